// Fused GEMM kernels (emit_fused of a spec with a matrix product: a GEMM template and its pointwise epilogue) against
// the reference interpreter (fused_kernels_support.h), in both modes with no hazard, and a plain product against
// emit_matmul bit for bit. The chip has a small systolic array (8 x 4), accumulator (1 KiB) and scratchpad, so that
// m, n and k are not multiples of the array and the products take several blocks on each of three cores.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "fused_kernels_support.h"
#include "npusim/emitter/matmul.h"

namespace npusim {
namespace {

using namespace fused_test;  // NOLINT(google-build-using-namespace): the tests' shared vocabulary
using emitter::FusedMatmul;

constexpr ElementType BF16 = ElementType::BF16;

config::ChipConfig gemm_chip() {
  config::ChipConfig config = small_chip(8);
  config.core_systolic_rows = 8;
  config.core_systolic_cols = 4;
  config.core_accumulator_kib = 1;
  return config;
}

// gemm_chip with room in the scratchpad for two sets of staging and epilogue tiles beside its largest blocks.
config::ChipConfig roomy_gemm_chip() {
  config::ChipConfig config = gemm_chip();
  config.core_scratchpad_kib = 16;
  return config;
}

// A [m, k] row-major in argument a, B in argument b: [k, n] row-major, or (transposed) linear's weight [n, k].
FusedMatmul product(int a, int b, ElementType type, int64_t m, int64_t n, int64_t k, bool transposed = false) {
  FusedMatmul p;
  p.a_argument = a;
  p.b_argument = b;
  p.type = type;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_row = k;
  p.a_col = 1;
  p.b_row = transposed ? 1 : n;
  p.b_col = transposed ? k : 1;
  return p;
}

// The kernel runs on every core, each taking more than one block of C (the description gives the block's size).
void expect_blocks_on_every_core(const emitter::Kernel& kernel, int64_t cores, int64_t m, int64_t n) {
  EXPECT_EQ(kernel.cores, cores);
  long long block_m = 0, block_n = 0;
  const size_t at = kernel.description.find("blocks m ");
  ASSERT_NE(at, std::string::npos) << kernel.description;
  ASSERT_EQ(std::sscanf(kernel.description.c_str() + at, "blocks m %lld n %lld", &block_m, &block_n), 2);
  EXPECT_GT((m + block_m - 1) / block_m * ((n + block_n - 1) / block_n), 2 * cores) << kernel.description;
}

TEST(FusedGemmKernels, ReluOfAProductPlusABroadcastBias) {
  // relu(A @ W + b): A [37, 21], W [21, 45], b [45] with strides [0, 1].
  const int64_t m = 37, n = 45, k = 21;
  SpecBuilder s("fused_addmm_relu", {m, n}, 0, 4);
  s.spec.matmul = product(0, 1, F32, m, n, k);
  const int c = s.node({.op = Op::Product, .type = F32});
  const int biased = s.op(Op::Add, F32, c, s.load(2, F32, {0, 1}));
  s.store(s.op(Op::Maximum, F32, biased, s.constant(F32, 0)), 3, F32, {n, 1});
  const config::ChipConfig config = gemm_chip();
  const emitter::Kernel kernel = emitter::emit_fused(s.spec, config);
  expect_blocks_on_every_core(kernel, config.chip_cores, m, n);
  run_and_compare(
      s.spec, config,
      {random_buffer(F32, m * k, 21), random_buffer(F32, k * n, 22), random_buffer(F32, n, 23), Bytes(m * n * 4)},
      {F32, F32, F32, F32});
}

TEST(FusedGemmKernels, GeluThroughErfOnATransposedWeight) {
  // gelu(linear(x)) = 0.5 * y * (1 + erf(y / sqrt 2)), y = x @ W^T + b with linear's weight W [n, k] (b_row 1,
  // b_col k).
  const int64_t m = 29, n = 34, k = 19;
  SpecBuilder s("fused_linear_gelu", {m, n}, 0, 4);
  s.spec.matmul = product(0, 1, F32, m, n, k, /*transposed=*/true);
  const int y = s.op(Op::Add, F32, s.node({.op = Op::Product, .type = F32}), s.load(2, F32, {0, 1}));
  const int erf = s.op(Op::Erf, F32, s.op(Op::Mul, F32, y, s.constant(F32, 0.7071067811865476)));
  const int half = s.op(Op::Mul, F32, y, s.constant(F32, 0.5));
  s.store(s.op(Op::Mul, F32, half, s.op(Op::Add, F32, erf, s.constant(F32, 1))), 3, F32, {n, 1});
  run_and_compare(s.spec, gemm_chip(),
                  {random_buffer(F32, m * k, 24, -1, 1), random_buffer(F32, n * k, 25, -1, 1),
                   random_buffer(F32, n, 26), Bytes(m * n * 4)},
                  {F32, F32, F32, F32}, 1e-6);
}

// A weight gradient's product X^T @ dY: A stored [k, m] (contiguous along m), so each K step's A block arrives in
// columns and is transposed on the vector engine before the matrix engine reads it; the epilogue scales it.
void expect_transposed_input_product(ElementType type) {
  const int64_t m = 53, n = 30, k = 41;
  SpecBuilder s("fused_mm_t_mul", {m, n}, 0, 3);
  s.spec.matmul = product(0, 1, type, m, n, k);
  s.spec.matmul->a_row = 1;
  s.spec.matmul->a_col = m;
  const int c = s.op(Op::Convert, F32, s.node({.op = Op::Product, .type = type}));
  s.store(s.op(Op::Convert, type, s.op(Op::Mul, F32, c, s.constant(F32, 0.25))), 2, type, {n, 1});
  const config::ChipConfig config = gemm_chip();
  const emitter::Kernel kernel = emitter::emit_fused(s.spec, config);
  EXPECT_NE(kernel.description.find("A transposed"), std::string::npos) << kernel.description;
  expect_blocks_on_every_core(kernel, config.chip_cores, m, n);
  const int64_t bytes = static_cast<int64_t>(isa::element_bytes(type));
  run_and_compare(s.spec, config,
                  {random_buffer(type, k * m, 61), random_buffer(type, k * n, 62), Bytes(m * n * bytes)},
                  {type, type, type});
}
TEST(FusedGemmKernels, ATransposedInputIsTransposedInTheKernel) { expect_transposed_input_product(F32); }
TEST(FusedGemmKernels, ATransposedBf16InputIsTransposedInTheKernel) { expect_transposed_input_product(BF16); }

TEST(FusedGemmKernels, Bf16OperandsRoundTheProductThenAddInF32) {
  // out (bf16) = bf16(f32(bf16(A @ B)) + f32(bias)), A and B bf16, the bias bf16 along n.
  const int64_t m = 23, n = 30, k = 17;
  SpecBuilder s("fused_bf16_addmm", {m, n}, 0, 4);
  s.spec.matmul = product(0, 1, BF16, m, n, k);
  const int c = s.op(Op::Convert, F32, s.node({.op = Op::Product, .type = BF16}));
  const int bias = s.op(Op::Convert, F32, s.load(2, BF16, {0, 1}));
  s.store(s.op(Op::Convert, BF16, s.op(Op::Add, F32, c, bias)), 3, BF16, {n, 1});
  run_and_compare(
      s.spec, gemm_chip(),
      {random_buffer(BF16, m * k, 27), random_buffer(BF16, k * n, 28), random_buffer(BF16, n, 29), Bytes(m * n * 2)},
      {BF16, BF16, BF16, BF16});
}

TEST(FusedGemmKernels, BatchedProductWithAResidualAndTwoStores) {
  // bmm(a, b) * 0.5 + r over 3 entries, storing the product itself (argument 3) and the result (argument 4).
  const int64_t batch = 3, m = 13, n = 11, k = 9;
  SpecBuilder s("fused_bmm_scale_residual", {batch, m, n}, 0, 5);
  FusedMatmul p = product(0, 1, F32, m, n, k);
  p.batch = batch;
  p.a_batch = m * k;
  p.b_batch = k * n;
  s.spec.matmul = p;
  const int c = s.node({.op = Op::Product, .type = F32});
  s.store(c, 3, F32, {m * n, n, 1});
  const int scaled = s.op(Op::Mul, F32, c, s.constant(F32, 0.5));
  s.store(s.op(Op::Add, F32, scaled, s.load(2, F32, {m * n, n, 1})), 4, F32, {m * n, n, 1});
  run_and_compare(s.spec, gemm_chip(),
                  {random_buffer(F32, batch * m * k, 30), random_buffer(F32, batch * k * n, 31),
                   random_buffer(F32, batch * m * n, 32), Bytes(batch * m * n * 4), Bytes(batch * m * n * 4)},
                  {F32, F32, F32, F32, F32});
}

// A spec whose only node is the product, stored as it is, gives emit_matmul's C bit for bit.
void expect_same_as_emit_matmul(ElementType type) {
  const int64_t m = 37, n = 21, k = 30;
  SpecBuilder s(fmt::format("fused_mm_{}", isa::type_name(type)), {m, n}, 0, 3);
  s.spec.matmul = product(1, 2, type, m, n, k);
  s.store(s.node({.op = Op::Product, .type = type}), 0, type, {n, 1});
  const config::ChipConfig config = gemm_chip();
  const auto bytes = static_cast<int64_t>(isa::element_bytes(type));
  const std::vector<Bytes> buffers = {Bytes(m * n * bytes), random_buffer(type, m * k, 33),
                                      random_buffer(type, k * n, 34)};
  BothModes modes(config);  // one timed device per process
  const std::vector<Bytes> fused = modes.run(emitter::emit_fused(s.spec, config), buffers);
  expect_matches(fused, reference(s.spec, buffers), 0, type, 0, s.spec.name);
  emitter::MatmulSpec plain;
  plain.m = m;
  plain.k = k;
  plain.n = n;
  plain.a_row = k;
  plain.a_col = 1;
  plain.b_row = n;
  plain.b_col = 1;
  plain.c_row = n;
  plain.c_col = 1;
  plain.type = type;
  EXPECT_EQ(fused[0], modes.run(emitter::emit_matmul(plain, config), buffers)[0]);
}

TEST(FusedGemmKernels, APlainProductIsBitIdenticalToEmitMatmul) { expect_same_as_emit_matmul(F32); }
TEST(FusedGemmKernels, APlainBf16ProductIsBitIdenticalToEmitMatmul) { expect_same_as_emit_matmul(BF16); }

TEST(FusedGemmKernels, AWideEpilogueTakesSmallerBlocks) {
  // Eight values live at once beside the staging tile: the blocks shrink to fit the scratchpad, and still match.
  const int64_t m = 20, n = 18, k = 10;
  SpecBuilder s("fused_wide_epilogue", {m, n}, 0, 11);
  s.spec.matmul = product(0, 1, F32, m, n, k);
  const int c = s.node({.op = Op::Product, .type = F32});
  std::vector<int> loads;
  for (int a = 2; a < 10; ++a) loads.push_back(s.load(a, F32, {n, 1}));
  int sum = c;
  for (auto it = loads.rbegin(); it != loads.rend(); ++it) sum = s.op(Op::Add, F32, sum, *it);
  s.store(sum, 10, F32, {n, 1});
  std::vector<Bytes> buffers = {random_buffer(F32, m * k, 35), random_buffer(F32, k * n, 36)};
  for (uint32_t a = 2; a < 10; ++a) buffers.push_back(random_buffer(F32, m * n, 40 + a));
  buffers.push_back(Bytes(m * n * 4));
  run_and_compare(s.spec, gemm_chip(), buffers, std::vector<ElementType>(11, F32));
}

// The kernel's description names how many sets of staging and epilogue tiles the GEMM loop alternates between.
void expect_sets(const emitter::Kernel& kernel, int sets) {
  EXPECT_NE(kernel.description.find(fmt::format(", {} set{} of staging", sets, sets > 1 ? "s" : "")), std::string::npos)
      << kernel.description;
}

// relu(C + bias) stored in `type`, then C itself (from the staging tile, after the next block's K loop), over blocks
// of which each core takes several: each block's epilogue overlaps the next block's K loop, from `sets` sets of tiles.
void expect_overlapped_epilogue(const std::string& name, const config::ChipConfig& config, ElementType type, int64_t m,
                                int64_t n, int64_t k, int sets) {
  SpecBuilder s(name, {m, n}, 0, 5);
  s.spec.matmul = product(0, 1, type, m, n, k);
  const int c = s.node({.op = Op::Product, .type = type});
  const int biased = s.op(Op::Add, F32, s.op(Op::Convert, F32, c), s.op(Op::Convert, F32, s.load(2, type, {0, 1})));
  s.store(s.op(Op::Convert, type, s.op(Op::Maximum, F32, biased, s.constant(F32, 0))), 4, type, {n, 1});
  s.store(c, 3, type, {n, 1});
  const emitter::Kernel kernel = emitter::emit_fused(s.spec, config);
  expect_blocks_on_every_core(kernel, config.chip_cores, m, n);
  expect_sets(kernel, sets);
  const auto bytes = static_cast<int64_t>(isa::element_bytes(type));
  run_and_compare(s.spec, config,
                  {random_buffer(type, m * k, 50), random_buffer(type, k * n, 51), random_buffer(type, n, 52),
                   Bytes(m * n * bytes), Bytes(m * n * bytes)},
                  {type, type, type, type, type});
}

// The accumulator bounds the blocks (16 x 16): two sets fit beside them. 5 x 3 blocks, five on each core, the last
// row and column of blocks partial (13 rows, 13 columns: a ragged sub-tile).
TEST(FusedGemmKernels, TwoSetsOfEpilogueTilesAlternateOverAnOddBlockCountPerCore) {
  expect_overlapped_epilogue("fused_mm_relu_two_sets", roomy_gemm_chip(), F32, 77, 45, 19, 2);
}
TEST(FusedGemmKernels, TwoSetsOfBf16EpilogueTilesOverAnUnevenBlockShare) {
  expect_overlapped_epilogue("fused_bf16_mm_relu_two_sets", roomy_gemm_chip(), BF16, 64, 61, 27, 2);  // 6, 5, 5 blocks
}

// The scratchpad bounds the blocks, and a second set would make them shorter: one set, the epilogue still ahead of
// the next block's staging.
config::ChipConfig gemm_chip_with_a_larger_accumulator() {
  config::ChipConfig config = gemm_chip();
  config.core_accumulator_kib = 4;
  return config;
}
TEST(FusedGemmKernels, OneSetOfEpilogueTilesWhenTwoWouldShrinkTheBlocks) {
  expect_overlapped_epilogue("fused_mm_relu_one_set", gemm_chip_with_a_larger_accumulator(), F32, 70, 45, 21, 1);
}
TEST(FusedGemmKernels, OneSetOfBf16EpilogueTilesWhenTwoWouldShrinkTheBlocks) {
  expect_overlapped_epilogue("fused_bf16_mm_relu_one_set", gemm_chip_with_a_larger_accumulator(), BF16, 70, 45, 21, 1);
}

// emit_matmul's scale and bias epilogue (bf16 in, bf16 out, a bias along n) over several blocks per core, against
// alpha * C + beta * bias in f32 rounded once.
TEST(FusedGemmKernels, MatmulScaleAndBiasOverlapsTheNextBlock) {
  const int64_t m = 61, n = 38, k = 23;
  const config::ChipConfig config = gemm_chip();
  emitter::MatmulSpec spec;
  spec.m = m;
  spec.k = k;
  spec.n = n;
  spec.a_row = k;
  spec.a_col = 1;
  spec.b_row = n;
  spec.b_col = 1;
  spec.c_row = n;
  spec.c_col = 1;
  spec.type = BF16;
  spec.epilogue = {.alpha = 0.75f, .bias = true, .beta = -2.0f, .bias_row = 0, .bias_col = 1};
  const emitter::Kernel kernel = emitter::emit_matmul(spec, config);
  expect_blocks_on_every_core(kernel, config.chip_cores, m, n);
  const std::vector<Bytes> buffers = {Bytes(m * n * 2), random_buffer(BF16, m * k, 53), random_buffer(BF16, k * n, 54),
                                      random_buffer(BF16, n, 55)};
  BothModes modes(config);
  const std::vector<Bytes> actual = modes.run(kernel, buffers);
  FusedSpec holder;
  holder.matmul = product(1, 2, BF16, m, n, k);
  std::vector<Bytes> expected = buffers;
  for (int64_t point = 0; point < m * n; ++point) {
    const float scaled = static_cast<float>(product_at(holder, buffers, point)) * spec.epilogue.alpha;
    const float bias = static_cast<float>(read_element(buffers[3], BF16, point % n)) * spec.epilogue.beta;
    write_element(expected[0], BF16, point, scaled + bias);
  }
  expect_matches(actual, expected, 0, BF16, 0, kernel.name);
}

void expect_unsupported(const FusedSpec& spec, const std::string& words) {
  try {
    emitter::emit_fused(spec, gemm_chip());
    ADD_FAILURE() << "expected Unsupported: " << words;
  } catch (const emitter::Unsupported& error) {
    EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(spec.name), std::string::npos) << error.what();
  }
}

TEST(FusedGemmKernels, WhatTheEpilogueCannotDoIsUnsupported) {
  const int64_t m = 8, n = 8, k = 8;
  SpecBuilder s("fused_mm_exp_i32", {m, n}, 0, 3);
  s.spec.matmul = product(0, 1, F32, m, n, k);
  const int integer = s.op(Op::Convert, ElementType::I32, s.node({.op = Op::Product, .type = F32}));
  s.store(s.op(Op::Exp, ElementType::I32, integer), 2, ElementType::I32, {n, 1});
  expect_unsupported(s.spec, "node 2 (Exp)");

  SpecBuilder wide("fused_mm_wide_store", {m, n}, 0, 3);
  wide.spec.matmul = product(0, 1, F32, m, n, k);
  wide.store(wide.node({.op = Op::Product, .type = F32}), 2, F32, {n, int64_t{1} << 30});
  expect_unsupported(wide.spec, "store 0 has stride 1073741824");

  SpecBuilder sum("fused_mm_sum", {m, n}, 0, 3);
  sum.spec.matmul = product(0, 1, F32, m, n, k);
  sum.store(sum.op(Op::ReduceSum, F32, sum.node({.op = Op::Product, .type = F32})), 2, F32, {n, 1});
  expect_unsupported(sum.spec, "node 1 (ReduceSum) reduces");
}

TEST(FusedGemmKernels, AProductOutsideItsSpaceIsAnInvalidArgument) {
  SpecBuilder s("fused_mm_bad", {8, 6}, 0, 3);
  s.spec.matmul = product(0, 1, F32, 8, 6, 4);
  s.store(s.node({.op = Op::Product, .type = F32}), 2, F32, {6, 1});
  EXPECT_NO_THROW(emitter::emit_fused(s.spec, gemm_chip()));
  FusedSpec spec = s.spec;
  spec.sizes = {6, 8};
  EXPECT_THROW(emitter::emit_fused(spec, gemm_chip()), std::invalid_argument);
  spec = s.spec;
  spec.matmul.reset();
  try {
    emitter::emit_fused(spec, gemm_chip());
    ADD_FAILURE() << "expected invalid_argument";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("node 0 (Product): the spec has no matrix product"), std::string::npos)
        << error.what();
  }
  spec = s.spec;
  spec.matmul->b_argument = 3;
  EXPECT_THROW(emitter::emit_fused(spec, gemm_chip()), std::invalid_argument);
}

}  // namespace
}  // namespace npusim
