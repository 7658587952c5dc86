// Indexed DMA (dma.ldx, dma.stx, dma.stxadd) and the index bounds check (vcheck).
#include "semantics_fixture.h"

namespace npusim::emulator::semantics_test {

TEST_F(DmaLoadIndexed, GathersElementsAtIndexedOffsets) {
  std::vector<float> table(16);
  for (size_t k = 0; k < table.size(); ++k) table[k] = 0.5f + static_cast<float>(k);
  chip_.memory().write(kData + 1024, table.data(), table.size() * 4);
  const std::vector<int64_t> indices = {3, 0, 15, 3, 7};
  chip_.memory().write(kData, indices.data(), indices.size() * 8);
  // Stride 4 reads table[idx]; from the last element with stride -4, table[15 - idx].
  ASSERT_FALSE(
      run("li r4, 5\n dma.ld.b64 r0, r1, r4, 8\n fence\n li r5, 256\n addi r6, r1, 1024\n"
          " dma.ldx.f32 r5, r6, r0, r4, 4\n li r7, 276\n addi r8, r1, 1084\n dma.ldx.f32 r7, r8, r0, r4, -4\n"
          " fence\n addi r9, r1, 4096\n li r10, 10\n dma.st.b32 r9, r5, r10, 4\n fence\n halt\n"));
  std::vector<float> out(10);
  chip_.memory().read(kData + 4096, out.data(), 40);
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(out[k], table[indices[k]]) << k;
    EXPECT_EQ(out[5 + k], table[15 - indices[k]]) << k;
  }
}
TEST_F(DmaLoadIndexed, AnIndexOutsideTheDeviceTraps) {
  const std::vector<int64_t> indices = {0, int64_t{1} << 40};
  chip_.memory().write(kData, indices.data(), 16);
  EXPECT_NE(trap_of("li r4, 2\n dma.ld.b64 r0, r1, r4, 8\n fence\n li r5, 256\n dma.ldx.i32 r5, r1, r0, r4, 4\n"
                    " fence\n halt\n")
                .find("outside"),
            std::string::npos);
}
TEST_F(DmaStoreIndexed, ScattersElementsAndTheLastRepeatedIndexWins) {
  const std::vector<int64_t> indices = {2, 5, 2, 0};
  const std::vector<uint16_t> values = {11, 22, 33, 44};
  chip_.memory().write(kData, indices.data(), 32);
  chip_.memory().write(kData + 256, values.data(), 8);
  const std::vector<uint16_t> zeros(8, 0);
  chip_.memory().write(kData + 1024, zeros.data(), 16);
  ASSERT_FALSE(
      run("li r4, 4\n dma.ld.b64 r0, r1, r4, 8\n addi r5, r1, 256\n li r6, 256\n dma.ld.b16 r6, r5, r4, 2\n"
          " fence\n addi r7, r1, 1024\n dma.stx.bf16 r7, r6, r0, r4, 2\n fence\n halt\n"));
  std::vector<uint16_t> out(8);
  chip_.memory().read(kData + 1024, out.data(), 16);
  EXPECT_EQ(out, (std::vector<uint16_t>{44, 0, 33, 0, 0, 22, 0, 0}));
}
TEST_F(DmaStoreAddIndexed, RepeatedIndicesAccumulateInOrder) {
  const std::vector<int64_t> indices = {1, 1, 3, 1};
  const std::vector<float> values = {1.0f, 1e8f, 2.5f, -1e8f};
  const std::vector<float> table = {10.0f, 20.0f, 30.0f, 40.0f};
  chip_.memory().write(kData, indices.data(), 32);
  chip_.memory().write(kData + 256, values.data(), 16);
  chip_.memory().write(kData + 1024, table.data(), 16);
  ASSERT_FALSE(
      run("li r4, 4\n dma.ld.b64 r0, r1, r4, 8\n addi r5, r1, 256\n li r6, 256\n dma.ld.b32 r6, r5, r4, 4\n"
          " fence\n addi r7, r1, 1024\n dma.stxadd.f32 r7, r6, r0, r4, 4\n fence\n halt\n"));
  std::vector<float> out(4);
  chip_.memory().read(kData + 1024, out.data(), 16);
  // In k order, rounding each sum to f32: 20 + 1 + 1e8 rounds to 100000024 (f32 spacing 8 there), so 24 is left.
  EXPECT_EQ(out, (std::vector<float>{10.0f, 24.0f, 30.0f, 42.5f}));
}
TEST_F(DmaStoreAddIndexed, IntegersWrapAndHalfPrecisionRoundsEachSum) {
  const std::vector<int64_t> indices = {0, 0};
  chip_.memory().write(kData, indices.data(), 16);
  const std::vector<int8_t> values = {100, 100};
  const int8_t start = 0;
  chip_.memory().write(kData + 256, values.data(), 2);
  chip_.memory().write(kData + 1024, &start, 1);
  ASSERT_FALSE(
      run("li r4, 2\n dma.ld.b64 r0, r1, r4, 8\n addi r5, r1, 256\n li r6, 256\n dma.ld.b8 r6, r5, r4, 1\n"
          " fence\n addi r7, r1, 1024\n dma.stxadd.i8 r7, r6, r0, r4, 1\n fence\n halt\n"));
  int8_t out = 0;
  chip_.memory().read(kData + 1024, &out, 1);
  EXPECT_EQ(out, static_cast<int8_t>(200 - 256));
  // bf16: 256 + 1 rounds back to 256 each time (8 significand bits), so the sum stays 256.
  const std::vector<BFloat16> ones = {BFloat16(1.0f), BFloat16(1.0f)};
  const BFloat16 base(256.0f);
  chip_.memory().write(kData + 256, ones.data(), 4);
  chip_.memory().write(kData + 1024, &base, 2);
  ASSERT_FALSE(
      run("li r4, 2\n dma.ld.b64 r0, r1, r4, 8\n addi r5, r1, 256\n li r6, 256\n dma.ld.b16 r6, r5, r4, 2\n"
          " fence\n addi r7, r1, 1024\n dma.stxadd.bf16 r7, r6, r0, r4, 0\n fence\n halt\n"));
  BFloat16 sum;
  chip_.memory().read(kData + 1024, &sum, 2);
  EXPECT_EQ(static_cast<float>(sum), 256.0f);
}

TEST_F(Vcheck, PassesIndicesInsideTheBoundAndTrapsOnOthers) {
  EXPECT_EQ(vector_op<int64_t>("li r5, 10\n vcheck.i64 r10, r5, r14, 1", {0, 9, 3}), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(vector_op<int32_t>("li r5, 3\n vcheck.i32 r10, r5, r14, 1", {2, 0}), (std::vector<int32_t>{0, 0}));
  const std::vector<int64_t> too_big = {0, 10};
  chip_.memory().write(kData, too_big.data(), 16);
  EXPECT_EQ(trap_of("li r4, 2\n dma.ld.b64 r0, r1, r4, 8\n fence\n li r5, 10\n vcheck.i64 r0, r5, r4, 7\n halt\n"),
            "vcheck: element 1 is 10, outside [0, 10): trap instruction, code 7");
  const std::vector<int32_t> negative = {-1};
  chip_.memory().write(kData, negative.data(), 4);
  EXPECT_EQ(trap_of("li r4, 1\n dma.ld.b32 r0, r1, r4, 4\n fence\n li r5, 10\n vcheck.i32 r0, r5, r4, 1\n halt\n"),
            "vcheck: element 0 is -1, outside [0, 10): trap instruction, code 1");
}

}  // namespace npusim::emulator::semantics_test
