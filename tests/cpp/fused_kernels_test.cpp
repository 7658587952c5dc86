// Fused pointwise/reduction kernels (emit_fused) against plain C++ loops, in both modes: the same bits in the
// functional and the timed model, no hazard in timed mode, and the values of the reference interpreter
// (fused_kernels_support.h); softmax, layer norm and the bias gradient are also checked against loops written out by
// hand. Most cases run on a small chip (three cores, a few KiB of scratchpad) so that rows split into many tiles, the
// last one partial.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "fused_kernels_support.h"

namespace npusim {
namespace {

using namespace fused_test;  // NOLINT(google-build-using-namespace): the tests' shared vocabulary

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

void expect_invalid(const FusedSpec& spec, const std::string& words) {
  try {
    emitter::emit_fused(spec, small_chip());
    ADD_FAILURE() << "expected invalid_argument: " << words;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(spec.name), std::string::npos) << error.what();
  }
}

TEST(FusedKernels, F64IsLoadedConvertedAndStoredButNotComputedIn) {
  // out (f64) = f64(exp(f32(x))) for f64 x: the vector engine computes in f32, f64 only moves and converts. One
  // element (a 0-dim tensor's conversion) is a space whose loads have stride 0.
  BothModes modes(small_chip());
  for (const int64_t count : {int64_t{1500}, int64_t{1}}) {
    SpecBuilder s("fused_f64_exp", {count}, 0, 2);
    const int64_t stride = count > 1 ? 1 : 0;
    const int x = s.op(Op::Convert, F32, s.load(0, ElementType::F64, {stride}));
    s.store(s.op(Op::Convert, ElementType::F64, s.op(Op::Exp, F32, x)), 1, ElementType::F64, {stride});
    std::vector<double> in(count);
    for (int64_t k = 0; k < count; ++k) in[k] = -5.0 + 10.0 * static_cast<double>(k) / count + 1e-12;
    Bytes input(count * 8);
    std::memcpy(input.data(), in.data(), input.size());
    const std::vector<Bytes> result = modes.run(emitter::emit_fused(s.spec, small_chip()), {input, Bytes(count * 8)});
    for (int64_t k = 0; k < count; ++k) {
      double out;
      std::memcpy(&out, result[1].data() + 8 * k, 8);
      // vexp evaluates in binary64 from the f32 value and rounds to f32 (docs/isa.md).
      EXPECT_EQ(out, static_cast<double>(static_cast<float>(std::exp(static_cast<double>(static_cast<float>(in[k]))))))
          << k;
    }
  }

  SpecBuilder sum("fused_f64_sum", {8}, 0, 2);
  const int a = sum.load(0, ElementType::F64, {1});
  sum.store(sum.op(Op::Add, ElementType::F64, a, a), 1, ElementType::F64, {1});
  expect_invalid(sum.spec, "node 1 (Add): f64 values are only loaded, converted and stored");
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

TEST(FusedKernels, ARowSharedByEveryRowIsLoadedOnceATileAndReadAsARepeatingRow) {
  // y = x * w + b with w and b the same in every row (layer norm's weight and bias): each tile loads one row of each,
  // so the kernel reads x once plus two rows per tile, not three tensors the size of x.
  const int64_t rows = 96, cols = 40;
  SpecBuilder s("fused_shared_rows", {rows, cols}, 1, 4);
  const int x = s.load(0, F32, {cols, 1}), w = s.load(1, F32, {0, 1}), b = s.load(2, F32, {0, 1});
  s.store(s.op(Op::Add, F32, s.op(Op::Mul, F32, x, w), b), 3, F32, {cols, 1});
  const config::ChipConfig config = small_chip();
  const emitter::Kernel kernel = emitter::emit_fused(s.spec, config);
  BothModes modes(config);
  const std::vector<Bytes> buffers = {random_buffer(F32, rows * cols, 40), random_buffer(F32, cols, 41),
                                      random_buffer(F32, cols, 42), Bytes(rows * cols * 4)};
  const std::vector<Bytes> actual = modes.run(kernel, buffers);
  expect_matches(actual, reference(s.spec, buffers), 3, F32, 0, s.spec.name);
  const size_t at = kernel.description.find(" tiles on ");
  ASSERT_NE(at, std::string::npos) << kernel.description;
  const int64_t tiles = std::stoll(kernel.description.substr(kernel.description.rfind(' ', at - 1) + 1));
  EXPECT_GT(tiles, 2);
  // Besides the tiles, each core reads the four addresses of the argument block once.
  EXPECT_EQ(modes.last_record().stats.dram_bytes_read,
            static_cast<uint64_t>(rows * cols * 4 + tiles * 2 * cols * 4 + kernel.cores * 4 * 8));
}

TEST(FusedKernels, ASharedRowMixesWithFullRowsPerRowValuesAndConstantsInEitherOrder) {
  // w - x (a shared row first in a non-commutative op), 2 w (a shared row only), w s and s - w with s one value read
  // by every row (a per-row value that is also the same in every row), and the row's max of w x.
  const int64_t rows = 37, cols = 24;
  SpecBuilder s("fused_shared_row_mixes", {rows, cols}, 1, 7);
  const int x = s.load(0, F32, {cols, 1}), w = s.load(1, F32, {0, 1}), one = s.load(2, F32, {0, 0});
  const int twice = s.op(Op::Mul, F32, w, s.constant(F32, 2));
  s.store(s.op(Op::Add, F32, s.op(Op::Sub, F32, w, x), twice), 3, F32, {cols, 1});
  s.store(s.op(Op::Mul, F32, s.op(Op::Sub, F32, one, w), s.op(Op::Mul, F32, w, one)), 4, F32, {cols, 1});
  s.store(s.op(Op::ReduceMax, F32, s.op(Op::Mul, F32, w, x)), 5, F32, {1, 0});
  s.store(s.op(Op::Where, F32, s.op(Op::Gt, Bool, w, s.constant(F32, 0)), w, x), 6, F32, {cols, 1});
  run_and_compare(s.spec, small_chip(),
                  {random_buffer(F32, rows * cols, 43), random_buffer(F32, cols, 44), random_buffer(F32, 1, 45),
                   Bytes(rows * cols * 4), Bytes(rows * cols * 4), Bytes(rows * 4), Bytes(rows * cols * 4)},
                  {F32, F32, F32, F32, F32, F32, F32});
}

TEST(FusedKernels, ArgMaxAndArgMinAreTheFirstIndexOfTheExtremumWithNaNCountingAsIt) {
  const ElementType I64 = ElementType::I64, I32 = ElementType::I32;
  const int64_t rows = 41, cols = 13;
  SpecBuilder s("fused_arg_extrema", {rows, cols}, 1, 6);
  const int x = s.load(0, F32, {cols, 1}), n = s.load(1, I32, {cols, 1});
  s.store(s.op(Op::ReduceArgMax, I64, x), 2, I64, {1, 0});
  s.store(s.op(Op::ReduceArgMin, I64, x), 3, I64, {1, 0});
  s.store(s.op(Op::ReduceArgMax, I64, n), 4, I64, {1, 0});
  s.store(s.op(Op::ReduceArgMin, I64, s.op(Op::Neg, I32, n)), 5, I64, {1, 0});
  // Ties in every row (values in a few steps), a NaN in every fifth row.
  const Bytes xs = buffer_of(F32, rows * cols, [&](int64_t k) {
    return k / cols % 5 == 2 && k % cols == 7 ? std::nan("") : double((k * 7919) % 9) - 4;
  });
  const auto result = run_and_compare(s.spec, small_chip(),
                                      {xs, buffer_of(I32, rows * cols, [](int64_t k) { return double((k * 31) % 6); }),
                                       Bytes(rows * 8), Bytes(rows * 8), Bytes(rows * 8), Bytes(rows * 8)},
                                      {F32, I32, I64, I64, I64, I64});
  EXPECT_EQ(read_element(result[2], I64, 2), 7);  // the NaN
  EXPECT_EQ(read_element(result[3], I64, 2), 7);
}

TEST(FusedKernels, AnIndexOfABoolRowOrOfAnotherTypeIsRefused) {
  SpecBuilder s("fused_bad_argmax", {4, 3}, 1, 2);
  const int x = s.load(0, F32, {3, 1});
  s.store(s.op(Op::ReduceArgMax, F32, x), 1, F32, {1, 0});
  EXPECT_THROW(emitter::emit_fused(s.spec, small_chip()), std::invalid_argument);
  SpecBuilder b("fused_bool_argmax", {4, 3}, 1, 2);
  b.store(b.op(Op::ReduceArgMax, ElementType::I64, b.load(0, Bool, {3, 1})), 1, ElementType::I64, {1, 0});
  EXPECT_THROW(emitter::emit_fused(b.spec, small_chip()), std::invalid_argument);
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

// ---- double buffering across tiles

// How a kernel's tiles are shared, from its description: rows per tile, tiles, cores and sets of slots.
struct TileShare {
  long long rows = 0, tiles = 0, cores = 0, sets = 0;
};
TileShare tile_share(const emitter::Kernel& kernel) {
  TileShare share;
  const size_t at = kernel.description.find("tiles: ");
  const size_t count = kernel.description.find("; ", at);
  EXPECT_NE(count, std::string::npos) << kernel.description;
  if (count == std::string::npos) return share;
  EXPECT_EQ(std::sscanf(kernel.description.c_str() + at, "tiles: %lld rows", &share.rows), 1) << kernel.description;
  long long slots = 0;
  EXPECT_EQ(std::sscanf(kernel.description.c_str() + count, "; %lld tiles on %lld cores, %lld slots, %lld set",
                        &share.tiles, &share.cores, &slots, &share.sets),
            4)
      << kernel.description;
  return share;
}

// Each core takes several tiles, not all as many (an odd count on some), and the last tile is partial.
void expect_uneven_shares(const TileShare& share, int64_t elements) {
  EXPECT_GT(share.tiles, 2 * share.cores);
  EXPECT_NE(share.tiles % share.cores, 0);
  EXPECT_NE(elements % share.rows, 0);
}

// max((x + y) * 0.25, x) in `type` (computed in f32), with (x + y) stored first, in the middle of the steps: 2 sets of
// slots alternate over 17 tiles on three cores (6, 6, 5), the last a third full.
void expect_double_buffered_pointwise(const std::string& name, ElementType type) {
  const auto spec_over = [&](int64_t count) {
    SpecBuilder s(name, {count}, 0, 4);
    const int x = s.op(Op::Convert, F32, s.load(0, type, {1})), y = s.op(Op::Convert, F32, s.load(1, type, {1}));
    const int sum = s.op(Op::Add, F32, x, y);
    s.store(s.op(Op::Convert, type, sum), 2, type, {1});
    s.store(s.op(Op::Convert, type, s.op(Op::Maximum, F32, s.op(Op::Mul, F32, sum, s.constant(F32, 0.25)), x)), 3, type,
            {1});
    return s.spec;
  };
  const config::ChipConfig config = small_chip();
  const int64_t rows = tile_share(emitter::emit_fused(spec_over(1 << 16), config)).rows;
  const int64_t count = rows * 16 + rows / 3;
  const FusedSpec spec = spec_over(count);
  const TileShare share = tile_share(emitter::emit_fused(spec, config));
  EXPECT_EQ(share.sets, 2);
  EXPECT_EQ(share.tiles, 17);
  expect_uneven_shares(share, count);
  const auto bytes = static_cast<int64_t>(isa::element_bytes(type));
  run_and_compare(
      spec, config,
      {random_buffer(type, count, 60), random_buffer(type, count, 61), Bytes(count * bytes), Bytes(count * bytes)},
      {type, type, type, type});
}

TEST(FusedKernels, DoubleBufferedPointwiseOverUnevenSharesAndAPartialLastTile) {
  expect_double_buffered_pointwise("fused_double_buffered_f32", F32);
}
TEST(FusedKernels, DoubleBufferedBf16PointwiseOverUnevenSharesAndAPartialLastTile) {
  expect_double_buffered_pointwise("fused_double_buffered_bf16", ElementType::BF16);
}

TEST(FusedKernels, DoubleBufferedSoftmaxRows) {
  const int64_t cols = 37;
  const auto spec_over = [&](int64_t rows) {
    SpecBuilder s("fused_double_buffered_softmax", {rows, cols}, 1, 2);
    const int x = s.load(0, F32, {cols, 1});
    const int e = s.op(Op::Exp, F32, s.op(Op::Sub, F32, x, s.op(Op::ReduceMax, F32, x)));
    s.store(s.op(Op::Div, F32, e, s.op(Op::ReduceSum, F32, e)), 1, F32, {cols, 1});
    return s.spec;
  };
  const config::ChipConfig config = small_chip();
  const int64_t tile_rows = tile_share(emitter::emit_fused(spec_over(4096), config)).rows;
  const int64_t rows = tile_rows * 16 + std::max<int64_t>(1, tile_rows / 3);  // 17 tiles, the last partial
  const FusedSpec spec = spec_over(rows);
  const TileShare share = tile_share(emitter::emit_fused(spec, config));
  EXPECT_EQ(share.sets, 2);
  expect_uneven_shares(share, rows);
  run_and_compare(spec, config, {random_buffer(F32, rows * cols, 62), Bytes(rows * cols * 4)}, {F32, F32}, 1e-6);
}

TEST(FusedKernels, DoubleBufferedTilesLoadATransposedOperandInPlace) {
  // x + y^T: y's load needs a vtr, so it stays among the tile's steps rather than loading a tile ahead.
  const int64_t rows = 203, cols = 9;
  SpecBuilder s("fused_double_buffered_transposed", {rows, cols}, 0, 3);
  s.store(s.op(Op::Add, F32, s.load(0, F32, {cols, 1}), s.load(1, F32, {1, rows})), 2, F32, {cols, 1});
  const config::ChipConfig config = small_chip();
  const TileShare share = tile_share(emitter::emit_fused(s.spec, config));
  EXPECT_EQ(share.sets, 2);
  EXPECT_GT(share.tiles, 2 * share.cores);
  run_and_compare(s.spec, config,
                  {random_buffer(F32, rows * cols, 63), random_buffer(F32, rows * cols, 64), Bytes(rows * cols * 4)},
                  {F32, F32, F32});
}

TEST(FusedKernels, DoubleBufferedTilesWhoseOnlyLoadIsTransposedTakeNoPrefetchSync) {
  // A sum over the outer dimension over many tiles: its one load needs a vtr, so once the layout is known nothing
  // loads a tile ahead, and the two-set loop has no prefetched slot to sync through (it once read a missing one).
  const int64_t n = 45, c = 203;
  SpecBuilder s("fused_double_buffered_sum_dim0", {c, n}, 1, 2);
  s.store(s.op(Op::ReduceSum, F32, s.load(0, F32, {1, c})), 1, F32, {1, 0});
  const config::ChipConfig config = small_chip();
  const TileShare share = tile_share(emitter::emit_fused(s.spec, config));
  EXPECT_EQ(share.sets, 2);
  EXPECT_GT(share.tiles, 2 * share.cores);
  const Bytes g = random_buffer(F32, n * c, 66);
  const auto result = run_and_compare(s.spec, config, {g, Bytes(c * 4)}, {F32, F32});
  for (int64_t j = 0; j < c; ++j) {
    float sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<float>(read_element(g, F32, i * c + j));
    EXPECT_EQ(read_element(result[1], F32, j), sum) << j;
  }
}

TEST(FusedKernels, ARowThatFitsOnlyOnceTakesOneSetOfSlots) {
  const int64_t rows = 7, cols = 400;
  SpecBuilder s("fused_one_set_softmax", {rows, cols}, 1, 2);
  const int x = s.load(0, F32, {cols, 1});
  const int e = s.op(Op::Exp, F32, s.op(Op::Sub, F32, x, s.op(Op::ReduceMax, F32, x)));
  s.store(s.op(Op::Div, F32, e, s.op(Op::ReduceSum, F32, e)), 1, F32, {cols, 1});
  const config::ChipConfig config = small_chip();
  const TileShare share = tile_share(emitter::emit_fused(s.spec, config));
  EXPECT_EQ(share.sets, 1);
  EXPECT_GT(share.tiles, share.cores);
  run_and_compare(s.spec, config, {random_buffer(F32, rows * cols, 65), Bytes(rows * cols * 4)}, {F32, F32}, 1e-6);
}

// ---- what the emitter refuses

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

  // Indexed accesses: i64 indices, strides of 0, an integer checked against a positive bound.
  SpecBuilder indexed("fused_bad_indices", {8, 4}, 0, 3);
  const int indices = indexed.check(indexed.load(0, ElementType::I64, {4, 1}), 10);
  indexed.scatter_add(indexed.gather(indices, 1, F32), indices, 2, F32);
  EXPECT_NO_THROW(emitter::emit_fused(indexed.spec, small_chip()));
  spec = indexed.spec;
  spec.loads[1].strides = {4, 1};
  expect_invalid(spec, "node 2 (Gather): an indexed access with strides [4, 1]");
  spec = indexed.spec;
  spec.nodes[3].b = 2;
  expect_invalid(spec, "node 3 (ScatterAdd): operand b (the indices) is f32, not i64");
  spec = indexed.spec;
  spec.nodes[1].constant = 0;
  expect_invalid(spec, "node 1 (CheckIndex): a bound of 0");
  spec = indexed.spec;
  spec.nodes[3].access = 1;
  expect_invalid(spec, "node 3 (ScatterAdd): access 1 of 1 stores");
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

// ---- indexed loads and stores

// The i64 values 0, 1, 2, ...: what the compiled kernels read an affine index from (runtime.py's arange).
Bytes ascending(int64_t count) {
  return buffer_of(ElementType::I64, count, [](int64_t k) { return double(k); });
}

// x[t][c] = table[tokens[t]][c] + positions[c]; out = x, sums[t] = sum over c of x (repeated tokens). With runs of
// 2, each pair of columns moves as one 8-byte element.
void gather_embedding_rows(int run) {
  const ElementType I64 = ElementType::I64;
  const int64_t tokens = 41, cols = 24, table_rows = 9;
  SpecBuilder s(fmt::format("fused_embedding_sum_run{}", run), {tokens, cols}, 1, 6);
  const int token = s.check(s.load(0, I64, {1, 0}), table_rows);  // per row
  const int column = s.load(4, I64, {0, 1});
  const int row_start = s.op(Op::Mul, I64, token, s.constant(I64, cols));
  const int element = s.check(s.op(Op::Add, I64, column, row_start), table_rows * cols);
  const int x = s.op(Op::Add, F32, s.gather(element, 1, F32, 0, run), s.load(2, F32, {0, 1}));
  s.store(x, 3, F32, {cols, 1});
  s.store(s.op(Op::ReduceSum, F32, x), 5, F32, {1, 0});
  const std::vector<Bytes> buffers = {buffer_of(I64, tokens, [](int64_t t) { return double((t * 7) % 9); }),
                                      random_buffer(F32, table_rows * cols, 8),
                                      random_buffer(F32, cols, 9),
                                      Bytes(tokens * cols * 4),
                                      ascending(cols),
                                      Bytes(tokens * 4)};
  const auto result = run_and_compare(s.spec, small_chip(), buffers, {I64, F32, F32, F32, I64, F32});
  for (int64_t t = 0; t < tokens; ++t)  // by hand, for the gathered rows
    for (int64_t c = 0; c < cols; ++c) {
      const double expected = static_cast<float>(read_element(buffers[1], F32, (t * 7) % 9 * cols + c)) +
                              static_cast<float>(read_element(buffers[2], F32, c));
      EXPECT_EQ(read_element(result[3], F32, t * cols + c), static_cast<float>(expected));
    }
}

TEST(FusedKernels, GathersEmbeddingRowsByLoadedIndicesIntoALayerNormLikeRow) { gather_embedding_rows(1); }
TEST(FusedKernels, GathersRunsOfConsecutiveElementsAsWiderOnes) {
  gather_embedding_rows(2);
  // A run must fit 4 or 8 bytes and divide the innermost (reduced) dimension.
  SpecBuilder s("fused_bad_run", {4, 6}, 1, 3);
  s.store(s.gather(s.load(2, ElementType::I64, {0, 1}), 0, F32, 0, 4), 1, F32, {6, 1});
  expect_invalid(s.spec, "runs of 4 f32 elements");
  s.spec.nodes[1].constant = 2;
  s.spec.sizes = {4, 5};
  expect_invalid(s.spec, "runs of 2 along an innermost dimension of 5");
}

TEST(FusedKernels, AnIndexOutOfRangeStopsTheKernelWithTrapOne) {
  const ElementType I64 = ElementType::I64;
  const int64_t count = 300, table = 50;
  SpecBuilder s("fused_gather_checked", {count}, 0, 3);
  s.store(s.gather(s.check(s.load(0, I64, {1}), table), 1, F32), 2, F32, {1});
  const emitter::Kernel kernel = emitter::emit_fused(s.spec, small_chip());
  BothModes modes(small_chip());
  const auto indices = [&](int64_t bad) {
    return buffer_of(I64, count, [&](int64_t k) { return k == 217 ? double(bad) : double(k % table); });
  };
  modes.run(kernel, {indices(49), random_buffer(F32, table, 3), Bytes(count * 4)});
  for (int64_t bad : {50, -1})
    modes.expect_error(kernel, {indices(bad), random_buffer(F32, table, 3), Bytes(count * 4)}, "code 1");
}

TEST(FusedKernels, AMaskedGatherReadsTheConstantWhereTheMaskIsFalse) {
  // cat([a, b], 1) of a [rows x 7] and b [rows x 10]: column c reads a[r][c] if c < 7, else b[r][c - 7].
  const ElementType I64 = ElementType::I64;
  const int64_t rows = 33, wa = 7, wb = 10, cols = wa + wb;
  SpecBuilder s("fused_cat", {rows, cols}, 0, 4);
  const int column = s.load(3, I64, {0, 1}), row = s.load(3, I64, {1, 0});
  const int in_a = s.op(Op::Lt, Bool, column, s.constant(I64, wa));
  const auto element = [&](int64_t width, int64_t shift, int mask) {
    const int at = s.op(Op::Add, I64, s.op(Op::Mul, I64, row, s.constant(I64, width)),
                        s.op(Op::Sub, I64, column, s.constant(I64, shift)));
    return s.check(s.op(Op::Where, I64, mask, at, s.constant(I64, 0)), rows * width);
  };
  const int a = s.op(Op::Where, F32, in_a, s.gather(element(wa, 0, in_a), 0, F32), s.constant(F32, 0));
  const int in_b = s.op(Op::Not, Bool, in_a);
  const int b = s.op(Op::Where, F32, in_b, s.gather(element(wb, wa, in_b), 1, F32), s.constant(F32, 0));
  s.store(s.op(Op::Where, F32, in_a, a, b), 2, F32, {cols, 1});
  const std::vector<Bytes> buffers = {random_buffer(F32, rows * wa, 11), random_buffer(F32, rows * wb, 12),
                                      Bytes(rows * cols * 4), ascending(cols + rows)};
  const auto result = run_and_compare(s.spec, small_chip(), buffers, {F32, F32, F32, I64});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_EQ(read_element(result[2], F32, r * cols + c),
                c < wa ? read_element(buffers[0], F32, r * wa + c) : read_element(buffers[1], F32, r * wb + c - wa));
}

TEST(FusedKernels, AScatterAddAccumulatesRepeatedIndicesInTheOrderOfThePoints) {
  // table[tokens[t]][c] += grad[t][c] * 2 (an embedding's gradient), many tokens repeated: the sums must be those of
  // adding in t order, on one core, over tiles double-buffered.
  const ElementType I64 = ElementType::I64;
  const int64_t tokens = 150, cols = 20, table_rows = 6;
  SpecBuilder s("fused_embedding_backward", {tokens, cols}, 0, 4);
  const int token = s.load(0, I64, {1, 0});
  const int element = s.check(
      s.op(Op::Add, I64, s.op(Op::Mul, I64, token, s.constant(I64, cols)), s.load(3, I64, {0, 1})), table_rows * cols);
  s.scatter_add(s.op(Op::Mul, F32, s.load(1, F32, {cols, 1}), s.constant(F32, 2)), element, 2, F32);
  const std::vector<Bytes> buffers = {buffer_of(I64, tokens, [](int64_t t) { return double((t * t) % 6); }),
                                      random_buffer(F32, tokens * cols, 13), random_buffer(F32, table_rows * cols, 14),
                                      ascending(cols)};
  const emitter::Kernel kernel = emitter::emit_fused(s.spec, small_chip());
  EXPECT_EQ(kernel.cores, 1);
  const auto result = run_and_compare(s.spec, small_chip(), buffers, {I64, F32, F32, I64});
  for (int64_t r = 0; r < table_rows; ++r)  // by hand: float sums in t order
    for (int64_t c = 0; c < cols; ++c) {
      auto sum = static_cast<float>(read_element(buffers[2], F32, r * cols + c));
      for (int64_t t = 0; t < tokens; ++t)
        if ((t * t) % 6 == r) sum += static_cast<float>(read_element(buffers[1], F32, t * cols + c)) * 2.0f;
      EXPECT_EQ(read_element(result[2], F32, r * cols + c), sum);
    }
}

}  // namespace
}  // namespace npusim
