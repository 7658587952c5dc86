// Instruction semantics on the functional emulator, and its traps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "npusim/emulator/functional_chip.h"
#include "npusim/isa/assembler.h"

namespace npusim::emulator {
namespace {

constexpr uint64_t kProgram = 0x10000;
constexpr uint64_t kData = 0x20000;

class Emulator : public ::testing::Test {
 public:
  Emulator() : chip_(small_config()) {}

  static config::ChipConfig small_config() {
    config::ChipConfig config;
    config.dram_capacity_mib = 64;
    config.core_scratchpad_kib = 16;
    config.core_accumulator_kib = 16;
    config.runtime_watchdog_instructions = 10000;
    return config;
  }

  std::optional<KernelFault> run(const std::string& source) {
    const auto words = isa::assemble(source, "test.s");
    chip_.memory().write(kProgram, words.data(), words.size() * 8);
    return chip_.run_kernel(0, kProgram, kData);
  }
  uint64_t reg(int index) const { return chip_.core_state(0).registers[index]; }

  FunctionalChip chip_;
};

TEST(DeviceMemory, A16GiBDeviceCostsHostMemoryOnlyForTheTouchedPages) {
  DeviceMemory memory(uint64_t{16} << 30);
  EXPECT_EQ(memory.resident_bytes(), 0u);
  const uint64_t last = (uint64_t{16} << 30) - 8, value = 0x1234;
  memory.write(last, &value, 8);
  memory.write(0, &value, 1);
  std::vector<uint8_t> middle(1 << 20, 0xff);
  memory.read(uint64_t{8} << 30, middle.data(), middle.size());  // never written: zeros, and no page for it
  EXPECT_EQ(middle, std::vector<uint8_t>(1 << 20, 0));
  EXPECT_EQ(memory.resident_bytes(), 2 * DeviceMemory::kPageBytes);
  uint64_t back = 0;
  memory.read(last, &back, 8);
  EXPECT_EQ(back, value);
}

// Found by the program fuzz target under ASan: rows of no bytes, a stride apart that leaves the device, passed the
// range check (the tile has no bytes) and then indexed the page table past its end (a write created a page there).
TEST(DeviceMemory, RowsOfNoBytesTouchNothingWhateverTheStride) {
  DeviceMemory memory(uint64_t{1} << 20);
  std::vector<std::byte> rows(16);
  memory.read_rows(0, int64_t{1} << 40, 0, 1'000'000, rows.data());
  memory.write_rows(64, -(int64_t{1} << 40), 0, 1'000'000, rows.data());
  EXPECT_EQ(memory.resident_bytes(), 0u);
}

// clear() zeroes only the pages written since the last clear: whatever wrote them (write, fill, write_rows), and in
// every round, not only the first.
TEST(DeviceMemory, ClearZeroesEveryPageWrittenSinceTheLastClear) {
  DeviceMemory memory(uint64_t{1} << 20);
  const uint64_t page = DeviceMemory::kPageBytes;
  const auto reads_zero = [&](uint64_t address, uint64_t bytes) {
    std::vector<uint8_t> back(bytes, 0xff);
    memory.read(address, back.data(), bytes);
    return back == std::vector<uint8_t>(bytes, 0);
  };
  const std::vector<uint8_t> ones(3 * page, 1);
  for (int round = 0; round < 3; ++round) {
    memory.write(page - 8, ones.data(), 16);                                     // across two pages
    memory.fill(4 * page + 100, 7, 10);                                          // one page
    memory.write_rows(8 * page, static_cast<int64_t>(page), 4, 3, ones.data());  // a row on each of three pages
    EXPECT_FALSE(reads_zero(page - 8, 16));
    memory.clear();
    EXPECT_TRUE(reads_zero(0, uint64_t{1} << 20)) << "round " << round;
  }
  EXPECT_EQ(memory.resident_bytes(), 6 * page);  // the pages stay allocated
}

TEST_F(Emulator, ATileOfNoColumnsWithAHugeStrideMovesNothing) {
  EXPECT_FALSE(
      run("li r2, 10\n li r3, 0x100000\n dma.ld2.b16 r0, r0, r0, r3, 209723906\n"
          " dma.st2.b32 r0, r0, r0, r3, -209723906\n fence\n halt\n"));
}

// Found by the program fuzz target (a libFuzzer timeout): a tile of no columns whose count of rows came from an
// address checked every row for a store into the command processor's memory, 2^28 and more per instruction. Here
// 2^40 rows of nothing, loaded and stored.
TEST_F(Emulator, ManyRowsOfNothingMoveNothingAtOnce) {
  EXPECT_FALSE(
      run("li r3, 0\n lhi r3, 0x100\n dma.st2.b16 r0, r0, r0, r3, -310538\n dma.ld2.b32 r0, r0, r0, r3, 8\n"
          " fence\n halt\n"));
}

TEST_F(Emulator, ScalarArithmeticWrapsAndShifts) {
  ASSERT_FALSE(
      run("li r2, -1\n li r3, 2\n add r4, r2, r3\n sub r5, r0, r3\n mul r6, r3, r3\n srai r7, r2, 60\n"
          " srli r8, r2, 60\n slt r9, r2, r3\n sltu r10, r2, r3\n halt\n"));
  EXPECT_EQ(reg(4), 1u);
  EXPECT_EQ(reg(5), static_cast<uint64_t>(-2));
  EXPECT_EQ(reg(6), 4u);
  EXPECT_EQ(reg(7), ~0ull);
  EXPECT_EQ(reg(8), 0xfu);
  EXPECT_EQ(reg(9), 1u);
  EXPECT_EQ(reg(10), 0u);
}

TEST_F(Emulator, RegisterZeroIgnoresWrites) {
  ASSERT_FALSE(run("li r0, 5\n addi r1, r0, 0\n halt\n"));
  EXPECT_EQ(reg(1), 0u);
}

TEST_F(Emulator, LhiBuildsSixtyFourBitConstants) {
  ASSERT_FALSE(run("li r2, -16\n lhi r2, 0x12345678\n halt\n"));
  EXPECT_EQ(reg(2), 0x12345678fffffff0ull);
}

TEST_F(Emulator, LoopsWithBranches) {
  ASSERT_FALSE(run("li r2, 10\n li r3, 0\nloop: add r3, r3, r2\n addi r2, r2, -1\n bne r2, r0, loop\n halt\n"));
  EXPECT_EQ(reg(3), 55u);
}

TEST_F(Emulator, JalLinksAndJalrReturns) {
  ASSERT_FALSE(run(" jal r31, function\n li r3, 7\n halt\nfunction: li r2, 9\n jalr r0, r31, 0\n"));
  EXPECT_EQ(reg(2), 9u);
  EXPECT_EQ(reg(3), 7u);
}

TEST_F(Emulator, LoadsAndStoresDram) {
  ASSERT_FALSE(run("li r2, -2\n st r2, 8(r1)\n ld r3, 8(r1)\n lw r4, 8(r1)\n sw r2, 16(r1)\n ld r5, 16(r1)\n halt\n"));
  EXPECT_EQ(reg(3), static_cast<uint64_t>(-2));
  EXPECT_EQ(reg(4), 0xfffffffeu);
  EXPECT_EQ(reg(5), 0xfffffffeu);
}

TEST_F(Emulator, CsrReportsCoreIdentity) {
  ASSERT_FALSE(run("csrr r2, coreid\n csrr r3, ncores\n halt\n"));
  EXPECT_EQ(reg(2), 0u);
  EXPECT_EQ(reg(3), 1u);
}

TEST_F(Emulator, StridedDmaGathersAndScattersThroughTheScratchpad) {
  std::vector<float> input(16);
  for (int k = 0; k < 16; ++k) input[k] = static_cast<float>(k);
  chip_.memory().write(kData, input.data(), 64);
  // Gather every fourth element, then store them contiguously after the input.
  ASSERT_FALSE(
      run("li r2, 4\n dma.ld.b32 r0, r1, r2, 16\n fence\n addi r3, r1, 64\n dma.st.b32 r3, r0, r2, 4\n halt\n"));
  float gathered[4];
  chip_.memory().read(kData + 64, gathered, sizeof gathered);
  EXPECT_EQ(gathered[0], 0.0f);
  EXPECT_EQ(gathered[1], 4.0f);
  EXPECT_EQ(gathered[3], 12.0f);
}

TEST_F(Emulator, DmaWithZeroStrideBroadcasts) {
  const float value = 2.5f;
  chip_.memory().write(kData, &value, 4);
  ASSERT_FALSE(run("li r2, 8\n dma.ld.b32 r0, r1, r2, 0\n addi r3, r1, 64\n dma.st.b32 r3, r0, r2, 4\n halt\n"));
  float out[8];
  chip_.memory().read(kData + 64, out, sizeof out);
  for (float x : out) EXPECT_EQ(x, 2.5f);
}

TEST_F(Emulator, VectorAddAndMultiplyAreIeeeFloat32) {
  const float a[4] = {1.5f, -0.0f, INFINITY, 1e38f};
  const float b[4] = {2.25f, 0.0f, -INFINITY, 10.0f};
  chip_.memory().write(kData, a, 16);
  chip_.memory().write(kData + 16, b, 16);
  ASSERT_FALSE(
      run("li r2, 4\n li r3, 16\n li r4, 32\n li r5, 48\n dma.ld.b32 r0, r1, r2, 4\n addi r6, r1, 16\n"
          " dma.ld.b32 r3, r6, r2, 4\n vadd.f32 r4, r0, r3, r2\n vmul.f32 r5, r0, r3, r2\n"
          " addi r7, r1, 64\n dma.st.b32 r7, r4, r2, 4\n addi r7, r1, 96\n dma.st.b32 r7, r5, r2, 4\n halt\n"));
  float sum[4], product[4];
  chip_.memory().read(kData + 64, sum, 16);
  chip_.memory().read(kData + 96, product, 16);
  for (int k = 0; k < 4; ++k) {
    const float expected_sum = a[k] + b[k], expected_product = a[k] * b[k];
    EXPECT_EQ(std::memcmp(&sum[k], &expected_sum, 4), 0) << k;
    EXPECT_EQ(std::memcmp(&product[k], &expected_product, 4), 0) << k;
  }
  EXPECT_TRUE(std::isnan(sum[2]));
  EXPECT_TRUE(std::isinf(product[3]));
}

TEST_F(Emulator, VectorMaxAndMinPropagateNan) {
  const float a[4] = {1.0f, -2.0f, NAN, -0.0f};
  const float b[4] = {0.5f, 3.0f, 1.0f, NAN};
  chip_.memory().write(kData, a, 16);
  chip_.memory().write(kData + 16, b, 16);
  ASSERT_FALSE(
      run("li r2, 4\n li r3, 16\n dma.ld.b32 r0, r1, r2, 4\n addi r6, r1, 16\n dma.ld.b32 r3, r6, r2, 4\n"
          " li r4, 32\n li r5, 48\n vmax.f32 r4, r0, r3, r2\n vmin.f32 r5, r0, r3, r2\n"
          " addi r7, r1, 64\n dma.st.b32 r7, r4, r2, 4\n addi r7, r1, 96\n dma.st.b32 r7, r5, r2, 4\n halt\n"));
  float maximum[4], minimum[4];
  chip_.memory().read(kData + 64, maximum, 16);
  chip_.memory().read(kData + 96, minimum, 16);
  EXPECT_EQ(maximum[0], 1.0f);
  EXPECT_EQ(maximum[1], 3.0f);
  EXPECT_TRUE(std::isnan(maximum[2]) && std::isnan(maximum[3]));
  EXPECT_EQ(minimum[0], 0.5f);
  EXPECT_EQ(minimum[1], -2.0f);
  EXPECT_TRUE(std::isnan(minimum[2]) && std::isnan(minimum[3]));
}

// out = 2 * (A @ W) for A 5x3, W 3x4: one weight load, one overwriting pass, one accumulating pass.
TEST_F(Emulator, MatrixEngineMultipliesAndAccumulatesInKOrder) {
  std::vector<float> a(15), w(12);
  for (int k = 0; k < 15; ++k) a[k] = 0.1f * static_cast<float>(k) - 0.7f;
  for (int k = 0; k < 12; ++k) w[k] = 1.0f / static_cast<float>(k + 3);
  chip_.memory().write(kData, a.data(), 60);
  chip_.memory().write(kData + 64, w.data(), 48);
  ASSERT_FALSE(
      run("li r2, 15\n dma.ld.b32 r0, r1, r2, 4\n li r3, 12\n addi r4, r1, 64\n li r5, 256\n"
          " dma.ld.b32 r5, r4, r3, 4\n fence\n li r6, 3\n li r7, 4\n mx.ldw.f32 r5, r6, r7\n li r8, 5\n"
          " li r9, 128\n mx.mac.f32 r9, r0, r8, 0\n mx.mac.f32 r9, r0, r8, 1\n li r10, 20\n li r11, 512\n"
          " mx.st.f32 r11, r9, r10\n fence\n addi r12, r1, 128\n dma.st.b32 r12, r11, r10, 4\n halt\n"));
  float out[20];
  chip_.memory().read(kData + 128, out, sizeof out);
  for (int m = 0; m < 5; ++m) {
    for (int n = 0; n < 4; ++n) {
      float sum = 0.0f;  // the second mx.mac continues the first's fused multiply-adds
      for (int pass = 0; pass < 2; ++pass)
        for (int k = 0; k < 3; ++k) sum = std::fma(a[m * 3 + k], w[k * 4 + n], sum);
      EXPECT_EQ(out[m * 4 + n], sum) << m << "," << n;
    }
  }
}

// Tile operands need no alignment (docs/isa.md): A at scratchpad byte 1 and the sums at accumulator byte 130 give
// the same products as aligned tiles. 16 columns take the host's vectorised path, not only the one-output loop.
TEST_F(Emulator, MatrixEngineReadsAndWritesTilesAtAnyByte) {
  std::vector<float> a(15), w(48);
  for (int k = 0; k < 15; ++k) a[k] = 0.1f * static_cast<float>(k) - 0.7f;
  for (int k = 0; k < 48; ++k) w[k] = 1.0f / static_cast<float>(k + 3);
  chip_.memory().write(kData, a.data(), 60);
  chip_.memory().write(kData + 64, w.data(), 192);
  ASSERT_FALSE(
      run("li r2, 15\n li r13, 1\n dma.ld.b32 r13, r1, r2, 4\n li r3, 48\n addi r4, r1, 64\n li r5, 256\n"
          " dma.ld.b32 r5, r4, r3, 4\n fence\n li r6, 3\n li r7, 16\n mx.ldw.f32 r5, r6, r7\n li r8, 5\n"
          " li r9, 130\n mx.mac.f32 r9, r13, r8, 0\n li r10, 80\n li r11, 515\n"
          " mx.st.f32 r11, r9, r10\n fence\n addi r12, r1, 256\n dma.st.b32 r12, r11, r10, 4\n halt\n"));
  float out[80];
  chip_.memory().read(kData + 256, out, sizeof out);
  for (int m = 0; m < 5; ++m) {
    for (int n = 0; n < 16; ++n) {
      float sum = 0.0f;
      for (int k = 0; k < 3; ++k) sum = std::fma(a[m * 3 + k], w[k * 16 + n], sum);
      EXPECT_EQ(out[m * 16 + n], sum) << m << "," << n;
    }
  }
}

TEST_F(Emulator, MatrixTrapsOnOversizedTileMissingWeightsAndAccumulatorOverrun) {
  auto fault = run("li r2, 17\n li r3, 4\n mx.ldw.f32 r0, r2, r3\n halt\n");  // 16 x 16 array
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->cause, "weight tile 17 x 4 does not fit the 16 x 16 systolic array");
  fault = run("li r2, 1\n mx.mac.f32 r0, r0, r2, 0\n halt\n");
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->cause, "mx.mac before any mx.ldw loaded weights");
  fault = run("li r2, 1\n li r4, 16\n mx.ldw.f32 r0, r2, r4\n li r3, 300\n mx.mac.f32 r0, r0, r3, 0\n halt\n");
  ASSERT_TRUE(fault);  // K = 1, N = 16: 300 x 16 fp32 outputs = 18.75 KiB > the 16 KiB test accumulator
  EXPECT_NE(fault->cause.find("outside the 16 KiB accumulator"), std::string::npos) << fault->cause;
}

TEST_F(Emulator, IllegalInstructionTrapsWithPcAndWord) {
  const auto fault = run("li r2, 1\n .dword 0xff\n halt\n");
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->pc, kProgram + 8);
  EXPECT_EQ(fault->instruction, ".dword 0x00000000000000ff");
  EXPECT_NE(fault->cause.find("undefined opcode 0xff"), std::string::npos) << fault->cause;
}

TEST_F(Emulator, OutOfBoundsDramAccessTraps) {
  const auto fault = run("li r2, 0\n lhi r2, 1\n ld r3, 0(r2)\n halt\n");
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->instruction, "ld r3, 0(r2)");
  EXPECT_NE(fault->cause.find("outside the device's 64 MiB"), std::string::npos) << fault->cause;
  EXPECT_NE(fault->describe().find("core 0, pc 0x10010 (ld r3, 0(r2))"), std::string::npos) << fault->describe();
}

TEST_F(Emulator, MisalignedLoadTraps) {
  const auto fault = run("ld r3, 4(r1)\n halt\n");
  ASSERT_TRUE(fault);
  EXPECT_NE(fault->cause.find("misaligned 8-byte access"), std::string::npos);
}

TEST_F(Emulator, ScratchpadOverrunTraps) {
  const auto fault = run("li r2, 4097\n dma.ld.b32 r0, r1, r2, 4\n halt\n");  // 16 KiB scratchpad = 4096 floats
  ASSERT_TRUE(fault);
  EXPECT_NE(fault->cause.find("outside the 16 KiB scratchpad"), std::string::npos) << fault->cause;
}

TEST_F(Emulator, ElementCountThatWouldWrapTheByteSizeTraps) {
  const auto fault = run("li r10, 1\n slli r10, r10, 62\n vadd.f32 r0, r0, r0, r10\n halt\n");
  ASSERT_TRUE(fault);
  EXPECT_NE(fault->cause.find("outside the 16 KiB scratchpad"), std::string::npos) << fault->cause;
}

TEST_F(Emulator, CommandProcessorInstructionTrapsOnCore) {
  const auto fault = run("wfd\n");
  ASSERT_TRUE(fault);
  EXPECT_NE(fault->cause.find("command-processor instruction"), std::string::npos);
}

TEST_F(Emulator, WatchdogEndsEndlessLoop) {
  const auto fault = run("spin: jal r0, spin\n");
  ASSERT_TRUE(fault);
  EXPECT_NE(fault->cause.find("watchdog: more than 10000 instructions"), std::string::npos);
}

TEST(CoreMask, RejectsEmptyMasksAndMissingCoresForEveryChipSize) {
  EXPECT_NO_THROW(check_core_mask(~uint64_t{0}, 64));  // all 64 cores: no shift by 64
  EXPECT_NO_THROW(check_core_mask(0b1010, 4));
  EXPECT_THROW(check_core_mask(0, 4), Trap);
  EXPECT_THROW(check_core_mask(0b10000, 4), Trap);
}

TEST_F(Emulator, ChipIsReusableAfterATrap) {
  ASSERT_TRUE(run(".dword 0\n"));
  ASSERT_FALSE(run("li r2, 3\n halt\n"));
  EXPECT_EQ(reg(2), 3u);
}

// The launched cores run on parallel host threads (WorkerPool); the result must not depend on it. Four cores each
// compute exp and a row sum of their own slice, pass a value to the next core, meet at a barrier and store both.
// Run under ThreadSanitizer, this is also the data-race check of the parallel emulator.
std::vector<float> run_four_cores(const char* threads) {
  setenv("NPUSIM_THREADS", threads, 1);
  config::ChipConfig config = Emulator::small_config();
  config.chip_cores = 4;
  FunctionalChip chip(config);
  unsetenv("NPUSIM_THREADS");
  constexpr uint64_t kFirmware = 0x8000, kKernel = 0x10000, kBuffer = 0x40000;
  const auto kernel = isa::assemble(
      "csrr r2, coreid\n csrr r3, ncores\n slli r4, r2, 10\n li r5, 0x40000\n add r6, r5, r4\n li r7, 256\n"
      " dma.ld.b32 r0, r6, r7, 4\n fence\n vexp.f32 r0, r0, r7\n li r8, 1\n li r9, 2048\n"
      " vrsum.f32 r9, r0, r8, r7\n fence\n addi r10, r2, 1\n bne r10, r3, send\n li r10, 0\n"
      "send: li r11, 4\n li r12, 3072\n dma.c2c r12, r9, r10, r11\n barrier\n dma.st.b32 r6, r0, r7, 4\n"
      " li r13, 0x50000\n slli r14, r2, 2\n add r13, r13, r14\n dma.st.b32 r13, r12, r8, 4\n fence\n halt\n",
      "cores.s");
  chip.memory().write(kKernel, kernel.data(), kernel.size() * 8);
  std::vector<float> input(1024);
  for (size_t k = 0; k < input.size(); ++k) input[k] = 0.01f * static_cast<float>(k % 300) - 1.0f;
  chip.memory().write(kBuffer, input.data(), input.size() * 4);
  const auto firmware = isa::assemble(
      "li r2, 0x10000\n li r3, 0\n li r4, 15\n launch r2, r3, r4\n wait r5\n st r5, 0(r0)\nidle: wfd\n"
      " jal r0, idle\n",
      "launcher.s");
  chip.memory().write(kFirmware, firmware.data(), firmware.size() * 8);
  chip.boot(kFirmware);
  EXPECT_FALSE(chip.take_launch_records().at(0).fault);
  std::vector<float> result(1024 + 4);
  chip.memory().read(kBuffer, result.data(), 1024 * 4);
  chip.memory().read(0x50000, result.data() + 1024, 16);
  return result;
}

TEST(FunctionalChip, CoresOnParallelHostThreadsGiveTheSameResultAsOneThread) {
  const std::vector<float> one = run_four_cores("1"), four = run_four_cores("4");
  EXPECT_EQ(one, four);
  EXPECT_EQ(one[0], std::exp(-1.0f));
  float first_sum = 0;  // core 3 received core 2's row sum
  for (int k = 512; k < 768; ++k) first_sum += std::exp(0.01f * static_cast<float>(k % 300) - 1.0f);
  EXPECT_FLOAT_EQ(four[1024 + 3], first_sum);
}

}  // namespace
}  // namespace npusim::emulator
