// The optimizer steps and the kernels that move rows and elements by index against plain C++ loops: the same bits
// in the emulator and the SystemC model, and engines that never race, for ragged tiles and chunks, repeated indices
// and several cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "npusim/emitter/adam.h"
#include "npusim/emitter/fused.h"
#include "npusim/emitter/gather.h"
#include "npusim/emitter/indexed_elements.h"
#include "npusim/emitter/scatter_add_rows.h"
#include "npusim/emitter/sgd.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim {
namespace {

using Bytes = std::vector<uint8_t>;

// Indices as int64 or int32 elements.
Bytes index_bytes(const std::vector<int64_t>& indices, int element_bytes) {
  if (element_bytes == 8) return bytes_of<uint8_t>(indices);
  return bytes_of<uint8_t>(std::vector<int32_t>(indices.begin(), indices.end()));
}

std::vector<float> pattern(size_t count, float scale, float offset) {
  std::vector<float> values(count);
  for (size_t k = 0; k < values.size(); ++k) values[k] = scale * static_cast<float>(k % 97) + offset;
  return values;
}

// One functional and one timed device (a process elaborates one SystemC design), on which a test runs its kernels.
class BothModes {
 public:
  explicit BothModes(const config::ChipConfig& config)
      : functional_(config, runtime::Mode::Functional), timed_(config, runtime::Mode::Timed) {}

  // Runs `kernel` in both modes on buffers holding `buffers`, the argument block their addresses then `words`;
  // expects every buffer to end as `expected` has it, and no hazard.
  void expect(const emitter::Kernel& kernel, const std::vector<Bytes>& buffers, const std::vector<uint64_t>& words,
              const std::vector<Bytes>& expected, const std::string& what) {
    for (runtime::Device* device : {&functional_, &timed_}) {
      const std::vector<Bytes> result = run(*device, kernel, buffers, words);
      const char* mode = device == &timed_ ? "timed" : "functional";
      for (size_t b = 0; b < expected.size(); ++b) {
        ASSERT_EQ(result[b].size(), expected[b].size());
        const auto [mismatch, _] = std::mismatch(result[b].begin(), result[b].end(), expected[b].begin());
        EXPECT_EQ(mismatch, result[b].end())
            << what << " (" << mode << "): buffer " << b << " differs at byte " << (mismatch - result[b].begin());
      }
    }
    const runtime::CommandRecord record = kernel_record(timed_.take_records(), kernel.name);
    EXPECT_EQ(record.stats.hazards, 0u) << what << ": " << record.first_hazard;
  }

  // Expects the kernel to stop with a device error in both modes.
  void expect_trap(const emitter::Kernel& kernel, const std::vector<Bytes>& buffers, const std::string& what) {
    for (runtime::Device* device : {&functional_, &timed_})
      EXPECT_THROW(run(*device, kernel, buffers, {}), runtime::DeviceError) << what;
  }

 private:
  static std::vector<Bytes> run(runtime::Device& device, const emitter::Kernel& kernel,
                                const std::vector<Bytes>& buffers, const std::vector<uint64_t>& words) {
    std::vector<uint64_t> arguments;
    for (const Bytes& buffer : buffers) {
      arguments.push_back(device.allocate(buffer.size()));
      device.copy_host_to_device(arguments.back(), buffer.data(), buffer.size());
    }
    arguments.insert(arguments.end(), words.begin(), words.end());
    std::vector<Bytes> result = buffers;
    try {
      device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << kernel.cores) - 1);
      for (size_t b = 0; b < buffers.size(); ++b)
        device.copy_device_to_host(result[b].data(), arguments[b], result[b].size());
    } catch (...) {
      for (size_t b = 0; b < buffers.size(); ++b) device.free(arguments[b]);
      throw;
    }
    for (size_t b = 0; b < buffers.size(); ++b) device.free(arguments[b]);
    return result;
  }

  runtime::Device functional_, timed_;
};

config::ChipConfig chip(int cores, int scratchpad_kib) {
  config::ChipConfig config = test_config();
  config.chip_cores = cores;
  config.core_scratchpad_kib = scratchpad_kib;
  return config;
}

TEST(OptimKernels, ScatterAddRowsAccumulatesRepeatedIndicesInOrder) {
  // A chip of two cores, of which the kernel takes one (repeated indices accumulate in order); rows of 100, 17
  // (not a multiple of the 64-byte tile alignment) and 1000 floats, int64 and int32 indices, a padding index or none.
  const config::ChipConfig config = chip(2, 16);
  BothModes modes(config);
  const emitter::ScatterAddRowsSpec specs[] = {{20, 100, 60, 8, 3}, {7, 17, 45, 4, -1}, {5, 1000, 9, 4, 0}};
  for (const emitter::ScatterAddRowsSpec& spec : specs) {
    const emitter::Kernel kernel = emitter::emit_scatter_add_rows(spec, config);
    EXPECT_EQ(kernel.cores, 1);
    std::vector<float> table = pattern(spec.table_rows * spec.row_length, 0.5f, -1.0f);
    const std::vector<float> rows = pattern(spec.indices * spec.row_length, 0.25f, 0.125f);
    std::vector<int64_t> indices(spec.indices);
    for (int64_t i = 0; i < spec.indices; ++i) indices[i] = (i * 7) % spec.table_rows;  // each index repeats
    const Bytes initial_table = bytes_of<uint8_t>(table);
    for (int64_t i = 0; i < spec.indices; ++i)
      if (indices[i] != spec.skip_index)
        for (int64_t k = 0; k < spec.row_length; ++k)
          table[indices[i] * spec.row_length + k] += rows[i * spec.row_length + k];
    const Bytes index = index_bytes(indices, spec.index_bytes);
    modes.expect(kernel, {initial_table, bytes_of<uint8_t>(rows), index}, {},
                 {bytes_of<uint8_t>(table), bytes_of<uint8_t>(rows), index},
                 fmt::format("{} rows of {}", spec.indices, spec.row_length));
  }
}

TEST(OptimKernels, ScatterAddRowsTrapsOnAnIndexOutsideTheTable) {
  const config::ChipConfig config = chip(1, 16);
  BothModes modes(config);
  const emitter::Kernel kernel = emitter::emit_scatter_add_rows({4, 8, 3, 8, -1}, config);
  modes.expect_trap(kernel, {Bytes(4 * 8 * 4), Bytes(3 * 8 * 4), index_bytes({1, 4, 0}, 8)}, "index 4 of 4 rows");
}

TEST(OptimKernels, GatherRowsCopiesTheIndexedRows) {
  // Three cores; rows of 256, 6 (2-byte DMA elements) and 12 bytes; fewer indices than cores in the last case.
  const config::ChipConfig config = chip(3, 16);
  BothModes modes(config);
  const emitter::GatherSpec specs[] = {{100, 256, 64, 8}, {100, 6, 31, 4}, {10, 12, 2, 8}};
  for (const emitter::GatherSpec& spec : specs) {
    const emitter::Kernel kernel = emitter::emit_gather(spec, config);
    EXPECT_EQ(kernel.cores, std::min<int64_t>(spec.indices, 3));
    Bytes table(spec.table_rows * spec.row_bytes), out(spec.indices * spec.row_bytes, 0);
    for (size_t k = 0; k < table.size(); ++k) table[k] = static_cast<uint8_t>(k * 7 + 3);
    std::vector<int64_t> indices(spec.indices);
    for (int64_t i = 0; i < spec.indices; ++i) indices[i] = (i * 37) % spec.table_rows;
    Bytes expected(out.size());
    for (int64_t i = 0; i < spec.indices; ++i)
      std::memcpy(&expected[i * spec.row_bytes], &table[indices[i] * spec.row_bytes], spec.row_bytes);
    const Bytes index = index_bytes(indices, spec.index_bytes);
    modes.expect(kernel, {out, table, index}, {}, {expected, table, index},
                 fmt::format("{} rows of {} bytes", spec.indices, spec.row_bytes));
  }
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The reference of an indexed move over float32 data.
void move_elements(const emitter::IndexedElementsSpec& spec, std::vector<float>& data,
                   const std::vector<int64_t>& index, std::vector<float>& values) {
  for (int64_t o = 0; o < spec.outer; ++o)
    for (int64_t i = 0; i < spec.inner; ++i)
      for (int64_t j = 0; j < spec.positions; ++j) {
        int64_t position = index[o * spec.index.outer + j * spec.index.position + i * spec.index.inner];
        if (position < 0) position += spec.dim_size;
        float& element = data[o * spec.data.outer + position * spec.data.position + i * spec.data.inner];
        float& value = values[o * spec.values.outer + j * spec.values.position + i * spec.values.inner];
        switch (spec.move) {
          case emitter::IndexedMove::Gather: value = element; break;
          case emitter::IndexedMove::Scatter: element = value; break;
          case emitter::IndexedMove::ScatterAdd: element += value; break;
          // NaN if either is NaN (the canonical NaN: the test's only NaN is one)
          case emitter::IndexedMove::ScatterMax:
            element = std::isnan(element) || std::isnan(value) ? kNaN : std::max(element, value);
            break;
          case emitter::IndexedMove::ScatterMin:
            element = std::isnan(element) || std::isnan(value) ? kNaN : std::min(element, value);
            break;
          case emitter::IndexedMove::ScatterMul: element *= value; break;
        }
      }
}

TEST(OptimKernels, IndexedElementsMoveLikeALoop) {
  // Two cores on a 4 KiB scratchpad: 6 x 50 x 5 columns (int32 indices, negative ones wrapped) and 2 x 900 x 1 ones
  // in ragged chunks (int64 indices); every index repeats, so the combining scatters must see each other's results.
  const config::ChipConfig config = chip(2, 4);
  BothModes modes(config);
  for (const emitter::IndexedMove move :
       {emitter::IndexedMove::Gather, emitter::IndexedMove::Scatter, emitter::IndexedMove::ScatterAdd,
        emitter::IndexedMove::ScatterMax, emitter::IndexedMove::ScatterMin, emitter::IndexedMove::ScatterMul})
    for (const bool long_columns : {false, true}) {
      emitter::IndexedElementsSpec spec;
      spec.move = move;
      if (long_columns) {
        spec.outer = 2, spec.positions = 900, spec.inner = 1, spec.dim_size = 40;
        spec.data = {40, 1, 1};
        spec.index = spec.values = {900, 1, 1};
        spec.index_bytes = 8;
      } else {
        spec.outer = 6, spec.positions = 50, spec.inner = 5, spec.dim_size = 40;
        spec.data = {200, 5, 1};
        spec.index = spec.values = {250, 5, 1};
        spec.index_bytes = 4;
        spec.wrap_negative = true;
      }
      const emitter::Kernel kernel = emitter::emit_indexed_elements(spec, config);
      std::vector<float> data(2048), values(2048);
      for (size_t k = 0; k < data.size(); ++k) {
        data[k] = 0.5f * static_cast<float>(k);
        values[k] = 1.0f / static_cast<float>(k + 3);
        if (move == emitter::IndexedMove::ScatterMul) values[k] = 1.0f + values[k] * (k % 2 == 0 ? 1.0f : -1.0f);
        if (move == emitter::IndexedMove::ScatterMax || move == emitter::IndexedMove::ScatterMin)
          values[k] = 1000.0f * std::sin(static_cast<float>(k));  // above and below the data, in no order
      }
      if (move == emitter::IndexedMove::ScatterMax || move == emitter::IndexedMove::ScatterMin) values[17] = kNaN;
      std::vector<int64_t> index(2048);
      for (size_t k = 0; k < index.size(); ++k)
        index[k] = static_cast<int64_t>((k * 7) % spec.dim_size) - (spec.wrap_negative ? 3 : 0);
      const Bytes initial_data = bytes_of<uint8_t>(data), initial_values = bytes_of<uint8_t>(values);
      const Bytes indices = index_bytes(index, spec.index_bytes);
      move_elements(spec, data, index, values);
      modes.expect(kernel, {initial_data, indices, initial_values}, {},
                   {bytes_of<uint8_t>(data), indices, bytes_of<uint8_t>(values)},
                   fmt::format("{} {}", kernel.name, long_columns ? "in chunks" : "with wrapping"));
    }
}

TEST(OptimKernels, IndexedElementsTrapOnAnIndexOutsideTheDimension) {
  const config::ChipConfig config = chip(1, 4);
  BothModes modes(config);
  emitter::IndexedElementsSpec spec;
  spec.move = emitter::IndexedMove::Scatter;
  spec.positions = 4;
  spec.dim_size = 4;
  spec.data = spec.index = spec.values = {4, 1, 1};
  modes.expect_trap(emitter::emit_indexed_elements(spec, config), {Bytes(16), index_bytes({0, 3, 4, 1}, 8), Bytes(16)},
                    "index 4 of a dimension of 4");
}

// ---- the optimizer steps: multi-tensor kernels, one segment per parameter tensor

// One segment's entries of the argument block: buffers (the entry is the address) and float values.
struct Entry {
  std::optional<std::vector<float>> buffer;
  float value = 0;
};

// Runs the kernel on the device over the entries, and returns the buffers afterwards, in order.
std::vector<std::vector<float>> run_segments(runtime::Device& device, const emitter::Kernel& kernel,
                                             const std::vector<Entry>& entries) {
  std::vector<uint64_t> block, allocated;
  for (const Entry& entry : entries) {
    if (!entry.buffer) {
      block.push_back(std::bit_cast<uint32_t>(entry.value));
      continue;
    }
    allocated.push_back(device.allocate(std::max<size_t>(entry.buffer->size() * 4, 8)));
    if (!entry.buffer->empty())
      device.copy_host_to_device(allocated.back(), entry.buffer->data(), entry.buffer->size() * 4);
    block.push_back(allocated.back());
  }
  device.launch(kernel.name, device.load_program(kernel.words), block, (uint64_t{1} << kernel.cores) - 1);
  std::vector<std::vector<float>> result;
  size_t next = 0;
  for (const Entry& entry : entries) {
    if (!entry.buffer) continue;
    result.emplace_back(entry.buffer->size());
    if (!result.back().empty())
      device.copy_device_to_host(result.back().data(), allocated[next], result.back().size() * 4);
    device.free(allocated[next++]);
  }
  return result;
}

// Expects the kernel, run on both devices (functional, then timed), to leave the buffers as `expected` (bit for
// bit) with no hazard.
void expect_segments(runtime::Device& functional, runtime::Device& timed, const emitter::Kernel& kernel,
                     const std::vector<Entry>& entries, const std::vector<std::vector<float>>& expected,
                     const std::string& what) {
  for (runtime::Device* device : {&functional, &timed}) {
    const std::vector<std::vector<float>> result = run_segments(*device, kernel, entries);
    ASSERT_EQ(result.size(), expected.size());
    for (size_t b = 0; b < expected.size(); ++b) {
      ASSERT_EQ(result[b].size(), expected[b].size());
      for (size_t k = 0; k < expected[b].size(); ++k)
        ASSERT_EQ(std::bit_cast<uint32_t>(result[b][k]), std::bit_cast<uint32_t>(expected[b][k]))
            << what << (device == &timed ? " (timed)" : " (functional)") << ": buffer " << b << " element " << k << ": "
            << result[b][k] << ", expected " << expected[b][k];
    }
  }
  const runtime::CommandRecord record = kernel_record(timed.take_records(), kernel.name);
  EXPECT_EQ(record.stats.hazards, 0u) << what << ": " << record.first_hazard;
}

// Parameter tensors of many sizes: a ragged last tile, one element, none, several tiles.
const std::vector<int64_t> kParameterSizes = {1000, 1, 0, 37, 2500};

// Adam's hyperparameters, as the argument block carries them after the addresses.
struct AdamHyper {
  float lr = 1e-2f, wd = 0.01f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

// PyTorch's Adam step in float32, computed as the kernel's operations are: one rounding per operation, exp and sqrt
// in double rounded once (the vector engine's special functions).
void adam_reference(const emitter::AdamSpec& spec, const AdamHyper& h, float step, std::vector<float>& p,
                    std::vector<float> g, std::vector<float>& m, std::vector<float>& v, std::vector<float>& x) {
  const auto exp = [](float y) { return static_cast<float>(std::exp(static_cast<double>(y))); };
  const float step_size = h.lr / (1.0f - exp(step * std::log(h.beta1)));
  const float bias2_sqrt = static_cast<float>(std::sqrt(static_cast<double>(1.0f - exp(step * std::log(h.beta2)))));
  for (size_t k = 0; k < p.size(); ++k) {
    if (spec.maximize) g[k] = -g[k];
    if (spec.weight_decay && spec.decoupled_weight_decay) {
      const float decay = p[k] * (h.lr * h.wd);
      p[k] = p[k] - decay;
    } else if (spec.weight_decay) {
      const float decay = p[k] * h.wd;
      g[k] = g[k] + decay;
    }
    const float lerp = (g[k] - m[k]) * (1.0f - h.beta1);
    m[k] = m[k] + lerp;
    const float square = (g[k] * g[k]) * (1.0f - h.beta2);
    v[k] = v[k] * h.beta2;
    v[k] = v[k] + square;
    float second_moment = v[k];
    if (spec.amsgrad) second_moment = x[k] = std::max(x[k], v[k]);
    float denominator = static_cast<float>(std::sqrt(static_cast<double>(second_moment))) / bias2_sqrt;
    denominator = denominator + h.eps;
    const float update = (m[k] / denominator) * step_size;
    p[k] = p[k] - update;
  }
}

TEST(OptimKernels, AdamStepOverManyTensorsMatchesAFloat32Loop) {
  // Two cores, 8 KiB of scratchpad; each tensor has its own step counter.
  const config::ChipConfig config = chip(2, 8);
  runtime::Device functional(config, runtime::Mode::Functional), timed(config, runtime::Mode::Timed);
  const emitter::AdamSpec specs[] = {
      {true, true, true, false}, {false, true, false, true}, {false, false, false, false}};
  const AdamHyper h;
  for (const emitter::AdamSpec& spec : specs) {
    const emitter::Kernel kernel = emitter::emit_fused(emitter::adam_spec(spec, kParameterSizes), config);
    EXPECT_EQ(kernel.name, spec.decoupled_weight_decay ? "adamw_f32" : "adam_f32");
    std::vector<Entry> entries;
    std::vector<std::vector<float>> expected;
    for (size_t t = 0; t < kParameterSizes.size(); ++t) {
      const auto n = static_cast<size_t>(kParameterSizes[t]);
      const auto shift = static_cast<float>(t) * 0.001f;
      std::vector<float> p = pattern(n, 0.001f, 0.01f + shift), g = pattern(n, 0.002f, -0.05f),
                         m = pattern(n, 0.003f, shift), v = pattern(n, 0.0001f, 0.001f), x = pattern(n, 0.0002f, 0.0f);
      const float step = 1.0f + 2.0f * static_cast<float>(t);
      for (const std::vector<float>& buffer : {p, g, m, v, x, std::vector<float>{step}}) entries.push_back({buffer});
      for (const float value :
           {h.lr, h.wd, h.beta1, h.beta2, h.eps, std::log(h.beta1), std::log(h.beta2), 1.0f - h.beta1, 1.0f - h.beta2})
        entries.push_back({std::nullopt, value});
      adam_reference(spec, h, step, p, g, m, v, x);
      expected.insert(expected.end(), {p, g, m, v, x, {step}});
    }
    expect_segments(functional, timed, kernel, entries, expected,
                    fmt::format("{} amsgrad {} maximize {}", kernel.name, spec.amsgrad, spec.maximize));
  }
}

TEST(OptimKernels, SgdStepOverManyTensorsMatchesAFloat32Loop) {
  // Two cores, 4 KiB of scratchpad.
  const config::ChipConfig config = chip(2, 4);
  runtime::Device functional(config, runtime::Mode::Functional), timed(config, runtime::Mode::Timed);
  const emitter::SgdSpec specs[] = {
      {true, true, false, true, false}, {false, true, true, false, true}, {true, true, false, false, false}, {}};
  const float lr = 0.1f, wd = 0.01f, momentum = 0.9f, one_minus_dampening = 0.8f;
  for (const emitter::SgdSpec& spec : specs) {
    const emitter::Kernel kernel = emitter::emit_fused(emitter::sgd_spec(spec, kParameterSizes), config);
    std::vector<Entry> entries;
    std::vector<std::vector<float>> expected;
    for (size_t t = 0; t < kParameterSizes.size(); ++t) {
      const auto n = static_cast<size_t>(kParameterSizes[t]);
      std::vector<float> p = pattern(n, 0.01f, -0.3f), g = pattern(n, 0.02f, -0.6f + static_cast<float>(t)),
                         b = pattern(n, 0.03f, -0.9f);
      for (const std::vector<float>& buffer : {p, g, b}) entries.push_back({buffer});
      for (const float value : {lr, wd, momentum, one_minus_dampening}) entries.push_back({std::nullopt, value});
      const std::vector<float> grads = g;
      for (size_t k = 0; k < n; ++k) {
        float grad = spec.maximize ? -g[k] : g[k];
        if (spec.weight_decay) grad = grad + p[k] * wd;
        if (spec.momentum) {
          if (spec.first_step) {
            b[k] = grad;
          } else {
            const float damped = grad * one_minus_dampening;
            b[k] = b[k] * momentum;
            b[k] = b[k] + damped;
          }
          grad = spec.nesterov ? grad + b[k] * momentum : b[k];
        }
        const float update = grad * lr;
        p[k] = p[k] - update;
      }
      expected.insert(expected.end(), {p, grads, b});
    }
    expect_segments(functional, timed, kernel, entries, expected,
                    fmt::format("momentum {} first step {} nesterov {} maximize {}", spec.momentum, spec.first_step,
                                spec.nesterov, spec.maximize));
  }
}

}  // namespace
}  // namespace npusim
