// The program cache and the kernel dump.
#include "kernel_launcher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>

namespace npusim::bridge {
namespace {

struct LoadedKernel {
  std::string name;
  uint64_t program_address;
};

std::string cache_key(int device_index, const emitter::ElementwiseSpec& spec) {
  return fmt::format("{}|{}|{}|{}|{}", device_index, static_cast<int>(spec.op), spec.element_bytes,
                     fmt::join(spec.sizes, ","), fmt::join(spec.strides, ";"));
}

void dump(const emitter::Kernel& kernel, const std::string& key) {
  const char* directory = std::getenv("NPUSIM_DUMP_KERNELS");
  if (!directory || !*directory) return;
  std::filesystem::create_directories(directory);
  const auto path =
      std::filesystem::path(directory) / fmt::format("{}_{:016x}.s", kernel.name, std::hash<std::string>{}(key));
  std::ofstream(path) << kernel.assembly;
}

}  // namespace

void launch_elementwise(int device_index, runtime::Device& device, const emitter::ElementwiseSpec& spec,
                        std::span<const uint64_t> operand_addresses) {
  static std::mutex mutex;
  static std::map<std::string, LoadedKernel> cache;
  const std::string key = cache_key(device_index, spec);
  LoadedKernel loaded;
  {
    std::lock_guard lock(mutex);
    auto it = cache.find(key);
    if (it == cache.end()) {
      const emitter::Kernel kernel = emitter::emit_elementwise(spec, device.config());
      dump(kernel, key);
      it = cache.emplace(key, LoadedKernel{kernel.name, device.load_program(kernel.words)}).first;
    }
    loaded = it->second;
  }
  device.launch(loaded.name, loaded.program_address, operand_addresses);
}

}  // namespace npusim::bridge
