// Fuzz target for the YAML config loader: any text must give a configuration or a ConfigError whose message starts
// with the source name (and names the line, key and reason), never a crash, undefined behaviour or another exception.
// Seeds: configs/fuzz/corpus (the presets and a few malformed files); docs/robustness.md tells how to run it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "npusim/config/chip_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    npusim::config::load_config_text(text, "fuzz.yaml");
  } catch (const npusim::config::ConfigError& error) {
    if (std::string(error.what()).rfind("fuzz.yaml", 0) != 0) {
      std::fprintf(stderr, "fuzz: a config error that does not name its source: %s\n", error.what());
      std::abort();
    }
  }
  return 0;
}
