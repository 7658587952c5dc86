// Configuration loading and validation.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "npusim/config/chip_config.h"

namespace npusim::config {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    load_config_text(yaml, "bad.yaml");
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

TEST(Config, PresetsLoadAndDiffer) {
  const auto dirs = std::vector{source_config_dir()};
  const ChipConfig edge = load_config("edge", dirs);
  const ChipConfig datacenter = load_config("datacenter", dirs);
  EXPECT_EQ(edge.name, "edge");
  EXPECT_EQ(load_config("default", dirs).chip_cores, 1);
  EXPECT_GT(datacenter.dram_bandwidth_gbps, 10 * edge.dram_bandwidth_gbps);
  EXPECT_EQ(list_presets(dirs), (std::vector<std::string>{"datacenter", "default", "edge", "eyeriss", "tpu_v1"}));
}

TEST(Config, UnknownKeyNamesFileLineAndKey) {
  EXPECT_EQ(error_of("chip:\n  cores: 2\n  corse: 3\n"), "bad.yaml:3: unknown key 'chip.corse'");
}

TEST(Config, UnknownSectionIsAnError) {
  EXPECT_EQ(error_of("chips:\n  cores: 2\n"), "bad.yaml:1: unknown section 'chips'");
}

TEST(Config, WrongTypeIsAnError) {
  EXPECT_EQ(error_of("dram:\n  bandwidth_gbps: fast\n"),
            "bad.yaml:2: key 'dram.bandwidth_gbps' must be a Real, found 'fast'");
}

TEST(Config, OutOfRangeValueIsAnError) {
  EXPECT_EQ(error_of("chip:\n  cores: 0\n"), "bad.yaml:2: key 'chip.cores' = 0 is outside [1, 64]");
}

TEST(Config, NotANumberIsOutOfRange) {
  EXPECT_EQ(error_of("chip:\n  clock_ghz: .nan\n"), "bad.yaml:2: key 'chip.clock_ghz' = nan is outside [0.01, 10] GHz");
}

TEST(Config, TextValueOutsideItsChoicesIsAnError) {
  EXPECT_EQ(error_of("core:\n  systolic_rows: 8\n  dataflow: row_stationary\n"),
            "bad.yaml:3: key 'core.dataflow' = 'row_stationary' is not one of weight_stationary, output_stationary");
  EXPECT_EQ(load_config_text("core:\n  dataflow: output_stationary\n", "good.yaml").core_dataflow, "output_stationary");
}

TEST(Config, EveryTextDefaultIsOneOfItsChoices) {
  for (const auto& param : parameter_table()) {
    const auto choices = text_choices(param);
    if (choices.empty()) continue;
    const std::string yaml = fmt::format("{}:\n  {}: {}\n", param.section, param.key,
                                         param.default_text.substr(1, param.default_text.size() - 2));
    EXPECT_NO_THROW(load_config_text(yaml, "defaults.yaml")) << yaml;
  }
}

TEST(Config, NameMustBeAString) { EXPECT_EQ(error_of("name:\n  a: 1\n"), "bad.yaml:2: 'name' must be a string"); }

// Found by the config fuzz target (configs/fuzz): a key that is a list or a map raised yaml-cpp's own exception.
TEST(Config, ASectionNameOrKeyThatIsNotAWordIsAnError) {
  EXPECT_EQ(error_of("? [core]\n: {systolic_rows: 8}\n"), "bad.yaml:1: a section name must be a plain word");
  EXPECT_EQ(error_of("core:\n  ? {a: 1}\n  : 2\n"), "bad.yaml:2: a key of section 'core' must be a plain word");
  EXPECT_EQ(error_of("core:\n  ? \n  : 2\n"), "bad.yaml:3: a key of section 'core' must be a plain word");
}

TEST(Config, UnknownPresetListsTheKnownOnes) {
  try {
    load_config("huge", {source_config_dir()});
    FAIL();
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(), "unknown configuration 'huge'; presets: datacenter, default, edge, eyeriss, tpu_v1");
  }
}

TEST(Config, EveryParameterHasUnitOrDescription) {
  for (const auto& param : parameter_table()) EXPECT_FALSE(param.doc.empty()) << param.section << "." << param.key;
}

}  // namespace
}  // namespace npusim::config
