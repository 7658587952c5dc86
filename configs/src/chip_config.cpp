// YAML → ChipConfig with validation against the declared parameter table.
#include "npusim/config/chip_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace npusim::config {
namespace {

struct ParamBinding {
  ParamInfo info;
  std::function<void(ChipConfig&, const YAML::Node&)> assign;
};

std::string location(const std::string& source, const YAML::Node& node) {
  return node.Mark().is_null() ? source : fmt::format("{}:{}", source, node.Mark().line + 1);
}

template <typename T>
T convert(const YAML::Node& node, const std::string& source, const ParamInfo& info, std::string_view type_name) {
  const std::string where = location(source, node);
  if (!node.IsScalar())
    throw ConfigError(fmt::format("{}: key '{}.{}' must be a {}", where, info.section, info.key, type_name));
  T value;
  if (!YAML::convert<T>::decode(node, value))
    throw ConfigError(fmt::format("{}: key '{}.{}' must be a {}, found '{}'", where, info.section, info.key, type_name,
                                  node.Scalar()));
  if constexpr (std::is_same_v<T, std::string>) {
    const std::vector<std::string_view> allowed = text_choices(info);
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), value) == allowed.end())
      throw ConfigError(fmt::format("{}: key '{}.{}' = '{}' is not one of {}", where, info.section, info.key, value,
                                    fmt::join(allowed, ", ")));
  } else {
    if (!(static_cast<double>(value) >= info.min && static_cast<double>(value) <= info.max))  // NaN fails too
      throw ConfigError(fmt::format("{}: key '{}.{}' = {} is outside [{}, {}]{}", where, info.section, info.key, value,
                                    info.min, info.max, info.unit.empty() ? "" : fmt::format(" {}", info.unit)));
  }
  return value;
}

const std::vector<ParamBinding>& bindings() {
  static const std::vector<ParamBinding> table = [] {
    std::vector<ParamBinding> rows;
#define NPUSIM_PARAM_Int int64_t
#define NPUSIM_PARAM_Real double
#define NPUSIM_PARAM_Text std::string
#define NPUSIM_PARAM(section, key, Type, default_value, unit, min, max, doc)                                   \
  {                                                                                                            \
    ParamInfo info{#section,                                                                                   \
                   #key,                                                                                       \
                   ParamType::Type,                                                                            \
                   #default_value,                                                                             \
                   unit,                                                                                       \
                   static_cast<double>(min),                                                                   \
                   static_cast<double>(max),                                                                   \
                   doc};                                                                                       \
    rows.push_back({info, [info](ChipConfig& config, const YAML::Node& node) {                                 \
                      config.section##_##key = convert<NPUSIM_PARAM_##Type>(node, config.source, info, #Type); \
                    }});                                                                                       \
  }
#include "npusim/config/parameters.def"
#undef NPUSIM_PARAM
#undef NPUSIM_PARAM_Int
#undef NPUSIM_PARAM_Real
#undef NPUSIM_PARAM_Text
    return rows;
  }();
  return table;
}

}  // namespace

std::vector<std::string_view> text_choices(const ParamInfo& info) {
  std::vector<std::string_view> choices;
  if (info.type != ParamType::Text || info.unit.empty()) return choices;
  for (size_t start = 0;;) {
    const size_t end = info.unit.find('|', start);
    choices.push_back(info.unit.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return choices;
    start = end + 1;
  }
}

const std::vector<ParamInfo>& parameter_table() {
  static const std::vector<ParamInfo> table = [] {
    std::vector<ParamInfo> rows;
    for (const auto& binding : bindings()) rows.push_back(binding.info);
    return rows;
  }();
  return table;
}

ChipConfig load_config_text(const std::string& yaml_text, const std::string& source_name) {
  ChipConfig config;
  config.source = source_name;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& error) {
    throw ConfigError(fmt::format("{}:{}: malformed YAML: {}", source_name, error.mark.line + 1, error.msg));
  }
  if (root.IsNull()) return config;
  if (!root.IsMap()) throw ConfigError(fmt::format("{}: the top level must be a map of sections", source_name));
  for (const auto& section : root) {
    if (!section.first.IsScalar())
      throw ConfigError(fmt::format("{}: a section name must be a plain word", location(source_name, section.first)));
    const std::string section_name = section.first.Scalar();
    if (section_name == "name") {
      if (!section.second.IsScalar())
        throw ConfigError(fmt::format("{}: 'name' must be a string", location(source_name, section.second)));
      config.name = section.second.Scalar();
      continue;
    }
    const bool known_section = std::any_of(bindings().begin(), bindings().end(),
                                           [&](const ParamBinding& b) { return b.info.section == section_name; });
    if (!known_section)
      throw ConfigError(fmt::format("{}: unknown section '{}'", location(source_name, section.first), section_name));
    if (!section.second.IsMap())
      throw ConfigError(
          fmt::format("{}: section '{}' must be a map of keys", location(source_name, section.first), section_name));
    for (const auto& entry : section.second) {
      if (!entry.first.IsScalar())
        throw ConfigError(fmt::format("{}: a key of section '{}' must be a plain word",
                                      location(source_name, entry.first), section_name));
      const std::string key = entry.first.Scalar();
      auto binding = std::find_if(bindings().begin(), bindings().end(), [&](const ParamBinding& b) {
        return b.info.section == section_name && b.info.key == key;
      });
      if (binding == bindings().end())
        throw ConfigError(
            fmt::format("{}: unknown key '{}.{}'", location(source_name, entry.first), section_name, key));
      binding->assign(config, entry.second);
    }
  }
  return config;
}

ChipConfig load_config_file(const std::filesystem::path& path) {
  std::ifstream file(path);
  if (!file) throw ConfigError(fmt::format("{}: cannot open configuration file", path.string()));
  std::stringstream content;
  content << file.rdbuf();
  ChipConfig config = load_config_text(content.str(), path.string());
  if (config.name == "default" && path.stem() != "default") config.name = path.stem().string();
  return config;
}

ChipConfig load_config(const std::string& name_or_path, const std::vector<std::filesystem::path>& search_dirs) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml"))
    return load_config_file(name_or_path);
  for (const auto& dir : search_dirs) {
    const auto candidate = dir / (name_or_path + ".yaml");
    if (std::filesystem::exists(candidate)) return load_config_file(candidate);
  }
  const auto presets = list_presets(search_dirs);
  throw ConfigError(fmt::format("unknown configuration '{}'; presets: {}", name_or_path, fmt::join(presets, ", ")));
}

std::vector<std::string> list_presets(const std::vector<std::filesystem::path>& search_dirs) {
  std::vector<std::string> names;
  for (const auto& dir : search_dirs) {
    if (!std::filesystem::is_directory(dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::filesystem::path source_config_dir() { return NPUSIM_SOURCE_CONFIG_DIR; }

}  // namespace npusim::config
