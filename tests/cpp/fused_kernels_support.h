// What the fused-kernel tests share: element values, the reference interpreter of a spec (fused.h) evaluating it point
// by point in each node's precision (f32 arithmetic, one rounding to f16/bf16, a multiply-add rounded once in f32,
// wrapping integers, functions in double
// from the f32 value as the vector engine computes them, sums in f32 in row order, a product's elements by fused
// multiply-adds in k order as the matrix engine accumulates them), running a kernel in both modes, and building specs.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "npusim/emitter/fused.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim::fused_test {

using Bytes = std::vector<std::byte>;
using emitter::FusedAccess;
using emitter::FusedNode;
using emitter::FusedOpcode;
using emitter::FusedSpec;
using isa::ElementType;
using Op = FusedOpcode;

inline config::ChipConfig small_chip(int scratchpad_kib = 4) {
  config::ChipConfig config = test_config();
  config.chip_cores = 3;
  config.core_scratchpad_kib = scratchpad_kib;
  return config;
}

// ---- element values

inline uint16_t bf16_bits(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return 0x7fc0;
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}
inline float from_bf16(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// The value rounded (floats, from f32) or wrapped (integers) to `type`, as a double.
inline double round_to(ElementType type, double value) {
  switch (type) {
    case ElementType::F32: return static_cast<float>(value);
    case ElementType::F16: return static_cast<float>(static_cast<_Float16>(static_cast<float>(value)));
    case ElementType::BF16: return from_bf16(bf16_bits(static_cast<float>(value)));
    case ElementType::I8: return static_cast<int8_t>(static_cast<int64_t>(value));
    case ElementType::U8: return static_cast<uint8_t>(static_cast<int64_t>(value));
    case ElementType::I32: return static_cast<int32_t>(static_cast<int64_t>(value));
    case ElementType::I64: return static_cast<double>(static_cast<int64_t>(value));
    case ElementType::Bool: return value != 0 ? 1 : 0;
  }
  return value;
}

inline double read_element(const Bytes& buffer, ElementType type, int64_t index) {
  const std::byte* at = buffer.data() + index * static_cast<int64_t>(isa::element_bytes(type));
  const auto get = [&]<typename T>(T) {
    T value;
    std::memcpy(&value, at, sizeof(T));
    return value;
  };
  switch (type) {
    case ElementType::F32: return get(float{});
    case ElementType::F16: return static_cast<float>(get(_Float16{}));
    case ElementType::BF16: return from_bf16(get(uint16_t{}));
    case ElementType::I8: return get(int8_t{});
    case ElementType::U8:
    case ElementType::Bool: return get(uint8_t{});
    case ElementType::I32: return get(int32_t{});
    case ElementType::I64: return static_cast<double>(get(int64_t{}));
  }
  return 0;
}

inline void write_element(Bytes& buffer, ElementType type, int64_t index, double value) {
  std::byte* at = buffer.data() + index * static_cast<int64_t>(isa::element_bytes(type));
  const auto put = [&](auto v) { std::memcpy(at, &v, sizeof(v)); };
  switch (type) {
    case ElementType::F32: put(static_cast<float>(value)); break;
    case ElementType::F16: put(static_cast<_Float16>(static_cast<float>(value))); break;
    case ElementType::BF16: put(bf16_bits(static_cast<float>(value))); break;
    case ElementType::I8: put(static_cast<int8_t>(value)); break;
    case ElementType::U8:
    case ElementType::Bool: put(static_cast<uint8_t>(value)); break;
    case ElementType::I32: put(static_cast<int32_t>(value)); break;
    case ElementType::I64: put(static_cast<int64_t>(value)); break;
  }
}

// A buffer of `count` elements of `type`, from values(k).
inline Bytes buffer_of(ElementType type, int64_t count, const std::function<double(int64_t)>& values) {
  Bytes buffer(static_cast<size_t>(count) * isa::element_bytes(type));
  for (int64_t k = 0; k < count; ++k) write_element(buffer, type, k, round_to(type, values(k)));
  return buffer;
}
inline Bytes random_buffer(ElementType type, int64_t count, uint32_t seed, double low = -3, double high = 3) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> distribution(low, high);
  return buffer_of(type, count, [&](int64_t) {
    const double value = distribution(generator);
    return isa::is_float(type) ? value : std::round(value);
  });
}

// ---- the reference: the spec's semantics, one outer point at a time

inline double unary(Op op, ElementType type, double x) {
  const auto special = [&](double (*function)(double)) { return function(static_cast<float>(x)); };
  switch (op) {
    case Op::Neg: return -x;
    case Op::Abs: return std::fabs(x);
    case Op::Exp: return special(std::exp);
    case Op::Log: return special(std::log);
    case Op::Tanh: return special(std::tanh);
    case Op::Sigmoid: return 1 / (1 + std::exp(-x));
    case Op::Erf: return special(std::erf);
    case Op::Sqrt: return special(std::sqrt);
    case Op::Rsqrt: return 1 / std::sqrt(x);
    case Op::Reciprocal: return 1 / x;
    case Op::Sin: return special(std::sin);
    case Op::Cos: return special(std::cos);
    case Op::Log1p: return special(std::log1p);
    case Op::Expm1: return special(std::expm1);
    case Op::Floor: return std::floor(x);
    case Op::Ceil: return std::ceil(x);
    case Op::Round: return std::nearbyint(x);
    case Op::Trunc: return std::trunc(x);
    case Op::Not: return x == 0;
    case Op::Convert: return isa::is_float(type) || x == 0 ? x : std::trunc(x);
    default: ADD_FAILURE() << "not a unary op"; return 0;
  }
}

inline double binary(Op op, ElementType type, double x, double y) {
  const bool is_float = isa::is_float(type);
  const auto in_f32 = [&](float r) { return static_cast<double>(r); };
  const auto fx = static_cast<float>(x), fy = static_cast<float>(y);
  const auto ix = static_cast<int64_t>(x), iy = static_cast<int64_t>(y);
  switch (op) {
    case Op::Add: return is_float ? in_f32(fx + fy) : static_cast<double>(ix + iy);
    case Op::Sub: return is_float ? in_f32(fx - fy) : static_cast<double>(ix - iy);
    case Op::Mul:
      return is_float
                 ? in_f32(fx * fy)
                 : static_cast<double>(static_cast<int64_t>(static_cast<uint64_t>(ix) * static_cast<uint64_t>(iy)));
    case Op::Div: return is_float ? in_f32(fx / fy) : static_cast<double>(ix / iy);
    case Op::Maximum: return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
    case Op::Minimum: return std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
    case Op::And: return static_cast<double>(ix & iy);
    case Op::Or: return static_cast<double>(ix | iy);
    case Op::Xor: return static_cast<double>(ix ^ iy);
    case Op::Eq: return x == y;
    case Op::Ne: return x != y;
    case Op::Lt: return x < y;
    case Op::Le: return x <= y;
    case Op::Gt: return x > y;
    case Op::Ge: return x >= y;
    default: ADD_FAILURE() << "not a binary op"; return 0;
  }
}

// The kernel's matrix product at outer point `point` of a spec with one (its space (batch,) m, n): f32 products summed
// by fused multiply-adds in k order, as the matrix engine accumulates them.
inline double product_at(const FusedSpec& spec, const std::vector<Bytes>& buffers, int64_t point) {
  const emitter::FusedMatmul& p = *spec.matmul;
  const int64_t j = point % p.n, i = point / p.n % p.m, e = point / p.n / p.m;
  float accumulator = 0;
  for (int64_t l = 0; l < p.k; ++l) {
    const double a =
        read_element(buffers[p.a_argument], p.type, p.a_offset + e * p.a_batch + i * p.a_row + l * p.a_col);
    const double b =
        read_element(buffers[p.b_argument], p.type, p.b_offset + e * p.b_batch + l * p.b_row + j * p.b_col);
    accumulator = std::fma(static_cast<float>(a), static_cast<float>(b), accumulator);
  }
  return accumulator;
}

// Runs the spec over `buffers` (one per argument) on the host.
inline std::vector<Bytes> reference(const FusedSpec& spec, std::vector<Bytes> buffers) {
  const size_t dims = spec.sizes.size(), outer_dims = dims - spec.reduced_dims;
  int64_t outer_points = 1, row = 1;
  for (size_t d = 0; d < dims; ++d) (d < outer_dims ? outer_points : row) *= spec.sizes[d];
  const auto element = [&](const FusedAccess& access, int64_t point, int64_t column) {
    int64_t index = access.offset;
    for (size_t d = dims; d-- > 0;) {
      int64_t& remaining = d < outer_dims ? point : column;
      index += remaining % spec.sizes[d] * access.strides[d];
      remaining /= spec.sizes[d];
    }
    return index;
  };
  for (int64_t point = 0; point < outer_points; ++point) {
    std::vector<std::vector<double>> values(spec.nodes.size());  // each node's row
    for (size_t i = 0; i < spec.nodes.size(); ++i) {
      const FusedNode& node = spec.nodes[i];
      std::vector<double>& out = values[i];
      out.assign(row, 0);
      const auto operand = [&](int index, int64_t c) { return values[index][c]; };
      for (int64_t c = 0; c < row; ++c) {
        switch (node.op) {
          case Op::Load: {
            const FusedAccess& access = spec.loads[node.access];
            out[c] = read_element(buffers[access.argument], access.type, element(access, point, c));
            break;
          }
          case Op::Constant: out[c] = round_to(node.type, node.constant); break;
          case Op::Product: out[c] = product_at(spec, buffers, point); break;
          case Op::Where: out[c] = operand(node.a, c) != 0 ? operand(node.b, c) : operand(node.c, c); break;
          case Op::MulAdd:
            out[c] = std::fma(static_cast<float>(operand(node.a, c)), static_cast<float>(operand(node.b, c)),
                              static_cast<float>(operand(node.c, c)));
            break;
          case Op::Argument: ADD_FAILURE() << "the reference takes an Argument's value as a Constant"; break;
          case Op::ReduceSum:
          case Op::ReduceMax:
          case Op::ReduceMin: {
            float sum = 0;
            double extreme = operand(node.a, 0);
            int64_t total = 0;
            for (int64_t k = 0; k < row; ++k) {
              const double x = operand(node.a, k);
              sum += static_cast<float>(x);
              total += static_cast<int64_t>(isa::is_float(node.type) ? 0 : x);
              extreme = binary(node.op == Op::ReduceMax ? Op::Maximum : Op::Minimum, node.type, extreme, x);
            }
            out[c] = node.op != Op::ReduceSum ? extreme : isa::is_float(node.type) ? sum : total;
            break;
          }
          case Op::ReduceArgMax:
          case Op::ReduceArgMin: {  // the first index of the extremum, a NaN counting as it
            int64_t at = 0;
            for (int64_t k = 1; k < row; ++k) {
              const double best = operand(node.a, at), x = operand(node.a, k);
              if (std::isnan(best)) break;
              if (std::isnan(x) || (node.op == Op::ReduceArgMax ? x > best : x < best)) at = k;
            }
            out[c] = static_cast<double>(at);
            break;
          }
          case Op::Store: {
            const FusedAccess& access = spec.stores[node.access];
            write_element(buffers[access.argument], access.type, element(access, point, c),
                          round_to(access.type, operand(node.a, c)));
            break;
          }
          case Op::Gather: {
            const FusedAccess& access = spec.loads[node.access];
            out[c] = read_element(buffers[access.argument], access.type,
                                  access.offset + static_cast<int64_t>(operand(node.a, c)));
            break;
          }
          case Op::ScatterAdd: {  // in the order of the points, as dma.stxadd adds (as vadd)
            const FusedAccess& access = spec.stores[node.access];
            const int64_t at = access.offset + static_cast<int64_t>(operand(node.b, c));
            const double sum = binary(Op::Add, access.type, read_element(buffers[access.argument], access.type, at),
                                      operand(node.a, c));
            write_element(buffers[access.argument], access.type, at, round_to(access.type, sum));
            break;
          }
          case Op::CheckIndex:
            out[c] = operand(node.a, c);
            EXPECT_TRUE(out[c] >= 0 && out[c] < node.constant) << "the reference checks an index out of range";
            break;
          default:
            if (static_cast<int>(node.op) < static_cast<int>(Op::Add)) {
              out[c] = unary(node.op, node.type, operand(node.a, c));
            } else {
              out[c] = binary(node.op, spec.nodes[node.a].type, operand(node.a, c), operand(node.b, c));
            }
        }
        out[c] = round_to(node.type, out[c]);
      }
    }
  }
  return buffers;
}

// ---- running kernels

// A functional and a timed device of one chip: run() launches a kernel on both with the same buffers (the argument
// block lists their addresses in order) and returns the buffers afterwards, checking that both modes agree and that
// the timed model saw no hazard.
class BothModes {
 public:
  explicit BothModes(const config::ChipConfig& config)
      : functional_(config, runtime::Mode::Functional), timed_(config, runtime::Mode::Timed) {}

  // Expects the kernel to stop in each mode with an error whose message contains `what`.
  void expect_error(const emitter::Kernel& kernel, const std::vector<Bytes>& buffers, const std::string& what) {
    for (runtime::Device* device : {&functional_, &timed_}) {
      try {
        launch(*device, kernel, buffers);
        ADD_FAILURE() << kernel.name << " ran without an error";
      } catch (const runtime::DeviceError& error) {
        EXPECT_NE(std::string(error.what()).find(what), std::string::npos) << error.what();
      }
    }
  }

  std::vector<Bytes> run(const emitter::Kernel& kernel, const std::vector<Bytes>& buffers) {
    const std::vector<Bytes> result = launch(functional_, kernel, buffers);
    EXPECT_EQ(result, launch(timed_, kernel, buffers)) << kernel.name;
    last_record_ = kernel_record(timed_.take_records(), kernel.name);
    const runtime::CommandRecord& record = last_record_;
    EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << ": " << record.first_hazard;
    std::printf("[ cycles ] %s: %llu cycles, %zu words, %llu cores\n", kernel.name.c_str(),
                static_cast<unsigned long long>(record.kernel_cycles), kernel.words.size(),
                static_cast<unsigned long long>(record.cores));
    return result;
  }
  // The timed run's record of the last kernel run().
  const runtime::CommandRecord& last_record() const { return last_record_; }

 private:
  static std::vector<Bytes> launch(runtime::Device& device, const emitter::Kernel& kernel,
                                   const std::vector<Bytes>& buffers) {
    std::vector<uint64_t> addresses;
    for (const Bytes& buffer : buffers) {
      addresses.push_back(device.allocate(std::max<size_t>(buffer.size(), 8)));
      if (!buffer.empty()) device.copy_host_to_device(addresses.back(), buffer.data(), buffer.size());
    }
    std::vector<Bytes> result = buffers;
    device.launch(kernel.name, device.load_program(kernel.words), addresses, (uint64_t{1} << kernel.cores) - 1);
    for (size_t k = 0; k < buffers.size(); ++k)
      if (!result[k].empty()) device.copy_device_to_host(result[k].data(), addresses[k], result[k].size());
    for (uint64_t address : addresses) device.free(address);
    return result;
  }

  runtime::Device functional_, timed_;
  runtime::CommandRecord last_record_;
};

// Every element of argument `argument` within `relative` of the reference (exactly, bit for bit, when 0; NaN where
// it has NaN).
inline void expect_matches(const std::vector<Bytes>& actual, const std::vector<Bytes>& expected, int argument,
                           ElementType type, double relative, const std::string& what) {
  const auto count = static_cast<int64_t>(expected[argument].size() / isa::element_bytes(type));
  ASSERT_EQ(actual[argument].size(), expected[argument].size());
  int failures = 0;
  for (int64_t k = 0; k < count && failures < 10; ++k) {
    const double a = read_element(actual[argument], type, k), e = read_element(expected[argument], type, k);
    const bool ok = std::isnan(e)   ? std::isnan(a)
                    : relative == 0 ? a == e && std::signbit(a) == std::signbit(e)
                                    : std::fabs(a - e) <= relative * std::max(1.0, std::fabs(e));
    if (!ok) ++failures;
    EXPECT_TRUE(ok) << what << " argument " << argument << " element " << k << ": " << a << ", expected " << e;
  }
}

// Builds, runs in both modes and compares every argument with the reference.
inline std::vector<Bytes> run_and_compare(const FusedSpec& spec, const config::ChipConfig& config,
                                          const std::vector<Bytes>& buffers, const std::vector<ElementType>& types,
                                          double relative = 0) {
  const emitter::Kernel kernel = emitter::emit_fused(spec, config);
  EXPECT_EQ(kernel.name, spec.name);
  BothModes modes(config);
  const std::vector<Bytes> actual = modes.run(kernel, buffers);
  const std::vector<Bytes> expected = reference(spec, buffers);
  for (size_t k = 0; k < buffers.size(); ++k)
    expect_matches(actual, expected, static_cast<int>(k), types[k], relative, spec.name);
  return actual;
}

// ---- building specs

struct SpecBuilder {
  FusedSpec spec;
  SpecBuilder(std::string name, std::vector<int64_t> sizes, int reduced_dims, int arguments) {
    spec.name = std::move(name);
    spec.sizes = std::move(sizes);
    spec.reduced_dims = reduced_dims;
    spec.arguments = arguments;
  }
  int node(FusedNode node) {
    spec.nodes.push_back(node);
    return static_cast<int>(spec.nodes.size()) - 1;
  }
  int load(int argument, ElementType type, std::vector<int64_t> strides, int64_t offset = 0) {
    spec.loads.push_back({argument, type, offset, std::move(strides)});
    return node({.op = Op::Load, .type = type, .access = static_cast<int>(spec.loads.size()) - 1});
  }
  int constant(ElementType type, double value) { return node({.op = Op::Constant, .type = type, .constant = value}); }
  int op(Op op, ElementType type, int a, int b = -1, int c = -1) {
    return node({.op = op, .type = type, .a = a, .b = b, .c = c});
  }
  // Element offset + index of argument `argument`, at each point (index: an i64 node).
  int gather(int index, int argument, ElementType type, int64_t offset = 0, int run = 1) {
    spec.loads.push_back({argument, type, offset, std::vector<int64_t>(spec.sizes.size(), 0)});
    return node({.op = Op::Gather,
                 .type = type,
                 .a = index,
                 .access = static_cast<int>(spec.loads.size()) - 1,
                 .constant = double(run)});
  }
  void scatter_add(int value, int index, int argument, ElementType type, int64_t offset = 0) {
    spec.stores.push_back({argument, type, offset, std::vector<int64_t>(spec.sizes.size(), 0)});
    node({.op = Op::ScatterAdd,
          .type = type,
          .a = value,
          .b = index,
          .access = static_cast<int>(spec.stores.size()) - 1});
  }
  int check(int value, int64_t bound) {
    return node({.op = Op::CheckIndex, .type = spec.nodes[value].type, .a = value, .constant = double(bound)});
  }
  void store(int value, int argument, ElementType type, std::vector<int64_t> strides, int64_t offset = 0) {
    spec.stores.push_back({argument, type, offset, std::move(strides)});
    node({.op = Op::Store,
          .type = spec.nodes[value].type,
          .a = value,
          .access = static_cast<int>(spec.stores.size()) - 1});
  }
};

constexpr ElementType F32 = ElementType::F32;
constexpr ElementType Bool = ElementType::Bool;

}  // namespace npusim::fused_test
