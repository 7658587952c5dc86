// The program cache and the kernel dump.
#include "kernel_launcher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
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
  int64_t cores;
};

std::string cache_key(int device_index, const emitter::ElementwiseSpec& spec) {
  std::vector<std::string_view> float_types;
  for (isa::ElementType type : spec.float_types) float_types.push_back(isa::type_name(type));
  return fmt::format("elementwise|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", device_index, static_cast<int>(spec.op),
                     spec.element_bytes, fmt::join(spec.sizes, ","), fmt::join(spec.strides, ";"),
                     static_cast<int>(spec.convert_from), static_cast<int>(spec.convert_to),
                     fmt::join(spec.parameters, ","), fmt::join(float_types, ","),
                     fmt::join(spec.values_in_arguments, ","));
}

std::string cache_key(int device_index, const emitter::MatmulSpec& s) {
  return fmt::format("matmul|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", device_index, s.m, s.k, s.n, s.a_row,
                     s.a_col, s.b_row, s.b_col, s.c_row, s.c_col, isa::type_name(s.type),
                     isa::type_name(s.output_type.value_or(s.type)), s.batch, s.a_batch, s.b_batch, s.c_batch);
}

std::string cache_key(int device_index, const emitter::RowSpec& s) {
  return fmt::format("rows|{}|{}|{}|{}|{}|{}|{}", device_index, static_cast<int>(s.op), s.rows, s.cols, s.weight,
                     s.bias, std::bit_cast<uint32_t>(s.eps));
}

std::string cache_key(int device_index, const emitter::GatherSpec& s) {
  return fmt::format("gather|{}|{}|{}|{}|{}", device_index, s.table_rows, s.row_bytes, s.indices, s.index_bytes);
}

std::string cache_key(int device_index, const emitter::IndexedElementsSpec& s) {
  const auto strides = [](const emitter::Strides3& t) { return fmt::format("{},{},{}", t.outer, t.position, t.inner); };
  return fmt::format("indexed|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", device_index, static_cast<int>(s.move),
                     isa::type_name(s.type), s.outer, s.positions, s.inner, s.dim_size, strides(s.data),
                     strides(s.index), strides(s.values), s.index_bytes);
}

std::string cache_key(int device_index, const emitter::AdamSpec& s) {
  return fmt::format("adam|{}|{}|{}|{}|{}", device_index, s.decoupled_weight_decay, s.weight_decay, s.amsgrad,
                     s.maximize);
}

std::string cache_key(int device_index, const emitter::SgdSpec& s) {
  return fmt::format("sgd|{}|{}|{}|{}|{}|{}", device_index, s.weight_decay, s.momentum, s.first_step, s.nesterov,
                     s.maximize);
}

std::string cache_key(int device_index, const emitter::AttentionSpec& s) {
  return fmt::format("attention|{}|{}|{}|{}|{}|{}|{}|{}|{}", device_index, s.heads, s.q_len, s.k_len, s.head_dim,
                     s.value_dim, s.causal, std::bit_cast<uint32_t>(s.scale), isa::type_name(s.type));
}

std::string cache_key(int device_index, const emitter::NllLossSpec& s, bool backward) {
  return fmt::format("nll_loss|{}|{}|{}|{}|{}|{}|{}", device_index, s.rows, s.classes, s.weighted,
                     static_cast<int>(s.reduction), s.ignore_index, backward);
}

std::string cache_key(int device_index, const emitter::ScatterAddRowsSpec& s) {
  return fmt::format("scatter_add_rows|{}|{}|{}|{}|{}|{}", device_index, s.table_rows, s.row_length, s.indices,
                     s.index_bytes, s.skip_index);
}

std::string cache_key(int device_index, const emitter::TriangleSpec& s) {
  return fmt::format("triangle|{}|{}|{}|{}|{}|{}|{}", device_index, s.matrices, s.rows, s.cols, s.element_bytes,
                     s.diagonal, s.keep_lower);
}

std::string cache_key(int device_index, const emitter::CumsumSpec& s) {
  return fmt::format("cumsum|{}|{}|{}|{}", device_index, s.rows, s.cols, isa::type_name(s.type));
}

std::string cache_key(int device_index, const emitter::RandomSpec& s) {
  return fmt::format("random|{}|{}|{}|{}", device_index, static_cast<int>(s.op), s.elements, static_cast<int>(s.type));
}

void dump(const emitter::Kernel& kernel, const std::string& key) {
  const char* directory = std::getenv("NPUSIM_DUMP_KERNELS");
  if (!directory || !*directory) return;
  std::filesystem::create_directories(directory);
  const auto path =
      std::filesystem::path(directory) / fmt::format("{}_{:016x}.s", kernel.name, std::hash<std::string>{}(key));
  std::ofstream(path) << kernel.assembly;
}

// Emits (once per key) and launches; `emit` runs only on a cache miss.
void launch_cached(runtime::Device& device, const std::string& key, const std::function<emitter::Kernel()>& emit,
                   std::span<const uint64_t> operand_addresses) {
  static std::mutex mutex;
  static std::map<std::string, LoadedKernel> cache;
  LoadedKernel loaded;
  {
    std::lock_guard lock(mutex);
    auto it = cache.find(key);
    if (it == cache.end()) {
      const emitter::Kernel kernel = emit();
      dump(kernel, key);
      it = cache.emplace(key, LoadedKernel{kernel.name, device.load_program(kernel.words), kernel.cores}).first;
    }
    loaded = it->second;
  }
  // Cores 0 .. cores-1: the kernel shares its work among exactly the cores it was emitted for.
  const uint64_t core_mask = loaded.cores >= 64 ? ~uint64_t{0} : (uint64_t{1} << loaded.cores) - 1;
  device.launch(loaded.name, loaded.program_address, operand_addresses, core_mask);
}

}  // namespace

void launch_elementwise(int device_index, runtime::Device& device, const emitter::ElementwiseSpec& spec,
                        std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_elementwise(spec, device.config()); },
      operand_addresses);
}

void launch_matmul(int device_index, runtime::Device& device, const emitter::MatmulSpec& spec,
                   std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_matmul(spec, device.config()); },
      operand_addresses);
}

void launch_gather(int device_index, runtime::Device& device, const emitter::GatherSpec& spec,
                   std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_gather(spec, device.config()); },
      operand_addresses);
}

void launch_indexed_elements(int device_index, runtime::Device& device, const emitter::IndexedElementsSpec& spec,
                             std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_indexed_elements(spec, device.config()); },
      operand_addresses);
}

void launch_adam(int device_index, runtime::Device& device, const emitter::AdamSpec& spec,
                 std::span<const uint64_t> arguments) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_adam(spec, device.config()); }, arguments);
}

void launch_sgd(int device_index, runtime::Device& device, const emitter::SgdSpec& spec,
                std::span<const uint64_t> arguments) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_sgd(spec, device.config()); }, arguments);
}

void launch_attention(int device_index, runtime::Device& device, const emitter::AttentionSpec& spec,
                      std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_attention(spec, device.config()); },
      operand_addresses);
}

void launch_nll_loss(int device_index, runtime::Device& device, const emitter::NllLossSpec& spec, bool backward,
                     std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec, backward),
      [&] {
        return backward ? emitter::emit_nll_loss_backward(spec, device.config())
                        : emitter::emit_nll_loss(spec, device.config());
      },
      operand_addresses);
}

void launch_scatter_add_rows(int device_index, runtime::Device& device, const emitter::ScatterAddRowsSpec& spec,
                             std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_scatter_add_rows(spec, device.config()); },
      operand_addresses);
}

void launch_zero_triangle(int device_index, runtime::Device& device, const emitter::TriangleSpec& spec,
                          std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_zero_triangle(spec, device.config()); },
      operand_addresses);
}

void launch_cumsum(int device_index, runtime::Device& device, const emitter::CumsumSpec& spec,
                   std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_cumsum(spec, device.config()); },
      operand_addresses);
}

void launch_random(int device_index, runtime::Device& device, const emitter::RandomSpec& spec,
                   std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_random(spec, device.config()); },
      operand_addresses);
}

void launch_rows(int device_index, runtime::Device& device, const emitter::RowSpec& spec,
                 std::span<const uint64_t> operand_addresses) {
  launch_cached(
      device, cache_key(device_index, spec), [&] { return emitter::emit_rows(spec, device.config()); },
      operand_addresses);
}

}  // namespace npusim::bridge
