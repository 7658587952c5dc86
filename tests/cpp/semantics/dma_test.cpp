// DMA: 1-D, 2-D and 4-D strided moves, dma.dim and core-to-core moves.
#include "semantics_fixture.h"

namespace npusim::emulator::semantics_test {

// ---- DMA
// A strided gather of `count` elements of `bytes` each from DRAM (stride 2 elements) and a contiguous store back.
void check_strided_load(FunctionalChip& chip, int bytes, const std::string& width) {
  std::vector<uint8_t> source(256);
  for (size_t k = 0; k < source.size(); ++k) source[k] = static_cast<uint8_t>(k * 7 + 1);
  chip.memory().write(kData, source.data(), source.size());
  const auto words = isa::assemble(fmt::format("li r4, 5\n dma.ld.{0} r0, r1, r4, {1}\n fence\n addi r5, r1, 4096\n"
                                               " dma.st.{0} r5, r0, r4, {2}\n fence\n halt\n",
                                               width, 2 * bytes, bytes),
                                   "t.s");
  chip.memory().write(kProgram, words.data(), words.size() * 8);
  ASSERT_FALSE(chip.run_kernel(0, kProgram, kData));
  std::vector<uint8_t> out(5 * bytes);
  chip.memory().read(kData + 4096, out.data(), out.size());
  for (int k = 0; k < 5; ++k)
    for (int b = 0; b < bytes; ++b) EXPECT_EQ(out[k * bytes + b], source[2 * k * bytes + b]) << width << " " << k;
}
// A contiguous load, then a store scattering with stride 3 elements.
void check_strided_store(FunctionalChip& chip, int bytes, const std::string& width) {
  std::vector<uint8_t> source(64);
  for (size_t k = 0; k < source.size(); ++k) source[k] = static_cast<uint8_t>(k + 1);
  chip.memory().write(kData, source.data(), source.size());
  const auto words = isa::assemble(fmt::format("li r4, 4\n dma.ld.{0} r0, r1, r4, {1}\n fence\n addi r5, r1, 4096\n"
                                               " dma.st.{0} r5, r0, r4, {2}\n fence\n halt\n",
                                               width, bytes, 3 * bytes),
                                   "t.s");
  chip.memory().write(kProgram, words.data(), words.size() * 8);
  ASSERT_FALSE(chip.run_kernel(0, kProgram, kData));
  std::vector<uint8_t> out(12 * bytes);
  chip.memory().read(kData + 4096, out.data(), out.size());
  for (int k = 0; k < 4; ++k)
    for (int b = 0; b < bytes; ++b) EXPECT_EQ(out[3 * k * bytes + b], source[k * bytes + b]) << width;
}
TEST_F(DmaLoad8, GathersStridedBytes) { check_strided_load(chip_, 1, "b8"); }
TEST_F(DmaLoad16, GathersStridedElements) { check_strided_load(chip_, 2, "b16"); }
TEST_F(DmaLoad32, GathersStridedElements) { check_strided_load(chip_, 4, "b32"); }
TEST_F(DmaLoad64, GathersStridedElements) { check_strided_load(chip_, 8, "b64"); }
TEST_F(DmaStore8, ScattersStridedBytes) { check_strided_store(chip_, 1, "b8"); }
TEST_F(DmaStore16, ScattersStridedElements) { check_strided_store(chip_, 2, "b16"); }
TEST_F(DmaStore32, ScattersStridedElements) { check_strided_store(chip_, 4, "b32"); }
TEST_F(DmaStore64, ScattersStridedElements) { check_strided_store(chip_, 8, "b64"); }

// A 3 x 2-element tile from rows 5 elements apart, stored back to rows 4 elements apart.
void check_2d(FunctionalChip& chip, int bytes, const std::string& width) {
  std::vector<uint8_t> source(256);
  for (size_t k = 0; k < source.size(); ++k) source[k] = static_cast<uint8_t>(k + 3);
  chip.memory().write(kData, source.data(), source.size());
  const auto words =
      isa::assemble(fmt::format("li r4, 2\n li r5, 3\n dma.ld2.{0} r0, r1, r4, r5, {1}\n fence\n addi r6, r1, 4096\n"
                                " dma.st2.{0} r6, r0, r4, r5, {2}\n fence\n halt\n",
                                width, 5 * bytes, 4 * bytes),
                    "t.s");
  chip.memory().write(kProgram, words.data(), words.size() * 8);
  ASSERT_FALSE(chip.run_kernel(0, kProgram, kData));
  std::vector<uint8_t> out(12 * bytes);
  chip.memory().read(kData + 4096, out.data(), out.size());
  for (int r = 0; r < 3; ++r)
    for (int e = 0; e < 2 * bytes; ++e) EXPECT_EQ(out[r * 4 * bytes + e], source[r * 5 * bytes + e]) << width;
}
TEST_F(DmaLoad2d8, MovesRowsOfATile) { check_2d(chip_, 1, "b8"); }
TEST_F(DmaLoad2d16, MovesRowsOfATile) { check_2d(chip_, 2, "b16"); }
TEST_F(DmaLoad2d32, MovesRowsOfATile) { check_2d(chip_, 4, "b32"); }
TEST_F(DmaLoad2d64, MovesRowsOfATile) { check_2d(chip_, 8, "b64"); }
TEST_F(DmaStore2d8, MovesRowsOfATile) { check_2d(chip_, 1, "b8"); }
TEST_F(DmaStore2d16, MovesRowsOfATile) { check_2d(chip_, 2, "b16"); }
TEST_F(DmaStore2d32, MovesRowsOfATile) { check_2d(chip_, 4, "b32"); }
TEST_F(DmaStore2d64, MovesRowsOfATile) { check_2d(chip_, 8, "b64"); }

// A 4-D gather that transposes a 2 x 3 x 4 array: gathered[c][b][a] = source[a][b][c], with dimension 0 = a
// (count 2, stride 12 elements), dimension 1 = b (3, stride 4) and dimension 2 = c (4, stride 1). A store with the
// same shape scatters it back, which must restore the source.
void check_4d(FunctionalChip& chip, int bytes, const std::string& width) {
  std::vector<uint8_t> source(24 * bytes);
  for (size_t k = 0; k < source.size(); ++k) source[k] = static_cast<uint8_t>(k * 5 + 2);
  chip.memory().write(kData, source.data(), source.size());
  const int e = bytes;
  const auto program = isa::assemble(
      fmt::format("li r4, 3\n li r5, {0}\n dma.dim 1, r4, r5\n li r4, 4\n li r5, {1}\n dma.dim 2, r4, r5\n"
                  " li r4, 2\n dma.ld4.{2} r0, r1, r4, {3}\n fence\n addi r8, r1, 4096\n"
                  " dma.st4.{2} r8, r0, r4, {3}\n fence\n li r4, 24\n addi r9, r1, 8192\n"
                  " dma.st.{2} r9, r0, r4, {1}\n fence\n halt\n",
                  4 * e, e, width, 12 * e),
      "t.s");
  chip.memory().write(kProgram, program.data(), program.size() * 8);
  ASSERT_FALSE(chip.run_kernel(0, kProgram, kData));
  std::vector<uint8_t> restored(source.size()), gathered(source.size());
  chip.memory().read(kData + 4096, restored.data(), restored.size());
  chip.memory().read(kData + 8192, gathered.data(), gathered.size());
  EXPECT_EQ(restored, source) << width;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        for (int byte = 0; byte < e; ++byte)
          EXPECT_EQ(gathered[((c * 3 + b) * 2 + a) * e + byte], source[((a * 3 + b) * 4 + c) * e + byte]) << width;
}
TEST_F(DmaLoad4d8, GathersATransposingFourDimensionalTile) { check_4d(chip_, 1, "b8"); }
TEST_F(DmaLoad4d16, GathersATransposingFourDimensionalTile) { check_4d(chip_, 2, "b16"); }
TEST_F(DmaLoad4d32, GathersATransposingFourDimensionalTile) { check_4d(chip_, 4, "b32"); }
TEST_F(DmaLoad4d64, GathersATransposingFourDimensionalTile) { check_4d(chip_, 8, "b64"); }
TEST_F(DmaStore4d8, ScattersTheTransposeBack) { check_4d(chip_, 1, "b8"); }
TEST_F(DmaStore4d16, ScattersTheTransposeBack) { check_4d(chip_, 2, "b16"); }
TEST_F(DmaStore4d32, ScattersTheTransposeBack) { check_4d(chip_, 4, "b32"); }
TEST_F(DmaStore4d64, ScattersTheTransposeBack) { check_4d(chip_, 8, "b64"); }
TEST_F(DmaDim, RejectsDimensionsOutsideOneToThree) {
  EXPECT_EQ(trap_of("dma.dim 0, r4, r5\n halt\n"), "dma.dim dimension 0 is not 1, 2 or 3");
  EXPECT_EQ(trap_of("dma.dim 4, r4, r5\n halt\n"), "dma.dim dimension 4 is not 1, 2 or 3");
}
TEST_F(DmaDim, ShapeResetsAtKernelStart) {
  // With outer dimensions 2 x 2, three bytes become twelve and overrun the scratchpad's last three bytes...
  EXPECT_NE(trap_of("li r4, 2\n dma.dim 1, r4, r0\n dma.dim 2, r4, r0\n li r4, 3\n li r5, 65533\n"
                    " dma.ld4.b8 r5, r1, r4, 1\n halt\n")
                .find("outside the 64 KiB scratchpad"),
            std::string::npos);
  // ...but the next kernel starts from 1 x 1 x 1 again.
  EXPECT_FALSE(run("li r4, 3\n li r5, 65533\n dma.ld4.b8 r5, r1, r4, 1\n halt\n"));
}
TEST_F(DmaCoreToCore, WritesAnotherCoresScratchpad) {
  const uint64_t value = 0x1122334455667788ull;
  chip_.memory().write(kData, &value, 8);
  // Core 0 sends 8 bytes to core 1's scratchpad at 64; core 1 then stores them from there.
  EXPECT_FALSE(
      run("li r4, 8\n dma.ld.b8 r0, r1, r4, 1\n fence\n li r5, 1\n li r6, 64\n dma.c2c r6, r0, r5, r4\n"
          " fence\n halt\n"));
  EXPECT_FALSE(run("li r4, 8\n li r6, 64\n addi r7, r1, 64\n dma.st.b8 r7, r6, r4, 1\n fence\n halt\n", 1));
  uint64_t received = 0;
  chip_.memory().read(kData + 64, &received, 8);
  EXPECT_EQ(received, value);
  EXPECT_EQ(trap_of("li r5, 2\n li r4, 8\n dma.c2c r0, r0, r5, r4\n halt\n"),
            "dma.c2c to core 2, which does not exist; the chip has 2");
  EXPECT_EQ(trap_of("li r5, 1\n li r4, 8\n li r6, 65532\n dma.c2c r6, r0, r5, r4\n halt\n"),
            "dma.c2c of 8 bytes at 0xfffc is outside core 1's 64 KiB scratchpad");
}

}  // namespace npusim::emulator::semantics_test
