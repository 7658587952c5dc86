// Matrix engine: weight loads (row-major and transposed), multiply-accumulate per input type, read-out.
#include "semantics_fixture.h"

namespace npusim::emulator::semantics_test {

// ---- matrix engine: C = A (M x K) @ W (K x N), K = N = 2 here, against a plain loop
// Matrix tests: A in slot a (r10), W in slot b (r11), M = r15 rows, the f32/i32 result stored from ACC 0 to the
// output slot; checked against values worked out by hand.
TEST_F(MatrixLoadWeights, LoadsRowMajorWeights) {
  const std::vector<Half> a = {Half(1.0f), Half(2.0f), Half(3.0f), Half(4.0f), Half(0.5f), Half(-1.0f)};  // 3 x 2
  const std::vector<Half> w = {Half(1.0f), Half(10.0f), Half(100.0f), Half(1000.0f)};                     // 2 x 2
  const auto out =
      values_of<float>(tile("li r16, 2\n mx.ldw.f16 r11, r16, r16\n mx.mac.f16 r0, r10, r15, 0\n"
                            " li r17, 6\n fence\n mx.st.f32 r13, r0, r17",
                            0, 24, {bytes_of(a), bytes_of(w)}, 3));
  EXPECT_EQ(out, (std::vector<float>{201, 2010, 403, 4030, -99.5f, -995}));
}
TEST_F(MatrixLoadWeightsTransposed, LoadsColumnMajorWeights) {
  const std::vector<BFloat16> a = {BFloat16(1.0f), BFloat16(2.0f)};                                        // 1 x 2
  const std::vector<BFloat16> w = {BFloat16(1.0f), BFloat16(100.0f), BFloat16(10.0f), BFloat16(1000.0f)};  // N x K
  const auto out =
      values_of<float>(tile("li r16, 2\n mx.ldwt.bf16 r11, r16, r16\n mx.mac.bf16 r0, r10, r15, 0\n"
                            " li r17, 2\n fence\n mx.st.f32 r13, r0, r17",
                            0, 8, {bytes_of(a), bytes_of(w)}, 1));
  EXPECT_EQ(out, (std::vector<float>{201, 2010}));
}
TEST_F(MatrixMultiply, SumsInt8InInt32AndRejectsMismatchedTypes) {
  const std::vector<int8_t> a = {127, 127, -128, -128};  // 2 x 2
  const std::vector<int8_t> w = {127, 1, 127, -1};
  const auto out =
      values_of<int32_t>(tile("li r16, 2\n mx.ldw.i8 r11, r16, r16\n mx.mac.i8 r0, r10, r15, 0\n"
                              " mx.mac.i8 r0, r10, r15, 1\n li r17, 4\n fence\n mx.st.i32 r13, r0, r17",
                              0, 16, {bytes_of(a), bytes_of(w)}, 2));
  EXPECT_EQ(out, (std::vector<int32_t>{2 * 2 * 127 * 127, 0, 2 * 2 * -128 * 127, 0}));
  EXPECT_EQ(trap_of("li r16, 2\n mx.ldw.f32 r11, r16, r16\n mx.mac.f16 r0, r10, r16, 0\n halt\n"),
            "mx.mac.f16 inputs do not match the loaded f32 weights");
  EXPECT_EQ(trap_of("li r16, 2\n mx.mac.f32 r0, r10, r16, 0\n halt\n"), "mx.mac before any mx.ldw loaded weights");
}
TEST_F(MatrixStore, RoundsAccumulatorsToTheOutputType) {
  const std::vector<float> a = {1.0f, 1.0f}, w = {1.0f / 3.0f, 1.0f, 1.0f / 3.0f, 1.0f};
  const auto out =
      values_of<BFloat16>(tile("li r16, 2\n mx.ldw.f32 r11, r16, r16\n mx.mac.f32 r0, r10, r15, 0\n"
                               " li r17, 2\n fence\n mx.st.bf16 r13, r0, r17",
                               0, 4, {bytes_of(a), bytes_of(w)}, 1));
  EXPECT_EQ(out[0], BFloat16(1.0f / 3.0f + 1.0f / 3.0f));
  EXPECT_EQ(float(out[1]), 2.0f);
}

}  // namespace npusim::emulator::semantics_test
