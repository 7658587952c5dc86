// Fused pointwise/reduction kernels (emit_fused) against plain C++ loops, in both modes: the same bits in the
// functional and the timed model, no hazard in timed mode, and the reference's values. The reference interpreter
// below evaluates a spec point by point in each node's precision (f32 arithmetic, one rounding to f16/bf16, wrapping
// integers, functions in double from the f32 value as the vector engine computes them, sums in f32 in row order);
// softmax, layer norm and the bias gradient are also checked against loops written out by hand. Most cases run on a
// small chip (three cores, a few KiB of scratchpad) so that rows split into many tiles, the last one partial.
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

namespace npusim {
namespace {

using Bytes = std::vector<std::byte>;
using emitter::FusedAccess;
using emitter::FusedNode;
using emitter::FusedOpcode;
using emitter::FusedSpec;
using isa::ElementType;
using Op = FusedOpcode;

config::ChipConfig small_chip(int scratchpad_kib = 4) {
  config::ChipConfig config = test_config();
  config.chip_cores = 3;
  config.core_scratchpad_kib = scratchpad_kib;
  return config;
}

// ---- element values

uint16_t bf16_bits(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return 0x7fc0;
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}
float from_bf16(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

// The value rounded (floats, from f32) or wrapped (integers) to `type`, as a double.
double round_to(ElementType type, double value) {
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

double read_element(const Bytes& buffer, ElementType type, int64_t index) {
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

void write_element(Bytes& buffer, ElementType type, int64_t index, double value) {
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
Bytes buffer_of(ElementType type, int64_t count, const std::function<double(int64_t)>& values) {
  Bytes buffer(static_cast<size_t>(count) * isa::element_bytes(type));
  for (int64_t k = 0; k < count; ++k) write_element(buffer, type, k, round_to(type, values(k)));
  return buffer;
}
Bytes random_buffer(ElementType type, int64_t count, uint32_t seed, double low = -3, double high = 3) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> distribution(low, high);
  return buffer_of(type, count, [&](int64_t) {
    const double value = distribution(generator);
    return isa::is_float(type) ? value : std::round(value);
  });
}

// ---- the reference: the spec's semantics, one outer point at a time

double unary(Op op, ElementType type, double x) {
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

double binary(Op op, ElementType type, double x, double y) {
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

// Runs the spec over `buffers` (one per argument) on the host.
std::vector<Bytes> reference(const FusedSpec& spec, std::vector<Bytes> buffers) {
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
          case Op::Where: out[c] = operand(node.a, c) != 0 ? operand(node.b, c) : operand(node.c, c); break;
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
          case Op::Store: {
            const FusedAccess& access = spec.stores[node.access];
            write_element(buffers[access.argument], access.type, element(access, point, c),
                          round_to(access.type, operand(node.a, c)));
            break;
          }
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

  std::vector<Bytes> run(const emitter::Kernel& kernel, const std::vector<Bytes>& buffers) {
    const std::vector<Bytes> result = launch(functional_, kernel, buffers);
    EXPECT_EQ(result, launch(timed_, kernel, buffers)) << kernel.name;
    const runtime::CommandRecord record = kernel_record(timed_.take_records(), kernel.name);
    EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << ": " << record.first_hazard;
    std::printf("[ cycles ] %s: %llu cycles, %zu words, %llu cores\n", kernel.name.c_str(),
                static_cast<unsigned long long>(record.kernel_cycles), kernel.words.size(),
                static_cast<unsigned long long>(record.cores));
    return result;
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
    device.launch(kernel.name, device.load_program(kernel.words), addresses, (uint64_t{1} << kernel.cores) - 1);
    for (size_t k = 0; k < buffers.size(); ++k)
      if (!result[k].empty()) device.copy_device_to_host(result[k].data(), addresses[k], result[k].size());
    for (uint64_t address : addresses) device.free(address);
    return result;
  }

  runtime::Device functional_, timed_;
};

// Every element of argument `argument` within `relative` of the reference (exactly, bit for bit, when 0; NaN where
// it has NaN).
void expect_matches(const std::vector<Bytes>& actual, const std::vector<Bytes>& expected, int argument,
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
std::vector<Bytes> run_and_compare(const FusedSpec& spec, const config::ChipConfig& config,
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

// ---- pointwise

TEST(FusedKernels, PointwiseChainOverABroadcastAndATransposedOperand) {
  // out[i][j] = x[i][j] > y[j][i] ? exp((x + bias[j]) * y[j][i] * 0.25) : y[j][i]; mask = x > y.
  const int64_t rows = 37, cols = 53;
  SpecBuilder s("fused_add_mul_exp_where", {rows, cols}, 0, 5);
  const int x = s.load(0, F32, {cols, 1}), bias = s.load(1, F32, {0, 1}), y = s.load(2, F32, {1, rows});
  const int sum = s.op(Op::Add, F32, x, bias), product = s.op(Op::Mul, F32, sum, y);
  const int scaled = s.op(Op::Mul, F32, product, s.constant(F32, 0.25)), e = s.op(Op::Exp, F32, scaled);
  const int greater = s.op(Op::Gt, Bool, x, y);
  s.store(s.op(Op::Where, F32, greater, e, y), 3, F32, {cols, 1});
  s.store(greater, 4, Bool, {cols, 1});
  const std::vector<Bytes> buffers = {random_buffer(F32, rows * cols, 1), random_buffer(F32, cols, 2),
                                      random_buffer(F32, rows * cols, 3), Bytes(rows * cols * 4), Bytes(rows * cols)};
  const auto result = run_and_compare(s.spec, small_chip(), buffers, {F32, F32, F32, F32, Bool}, 1e-6);
  // And by hand, for one element that takes each side.
  const auto x_at = [&](int64_t i, int64_t j) { return read_element(buffers[0], F32, i * cols + j); };
  const auto y_at = [&](int64_t i, int64_t j) { return read_element(buffers[2], F32, j * rows + i); };
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const auto xv = static_cast<float>(x_at(i, j)), yv = static_cast<float>(y_at(i, j));
      const float expected =
          xv > yv ? std::exp((xv + static_cast<float>(read_element(buffers[1], F32, j))) * yv * 0.25f) : yv;
      EXPECT_NEAR(read_element(result[3], F32, i * cols + j), expected, 2e-6 * std::max(1.0f, std::fabs(expected)));
      EXPECT_EQ(read_element(result[4], Bool, i * cols + j), xv > yv ? 1 : 0);
    }
}

TEST(FusedKernels, HalfPrecisionLoadsComputeInF32AndStoreBf16) {
  // out (bf16) = (f32(a f16) * f32(b bf16) + 0.5) / 3, and the sum rounded to f16 as a second output.
  const int64_t count = 3000;
  SpecBuilder s("fused_f16_bf16_to_bf16", {count}, 0, 4);
  const int a = s.op(Op::Convert, F32, s.load(0, ElementType::F16, {1}));
  const int b = s.op(Op::Convert, F32, s.load(1, ElementType::BF16, {1}));
  const int sum = s.op(Op::Add, F32, s.op(Op::Mul, F32, a, b), s.constant(F32, 0.5));
  s.store(s.op(Op::Div, F32, sum, s.constant(F32, 3)), 2, ElementType::BF16, {1});
  s.store(s.op(Op::Convert, ElementType::F16, sum), 3, ElementType::F16, {1});
  run_and_compare(s.spec, small_chip(),
                  {random_buffer(ElementType::F16, count, 4), random_buffer(ElementType::BF16, count, 5),
                   Bytes(count * 2), Bytes(count * 2)},
                  {ElementType::F16, ElementType::BF16, ElementType::BF16, ElementType::F16});
}

TEST(FusedKernels, HalfPrecisionArithmeticRoundsEachStep) {
  // In bf16 throughout: (a * a - 1.25) * b, with a bf16 constant.
  const int64_t count = 1000;
  const ElementType BF16 = ElementType::BF16;
  SpecBuilder s("fused_bf16_chain", {count}, 0, 3);
  const int a = s.load(0, BF16, {1}), b = s.load(1, BF16, {1});
  const int square = s.op(Op::Mul, BF16, a, a);
  s.store(s.op(Op::Mul, BF16, s.op(Op::Sub, BF16, square, s.constant(BF16, 1.25)), b), 2, BF16, {1});
  run_and_compare(s.spec, small_chip(),
                  {random_buffer(BF16, count, 6), random_buffer(BF16, count, 7), Bytes(count * 2)}, {BF16, BF16, BF16});
}

TEST(FusedKernels, IntegerArithmeticWraps) {
  // i32: a + b - 7; i64: c + 2^40 (a constant wider than a vfill immediate) and c * c.
  const int64_t count = 700;
  const ElementType I32 = ElementType::I32, I64 = ElementType::I64;
  SpecBuilder s("fused_int_add", {count}, 0, 5);
  const int a = s.load(0, I32, {1}), b = s.load(1, I32, {1}), c = s.load(2, I64, {1});
  s.store(s.op(Op::Sub, I32, s.op(Op::Add, I32, a, b), s.constant(I32, 7)), 3, I32, {1});
  const int shifted = s.op(Op::Add, I64, c, s.constant(I64, 1099511627776.0));
  s.store(s.op(Op::Add, I64, shifted, s.op(Op::Mul, I64, c, c)), 4, I64, {1});
  const Bytes big = buffer_of(I64, count, [](int64_t k) { return (k - 350) * 123457.0; });
  run_and_compare(s.spec, small_chip(),
                  {random_buffer(I32, count, 8, -1e9, 1e9), random_buffer(I32, count, 9, -2e9, 2e9), big,
                   Bytes(count * 4), Bytes(count * 8)},
                  {I32, I32, I64, I32, I64});
}

TEST(FusedKernels, AConstantFirstOperandOfANonCommutativeOp) {
  // 1 - x, 2 / x and 0.5 < x, and with a per-row first operand: rowmax(x) - x.
  const int64_t rows = 29, cols = 21;
  SpecBuilder s("fused_constant_first", {rows, cols}, 1, 5);
  const int x = s.load(0, F32, {cols, 1});
  s.store(s.op(Op::Sub, F32, s.constant(F32, 1), x), 1, F32, {cols, 1});
  s.store(s.op(Op::Div, F32, s.constant(F32, 2), x), 2, F32, {cols, 1});
  s.store(s.op(Op::Lt, Bool, s.constant(F32, 0.5), x), 3, Bool, {cols, 1});
  s.store(s.op(Op::Sub, F32, s.op(Op::ReduceMax, F32, x), x), 4, F32, {cols, 1});
  run_and_compare(s.spec, small_chip(),
                  {random_buffer(F32, rows * cols, 10), Bytes(rows * cols * 4), Bytes(rows * cols * 4),
                   Bytes(rows * cols), Bytes(rows * cols * 4)},
                  {F32, F32, F32, Bool, F32});
}

TEST(FusedKernels, SmallInnerDimensionsTravelInBlocks) {
  // A [40, 6, 5] pointwise add with a per-channel operand: tiles of whole [6, 5] blocks (one 2-D DMA each for x,
  // whose blocks are 40 elements apart; a 4-D one for the channel operand), the sum stored in place (argument 0
  // loaded and stored) and a bool result.
  const int64_t a = 40, b = 6, c = 5, pitch = 40;
  SpecBuilder s("fused_blocks", {a, b, c}, 0, 3);
  const int x = s.load(0, F32, {pitch, c, 1}), channel = s.load(1, F32, {0, 1, 0});
  s.store(s.op(Op::Add, F32, x, channel), 0, F32, {pitch, c, 1});
  s.store(s.op(Op::Not, Bool, s.op(Op::Ge, Bool, x, channel)), 2, Bool, {b * c, c, 1});
  const config::ChipConfig config = small_chip();
  const std::string assembly = emitter::emit_fused(s.spec, config).assembly();
  EXPECT_NE(assembly.find("dma.ld2.b32"), std::string::npos) << assembly;
  EXPECT_NE(assembly.find("dma.ld4.b32"), std::string::npos) << assembly;
  run_and_compare(s.spec, config, {random_buffer(F32, a * pitch, 11), random_buffer(F32, b, 12), Bytes(a * b * c)},
                  {F32, F32, Bool});
}

// ---- reductions

TEST(FusedKernels, SoftmaxIsOneKernelOverPartialTilesAndThreeCores) {
  const int64_t rows = 50, cols = 37;
  SpecBuilder s("fused_softmax", {rows, cols}, 1, 2);
  const int x = s.load(0, F32, {cols, 1});
  const int shifted = s.op(Op::Sub, F32, x, s.op(Op::ReduceMax, F32, x));
  const int e = s.op(Op::Exp, F32, shifted);
  s.store(s.op(Op::Div, F32, e, s.op(Op::ReduceSum, F32, e)), 1, F32, {cols, 1});
  const config::ChipConfig config = small_chip();
  const emitter::Kernel kernel = emitter::emit_fused(s.spec, config);
  EXPECT_EQ(kernel.cores, 3);
  const Bytes x_buffer = random_buffer(F32, rows * cols, 13);
  const auto result = run_and_compare(s.spec, config, {x_buffer, Bytes(rows * cols * 4)}, {F32, F32}, 1e-6);
  for (int64_t r = 0; r < rows; ++r) {
    float max = -INFINITY, total = 0;
    for (int64_t c = 0; c < cols; ++c)
      max = std::max(max, static_cast<float>(read_element(x_buffer, F32, r * cols + c)));
    for (int64_t c = 0; c < cols; ++c)
      total += std::exp(static_cast<float>(read_element(x_buffer, F32, r * cols + c)) - max);
    for (int64_t c = 0; c < cols; ++c) {
      const float expected = std::exp(static_cast<float>(read_element(x_buffer, F32, r * cols + c)) - max) / total;
      EXPECT_NEAR(read_element(result[1], F32, r * cols + c), expected, 2e-6) << r << ", " << c;
    }
  }
}

TEST(FusedKernels, SumOverTheOuterDimensionOfAMatrix) {
  // The bias gradient: out[c] = sum over n of g[n][c], g [N, C] contiguous: the reduced dimension has stride C.
  const int64_t n = 45, c = 19;
  SpecBuilder s("fused_sum_dim0", {c, n}, 1, 2);
  s.store(s.op(Op::ReduceSum, F32, s.load(0, F32, {1, c})), 1, F32, {1, 0});
  // The rows are strided but the chunk of columns is contiguous: each tile loads runs of columns and transposes them.
  EXPECT_NE(emitter::emit_fused(s.spec, small_chip()).assembly().find("vtr.f32"), std::string::npos);
  const Bytes g = random_buffer(F32, n * c, 14);
  const auto result = run_and_compare(s.spec, small_chip(), {g, Bytes(c * 4)}, {F32, F32});
  for (int64_t j = 0; j < c; ++j) {
    float sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<float>(read_element(g, F32, i * c + j));
    EXPECT_EQ(read_element(result[1], F32, j), sum) << j;
  }
}

TEST(FusedKernels, SumOverTwoNonContiguousDimensions) {
  // out[b] = sum over a, c of x[a][b][c] (x [A, B, C]): two reduced dimensions moved by a 4-D DMA, and the max.
  const int64_t a = 7, b = 11, c = 13;
  SpecBuilder s("fused_sum_dims02", {b, a, c}, 2, 3);
  const int x = s.load(0, F32, {c, b * c, 1});
  s.store(s.op(Op::ReduceSum, F32, x), 1, F32, {1, 0, 0});
  s.store(s.op(Op::ReduceMax, F32, x), 2, F32, {1, 0, 0});
  run_and_compare(s.spec, small_chip(), {random_buffer(F32, a * b * c, 15), Bytes(b * 4), Bytes(b * 4)},
                  {F32, F32, F32});
}

TEST(FusedKernels, LayerNormWithTwoReductionsAndThreeOutputs) {
  // mean = sum(x) / cols; d = x - mean; var = sum(d * d) / cols; r = rsqrt(var + eps); y = d * r * w + b; the means
  // and the 1/stds are stored too.
  const int64_t rows = 23, cols = 40;
  const float inverse = 1.0f / cols, eps = 1e-5f;
  SpecBuilder s("fused_layer_norm", {rows, cols}, 1, 6);
  const int x = s.load(0, F32, {cols, 1}), w = s.load(1, F32, {0, 1}), bias = s.load(2, F32, {0, 1});
  const int mean = s.op(Op::Mul, F32, s.op(Op::ReduceSum, F32, x), s.constant(F32, inverse));
  const int d = s.op(Op::Sub, F32, x, mean);
  const int var = s.op(Op::Mul, F32, s.op(Op::ReduceSum, F32, s.op(Op::Mul, F32, d, d)), s.constant(F32, inverse));
  const int r = s.op(Op::Rsqrt, F32, s.op(Op::Add, F32, var, s.constant(F32, eps)));
  s.store(s.op(Op::Add, F32, s.op(Op::Mul, F32, s.op(Op::Mul, F32, d, r), w), bias), 3, F32, {cols, 1});
  s.store(mean, 4, F32, {1, 0});
  s.store(r, 5, F32, {1, 0});
  const Bytes xs = random_buffer(F32, rows * cols, 16), ws = random_buffer(F32, cols, 17),
              bs = random_buffer(F32, cols, 18);
  const auto result =
      run_and_compare(s.spec, small_chip(), {xs, ws, bs, Bytes(rows * cols * 4), Bytes(rows * 4), Bytes(rows * 4)},
                      {F32, F32, F32, F32, F32, F32}, 1e-6);
  for (int64_t i = 0; i < rows; ++i) {
    float sum = 0, squares = 0;
    for (int64_t j = 0; j < cols; ++j) sum += static_cast<float>(read_element(xs, F32, i * cols + j));
    const float m = sum * inverse;
    for (int64_t j = 0; j < cols; ++j) {
      const float dj = static_cast<float>(read_element(xs, F32, i * cols + j)) - m;
      squares += dj * dj;
    }
    const float rstd = 1.0f / std::sqrt(squares * inverse + eps);
    EXPECT_EQ(read_element(result[4], F32, i), m);
    EXPECT_NEAR(read_element(result[5], F32, i), rstd, 1e-6 * rstd);
    for (int64_t j = 0; j < cols; ++j) {
      const float dj = static_cast<float>(read_element(xs, F32, i * cols + j)) - m;
      const float expected =
          dj * rstd * static_cast<float>(read_element(ws, F32, j)) + static_cast<float>(read_element(bs, F32, j));
      EXPECT_NEAR(read_element(result[3], F32, i * cols + j), expected, 1e-5 * std::max(1.0f, std::fabs(expected)));
    }
  }
}

TEST(FusedKernels, APerRowValueStoredAlongTheRowIsBroadcast) {
  // Softmax's max, stored to every element of the row, and a where choosing per-row values over the row.
  const int64_t rows = 17, cols = 9;
  SpecBuilder s("fused_per_row_store", {rows, cols}, 1, 3);
  const int x = s.load(0, F32, {cols, 1});
  const int max = s.op(Op::ReduceMax, F32, x), min = s.op(Op::ReduceMin, F32, x);
  s.store(max, 1, F32, {cols, 1});
  s.store(s.op(Op::Where, F32, s.op(Op::Gt, Bool, x, s.constant(F32, 0)), max, min), 2, F32, {cols, 1});
  run_and_compare(s.spec, small_chip(),
                  {random_buffer(F32, rows * cols, 19), Bytes(rows * cols * 4), Bytes(rows * cols * 4)},
                  {F32, F32, F32});
}

TEST(FusedKernels, PerRowValuesAreLoadsConstantAlongTheRowReductionsAndWhatUsesOnlyThose) {
  SpecBuilder s("fused_shapes", {8, 4}, 1, 3);
  const int x = s.load(0, F32, {4, 1}), mean = s.load(1, F32, {1, 0}), max = s.op(Op::ReduceMax, F32, x);
  const int shifted = s.op(Op::Sub, F32, max, mean), scaled = s.op(Op::Mul, F32, x, shifted);
  s.store(scaled, 2, F32, {4, 1});
  EXPECT_FALSE(emitter::is_per_row(s.spec, x));
  EXPECT_TRUE(emitter::is_per_row(s.spec, mean));
  EXPECT_TRUE(emitter::is_per_row(s.spec, max));
  EXPECT_TRUE(emitter::is_per_row(s.spec, shifted));
  EXPECT_FALSE(emitter::is_per_row(s.spec, scaled));
  EXPECT_THROW(emitter::is_per_row(s.spec, 9), std::invalid_argument);
}

// ---- what the emitter refuses

TEST(FusedKernels, ARowThatDoesNotFitIsUnsupported) {
  SpecBuilder s("fused_big_row", {4, 1 << 20}, 1, 2);
  s.store(s.op(Op::ReduceSum, F32, s.load(0, F32, {1 << 20, 1})), 1, F32, {1, 0});
  try {
    emitter::emit_fused(s.spec, small_chip());
    ADD_FAILURE() << "expected Unsupported";
  } catch (const emitter::Unsupported& error) {
    EXPECT_NE(std::string(error.what()).find("row of 1048576 elements does not fit"), std::string::npos)
        << error.what();
  }
}

TEST(FusedKernels, AnOperationTheVectorEngineLacksIsUnsupported) {
  SpecBuilder s("fused_exp_i32", {100}, 0, 2);
  s.store(s.op(Op::Exp, ElementType::I32, s.load(0, ElementType::I32, {1})), 1, ElementType::I32, {1});
  try {
    emitter::emit_fused(s.spec, small_chip());
    ADD_FAILURE() << "expected Unsupported";
  } catch (const emitter::Unsupported& error) {
    EXPECT_NE(std::string(error.what()).find("node 1 (Exp)"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("i32"), std::string::npos) << error.what();
  }
}

void expect_invalid(const FusedSpec& spec, const std::string& words) {
  try {
    emitter::emit_fused(spec, small_chip());
    ADD_FAILURE() << "expected invalid_argument: " << words;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(spec.name), std::string::npos) << error.what();
  }
}

TEST(FusedKernels, AMalformedSpecIsAnInvalidArgumentNamingTheNode) {
  SpecBuilder s("fused_bad", {8, 4}, 1, 2);
  const int x = s.load(0, F32, {4, 1});
  s.store(s.op(Op::Exp, F32, x), 1, F32, {4, 1});
  const FusedSpec good = s.spec;
  EXPECT_NO_THROW(emitter::emit_fused(good, small_chip()));

  FusedSpec spec = good;
  spec.nodes[1].a = 1;  // itself
  expect_invalid(spec, "node 1 (Exp): operand a is node 1");
  spec = good;
  spec.nodes[2].a = 5;
  expect_invalid(spec, "node 2 (Store): operand a is node 5");
  spec = good;
  spec.loads[0].strides = {4};
  expect_invalid(spec, "load 0 has 1 strides for 2 dimensions");
  spec = good;
  spec.stores[0].argument = 2;
  expect_invalid(spec, "store 0 uses argument 2 of 2");
  spec = good;
  spec.nodes[0].access = 3;
  expect_invalid(spec, "node 0 (Load): access 3");
  spec = good;
  spec.nodes[1].type = ElementType::F16;
  expect_invalid(spec, "node 1 (Exp): an operand is f32, not f16");
  spec = good;
  spec.stores[0].strides = {1, 0};  // a full row into one element per row
  expect_invalid(spec, "node 2 (Store): stores a full row");
  spec = good;
  spec.reduced_dims = 3;
  expect_invalid(spec, "3 reduced dimensions of 2");
}

TEST(FusedKernels, AnEmptyIterationSpaceOnlyHalts) {
  SpecBuilder s("fused_empty", {0, 5}, 1, 2);
  s.store(s.op(Op::ReduceSum, F32, s.load(0, F32, {5, 1})), 1, F32, {1, 0});
  const emitter::Kernel kernel = emitter::emit_fused(s.spec, small_chip());
  EXPECT_EQ(kernel.cores, 1);
  EXPECT_EQ(kernel.words.size(), 1u);
  BothModes modes(small_chip());
  modes.run(kernel, {Bytes(8), Bytes(8)});
}

}  // namespace
}  // namespace npusim
