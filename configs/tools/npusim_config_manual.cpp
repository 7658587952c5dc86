// Writes the configuration reference (build/docs/configs.md) from the parameter schema, so it cannot drift.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "npusim/config/chip_config.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: npusim-config-manual OUTPUT.md\n";
    return 1;
  }
  std::ofstream out(argv[1]);
  out << "# npusim configuration reference\n\n"
         "Generated from `configs/include/npusim/config/parameters.def`; do not edit. A configuration is a YAML map "
         "of\n"
         "sections to keys; unset keys take the default. An unknown section or key, a wrong type or a value outside "
         "the\n"
         "range is an error naming the file, line and key. Presets: `configs/*.yaml`.\n\n"
         "| key | type | default | unit | range | meaning |\n|---|---|---|---|---|---|\n";
  for (const auto& param : npusim::config::parameter_table()) {
    const bool text = param.type == npusim::config::ParamType::Text;
    const char* type = text ? "text" : param.type == npusim::config::ParamType::Int ? "integer" : "real";
    const auto choices = npusim::config::text_choices(param);
    const std::string range = !text             ? fmt::format("{} … {}", param.min, param.max)
                              : choices.empty() ? std::string()
                                                : fmt::format("`{}`", fmt::join(choices, "` \\| `"));
    out << fmt::format("| `{}.{}` | {} | {} | {} | {} | {} |\n", param.section, param.key, type, param.default_text,
                       text ? "" : param.unit, range, param.doc);
  }
  out << "\nEnergy and area come from tables by technology node (`chip.technology_nm`), PE type (`core.pe_type`), "
         "memory\nsize and banking, and DRAM technology (`dram.kind`), each figure with its published source: "
         "[costs.md](costs.md).\n";
  return out ? 0 : 1;
}
