// The chip configuration: a struct generated from parameters.def, and the YAML loader that validates against it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace npusim::config {

struct ChipConfig {
  std::string name = "default";  // preset name or file stem
  std::string source = "<built-in defaults>";
#define NPUSIM_PARAM_Int int64_t
#define NPUSIM_PARAM_Real double
#define NPUSIM_PARAM_Text std::string
#define NPUSIM_PARAM(section, key, Type, default_value, unit, min, max, doc) \
  NPUSIM_PARAM_##Type section##_##key = default_value;
#include "npusim/config/parameters.def"
#undef NPUSIM_PARAM
#undef NPUSIM_PARAM_Int
#undef NPUSIM_PARAM_Real
#undef NPUSIM_PARAM_Text

  uint64_t dram_capacity_bytes() const { return static_cast<uint64_t>(dram_capacity_mib) << 20; }
  uint64_t scratchpad_bytes() const { return static_cast<uint64_t>(core_scratchpad_kib) << 10; }
  uint64_t accumulator_bytes() const { return static_cast<uint64_t>(core_accumulator_kib) << 10; }
  bool output_stationary() const { return core_dataflow == "output_stationary"; }
  bool weight_load_all_rows() const { return core_weight_load_rows == "all"; }
};

// Raised for a bad configuration; the message names the file, line, key and reason.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ParamType { Int, Real, Text };
struct ParamInfo {
  std::string_view section, key;
  ParamType type;
  std::string_view default_text, unit;
  double min, max;
  std::string_view doc;
};
const std::vector<ParamInfo>& parameter_table();
// The values a Text parameter accepts (its unit, split at '|'); empty when it accepts any string.
std::vector<std::string_view> text_choices(const ParamInfo& info);

ChipConfig load_config_file(const std::filesystem::path& path);
ChipConfig load_config_text(const std::string& yaml_text, const std::string& source_name);

// A preset name ("default", "edge", ...) is looked up as NAME.yaml in `search_dirs`; anything containing a '/' or
// ending in .yaml is a path.
ChipConfig load_config(const std::string& name_or_path, const std::vector<std::filesystem::path>& search_dirs);
std::vector<std::string> list_presets(const std::vector<std::filesystem::path>& search_dirs);

// configs/ of the source tree this library was built from (for tests and tools run from a build tree).
std::filesystem::path source_config_dir();

}  // namespace npusim::config
