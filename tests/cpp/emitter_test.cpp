// Emitted elementwise kernels on the emulator against plain reference loops, for contiguous, strided, broadcast and
// partial-tile shapes.
#include <gtest/gtest.h>

#include <algorithm>

#include <bit>
#include <random>

#include "npusim/emitter/elementwise.h"
#include "npusim/runtime/device.h"

namespace npusim {
namespace {

using emitter::ElementwiseOp;

config::ChipConfig small_config() {
  config::ChipConfig config;
  config.dram_capacity_mib = 128;
  config.core_scratchpad_kib = 4;  // small tiles, so the tests exercise tile loops and remainders
  return config;
}

// Reference: walk the index space of `sizes`, addressing each operand by its strides.
std::vector<float> reference(ElementwiseOp op, const std::vector<int64_t>& sizes,
                             const std::vector<std::vector<int64_t>>& strides, const std::vector<float>& a,
                             const std::vector<float>& b, std::vector<float> out) {
  int64_t total = 1;
  for (int64_t size : sizes) total *= size;
  for (int64_t linear = 0; linear < total; ++linear) {
    int64_t rest = linear;
    int64_t offsets[3] = {0, 0, 0};
    for (int dim = static_cast<int>(sizes.size()) - 1; dim >= 0; --dim) {
      const int64_t index = rest % sizes[dim];
      rest /= sizes[dim];
      for (size_t k = 0; k < strides.size(); ++k) offsets[k] += index * strides[k][dim];
    }
    const float x = a[offsets[1]];
    const float y = op == ElementwiseOp::Copy ? 0.0f : b[offsets[2]];
    float result = x;
    if (op == ElementwiseOp::AddF32) result = x + y;
    if (op == ElementwiseOp::MulF32) result = x * y;
    if (op == ElementwiseOp::MaxF32) result = std::max(x, y);  // no NaNs in these inputs
    if (op == ElementwiseOp::MinF32) result = std::min(x, y);
    out[offsets[0]] = result;
  }
  return out;
}

struct Case {
  ElementwiseOp op;
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << emitter::op_name(c.op) << " sizes " << ::testing::PrintToString(c.sizes) << " strides "
       << ::testing::PrintToString(c.strides);
}

class EmittedElementwise : public ::testing::TestWithParam<Case> {};

// Runs the case's kernel on every core of `config` and compares it with the reference loops.
void expect_matches_reference(const Case& c, const config::ChipConfig& config) {
  runtime::Device device(config, runtime::Mode::Functional);
  std::mt19937 random(7);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  const size_t span = 1 << 16;
  std::vector<float> a(span), b(span), out(span, -1.0f);
  for (auto& x : a) x = value(random);
  for (auto& x : b) x = value(random);
  const uint64_t da = device.allocate(span * 4), db = device.allocate(span * 4), dout = device.allocate(span * 4);
  device.copy_host_to_device(da, a.data(), span * 4);
  device.copy_host_to_device(db, b.data(), span * 4);
  device.copy_host_to_device(dout, out.data(), span * 4);

  const emitter::Kernel kernel = emitter::emit_elementwise({c.op, 4, c.sizes, c.strides}, device.config());
  const uint64_t arguments[] = {dout, da, db};
  const uint64_t kernel_cores = (uint64_t{1} << kernel.cores) - 1;
  device.launch(kernel.name, device.load_program(kernel.words), std::span(arguments, c.strides.size()), kernel_cores);
  std::vector<float> actual(span);
  device.copy_device_to_host(actual.data(), dout, span * 4);
  EXPECT_EQ(actual, reference(c.op, c.sizes, c.strides, a, b, out)) << kernel.assembly();
}

TEST_P(EmittedElementwise, MatchesReferenceLoops) { expect_matches_reference(GetParam(), small_config()); }

TEST_P(EmittedElementwise, MatchesReferenceLoopsWhenCoresShareTheTiles) {
  config::ChipConfig config = small_config();
  config.chip_cores = 3;
  expect_matches_reference(GetParam(), config);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, EmittedElementwise,
    ::testing::Values(
        Case{ElementwiseOp::AddF32, {8}, {{1}, {1}, {1}}},
        Case{ElementwiseOp::AddF32, {5000}, {{1}, {1}, {1}}},                         // several tiles and a remainder
        Case{ElementwiseOp::MulF32, {37, 53}, {{53, 1}, {1, 37}, {53, 1}}},           // transposed input
        Case{ElementwiseOp::MulF32, {3, 4, 5}, {{20, 5, 1}, {0, 5, 1}, {20, 0, 1}}},  // broadcasts
        Case{ElementwiseOp::AddF32, {2, 3, 4, 5, 6}, {{360, 120, 30, 6, 1}, {1, 2, 6, 24, 120}, {0, 1, 0, 3, 0}}},
        // transposing copies: a short dimension taken whole, square tiles with partial edges, a permuted 3-D
        // tensor, a contiguous source into a transposed view, and a 4-D permutation with two outer dimensions
        Case{ElementwiseOp::Copy, {300, 7}, {{7, 1}, {1, 300}}},
        Case{ElementwiseOp::Copy, {37, 53}, {{53, 1}, {1, 37}}},
        Case{ElementwiseOp::Copy, {5, 6, 7}, {{42, 7, 1}, {6, 1, 30}}},
        Case{ElementwiseOp::Copy, {40, 20}, {{1, 40}, {20, 1}}},
        Case{ElementwiseOp::Copy, {3, 4, 5, 6}, {{120, 30, 6, 1}, {20, 5, 1, 60}}},
        Case{ElementwiseOp::MaxF32, {100, 7}, {{7, 1}, {9, 1}, {0, 1}}},  // 2-D row tiles, a partial last one
        Case{ElementwiseOp::MulF32, {100, 7}, {{7, 1}, {7, 1}, {1, 0}}},  // a per-row broadcast (4-D DMA)
        // tiles of planes or cubes by 4-D DMA: im2col patches of a padded 8 x 8 map (cubes), per-row broadcasts
        Case{ElementwiseOp::Copy, {4, 3, 3, 6, 6}, {{324, 108, 36, 6, 1}, {64, 8, 1, 8, 1}}},
        Case{ElementwiseOp::MulF32, {50, 6, 7}, {{42, 7, 1}, {42, 7, 1}, {6, 1, 0}}},
        Case{ElementwiseOp::MulF32, {3, 4, 5, 6}, {{120, 30, 6, 1}, {120, 30, 6, 1}, {20, 5, 1, 0}}},  // cubes
        Case{ElementwiseOp::AddF32, {7, 100}, {{1, 7}, {1, 7}, {0, 1}}},  // a transposed result, walked in its order
        // seven dimensions that no two operands share an order of: four loops around tiles of three
        Case{ElementwiseOp::AddF32,
             {2, 3, 2, 3, 2, 3, 2},
             {{216, 72, 36, 12, 6, 2, 1}, {1, 2, 6, 12, 36, 72, 216}, {1, 2, 6, 12, 36, 72, 216}}},
        Case{ElementwiseOp::Copy, {1}, {{1}, {1}}}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return emitter::op_name(info.param.op) + "_" + std::to_string(info.index);
    });

TEST(ElementwiseEmitter, TheOpTableNamesThePyTorchFunctionsTheGlueRegisters) {
  using emitter::ElementwiseOp;
  const std::vector<ElementwiseOp> unary = emitter::unary_pytorch_functions();
  const auto listed = [&](ElementwiseOp op) { return std::find(unary.begin(), unary.end(), op) != unary.end(); };
  EXPECT_TRUE(listed(ElementwiseOp::SinhF32) && listed(ElementwiseOp::NegF32) && listed(ElementwiseOp::SiluF32));
  EXPECT_EQ(unary.size(), 24u);  // neg .. silu: the functions registered with their in-place and out= variants
  EXPECT_FALSE(listed(ElementwiseOp::MulF32));   // two inputs: registered by hand, named for its fallback
  EXPECT_FALSE(listed(ElementwiseOp::GeluF32));  // gelu's `approximate` picks GeluF32 or GeluTanhF32
  EXPECT_EQ(emitter::pytorch_function(ElementwiseOp::SinhF32), "sinh");
  EXPECT_EQ(emitter::pytorch_function(ElementwiseOp::MaxF32), "maximum");
  EXPECT_EQ(emitter::pytorch_function(ElementwiseOp::GeluF32), std::nullopt);
  for (ElementwiseOp op : unary) EXPECT_EQ(emitter::input_count(op), 1) << emitter::op_name(op);
}

TEST(ElementwiseEmitter, EmptyShapeEmitsAProgramThatOnlyHalts) {
  const auto kernel =
      emitter::emit_elementwise({ElementwiseOp::AddF32, 4, {5, 0}, {{0, 1}, {0, 1}, {0, 1}}}, small_config());
  EXPECT_EQ(kernel.words.size(), 1u);
  EXPECT_THROW(emitter::emit_elementwise({ElementwiseOp::Copy, 4, {-1}, {{1}, {1}}}, small_config()),
               std::invalid_argument);
}

// Runs `spec` (an op of a tensor and a scalar) on a 3-core chip over `a`, the scalar's f32 bits in the argument block.
std::vector<float> run_with_scalar_argument(const emitter::ElementwiseSpec& spec, const std::vector<float>& a,
                                            float scalar) {
  config::ChipConfig config = small_config();
  config.chip_cores = 3;
  runtime::Device device(config, runtime::Mode::Functional);
  const uint64_t bytes = a.size() * 4, da = device.allocate(bytes), dout = device.allocate(bytes);
  device.copy_host_to_device(da, a.data(), bytes);
  const emitter::Kernel kernel = emitter::emit_elementwise(spec, device.config());
  const bool scalar_first = spec.values_in_arguments[1];
  const uint64_t value = std::bit_cast<uint32_t>(scalar);
  const uint64_t arguments[] = {dout, scalar_first ? value : da, scalar_first ? da : value};
  device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << kernel.cores) - 1);
  std::vector<float> out(a.size());
  device.copy_device_to_host(out.data(), dout, bytes);
  return out;
}

TEST(ElementwiseEmitter, OnlyBroadcastInputsCanBeValuesInTheArgumentBlock) {
  // 5000 elements: several tiles per core, double-buffered.
  std::vector<float> a(5000);
  for (size_t k = 0; k < a.size(); ++k) a[k] = 0.25f * static_cast<float>(k) - 7.0f;
  // a * 2.5: the scalar as the second source, broadcast by the instruction.
  emitter::ElementwiseSpec spec{ElementwiseOp::MulF32, 4, {5000}, {{1}, {1}, {0}}};
  spec.values_in_arguments = {false, false, true};
  std::vector<float> out = run_with_scalar_argument(spec, a, 2.5f);
  for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(out[k], a[k] * 2.5f) << k;
  // 2.5 - a: the scalar as the first source, repeated over a tile by the DMA engine.
  spec = {ElementwiseOp::SubF32, 4, {5000}, {{1}, {0}, {1}}};
  spec.values_in_arguments = {false, true, false};
  out = run_with_scalar_argument(spec, a, 2.5f);
  for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(out[k], 2.5f - a[k]) << k;

  spec.values_in_arguments = {false, false, true};  // an input that is not a broadcast scalar
  EXPECT_THROW(emitter::emit_elementwise(spec, small_config()), std::invalid_argument);
  spec.values_in_arguments = {true, false, false};  // the output
  EXPECT_THROW(emitter::emit_elementwise(spec, small_config()), std::invalid_argument);
}

// Seven dimensions that do not collapse run (four loops around tiles of three: see the Shapes cases); nine do not.
TEST(ElementwiseEmitter, RejectsTooManyDimensionsAsUnsupported) {
  std::vector<int64_t> sizes(9, 2), strides(9), other(9);
  for (int d = 0; d < 9; ++d) {
    strides[d] = int64_t{1} << d;
    other[d] = int64_t{1} << (8 - d);
  }
  EXPECT_THROW(emitter::emit_elementwise({ElementwiseOp::AddF32, 4, sizes, {strides, other, strides}}, small_config()),
               emitter::Unsupported);
}

}  // namespace
}  // namespace npusim
