// Fused kernels whose rows do not fit the scratchpad (fused_looped.h): each row walked in chunks, a pass per level of
// reductions, in both modes, against the reference interpreter (whose sums run in row order, the kernel's chunk by
// chunk: hence the relative tolerances).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fused_kernels_support.h"

namespace npusim::fused_test {
namespace {

constexpr ElementType F32 = ElementType::F32;

// Each test runs on small_chip()'s 4 KiB scratchpad, which holds a few hundred elements per slot, so that the slots
// come in one set; and on a 32 KiB one with rows `scale()` times as long, where two sets double-buffer the chunks
// (each pass loads the next chunk while it computes this one). Either way the rows take several chunks, the last one
// short, and the run checks that the timed model saw no hazard.
class LoopedRows : public ::testing::TestWithParam<int> {
 public:
  int64_t scale() const { return GetParam() / 4; }
  config::ChipConfig chip() const { return small_chip(GetParam()); }
  std::vector<Bytes> run(const FusedSpec& spec, const std::vector<Bytes>& buffers,
                         const std::vector<ElementType>& types, double relative = 0) const {
    const std::string assembly = emitter::emit_fused(spec, chip()).assembly();
    EXPECT_NE(assembly.find("looped rows"), std::string::npos);
    EXPECT_NE(assembly.find(GetParam() == 4 ? "slots, 1 set\n" : "slots, 2 sets\n"), std::string::npos) << assembly;
    return run_and_compare(spec, chip(), buffers, types, relative);
  }
};
INSTANTIATE_TEST_SUITE_P(OneAndTwoSetsOfSlots, LoopedRows, ::testing::Values(4, 32),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return fmt::format("Scratchpad{}KiB", info.param);
                         });

TEST_P(LoopedRows, SoftmaxOverRowsLongerThanTheScratchpadIsOneKernel) {
  const int64_t rows = 5, cols = 3001 * scale();
  SpecBuilder s("looped_softmax", {rows, cols}, 1, 2);
  const int x = s.load(0, F32, {cols, 1});
  const int e = s.op(Op::Exp, F32, s.op(Op::Sub, F32, x, s.op(Op::ReduceMax, F32, x)));
  s.store(s.op(Op::Div, F32, e, s.op(Op::ReduceSum, F32, e)), 1, F32, {cols, 1});
  EXPECT_EQ(emitter::emit_fused(s.spec, chip()).cores, 3);
  run(s.spec, {random_buffer(F32, rows * cols, 31), Bytes(rows * cols * 4)}, {F32, F32}, 1e-5);
}

TEST_P(LoopedRows, LayerNormTakesTwoReductionPassesThenStoresTheRowAndItsStatistics) {
  // mean, then the variance of x - mean: two passes of reductions, a pass storing y, then the per-row mean and 1/std.
  // The weight and bias are the same in every row (a pattern in the tiled kernel, chunks of a row here).
  const int64_t rows = 4, cols = 1999 * scale();
  const float inverse = 1.0f / cols, eps = 1e-5f;
  SpecBuilder s("looped_layer_norm", {rows, cols}, 1, 6);
  const int x = s.load(0, F32, {cols, 1}), w = s.load(1, F32, {0, 1}), bias = s.load(2, F32, {0, 1});
  const int mean = s.op(Op::Mul, F32, s.op(Op::ReduceSum, F32, x), s.constant(F32, inverse));
  const int d = s.op(Op::Sub, F32, x, mean);
  const int var = s.op(Op::Mul, F32, s.op(Op::ReduceSum, F32, s.op(Op::Mul, F32, d, d)), s.constant(F32, inverse));
  const int r = s.op(Op::Rsqrt, F32, s.op(Op::Add, F32, var, s.constant(F32, eps)));
  s.store(s.op(Op::Add, F32, s.op(Op::Mul, F32, s.op(Op::Mul, F32, d, r), w), bias), 3, F32, {cols, 1});
  s.store(mean, 4, F32, {1, 0});
  s.store(r, 5, F32, {1, 0});
  // Values around 2, so that the mean is far from zero and its relative error small. The reference sums 16000 of
  // them in row order on the larger chip, which leaves y about 4e-5 from the chunked sums.
  const Bytes xs = random_buffer(F32, rows * cols, 32, 1, 3);
  run(s.spec,
      {xs, random_buffer(F32, cols, 33), random_buffer(F32, cols, 34), Bytes(rows * cols * 4), Bytes(rows * 4),
       Bytes(rows * 4)},
      {F32, F32, F32, F32, F32, F32}, 1e-4);
}

// Batch norm's statistics: [C, N, S] with N and S reduced, N strided by C S. A long S is cut into chunks inside the
// loop over N; a short S is a block, and the chunks are runs of N.
void channel_statistics(const LoopedRows& test, int64_t channels, int64_t batch, int64_t spatial, uint32_t seed) {
  SpecBuilder s("looped_channel_statistics", {channels, batch, spatial}, 2, 4);
  const int x = s.load(0, F32, {spatial, channels * spatial, 1});
  const int count = s.constant(F32, static_cast<double>(batch * spatial));
  const int mean = s.op(Op::Div, F32, s.op(Op::ReduceSum, F32, x), count);
  const int centered = s.op(Op::Sub, F32, x, mean);
  s.store(s.op(Op::Div, F32, s.op(Op::ReduceSum, F32, s.op(Op::Mul, F32, centered, centered)), count), 1, F32,
          {1, 0, 0});
  s.store(centered, 2, F32, {spatial, channels * spatial, 1});
  s.store(s.op(Op::ReduceMax, F32, x), 3, F32, {1, 0, 0});
  const int64_t elements = channels * batch * spatial;
  test.run(s.spec,
           {random_buffer(F32, elements, seed, 1, 3), Bytes(channels * 4), Bytes(elements * 4), Bytes(channels * 4)},
           {F32, F32, F32, F32}, 2e-5);
}
TEST_P(LoopedRows, ChannelStatisticsWithChunksOfALongSpatialDimension) {
  channel_statistics(*this, 3, 5, 700 * scale(), 35);
}
TEST_P(LoopedRows, ChannelStatisticsWithChunksOfTheBatchOverAShortSpatialDimension) {
  channel_statistics(*this, 2, 300 * scale(), 7, 36);
}

TEST_P(LoopedRows, ExtremaCarryNaNAndInfinitiesAcrossChunks) {
  const int64_t rows = 4, cols = 2500 * scale();
  SpecBuilder s("looped_extrema", {rows, cols}, 1, 3);
  const int x = s.load(0, F32, {cols, 1});
  s.store(s.op(Op::ReduceMax, F32, x), 1, F32, {1, 0});
  s.store(s.op(Op::ReduceMin, F32, x), 2, F32, {1, 0});
  Bytes xs = random_buffer(F32, rows * cols, 37);
  write_element(xs, F32, 0 * cols + 2400 * scale(), NAN);        // row 0: a NaN in the last chunk
  write_element(xs, F32, 1 * cols + 5, INFINITY);                // row 1: +inf in the first chunk
  write_element(xs, F32, 2 * cols + 1700 * scale(), -INFINITY);  // row 2: -inf in a middle chunk
  const auto result = run(s.spec, {xs, Bytes(rows * 4), Bytes(rows * 4)}, {F32, F32, F32});
  EXPECT_TRUE(std::isnan(read_element(result[1], F32, 0)));
  EXPECT_TRUE(std::isnan(read_element(result[2], F32, 0)));
  EXPECT_EQ(read_element(result[1], F32, 1), INFINITY);
  EXPECT_EQ(read_element(result[2], F32, 2), -INFINITY);
}

TEST_P(LoopedRows, AnIntegerSumOverALongRowIsExact) {
  const int64_t rows = 3, cols = 5000 * scale();
  SpecBuilder s("looped_integer_sum", {rows, cols}, 1, 2);
  s.store(s.op(Op::ReduceSum, ElementType::I32, s.load(0, ElementType::I32, {cols, 1})), 1, ElementType::I32, {1, 0});
  run(s.spec, {random_buffer(ElementType::I32, rows * cols, 38), Bytes(rows * 4)},
      {ElementType::I32, ElementType::I32});
}

// The first index of the extremum, across chunks: ties keep the earlier chunk's, the first NaN wins, a row of -inf
// gives 0 (argmax), as the CPU's kernels and vargmax do.
TEST_P(LoopedRows, TheIndexOfAnExtremumIsTheFirstAcrossChunks) {
  const int64_t rows = 6, cols = 2500 * scale();
  SpecBuilder s("looped_argmax", {rows, cols}, 1, 3);
  const int x = s.load(0, F32, {cols, 1});
  s.store(s.op(Op::ReduceArgMax, ElementType::I64, x), 1, ElementType::I64, {1, 0});
  s.store(s.op(Op::ReduceArgMin, ElementType::I64, x), 2, ElementType::I64, {1, 0});
  Bytes xs = random_buffer(F32, rows * cols, 39);
  const int64_t tie = 2000 * scale(), first_nan = 1500 * scale(), minimum = 600 * scale();
  write_element(xs, F32, 0 * cols + tie, 100);  // row 0: a tie across chunks, the earlier one wins
  write_element(xs, F32, 0 * cols + 10, 100);
  write_element(xs, F32, 1 * cols + first_nan, NAN);  // row 1: the first NaN wins, for both
  write_element(xs, F32, 1 * cols + 2400 * scale(), NAN);
  write_element(xs, F32, 1 * cols + 3, 50);
  for (int64_t c = 0; c < cols; ++c) write_element(xs, F32, 2 * cols + c, -INFINITY);  // row 2: all -inf
  write_element(xs, F32, 3 * cols + cols - 1, 77);                                     // row 3: in the last chunk
  write_element(xs, F32, 4 * cols + minimum, -77);                                     // row 4: a minimum inside
  const auto result = run(s.spec, {xs, Bytes(rows * 8), Bytes(rows * 8)}, {F32, ElementType::I64, ElementType::I64});
  EXPECT_EQ(read_element(result[1], ElementType::I64, 0), 10);
  EXPECT_EQ(read_element(result[1], ElementType::I64, 1), first_nan);
  EXPECT_EQ(read_element(result[2], ElementType::I64, 1), first_nan);
  EXPECT_EQ(read_element(result[1], ElementType::I64, 2), 0);
  EXPECT_EQ(read_element(result[1], ElementType::I64, 3), cols - 1);
  EXPECT_EQ(read_element(result[2], ElementType::I64, 4), minimum);
}

TEST(LoopedRowsRefused, TheIndexOfAnExtremumOfIntegersOverALongRowIsUnsupportedNamingTheNode) {
  SpecBuilder s("looped_argmax_i32", {4, 1 << 20}, 1, 2);
  s.store(s.op(Op::ReduceArgMax, ElementType::I64, s.load(0, ElementType::I32, {1 << 20, 1})), 1, ElementType::I64,
          {1, 0});
  try {
    emitter::emit_fused(s.spec, small_chip());
    ADD_FAILURE() << "expected Unsupported";
  } catch (const emitter::Unsupported& error) {
    EXPECT_NE(std::string(error.what()).find("looped_argmax_i32: node 1 (ReduceArgMax): the index of an extremum"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace npusim::fused_test
