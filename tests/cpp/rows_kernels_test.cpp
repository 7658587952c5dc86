// The row, cumsum, triangle and nll_loss kernels against plain C++ reference loops, in both modes: identical memory,
// no hazard in timed mode, and the reference's values; over three cores with a 4 KiB scratchpad so that rows split
// into several tiles per core and the last tile is partial. Each run prints its simulated cycles.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "npusim/emitter/cumsum.h"
#include "npusim/emitter/nll_loss.h"
#include "npusim/emitter/rows.h"
#include "npusim/emitter/triangle.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim {
namespace {

using Bytes = std::vector<std::byte>;

// Three cores with 1024 floats of scratchpad each.
config::ChipConfig small_chip() {
  config::ChipConfig config = test_config();
  config.chip_cores = 3;
  config.core_scratchpad_kib = 4;
  return config;
}

// A functional and a timed device of one chip; run() launches a kernel on both with the same buffers (the argument
// block lists their addresses in order) and returns the buffers afterwards, checking that both modes agree.
class BothModes {
 public:
  explicit BothModes(const config::ChipConfig& config)
      : functional_(config, runtime::Mode::Functional), timed_(config, runtime::Mode::Timed) {}

  std::vector<Bytes> run(const emitter::Kernel& kernel, const std::vector<Bytes>& buffers, const std::string& shape) {
    const std::vector<Bytes> result = launch(functional_, kernel, buffers);
    EXPECT_EQ(result, launch(timed_, kernel, buffers)) << kernel.name << " " << shape;
    const runtime::CommandRecord record = kernel_record(timed_.take_records(), kernel.name);
    EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << " " << shape << ": " << record.first_hazard;
    std::printf("[ cycles ] %s %s: %llu cycles, %zu words, %llu cores\n", kernel.name.c_str(), shape.c_str(),
                static_cast<unsigned long long>(record.kernel_cycles), kernel.words.size(),
                static_cast<unsigned long long>(record.cores));
    return result;
  }

  // Whether the kernel stops with an error in each mode.
  void expect_error(const emitter::Kernel& kernel, const std::vector<Bytes>& buffers) {
    for (runtime::Device* device : {&functional_, &timed_})
      EXPECT_THROW(launch(*device, kernel, buffers), runtime::DeviceError) << kernel.name;
  }

 private:
  static std::vector<Bytes> launch(runtime::Device& device, const emitter::Kernel& kernel,
                                   const std::vector<Bytes>& buffers) {
    std::vector<uint64_t> addresses;
    for (const Bytes& buffer : buffers) {
      addresses.push_back(device.allocate(std::max<size_t>(buffer.size(), 8)));
      if (!buffer.empty()) device.copy_host_to_device(addresses.back(), buffer.data(), buffer.size());
    }
    std::vector<Bytes> result = buffers;
    try {
      device.launch(kernel.name, device.load_program(kernel.words), addresses, (uint64_t{1} << kernel.cores) - 1);
      for (size_t k = 0; k < buffers.size(); ++k)
        if (!result[k].empty()) device.copy_device_to_host(result[k].data(), addresses[k], result[k].size());
    } catch (...) {
      for (uint64_t address : addresses) device.free(address);
      throw;
    }
    for (uint64_t address : addresses) device.free(address);
    return result;
  }

  runtime::Device functional_, timed_;
};

std::vector<float> random_floats(size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(-3.0f, 3.0f);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(generator);
  return values;
}

// Class weights in [0.5, 3.5): a total weight near zero would make the mean's rounding dominate.
std::vector<float> positive(std::vector<float> values) {
  for (float& value : values) value = std::fabs(value) + 0.5f;
  return values;
}

// Within a relative 2e-5 (the vector engine's exp, log and rsqrt and its summation order are not the host's), NaN
// where the reference has NaN.
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t k = 0; k < expected.size(); ++k) {
    if (std::isnan(expected[k])) {
      EXPECT_TRUE(std::isnan(actual[k])) << what << " at " << k << ": " << actual[k];
    } else if (std::isinf(expected[k])) {
      EXPECT_EQ(actual[k], expected[k]) << what << " at " << k;
    } else {
      EXPECT_NEAR(actual[k], expected[k], 2e-5f * std::max(1.0f, std::fabs(expected[k]))) << what << " at " << k;
    }
  }
}

struct RowReference {
  std::vector<float> out, mean, rstd;
  std::vector<int64_t> index;
};

// The row ops as the header defines them, one row at a time; `forward` is the forward output for the backward ops.
RowReference reference_rows(const emitter::RowSpec& spec, const std::vector<float>& x,
                            const std::vector<float>& forward, const std::vector<float>& weight,
                            const std::vector<float>& bias) {
  RowReference r;
  const int64_t cols = spec.cols;
  for (int64_t i = 0; i < spec.rows; ++i) {
    const float* row = x.data() + i * cols;
    const float* y = forward.empty() ? nullptr : forward.data() + i * cols;
    float max = -std::numeric_limits<float>::infinity(), min = std::numeric_limits<float>::infinity(), sum = 0;
    int64_t argmax = 0, argmin = 0;
    bool nan = false;
    for (int64_t c = 0; c < cols; ++c) {
      sum += row[c];
      if (std::isnan(row[c])) {
        if (!nan) argmax = argmin = c;
        nan = true;
      }
      if (!nan && row[c] > max) max = row[c], argmax = c;
      if (!nan && row[c] < min) min = row[c], argmin = c;
    }
    if (nan) max = min = std::numeric_limits<float>::quiet_NaN();
    switch (spec.op) {
      case emitter::RowOp::SumF32: r.out.push_back(sum); break;
      case emitter::RowOp::MaxF32: r.out.push_back(max); break;
      case emitter::RowOp::MinF32: r.out.push_back(min); break;
      case emitter::RowOp::ArgMaxF32: r.index.push_back(argmax); break;
      case emitter::RowOp::ArgMinF32: r.index.push_back(argmin); break;
      case emitter::RowOp::SoftmaxF32:
      case emitter::RowOp::SafeSoftmaxF32:
      case emitter::RowOp::LogSoftmaxF32: {
        if (spec.op == emitter::RowOp::SafeSoftmaxF32 && max == -std::numeric_limits<float>::infinity()) {
          r.out.insert(r.out.end(), cols, 0.0f);
          break;
        }
        float total = 0;
        for (int64_t c = 0; c < cols; ++c) total += std::exp(row[c] - max);
        for (int64_t c = 0; c < cols; ++c)
          r.out.push_back(spec.op == emitter::RowOp::LogSoftmaxF32 ? row[c] - max - std::log(total)
                                                                   : std::exp(row[c] - max) / total);
        break;
      }
      case emitter::RowOp::SoftmaxBackwardF32: {
        float dot = 0;
        for (int64_t c = 0; c < cols; ++c) dot += row[c] * y[c];
        for (int64_t c = 0; c < cols; ++c) r.out.push_back(y[c] * (row[c] - dot));
        break;
      }
      case emitter::RowOp::LogSoftmaxBackwardF32:
        for (int64_t c = 0; c < cols; ++c) r.out.push_back(row[c] - std::exp(y[c]) * sum);
        break;
      case emitter::RowOp::LayerNormF32: {
        const float mean = sum / static_cast<float>(cols);
        float squares = 0;
        for (int64_t c = 0; c < cols; ++c) squares += (row[c] - mean) * (row[c] - mean);
        const float rstd = 1.0f / std::sqrt(squares / static_cast<float>(cols) + spec.eps);
        for (int64_t c = 0; c < cols; ++c) {
          float value = (row[c] - mean) * rstd;
          if (spec.weight) value *= weight[c];
          if (spec.bias) value += bias[c];
          r.out.push_back(value);
        }
        r.mean.push_back(mean);
        r.rstd.push_back(rstd);
        break;
      }
    }
  }
  return r;
}

TEST(RowKernels, MatchAReferenceInBothModesOverPartialTilesAndThreeCores) {
  const config::ChipConfig config = small_chip();
  BothModes modes(config);
  using emitter::RowOp;
  const RowOp ops[] = {RowOp::SoftmaxF32,
                       RowOp::SafeSoftmaxF32,
                       RowOp::LogSoftmaxF32,
                       RowOp::SumF32,
                       RowOp::MaxF32,
                       RowOp::MinF32,
                       RowOp::ArgMaxF32,
                       RowOp::ArgMinF32,
                       RowOp::SoftmaxBackwardF32,
                       RowOp::LogSoftmaxBackwardF32};
  const std::pair<int64_t, int64_t> shapes[] = {{37, 50}, {5, 300}, {1, 7}, {64, 10}};
  for (const auto& [rows, cols] : shapes) {
    std::vector<float> x = random_floats(rows * cols, 7);
    const std::vector<float> y = random_floats(rows * cols, 8);
    if (rows > 2) {
      std::fill_n(x.begin() + cols, cols, -std::numeric_limits<float>::infinity());  // safe softmax's masked row
      x[2 * cols + 1] = std::numeric_limits<float>::quiet_NaN();                     // max, argmax: NaN wins
    }
    for (const RowOp op : ops) {
      const emitter::RowSpec spec{op, rows, cols};
      const std::string shape = fmt::format("{}x{}", rows, cols);
      const bool backward = op == RowOp::SoftmaxBackwardF32 || op == RowOp::LogSoftmaxBackwardF32;
      // The plain softmax of a NaN or all -inf row is NaN either way; the backward ops take finite inputs.
      std::vector<float> input = random_floats(rows * cols, 7);
      if (op != RowOp::SoftmaxF32 && op != RowOp::LogSoftmaxF32 && !backward) input = x;
      const emitter::Kernel kernel = emitter::emit_rows(spec, config);
      const bool arg = op == RowOp::ArgMaxF32 || op == RowOp::ArgMinF32;
      const bool reduction = arg || op == RowOp::SumF32 || op == RowOp::MaxF32 || op == RowOp::MinF32;
      const size_t out_bytes = static_cast<size_t>(rows) * (reduction ? (arg ? 8 : 4) : cols * 4);
      std::vector<Bytes> buffers = {Bytes(out_bytes), bytes_of(input)};
      if (backward) buffers.push_back(bytes_of(y));
      const std::vector<Bytes> result = modes.run(kernel, buffers, shape);
      const RowReference expected = reference_rows(spec, input, backward ? y : std::vector<float>{}, {}, {});
      if (arg) {
        EXPECT_EQ(values_of<int64_t>(result[0]), expected.index) << kernel.name << " " << shape;
      } else {
        expect_close(values_of<float>(result[0]), expected.out, kernel.name + " " + shape);
      }
    }
  }
}

TEST(RowKernels, ExtremaAndTheirIndicesOfInt64RowsAreExact) {
  // Values beyond float precision and ties: max, min and the first index of each, by plain loops.
  using emitter::RowOp;
  const config::ChipConfig config = small_chip();
  BothModes modes(config);
  const int64_t rows = 29, cols = 45;
  std::vector<int64_t> x(rows * cols);
  for (size_t k = 0; k < x.size(); ++k) x[k] = (int64_t{1} << 60) + static_cast<int64_t>((k * 7919) % 13) - 6;
  for (const RowOp op : {RowOp::MaxF32, RowOp::MinF32, RowOp::ArgMaxF32, RowOp::ArgMinF32}) {
    emitter::RowSpec spec{op, rows, cols};
    spec.type = isa::ElementType::I64;
    const emitter::Kernel kernel = emitter::emit_rows(spec, config);
    EXPECT_EQ(kernel.name.substr(kernel.name.size() - 4), "_i64");
    const std::vector<Bytes> result = modes.run(kernel, {Bytes(rows * 8), bytes_of(x)}, "i64");
    const bool is_max = op == RowOp::MaxF32 || op == RowOp::ArgMaxF32;
    std::vector<int64_t> expected;
    for (int64_t r = 0; r < rows; ++r) {
      const auto row = x.begin() + r * cols;
      const auto at = is_max ? std::max_element(row, row + cols) : std::min_element(row, row + cols);
      expected.push_back(op == RowOp::MaxF32 || op == RowOp::MinF32 ? *at : at - row);
    }
    EXPECT_EQ(values_of<int64_t>(result[0]), expected) << kernel.name;
  }
  emitter::RowSpec softmax{RowOp::SoftmaxF32, rows, cols};
  softmax.type = isa::ElementType::I64;
  EXPECT_THROW(emitter::emit_rows(softmax, config), std::invalid_argument);
}

TEST(RowKernels, LayerNormMatchesAReferenceInBothModes) {
  const config::ChipConfig config = small_chip();
  BothModes modes(config);
  const std::pair<int64_t, int64_t> shapes[] = {{37, 50}, {3, 200}, {1, 9}};
  for (const auto& [rows, cols] : shapes) {
    for (const bool affine : {false, true}) {
      const emitter::RowSpec spec{emitter::RowOp::LayerNormF32, rows, cols, affine, affine, 1e-5f};
      const std::string shape = fmt::format("{}x{}{}", rows, cols, affine ? " affine" : "");
      const std::vector<float> x = random_floats(rows * cols, 3), weight = random_floats(cols, 4),
                               bias = random_floats(cols, 5);
      const emitter::Kernel kernel = emitter::emit_rows(spec, config);
      const std::vector<Bytes> result = modes.run(
          kernel,
          {Bytes(rows * cols * 4), bytes_of(x), bytes_of(weight), bytes_of(bias), Bytes(rows * 4), Bytes(rows * 4)},
          shape);
      const RowReference expected = reference_rows(spec, x, {}, weight, bias);
      expect_close(values_of<float>(result[0]), expected.out, "layer norm " + shape);
      expect_close(values_of<float>(result[4]), expected.mean, "mean " + shape);
      expect_close(values_of<float>(result[5]), expected.rstd, "rstd " + shape);
    }
  }
}

// layer_norm's input gradient in one kernel against the formula in double precision, with and without the weight;
// partial tiles over three cores.
TEST(RowKernels, LayerNormBackwardMatchesAReferenceInBothModes) {
  const config::ChipConfig config = small_chip();
  BothModes modes(config);
  const std::pair<int64_t, int64_t> shapes[] = {{37, 50}, {3, 200}, {1, 9}};
  for (const auto& [rows, cols] : shapes) {
    for (const bool weighted : {false, true}) {
      const emitter::RowSpec spec{emitter::RowOp::LayerNormBackwardF32, rows, cols, weighted, false, 0.0f};
      const std::string shape = fmt::format("{}x{}{}", rows, cols, weighted ? " weighted" : "");
      const std::vector<float> dy = random_floats(rows * cols, 6), x = random_floats(rows * cols, 7),
                               weight = random_floats(cols, 8);
      std::vector<float> mean(rows), rstd(rows);
      for (int64_t r = 0; r < rows; ++r) {
        mean[r] = 0.1f * static_cast<float>(r % 5) - 0.2f;
        rstd[r] = 0.5f + 0.1f * static_cast<float>(r % 7);
      }
      const emitter::Kernel kernel = emitter::emit_rows(spec, config);
      EXPECT_EQ(kernel.name, "layer_norm_backward_f32");
      const std::vector<Bytes> result = modes.run(
          kernel, {Bytes(rows * cols * 4), bytes_of(dy), bytes_of(x), bytes_of(weight), bytes_of(mean), bytes_of(rstd)},
          shape);
      std::vector<float> expected_dx(rows * cols);
      for (int64_t r = 0; r < rows; ++r) {
        double sum_g = 0, sum_g_normalized = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const double normalized = (double{x[r * cols + c]} - mean[r]) * rstd[r];
          const double g = double{dy[r * cols + c]} * (weighted ? weight[c] : 1.0f);
          sum_g += g;
          sum_g_normalized += g * normalized;
        }
        for (int64_t c = 0; c < cols; ++c) {
          const double normalized = (double{x[r * cols + c]} - mean[r]) * rstd[r];
          const double g = double{dy[r * cols + c]} * (weighted ? weight[c] : 1.0f);
          expected_dx[r * cols + c] =
              static_cast<float>((g - sum_g / cols - normalized * sum_g_normalized / cols) * rstd[r]);
        }
      }
      expect_close(values_of<float>(result[0]), expected_dx, "dx " + shape);
    }
  }
}

template <typename T>
std::vector<T> reference_cumsum(const std::vector<T>& x, int64_t rows, int64_t cols) {
  std::vector<T> out(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    T sum = 0;
    for (int64_t c = 0; c < cols; ++c) out[i * cols + c] = sum = static_cast<T>(sum + x[i * cols + c]);
  }
  return out;
}

// Sequential sums, so even the float results are exact; rows longer than the 4 KiB scratchpad (the last three) are
// scanned in chunks of columns, with as many adds per element as in one pass.
TEST(CumsumKernel, MatchesASequentialSumInBothModes) {
  const config::ChipConfig config = small_chip();
  BothModes modes(config);
  const std::pair<int64_t, int64_t> shapes[] = {{45, 50}, {3, 1000}, {1, 1}, {70, 3}, {3, 2500}, {11, 1500}, {2, 513}};
  for (const auto& [rows, cols] : shapes) {
    const std::string shape = fmt::format("{}x{}", rows, cols);
    const std::vector<float> x = random_floats(rows * cols, 11);
    const std::vector<Bytes> f32 = modes.run(emitter::emit_cumsum({rows, cols, isa::ElementType::F32}, config),
                                             {Bytes(x.size() * 4), bytes_of(x)}, shape);
    EXPECT_EQ(values_of<float>(f32[0]), reference_cumsum(x, rows, cols)) << shape;
    std::vector<int32_t> i32(x.size());
    std::vector<int64_t> i64(x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      i32[k] = static_cast<int32_t>(x[k] * 7e8f);  // large enough to wrap
      i64[k] = static_cast<int64_t>(x[k] * 1e6f) << 20;
    }
    const std::vector<Bytes> wide = modes.run(emitter::emit_cumsum({rows, cols, isa::ElementType::I64}, config),
                                              {Bytes(x.size() * 8), bytes_of(i64)}, shape);
    EXPECT_EQ(values_of<int64_t>(wide[0]), reference_cumsum(i64, rows, cols)) << shape;
    const std::vector<Bytes> narrow = modes.run(emitter::emit_cumsum({rows, cols, isa::ElementType::I32}, config),
                                                {Bytes(x.size() * 4), bytes_of(i32)}, shape);
    std::vector<uint32_t> wrapped(i32.begin(), i32.end());  // the reference wraps as unsigned arithmetic does
    std::vector<uint32_t> expected = reference_cumsum(wrapped, rows, cols);
    EXPECT_EQ(values_of<uint32_t>(narrow[0]), expected) << shape;
  }
}

TEST(TriangleKernel, ZeroesTheTriangleInBothModes) {
  const config::ChipConfig config = small_chip();
  BothModes modes(config);
  struct Case {
    int64_t matrices, rows, cols;
    int element_bytes;
    int64_t diagonal;
  };
  const Case cases[] = {{2, 20, 50, 4, 3}, {3, 9, 7, 2, -2}, {1, 6, 6, 8, 0}, {1, 5, 4, 1, 9}, {2, 4, 6, 4, -9}};
  for (const Case& c : cases) {
    for (const bool lower : {true, false}) {
      const emitter::TriangleSpec spec{c.matrices, c.rows, c.cols, c.element_bytes, c.diagonal, lower};
      const std::string shape =
          fmt::format("{}x{}x{} b{} k{}", c.matrices, c.rows, c.cols, c.element_bytes, c.diagonal);
      Bytes data(c.matrices * c.rows * c.cols * c.element_bytes);
      for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<std::byte>(1 + k % 251);
      Bytes expected = data;
      for (int64_t m = 0; m < c.matrices; ++m)
        for (int64_t i = 0; i < c.rows; ++i)
          for (int64_t j = 0; j < c.cols; ++j)
            if (lower ? j > i + c.diagonal : j < i + c.diagonal)
              std::fill_n(expected.begin() + ((m * c.rows + i) * c.cols + j) * c.element_bytes, c.element_bytes,
                          std::byte{0});
      const emitter::Kernel kernel = emitter::emit_zero_triangle(spec, config);
      // The rows of the whole batch are shared across the cores, one row at least each.
      EXPECT_EQ(kernel.cores, std::min<int64_t>(c.matrices * c.rows, config.chip_cores)) << shape;
      const std::vector<Bytes> result = modes.run(kernel, {data}, shape);
      EXPECT_EQ(result[0], expected) << (lower ? "tril " : "triu ") << shape;
    }
  }
}

// 150 rows: chunks of 64, 64 and 22 on the small chip. An ignored row's class 0 holds -inf (a log-probability of a
// class of probability 0), which an ignored row must not turn into a NaN.
TEST(NllLossKernels, MatchAReferenceInBothModes) {
  const config::ChipConfig config = small_chip();
  BothModes modes(config);
  const int64_t rows = 150, classes = 5, ignore = -100;
  std::vector<float> input = random_floats(rows * classes, 21);
  const std::vector<float> weight = positive(random_floats(classes, 22)), grad = random_floats(rows, 23);
  std::vector<int64_t> target(rows);
  for (int64_t i = 0; i < rows; ++i) target[i] = i % 7 == 3 ? ignore : (i * 3) % classes;
  input[3 * classes] = -std::numeric_limits<float>::infinity();
  for (const auto reduction : {emitter::NllReduction::None, emitter::NllReduction::Mean, emitter::NllReduction::Sum}) {
    for (const bool weighted : {false, true}) {
      const emitter::NllLossSpec spec{rows, classes, weighted, reduction, ignore};
      const std::string shape =
          fmt::format("{}x{} reduction {}{}", rows, classes, static_cast<int>(reduction), weighted ? " weighted" : "");
      std::vector<float> loss(rows), picked_weight(rows);
      float sum = 0, total_weight = 0;
      for (int64_t i = 0; i < rows; ++i) {
        if (target[i] == ignore) continue;
        picked_weight[i] = weighted ? weight[target[i]] : 1.0f;
        loss[i] = -(input[i * classes + target[i]] * picked_weight[i]);
        sum += loss[i];
        total_weight += picked_weight[i];
      }
      const bool reduced = reduction != emitter::NllReduction::None;
      const emitter::Kernel kernel = emitter::emit_nll_loss(spec, config);
      EXPECT_NE(kernel.description.find("chunks of 64 rows"), std::string::npos) << kernel.description;
      const std::vector<Bytes> forward = modes.run(
          kernel, {Bytes(reduced ? 4 : rows * 4), Bytes(4), bytes_of(input), bytes_of(target), bytes_of(weight)},
          shape);
      if (reduced) {
        const float expected = reduction == emitter::NllReduction::Mean ? sum / total_weight : sum;
        expect_close(values_of<float>(forward[0]), {expected}, "nll_loss " + shape);
        expect_close(values_of<float>(forward[1]), {total_weight}, "total weight " + shape);
      } else {
        expect_close(values_of<float>(forward[0]), loss, "nll_loss " + shape);
      }
      // The gradient from grad_output (a scalar when reduced) and the forward's total weight.
      const std::vector<float> grad_output = reduced ? std::vector<float>{grad[0]} : grad;
      const std::vector<Bytes> backward = modes.run(emitter::emit_nll_loss_backward(spec, config),
                                                    {Bytes(rows * classes * 4), bytes_of(grad_output), bytes_of(target),
                                                     bytes_of(weight), bytes_of(std::vector<float>{total_weight})},
                                                    shape);
      std::vector<float> expected(rows * classes, 0.0f);
      for (int64_t i = 0; i < rows; ++i) {
        if (target[i] == ignore) continue;
        float g = reduced ? grad[0] : grad[i];
        if (reduction == emitter::NllReduction::Mean) g /= total_weight;
        expected[i * classes + target[i]] = -(picked_weight[i] * g);
      }
      expect_close(values_of<float>(backward[0]), expected, "nll_loss backward " + shape);
    }
  }
  // A target out of range stops the kernel in both modes, never a read outside the input.
  std::vector<int64_t> bad = target;
  bad[5] = classes;
  modes.expect_error(emitter::emit_nll_loss({rows, classes, true, emitter::NllReduction::Sum, ignore}, config),
                     {Bytes(4), Bytes(4), bytes_of(input), bytes_of(bad), bytes_of(weight)});
}

// The representative shapes measured before and after the port to the kernel builder (the cycles are printed), on
// the default chip with four cores.
TEST(RowKernels, RepresentativeShapesOnFourCores) {
  config::ChipConfig config = test_config();
  config.chip_cores = 4;
  BothModes modes(config);
  const std::vector<float> x = random_floats(256 * 100, 31);
  const std::vector<Bytes> softmax = modes.run(emitter::emit_rows({emitter::RowOp::SoftmaxF32, 256, 100}, config),
                                               {Bytes(x.size() * 4), bytes_of(x)}, "256x100");
  expect_close(values_of<float>(softmax[0]), reference_rows({emitter::RowOp::SoftmaxF32, 256, 100}, x, {}, {}, {}).out,
               "softmax 256x100");
  const std::vector<float> weight = positive(random_floats(100, 32)), bias = random_floats(100, 33);
  const emitter::RowSpec norm{emitter::RowOp::LayerNormF32, 256, 100, true, true, 1e-5f};
  const std::vector<Bytes> normed =
      modes.run(emitter::emit_rows(norm, config),
                {Bytes(x.size() * 4), bytes_of(x), bytes_of(weight), bytes_of(bias), Bytes(256 * 4), Bytes(256 * 4)},
                "256x100 affine");
  expect_close(values_of<float>(normed[0]), reference_rows(norm, x, {}, weight, bias).out, "layer norm 256x100");
  const std::vector<Bytes> scanned = modes.run(emitter::emit_cumsum({256, 100, isa::ElementType::F32}, config),
                                               {Bytes(x.size() * 4), bytes_of(x)}, "256x100");
  EXPECT_EQ(values_of<float>(scanned[0]), reference_cumsum(x, 256, 100));
  const std::vector<Bytes> zeroed =
      modes.run(emitter::emit_zero_triangle({4, 64, 100, 4, 0, true}, config), {bytes_of(x)}, "4x64x100");
  const std::vector<float> triangle = values_of<float>(zeroed[0]);
  for (int64_t k = 0; k < 4 * 64 * 100; ++k) EXPECT_EQ(triangle[k], k % 100 > (k / 100) % 64 ? 0.0f : x[k]) << k;
  std::vector<int64_t> target(256);
  for (int64_t i = 0; i < 256; ++i) target[i] = i % 10;
  const emitter::NllLossSpec nll{256, 100, true, emitter::NllReduction::Mean, -100};
  const std::vector<Bytes> loss =
      modes.run(emitter::emit_nll_loss(nll, config),
                {Bytes(4), Bytes(4), bytes_of(x), bytes_of(target), bytes_of(weight)}, "256x100 mean weighted");
  float sum = 0, total = 0;
  for (int64_t i = 0; i < 256; ++i) sum += -(x[i * 100 + target[i]] * weight[target[i]]), total += weight[target[i]];
  expect_close(values_of<float>(loss[0]), {sum / total}, "nll_loss 256x100");
  modes.run(emitter::emit_nll_loss_backward(nll, config),
            {Bytes(x.size() * 4), bytes_of(std::vector<float>{1.5f}), bytes_of(target), bytes_of(weight),
             bytes_of(std::vector<float>{total})},
            "256x100 mean weighted");
}

}  // namespace
}  // namespace npusim
