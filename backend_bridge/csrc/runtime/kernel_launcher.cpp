// The kernel cache (keyed by the specs themselves) and the kernel dump.
#include "kernel_launcher.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include "npusim/emitter/spec_key.h"

namespace npusim::bridge {
namespace {

struct LoadedKernel {
  std::string name;
  uint64_t program_address;
  int64_t cores;
};

// The loss kernel and its gradient's share a spec.
struct NllLossKernel {
  emitter::NllLossSpec spec;
  bool backward;
};

// A kernel is built once per device and spec; the key is the spec itself, compared and hashed over every field
// (spec_key.h), so a field that changes the program always changes the key.
template <typename Spec>
struct CacheKey {
  int device_index;
  Spec spec;
};

void dump(const emitter::Kernel& kernel, size_t key_hash) {
  const char* directory = std::getenv("NPUSIM_DUMP_KERNELS");
  if (!directory || !*directory) return;
  std::filesystem::create_directories(directory);
  const auto path = std::filesystem::path(directory) / fmt::format("{}_{:016x}.s", kernel.name, key_hash);
  std::ofstream(path) << kernel.assembly();
}

// Builds (once per device and spec) and launches; `build` runs only on a cache miss.
template <typename Spec, typename Build>
void launch_cached(runtime::Device& device, int device_index, const Spec& spec, Build&& build,
                   std::span<const uint64_t> operand_addresses) {
  using Key = CacheKey<Spec>;
  static std::mutex mutex;
  static std::unordered_map<Key, LoadedKernel, emitter::spec_key::Hash, emitter::spec_key::Equal> cache;
  const Key key{device_index, spec};
  LoadedKernel loaded;
  {
    std::lock_guard lock(mutex);
    auto it = cache.find(key);
    if (it == cache.end()) {
      const emitter::Kernel kernel = build();
      dump(kernel, emitter::spec_key::hash(key));
      it = cache.emplace(key, LoadedKernel{kernel.name, device.load_program(kernel.words), kernel.cores}).first;
    }
    loaded = it->second;
  }
  // Cores 0 .. cores-1: the kernel shares its work among exactly the cores it was built for.
  const uint64_t core_mask = loaded.cores >= 64 ? ~uint64_t{0} : (uint64_t{1} << loaded.cores) - 1;
  device.launch(loaded.name, loaded.program_address, operand_addresses, core_mask);
}

}  // namespace

void launch_elementwise(int device_index, runtime::Device& device, const emitter::ElementwiseSpec& spec,
                        std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_elementwise(spec, device.config()); }, operand_addresses);
}

void launch_matmul(int device_index, runtime::Device& device, const emitter::MatmulSpec& spec,
                   std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_matmul(spec, device.config()); }, operand_addresses);
}

void launch_gather(int device_index, runtime::Device& device, const emitter::GatherSpec& spec,
                   std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_gather(spec, device.config()); }, operand_addresses);
}

void launch_indexed_elements(int device_index, runtime::Device& device, const emitter::IndexedElementsSpec& spec,
                             std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_indexed_elements(spec, device.config()); },
      operand_addresses);
}

void launch_attention(int device_index, runtime::Device& device, const emitter::AttentionSpec& spec,
                      std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_attention(spec, device.config()); }, operand_addresses);
}

void launch_attention_gradient(int device_index, runtime::Device& device, const emitter::AttentionGradientSpec& spec,
                               std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_attention_gradient(spec, device.config()); },
      operand_addresses);
}

void launch_nll_loss(int device_index, runtime::Device& device, const emitter::NllLossSpec& spec, bool backward,
                     std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, NllLossKernel{spec, backward},
      [&] {
        return backward ? emitter::emit_nll_loss_backward(spec, device.config())
                        : emitter::emit_nll_loss(spec, device.config());
      },
      operand_addresses);
}

void launch_scatter_add_rows(int device_index, runtime::Device& device, const emitter::ScatterAddRowsSpec& spec,
                             std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_scatter_add_rows(spec, device.config()); },
      operand_addresses);
}

void launch_zero_triangle(int device_index, runtime::Device& device, const emitter::TriangleSpec& spec,
                          std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_zero_triangle(spec, device.config()); },
      operand_addresses);
}

void launch_cumsum(int device_index, runtime::Device& device, const emitter::CumsumSpec& spec,
                   std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_cumsum(spec, device.config()); }, operand_addresses);
}

void launch_fused(int device_index, runtime::Device& device, const emitter::FusedSpec& spec,
                  std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_fused(spec, device.config()); }, operand_addresses);
}

void launch_rows(int device_index, runtime::Device& device, const emitter::RowSpec& spec,
                 std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, device_index, spec, [&] { return emitter::emit_rows(spec, device.config()); }, operand_addresses);
}

}  // namespace npusim::bridge
