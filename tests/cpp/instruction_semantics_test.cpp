// One test suite per row of the instruction table, named after the row: what each instruction computes on the
// emulator, edge cases included. InstructionTable.EveryInstructionHasASemanticsTest fails when a row has none.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "npusim/emulator/functional_chip.h"
#include "npusim/isa/assembler.h"
#include "npusim/runtime/device.h"

namespace npusim::emulator {
namespace {

using Half = Eigen::half;
using BFloat16 = Eigen::bfloat16;
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

constexpr uint64_t kProgram = 0x10000;
constexpr uint64_t kData = 0x20000;  // r1 at kernel start
// Tile tests use four 4 KiB scratchpad slots: inputs a, b, c and the output, loaded from kData + slot address.
constexpr uint64_t kSlotBytes = 0x1000;

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}
template <typename T>
std::vector<T> values_of(const std::vector<std::byte>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}
uint32_t bits(float value) { return std::bit_cast<uint32_t>(value); }

class Semantics : public ::testing::Test {
 public:
  static config::ChipConfig config() {
    config::ChipConfig config;
    config.chip_cores = 2;
    config.dram_capacity_mib = 64;
    config.core_scratchpad_kib = 64;
    config.core_accumulator_kib = 16;
    config.core_systolic_rows = 4;
    config.core_systolic_cols = 4;
    config.runtime_watchdog_instructions = 100000;
    return config;
  }

 protected:
  Semantics() : chip_(config()) {}

  std::optional<KernelFault> run(const std::string& source, int core = 0) {
    const auto words = isa::assemble(source, "test.s");
    chip_.memory().write(kProgram, words.data(), words.size() * 8);
    return chip_.run_kernel(core, kProgram, kData);
  }
  uint64_t reg(int index, int core = 0) const { return chip_.core_state(core).registers[index]; }
  // r3 after running `body`, for scalar instructions.
  uint64_t r3(const std::string& body) {
    const auto fault = run(body + "\n halt\n");
    EXPECT_FALSE(fault) << fault->describe();
    return reg(3);
  }
  std::string trap_of(const std::string& source) {
    const auto fault = run(source);
    EXPECT_TRUE(fault) << source;
    return fault ? fault->cause : "";
  }

  // Puts a, b, c and the output's initial bytes in scratchpad slots 0..3 (r10..r13 hold their addresses), sets
  // r14 = count and r15 = rows, runs `op`, and returns the first `out_bytes` of the output slot.
  std::vector<std::byte> tile(const std::string& op, uint64_t count, uint64_t out_bytes,
                              const std::vector<std::vector<std::byte>>& inputs, uint64_t rows = 0) {
    std::vector<std::byte> image(4 * kSlotBytes);
    for (const auto& input : inputs) EXPECT_LE(input.size(), kSlotBytes) << "an input larger than its slot";
    for (size_t slot = 0; slot < inputs.size(); ++slot)
      std::memcpy(image.data() + slot * kSlotBytes, inputs[slot].data(), inputs[slot].size());
    chip_.memory().write(kData, image.data(), image.size());
    const auto fault = run(fmt::format(
        "li r10, 0\n li r11, 4096\n li r12, 8192\n li r13, 12288\n li r14, {}\n li r15, {}\n li r20, 16384\n"
        " dma.ld.b8 r0, r1, r20, 1\n fence\n {}\n fence\n addi r21, r1, 16384\n li r20, 4096\n"
        " dma.st.b8 r21, r13, r20, 1\n halt\n",
        count, rows, op));
    EXPECT_FALSE(fault) << op << ": " << (fault ? fault->describe() : "");
    std::vector<std::byte> out(out_bytes);
    chip_.memory().read(kData + 4 * kSlotBytes, out.data(), out.size());
    return out;
  }

 public:
  // A vector instruction over a (and b, c) of element type T, giving Out elements, one per input element.
  template <typename T, typename Out = T>
  std::vector<Out> vector_op(const std::string& op, const std::vector<T>& a, const std::vector<T>& b = {},
                             const std::vector<std::byte>& c = {}, const std::vector<Out>& initial_out = {}) {
    return values_of<Out>(
        tile(op, a.size(), a.size() * sizeof(Out), {bytes_of(a), bytes_of(b), c, bytes_of(initial_out)}));
  }

 protected:
  FunctionalChip chip_;
};

// A fixture class per instruction, so each suite carries the instruction's name.
#define NPUSIM_INSTRUCTION(Name, mnemonic, code, operands, timing, types, doc) \
  class Name : public Semantics {};
#include "npusim/isa/instructions.def"
#undef NPUSIM_INSTRUCTION

// ---- scalar arithmetic and logic
TEST_F(Add, WrapsAround) { EXPECT_EQ(r3("li r4, -1\n li r5, 2\n add r3, r4, r5"), 1u); }
TEST_F(Sub, WrapsAround) { EXPECT_EQ(r3("li r5, 1\n sub r3, r0, r5"), ~0ull); }
TEST_F(Mul, KeepsTheLow64Bits) { EXPECT_EQ(r3("li r4, -7\n li r5, 3\n mul r3, r4, r5"), static_cast<uint64_t>(-21)); }
TEST_F(And, Bitwise) { EXPECT_EQ(r3("li r4, 12\n li r5, 10\n and r3, r4, r5"), 8u); }
TEST_F(Or, Bitwise) { EXPECT_EQ(r3("li r4, 12\n li r5, 10\n or r3, r4, r5"), 14u); }
TEST_F(Xor, Bitwise) { EXPECT_EQ(r3("li r4, 12\n li r5, 10\n xor r3, r4, r5"), 6u); }
TEST_F(Sll, MasksTheShiftTo6Bits) { EXPECT_EQ(r3("li r4, 1\n li r5, 65\n sll r3, r4, r5"), 2u); }
TEST_F(Srl, IsLogical) { EXPECT_EQ(r3("li r4, -1\n li r5, 60\n srl r3, r4, r5"), 15u); }
TEST_F(Sra, IsArithmetic) { EXPECT_EQ(r3("li r4, -16\n li r5, 2\n sra r3, r4, r5"), static_cast<uint64_t>(-4)); }
TEST_F(Slt, IsSigned) { EXPECT_EQ(r3("li r4, -1\n li r5, 1\n slt r3, r4, r5"), 1u); }
TEST_F(Sltu, IsUnsigned) { EXPECT_EQ(r3("li r4, -1\n li r5, 1\n sltu r3, r4, r5"), 0u); }
TEST_F(Div, TruncatesTowardZero) { EXPECT_EQ(r3("li r4, -7\n li r5, 2\n div r3, r4, r5"), static_cast<uint64_t>(-3)); }
TEST_F(Div, OverflowWrapsAndZeroDivisorTraps) {
  EXPECT_EQ(r3("li r4, 1\n slli r4, r4, 63\n li r5, -1\n div r3, r4, r5"), uint64_t{1} << 63);
  EXPECT_EQ(trap_of("li r4, 1\n div r3, r4, r0\n halt\n"), "integer division by zero");
}
TEST_F(Divu, IsUnsignedAndTrapsOnZero) {
  EXPECT_EQ(r3("li r4, -2\n li r5, 2\n divu r3, r4, r5"), ~0ull / 2);
  EXPECT_EQ(trap_of("divu r3, r4, r0\n halt\n"), "integer division by zero");
}
TEST_F(Rem, TakesTheDividendsSign) {
  EXPECT_EQ(r3("li r4, -7\n li r5, 2\n rem r3, r4, r5"), static_cast<uint64_t>(-1));
  EXPECT_EQ(trap_of("rem r3, r4, r0\n halt\n"), "integer division by zero");
}
TEST_F(Remu, IsUnsigned) {
  EXPECT_EQ(r3("li r4, -1\n li r5, 10\n remu r3, r4, r5"), ~0ull % 10);
  EXPECT_EQ(trap_of("remu r3, r4, r0\n halt\n"), "integer division by zero");
}
TEST_F(Addi, SignExtendsTheImmediate) { EXPECT_EQ(r3("li r4, 5\n addi r3, r4, -6"), ~0ull); }
TEST_F(Andi, SignExtendsTheImmediate) { EXPECT_EQ(r3("li r4, -1\n andi r3, r4, -16"), ~0ull << 4); }
TEST_F(Ori, SignExtendsTheImmediate) { EXPECT_EQ(r3("ori r3, r0, -1"), ~0ull); }
TEST_F(Xori, SignExtendsTheImmediate) { EXPECT_EQ(r3("li r4, 5\n xori r3, r4, -1"), ~5ull); }
TEST_F(Slli, Shifts) { EXPECT_EQ(r3("li r4, 3\n slli r3, r4, 62"), uint64_t{3} << 62); }
TEST_F(Srli, IsLogical) { EXPECT_EQ(r3("li r4, -1\n srli r3, r4, 63"), 1u); }
TEST_F(Srai, IsArithmetic) { EXPECT_EQ(r3("li r4, -1\n srai r3, r4, 63"), ~0ull); }
TEST_F(Slti, IsSigned) { EXPECT_EQ(r3("li r4, -5\n slti r3, r4, -4"), 1u); }
TEST_F(Li, SignExtends) { EXPECT_EQ(r3("li r3, -2"), static_cast<uint64_t>(-2)); }
TEST_F(Lhi, SetsTheUpperHalf) { EXPECT_EQ(r3("li r3, 7\n lhi r3, 0x12345678"), 0x1234567800000007ull); }
TEST_F(La, FindsTheProgramsDataWhereverItIsLoaded) {
  EXPECT_FALSE(
      run("la r2, table\n li r4, 3\n dma.ld.b32 r0, r2, r4, 4\n fence\n dma.st.b32 r1, r0, r4, 4\n fence\n"
          " halt\n.data\ntable: .float 1.5, -2, 1e-3\n"));
  float values[3];
  chip_.memory().read(kData, values, sizeof values);
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_EQ(values[1], -2.0f);
  EXPECT_EQ(values[2], 1e-3f);
  EXPECT_EQ(r3("la r3, here\nhere: halt"), kProgram + 8);
}
TEST_F(Csrr, ReadsCoreIdentityAndCounts) {
  EXPECT_EQ(r3("csrr r3, ncores"), 2u);
  EXPECT_FALSE(run("csrr r3, coreid\n csrr r4, instret\n halt\n", 1));
  EXPECT_EQ(reg(3, 1), 1u);
  EXPECT_EQ(reg(4, 1), 1u);
}

// ---- scalar memory and control flow
TEST_F(Ld, ReadsSixtyFourBits) {
  const uint64_t value = 0x0123456789abcdefull;
  chip_.memory().write(kData + 8, &value, 8);
  EXPECT_EQ(r3("ld r3, 8(r1)"), value);
}
TEST_F(Lw, ZeroExtends) {
  const uint32_t value = 0xfffffffeu;
  chip_.memory().write(kData, &value, 4);
  EXPECT_EQ(r3("lw r3, 0(r1)"), 0xfffffffeull);
}
TEST_F(St, WritesSixtyFourBitsAndRejectsMisalignment) {
  EXPECT_FALSE(run("li r4, -3\n st r4, 16(r1)\n halt\n"));
  uint64_t value = 0;
  chip_.memory().read(kData + 16, &value, 8);
  EXPECT_EQ(value, static_cast<uint64_t>(-3));
  EXPECT_NE(trap_of("st r4, 3(r1)\n halt\n").find("misaligned"), std::string::npos);
}
TEST_F(Sw, WritesThirtyTwoBits) {
  const uint64_t ones = ~0ull;
  chip_.memory().write(kData, &ones, 8);
  EXPECT_FALSE(run("li r4, 5\n sw r4, 0(r1)\n halt\n"));
  uint64_t value = 0;
  chip_.memory().read(kData, &value, 8);
  EXPECT_EQ(value, 0xffffffff00000005ull);
}
TEST_F(Beq, BranchesWhenEqual) { EXPECT_EQ(r3("li r3, 1\n beq r0, r0, skip\n li r3, 2\nskip: addi r0, r0, 0"), 1u); }
TEST_F(Bne, FallsThroughWhenEqual) {
  EXPECT_EQ(r3("li r3, 1\n bne r0, r0, skip\n li r3, 2\nskip: addi r0, r0, 0"), 2u);
}
TEST_F(Blt, IsSigned) { EXPECT_EQ(r3("li r3, 1\n li r4, -1\n blt r4, r0, skip\n li r3, 2\nskip: addi r0, r0, 0"), 1u); }
TEST_F(Bge, IsSigned) { EXPECT_EQ(r3("li r3, 1\n li r4, -1\n bge r4, r0, skip\n li r3, 2\nskip: addi r0, r0, 0"), 2u); }
TEST_F(Bltu, IsUnsigned) {
  EXPECT_EQ(r3("li r3, 1\n li r4, -1\n bltu r4, r0, skip\n li r3, 2\nskip: addi r0, r0, 0"), 2u);
}
TEST_F(Bgeu, IsUnsigned) {
  EXPECT_EQ(r3("li r3, 1\n li r4, -1\n bgeu r4, r0, skip\n li r3, 2\nskip: addi r0, r0, 0"), 1u);
}
TEST_F(Jal, LinksTheNextAddress) {
  EXPECT_FALSE(run("jal r3, target\n li r4, 9\ntarget: halt\n"));
  EXPECT_EQ(reg(3), kProgram + 8);
  EXPECT_EQ(reg(4), 0u);
}
TEST_F(Jalr, JumpsToRegisterPlusOffset) {
  EXPECT_FALSE(run("jal r5, function\n li r4, 1\n halt\nfunction: li r3, 7\n jalr r0, r5, 0\n"));
  EXPECT_EQ(reg(3), 7u);
  EXPECT_EQ(reg(4), 1u);
}

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

// ---- vector engine: arithmetic in every type, with the broadcast modes
TEST_F(Vadd, IsIeeeFloat32) {
  const std::vector<float> a = {1.5f, -0.0f, kInf, 3e38f, 1e-45f}, b = {2.25f, 0.0f, -kInf, 3e38f, 1e-45f};
  const auto out = vector_op<float>("vadd.f32 r13, r10, r11, r14", a, b);
  for (size_t k = 0; k < a.size(); ++k)
    if (k != 2) EXPECT_EQ(bits(out[k]), bits(a[k] + b[k])) << k;
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_TRUE(std::isinf(out[3]));
  EXPECT_EQ(out[4], 2 * std::numeric_limits<float>::denorm_min());  // denormals are kept, not flushed
}
TEST_F(Vadd, RoundsHalfAndBFloat16OnceToNearestEven) {
  const std::vector<Half> a = {Half(1.0f), Half(2048.0f), Half(65504.0f)},
                          b = {Half(0.0009765625f), Half(1.0f), Half(32.0f)};
  const auto out = vector_op<Half>("vadd.f16 r13, r10, r11, r14", a, b);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(out[k], Half(float(a[k]) + float(b[k]))) << k;
  EXPECT_EQ(float(out[1]), 2048.0f);  // 2049 is a tie between 2048 and 2050: even wins
  const std::vector<BFloat16> c = {BFloat16(1.0f), BFloat16(256.0f)}, d = {BFloat16(0.00390625f), BFloat16(1.0f)};
  const auto bf = vector_op<BFloat16>("vadd.bf16 r13, r10, r11, r14", c, d);
  EXPECT_EQ(float(bf[0]), 1.0f);
  EXPECT_EQ(float(bf[1]), 256.0f);  // 257 rounds to even
}
TEST_F(Vadd, IntegersWrap) {
  EXPECT_EQ((vector_op<int8_t>("vadd.i8 r13, r10, r11, r14", {127, -128}, {1, -1})), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ((vector_op<uint8_t>("vadd.u8 r13, r10, r11, r14", {255}, {2})), (std::vector<uint8_t>{1}));
  EXPECT_EQ((vector_op<int64_t>("vadd.i64 r13, r10, r11, r14", {INT64_MAX}, {1})), (std::vector<int64_t>{INT64_MIN}));
}
TEST_F(Vadd, BroadcastsScalarRowAndColumn) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};  // 2 rows of 3
  EXPECT_EQ(vector_op<float>("vadd.f32 r13, r10, r11, r14, 1", a, {10}), (std::vector<float>{11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(vector_op<float>("vadd.f32 r13, r10, r11, r14, 2 + (3 << 2)", a, {10, 20, 30}),
            (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(vector_op<float>("vadd.f32 r13, r10, r11, r14, 3 + (3 << 2)", a, {10, 20}),
            (std::vector<float>{11, 12, 13, 24, 25, 26}));
  EXPECT_EQ(trap_of("li r14, 4\n vadd.f32 r13, r10, r11, r14, 2\n halt\n"), "broadcast mode 2 with period 0");
}
TEST_F(Vadd, InPlaceScalarBroadcastReadsTheScalarFirst) {
  // out = b: writing out[0] must not change the scalar added to later elements.
  const auto out = tile("vadd.f32 r11, r10, r11, r14, 1\n fence\n vmov.f32 r13, r11, r14", 3, 12,
                        {bytes_of(std::vector<float>{1, 2, 3}), bytes_of(std::vector<float>{10})});
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{11, 12, 13}));
}
TEST_F(Vsub, SubtractsInEveryType) {
  EXPECT_EQ(vector_op<float>("vsub.f32 r13, r10, r11, r14", {1.5f, 0.0f}, {0.25f, 0.0f}),
            (std::vector<float>{1.25f, 0.0f}));
  EXPECT_EQ((vector_op<int32_t>("vsub.i32 r13, r10, r11, r14", {INT32_MIN}, {1})), (std::vector<int32_t>{INT32_MAX}));
}
TEST_F(Vmul, MultipliesInEveryType) {
  const auto out = vector_op<BFloat16>("vmul.bf16 r13, r10, r11, r14", {BFloat16(3.0f)}, {BFloat16(1.0f / 3.0f)});
  EXPECT_EQ(out[0], BFloat16(3.0f * float(BFloat16(1.0f / 3.0f))));
  EXPECT_EQ((vector_op<int8_t>("vmul.i8 r13, r10, r11, r14", {16}, {16})), (std::vector<int8_t>{0}));
}
TEST_F(Vdiv, FloatsFollowIeeeAndIntegersTruncate) {
  const auto out = vector_op<float>("vdiv.f32 r13, r10, r11, r14", {1.0f, 1.0f, 0.0f}, {3.0f, 0.0f, 0.0f});
  EXPECT_EQ(bits(out[0]), bits(1.0f / 3.0f));
  EXPECT_EQ(out[1], kInf);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ((vector_op<int32_t>("vdiv.i32 r13, r10, r11, r14", {-7, INT32_MIN}, {2, -1})),
            (std::vector<int32_t>{-3, INT32_MIN}));
  EXPECT_EQ(trap_of("li r14, 1\n vfill.i32 r11, r14, 0\n vdiv.i32 r13, r10, r11, r14\n halt\n"),
            "integer division by zero in vdiv");
}
TEST_F(Vmax, PropagatesNan) {
  const auto out = vector_op<float>("vmax.f32 r13, r10, r11, r14", {1.0f, kNan, -0.5f}, {2.0f, 0.0f, kNan});
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_TRUE(std::isnan(out[1]) && std::isnan(out[2]));
  EXPECT_EQ((vector_op<int8_t>("vmax.i8 r13, r10, r11, r14", {-5}, {3})), (std::vector<int8_t>{3}));
}
TEST_F(Vmin, PropagatesNan) {
  const auto out = vector_op<float>("vmin.f32 r13, r10, r11, r14", {1.0f, kNan}, {2.0f, 0.0f});
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ((vector_op<uint8_t>("vmin.u8 r13, r10, r11, r14", {200}, {3})), (std::vector<uint8_t>{3}));
}
TEST_F(Vand, IsBitwiseOnIntegers) {
  EXPECT_EQ((vector_op<int32_t>("vand.i32 r13, r10, r11, r14", {0x0ff0}, {0x00ff})), (std::vector<int32_t>{0x00f0}));
}
TEST_F(Vor, IsBitwiseOnIntegers) {
  EXPECT_EQ((vector_op<uint8_t>("vor.u8 r13, r10, r11, r14", {0xf0}, {0x0f})), (std::vector<uint8_t>{0xff}));
}
TEST_F(Vxor, IsBitwiseOnIntegers) {
  EXPECT_EQ((vector_op<int64_t>("vxor.i64 r13, r10, r11, r14", {-1}, {1})), (std::vector<int64_t>{-2}));
}

// ---- compares give bool bytes; select merges under a mask
TEST_F(Vceq, IsFalseForNan) {
  EXPECT_EQ((vector_op<float, uint8_t>("vceq.f32 r13, r10, r11, r14", {1.0f, kNan, -0.0f}, {1.0f, kNan, 0.0f})),
            (std::vector<uint8_t>{1, 0, 1}));
}
TEST_F(Vcne, IsTrueForNan) {
  EXPECT_EQ((vector_op<float, uint8_t>("vcne.f32 r13, r10, r11, r14", {1.0f, kNan}, {1.0f, kNan})),
            (std::vector<uint8_t>{0, 1}));
}
TEST_F(Vclt, ComparesSignedAndUnsigned) {
  EXPECT_EQ((vector_op<int8_t, uint8_t>("vclt.i8 r13, r10, r11, r14", {-1, 5}, {0, 5})), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ((vector_op<uint8_t, uint8_t>("vclt.u8 r13, r10, r11, r14", {255}, {0})), (std::vector<uint8_t>{0}));
  EXPECT_EQ((vector_op<float, uint8_t>("vclt.f32 r13, r10, r11, r14, 1", {-1.0f, kNan, 3.0f}, {0.0f})),
            (std::vector<uint8_t>{1, 0, 0}));
}
TEST_F(Vcle, IncludesEquality) {
  EXPECT_EQ(
      (vector_op<Half, uint8_t>("vcle.f16 r13, r10, r11, r14", {Half(1.0f), Half(2.0f)}, {Half(1.0f), Half(1.0f)})),
      (std::vector<uint8_t>{1, 0}));
}
TEST_F(Vsel, MergesWhereTheMaskIsSet) {
  const std::vector<uint8_t> mask = {1, 0, 1, 0};
  const auto out = vector_op<float>("vsel.f32 r13, r12, r11, r14", {0, 0, 0, 0}, {1, 2, 3, 4}, bytes_of(mask),
                                    std::vector<float>{9, 9, 9, 9});
  EXPECT_EQ(out, (std::vector<float>{1, 9, 3, 9}));
  const auto filled = vector_op<float>("vsel.f32 r13, r12, r11, r14, 1", {0, 0, 0, 0}, {-kInf}, bytes_of(mask),
                                       std::vector<float>{9, 9, 9, 9});
  EXPECT_EQ(filled, (std::vector<float>{-kInf, 9, -kInf, 9}));  // masked_fill with a scalar
}
TEST_F(Vfill, TakesImmediateBitsForFloatsAndValuesForIntegers) {
  EXPECT_EQ(values_of<float>(tile("vfill.f32 r13, r14, 0x3fc00000", 3, 12, {})),
            (std::vector<float>{1.5f, 1.5f, 1.5f}));
  EXPECT_EQ(values_of<Half>(tile("vfill.f16 r13, r14, 0x3c00", 2, 4, {})), (std::vector<Half>{Half(1.0f), Half(1.0f)}));
  EXPECT_EQ(values_of<BFloat16>(tile("vfill.bf16 r13, r14, 0xbf80", 1, 2, {})),
            (std::vector<BFloat16>{BFloat16(-1.0f)}));
  EXPECT_EQ(values_of<int64_t>(tile("vfill.i64 r13, r14, -3", 2, 16, {})), (std::vector<int64_t>{-3, -3}));
  EXPECT_EQ(values_of<uint8_t>(tile("vfill.bool r13, r14, 7", 2, 2, {})), (std::vector<uint8_t>{1, 1}));
}
TEST_F(Vmov, CopiesOverlappingRegions) {
  const auto out = tile("vmov.i32 r13, r10, r14\n fence\n addi r16, r13, 4\n vmov.i32 r16, r13, r14", 3, 16,
                        {bytes_of(std::vector<int32_t>{1, 2, 3})});
  EXPECT_EQ(values_of<int32_t>(out), (std::vector<int32_t>{1, 1, 2, 3}));
}

// ---- conversions
TEST_F(Vcvt, FloatToFloatRoundsToNearestEven) {
  const std::vector<float> in = {1.0009765625f * 1.5f, 65520.0f, 1e-8f, kNan};
  const auto half = vector_op<float, Half>("vcvt.f16.f32 r13, r10, r14", in);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(bits(float(half[k])), bits(float(Half(in[k])))) << k;
  EXPECT_TRUE(std::isinf(float(half[1])));  // past f16's largest finite value
  EXPECT_TRUE(std::isnan(float(half[3])));
  const auto bf = vector_op<float, BFloat16>("vcvt.bf16.f32 r13, r10, r14", {1.00390625f, 1.01171875f});
  EXPECT_EQ(float(bf[0]), 1.0f);       // tie: to even
  EXPECT_EQ(float(bf[1]), 1.015625f);  // tie: to even (up)
}
TEST_F(Vcvt, FloatToIntegerTruncatesAndSaturates) {
  EXPECT_EQ((vector_op<float, int8_t>("vcvt.i8.f32 r13, r10, r14", {-2.7f, 2.7f, 300.0f, -300.0f, kNan})),
            (std::vector<int8_t>{-2, 2, 127, -128, 0}));
  EXPECT_EQ((vector_op<float, int64_t>("vcvt.i64.f32 r13, r10, r14", {1e30f, -1e30f})),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN}));
  EXPECT_EQ((vector_op<float, uint8_t>("vcvt.u8.f32 r13, r10, r14", {-1.0f, 255.9f})), (std::vector<uint8_t>{0, 255}));
}
TEST_F(Vcvt, IntegersSaturateAndBoolTestsForNonZero) {
  EXPECT_EQ((vector_op<int32_t, int8_t>("vcvt.i8.i32 r13, r10, r14", {1000, -1000, 5})),
            (std::vector<int8_t>{127, -128, 5}));
  EXPECT_EQ((vector_op<int64_t, uint8_t>("vcvt.u8.i64 r13, r10, r14", {-1, 256})), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ((vector_op<float, uint8_t>("vcvt.bool.f32 r13, r10, r14", {0.0f, -0.0f, 0.5f, kNan})),
            (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ((vector_op<uint8_t, float>("vcvt.f32.bool r13, r10, r14", {0, 1})), (std::vector<float>{0.0f, 1.0f}));
  EXPECT_EQ((vector_op<int32_t, float>("vcvt.f32.i32 r13, r10, r14", {16777217})), (std::vector<float>{16777216.0f}));
}
TEST_F(Vcvt, ConvertsInPlaceToAWiderType) {
  const auto out = tile("vcvt.f32.f16 r10, r10, r14\n fence\n vmov.f32 r13, r10, r14", 2, 8,
                        {bytes_of(std::vector<Half>{Half(0.5f), Half(-2.0f)})});
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{0.5f, -2.0f}));
}

// ---- unary functions. Special functions are within 1 ulp of the exact value (long double reference here).
int64_t ulp_distance(float a, float b) {
  const auto ordered = [](float x) {
    const int32_t i = std::bit_cast<int32_t>(x);
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  return std::llabs(ordered(a) - ordered(b));
}
std::vector<float> sample_inputs(float low, float high) {
  std::mt19937 random(11);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(1000);
  for (float& value : values) value = uniform(random);
  return values;
}
// Runs a special function over 1000 random inputs in [low, high] and checks the worst error against `reference`
// (an expression of the long double x).
#define EXPECT_SPECIAL_WITHIN_ONE_ULP(mnemonic, low, high, reference)               \
  do {                                                                              \
    const std::vector<float> in = sample_inputs(low, high);                         \
    const auto out = vector_op<float>(mnemonic " r13, r10, r14", in);               \
    int64_t worst = 0;                                                              \
    for (size_t k = 0; k < in.size(); ++k) {                                        \
      const long double x = in[k];                                                  \
      worst = std::max(worst, ulp_distance(out[k], static_cast<float>(reference))); \
    }                                                                               \
    EXPECT_LE(worst, 1) << mnemonic;                                                \
  } while (false)

TEST_F(Vneg, NegatesAndWrapsIntegers) {
  const auto out = vector_op<float>("vneg.f32 r13, r10, r14", {0.0f, 1.5f});
  EXPECT_TRUE(std::signbit(out[0]));
  EXPECT_EQ(out[1], -1.5f);
  EXPECT_EQ((vector_op<int8_t>("vneg.i8 r13, r10, r14", {-128, 5})), (std::vector<int8_t>{-128, -5}));
}
TEST_F(Vabs, ClearsTheSign) {
  EXPECT_EQ(vector_op<float>("vabs.f32 r13, r10, r14", {-0.0f, -3.0f})[1], 3.0f);
  EXPECT_FALSE(std::signbit(vector_op<float>("vabs.f32 r13, r10, r14", {-0.0f})[0]));
  EXPECT_EQ((vector_op<int32_t>("vabs.i32 r13, r10, r14", {-7, INT32_MIN})), (std::vector<int32_t>{7, INT32_MIN}));
}
TEST_F(Vexp, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vexp.f32", -80.0f, 80.0f, std::exp(x));
  const auto edges = vector_op<float>("vexp.f32 r13, r10, r14", {-kInf, kInf, kNan, 100.0f});
  EXPECT_EQ(edges[0], 0.0f);
  EXPECT_EQ(edges[1], kInf);
  EXPECT_TRUE(std::isnan(edges[2]));
  EXPECT_EQ(edges[3], kInf);
  EXPECT_EQ(vector_op<BFloat16>("vexp.bf16 r13, r10, r14", {BFloat16(1.0f)})[0], BFloat16(std::exp(1.0f)));
}
TEST_F(Vlog, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vlog.f32", 1e-30f, 1e30f, std::log(x));
  const auto edges = vector_op<float>("vlog.f32 r13, r10, r14", {0.0f, -1.0f, 1e-45f});
  EXPECT_EQ(edges[0], -kInf);
  EXPECT_TRUE(std::isnan(edges[1]));
  EXPECT_EQ(edges[2], static_cast<float>(std::log(static_cast<double>(1e-45f))));  // a denormal input
}
TEST_F(Vtanh, MatchesReferenceWithinOneUlp) { EXPECT_SPECIAL_WITHIN_ONE_ULP("vtanh.f32", -10.0f, 10.0f, std::tanh(x)); }
TEST_F(Vsigmoid, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vsigmoid.f32", -30.0f, 30.0f, 1.0L / (1.0L + std::exp(-x)));
  const auto edges = vector_op<float>("vsigmoid.f32 r13, r10, r14", {-kInf, kInf});
  EXPECT_EQ(edges[0], 0.0f);
  EXPECT_EQ(edges[1], 1.0f);
}
TEST_F(Verf, MatchesReferenceWithinOneUlp) { EXPECT_SPECIAL_WITHIN_ONE_ULP("verf.f32", -5.0f, 5.0f, std::erf(x)); }
TEST_F(Vrsqrt, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vrsqrt.f32", 1e-30f, 1e30f, 1.0L / std::sqrt(x));
  EXPECT_EQ(vector_op<float>("vrsqrt.f32 r13, r10, r14", {0.0f})[0], kInf);
}
TEST_F(Vrecip, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vrecip.f32", -1e30f, 1e30f, 1.0L / x);
  EXPECT_EQ(vector_op<float>("vrecip.f32 r13, r10, r14", {-0.0f})[0], -kInf);
}
TEST_F(Vsqrt, MatchesReferenceWithinOneUlp) {
  EXPECT_SPECIAL_WITHIN_ONE_ULP("vsqrt.f32", 0.0f, 1e30f, std::sqrt(x));
  EXPECT_TRUE(std::isnan(vector_op<float>("vsqrt.f32 r13, r10, r14", {-1.0f})[0]));
}

// ---- row reductions: r15 rows of r14 columns
TEST_F(Vrsum, SumsEachRowInColumnOrder) {
  const std::vector<float> in = {1e8f, 1.0f, -1e8f, 1.0f, 2.0f, 3.0f};
  const auto out = values_of<float>(tile("vrsum.f32 r13, r10, r15, r14", 3, 8, {bytes_of(in)}, 2));
  EXPECT_EQ(out, (std::vector<float>{(1e8f + 1.0f) - 1e8f, 6.0f}));  // the 1 is lost, as in sequential f32 sums
  const auto ints = values_of<int32_t>(
      tile("vrsum.i32 r13, r10, r15, r14", 2, 8, {bytes_of(std::vector<int32_t>{INT32_MAX, 1, -5, 2})}, 2));
  EXPECT_EQ(ints, (std::vector<int32_t>{INT32_MIN, -3}));
}
TEST_F(Vrmax, PropagatesNan) {
  const std::vector<float> in = {1.0f, 5.0f, 2.0f, kNan, 0.0f, 1.0f};
  const auto out = values_of<float>(tile("vrmax.f32 r13, r10, r15, r14", 3, 8, {bytes_of(in)}, 2));
  EXPECT_EQ(out[0], 5.0f);
  EXPECT_TRUE(std::isnan(out[1]));
}
TEST_F(Vrmin, TakesTheSmallest) {
  const auto out =
      values_of<int8_t>(tile("vrmin.i8 r13, r10, r15, r14", 2, 2, {bytes_of(std::vector<int8_t>{3, -4, 7, 7})}, 2));
  EXPECT_EQ(out, (std::vector<int8_t>{-4, 7}));
}
TEST_F(Vargmax, GivesTheFirstIndexAsI64AndNanWins) {
  const std::vector<float> in = {1.0f, 5.0f, 5.0f, 2.0f, kNan, 9.0f};
  const auto out = values_of<int64_t>(tile("vargmax.f32 r13, r10, r15, r14", 3, 16, {bytes_of(in)}, 2));
  EXPECT_EQ(out, (std::vector<int64_t>{1, 1}));
}
TEST_F(Vargmin, GivesTheFirstIndexAsI64) {
  const std::vector<Half> in = {Half(3.0f), Half(-1.0f), Half(-1.0f)};
  EXPECT_EQ(values_of<int64_t>(tile("vargmin.f16 r13, r10, r15, r14", 3, 8, {bytes_of(in)}, 1)),
            (std::vector<int64_t>{1}));
}

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

// ---- synchronisation
TEST_F(Fence, IsANoOpForTheEmulator) { EXPECT_EQ(r3("li r3, 4\n fence"), 4u); }
TEST_F(Halt, EndsTheKernel) { EXPECT_EQ(r3("li r3, 4\n halt\n li r3, 5"), 4u); }
TEST_F(RaiseTrap, StopsWithItsCode) {
  const auto fault = run("li r3, 1\n trap 42\n halt\n");
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->cause, "trap instruction, code 42");
  EXPECT_EQ(fault->pc, kProgram + 8);
  EXPECT_EQ(fault->instruction, "trap 42");
}
TEST_F(SemPostDma, LetsALaterWaitProceed) { EXPECT_EQ(r3("sem.post.dma 3\n sem.wait.mx 3\n li r3, 1"), 1u); }
TEST_F(SemPostVector, CountsPosts) {
  EXPECT_EQ(r3("sem.post.vec 0\n sem.post.vec 0\n sem.wait.dma 0\n sem.wait.dma 0\n li r3, 2"), 2u);
}
TEST_F(SemPostMatrix, RejectsSemaphoresThatDoNotExist) {
  EXPECT_EQ(trap_of("sem.post.mx 16\n halt\n"), "semaphore 16 does not exist (0..15)");
}
TEST_F(SemWaitDma, WithoutAnEarlierPostIsADeadlock) {
  EXPECT_EQ(trap_of("sem.wait.dma 1\n sem.post.mx 1\n halt\n"),
            "deadlock: this wait on semaphore 1 can never complete: it needs post number 1 and no earlier instruction "
            "posts it");
}
TEST_F(SemWaitVector, EachWaitConsumesOnePost) {
  EXPECT_NE(trap_of("sem.post.dma 2\n sem.wait.vec 2\n sem.wait.vec 2\n halt\n").find("post number 2"),
            std::string::npos);
}
TEST_F(SemWaitMatrix, SemaphoresStartAtZeroInEveryKernel) {
  EXPECT_FALSE(run("sem.post.dma 5\n halt\n"));
  EXPECT_NE(trap_of("sem.wait.mx 5\n halt\n").find("deadlock"), std::string::npos);
}

// ---- barrier and the command processor's instructions, through the firmware on a two-core device
std::unique_ptr<runtime::Device> two_core_device() {
  return std::make_unique<runtime::Device>(Semantics::config(), runtime::Mode::Functional);
}

TEST_F(Barrier, OrdersCoreToCoreMovesBetweenCores) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  // Each core sends its id + 100 to the other core's scratchpad, meets it at the barrier, then stores what it got.
  const auto program = isa::assemble(
      "csrr r2, coreid\n addi r3, r2, 100\n li r4, 8\n li r5, 0\n li r6, 0\n ld r7, 0(r1)\n"
      " addi r8, r2, 0\n xori r9, r2, 1\n li r10, 64\n li r11, 16\n"
      " li r12, 128\n st r3, 0(r7)\n slli r13, r2, 3\n add r13, r13, r7\n st r3, 0(r13)\n fence\n"
      " dma.ld.b8 r12, r13, r4, 1\n fence\n dma.c2c r10, r12, r9, r4\n barrier\n"
      " slli r14, r2, 3\n add r14, r14, r7\n addi r14, r14, 16\n dma.st.b8 r14, r10, r4, 1\n fence\n halt\n",
      "barrier.s");
  const uint64_t out = device.allocate(64);
  const uint64_t arguments[] = {out};
  device.launch("exchange", device.load_program(program), arguments, 0b11);
  uint64_t received[2] = {};
  device.copy_device_to_host(received, out + 16, 16);
  EXPECT_EQ(received[0], 101u);  // core 0 got core 1's message
  EXPECT_EQ(received[1], 100u);
}
TEST_F(Barrier, ThatACoreNeverReachesIsADeadlockNamingIt) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const auto program = isa::assemble("csrr r2, coreid\n beq r2, r0, skip\n barrier\nskip: halt\n", "deadlock.s");
  const uint64_t arguments[] = {0};
  try {
    device.launch("half_barrier", device.load_program(program), arguments, 0b11);
    ADD_FAILURE() << "no error";
  } catch (const runtime::DeviceError& error) {
    EXPECT_NE(std::string(error.what()).find("core 1, pc"), std::string::npos) << error.what();
    EXPECT_NE(
        std::string(error.what()).find("(barrier): deadlock: this barrier can never complete: core 0 halted instead"),
        std::string::npos)
        << error.what();
  }
  // The device stays usable.
  const auto fine = isa::assemble("barrier\n halt\n", "fine.s");
  EXPECT_NO_THROW(device.launch("full_barrier", device.load_program(fine), arguments, 0b11));
  // A launch of one core meets itself at the barrier.
  EXPECT_NO_THROW(device.launch("lonely_barrier", device.load_program(fine), arguments, 0b01));
}
TEST_F(Launch, StartsTheCoresOfTheMaskWithTheirArguments) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const auto program = isa::assemble(
      "ld r2, 0(r1)\n csrr r3, coreid\n slli r4, r3, 3\n add r2, r2, r4\n"
      " addi r3, r3, 7\n st r3, 0(r2)\n halt\n",
      "launch.s");
  const uint64_t out = device.allocate(16);
  const uint64_t zero[2] = {};
  device.copy_host_to_device(out, zero, 16);
  const uint64_t arguments[] = {out};
  device.launch("ids", device.load_program(program), arguments, 0b10);
  uint64_t written[2] = {};
  device.copy_device_to_host(written, out, 16);
  EXPECT_EQ(written[0], 0u);  // core 0 was not in the mask
  EXPECT_EQ(written[1], 8u);
}
TEST_F(Wait, ReportsTheFaultingCore) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const auto program = isa::assemble("csrr r2, coreid\n beq r2, r0, fine\n trap 7\nfine: halt\n", "wait.s");
  const uint64_t arguments[] = {0};
  try {
    device.launch("one_traps", device.load_program(program), arguments, 0b11);
    ADD_FAILURE() << "no error";
  } catch (const runtime::DeviceError& error) {
    EXPECT_NE(std::string(error.what()).find("core 1, pc"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("trap instruction, code 7"), std::string::npos) << error.what();
  }
}
TEST_F(Wfd, FirmwareSleepsUntilEachCommand) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const auto program = isa::assemble("halt\n", "empty.s");
  const uint64_t arguments[] = {0};
  for (int k = 0; k < 3; ++k) device.launch("empty", device.load_program(program), arguments, 1);
  EXPECT_EQ(device.take_records().size(), 3u);
}
TEST_F(CopyH2D, CopiesUnalignedSizes) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  std::vector<uint8_t> data(1001), back(1001);
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k * 13);
  const uint64_t buffer = device.allocate(2048);
  device.copy_host_to_device(buffer + 3, data.data(), data.size());
  device.copy_device_to_host(back.data(), buffer + 3, back.size());
  EXPECT_EQ(back, data);
}
TEST_F(CopyD2H, CopiesUnalignedSizes) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const uint64_t buffer = device.allocate(64);
  const char text[] = "npusim";
  device.copy_host_to_device(buffer, text, sizeof text);
  char back[sizeof text] = {};
  device.copy_device_to_host(back, buffer + 2, sizeof text - 2);
  EXPECT_STREQ(back, "usim");
}
TEST_F(CopyD2D, CopiesWithinTheDevice) {
  const auto owner = two_core_device();
  runtime::Device& device = *owner;
  const uint64_t a = device.allocate(64), b = device.allocate(64);
  const uint64_t value = 0xfeedull;
  device.copy_host_to_device(a, &value, 8);
  device.copy_device_to_device(b + 8, a, 8);
  uint64_t back = 0;
  device.copy_device_to_host(&back, b + 8, 8);
  EXPECT_EQ(back, value);
}

// ---- tile operations against plain reference loops, on random data, for every type they take

template <typename T>
std::vector<T> random_values(size_t count, std::mt19937& random) {
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::vector<T> values(count);
  for (T& value : values) {
    if constexpr (std::is_integral_v<T>)
      value = static_cast<T>(static_cast<int>(uniform(random) * 30));
    else
      value = T(uniform(random));
  }
  return values;
}

// A K x N weight tile on a 16 x 16 array times M rows, twice (the second accumulating), against a loop that sums
// each output in k order: M = 9 and N = 16 or 7 cover full register blocks and every kind of edge.
template <typename T, typename Acc>
void check_matrix_against_reference(const std::string& type, const std::string& out_type) {
  config::ChipConfig config = Semantics::config();
  config.core_systolic_rows = config.core_systolic_cols = 16;
  FunctionalChip chip(config);
  std::mt19937 random(5);
  for (const uint64_t n : {16, 7}) {
    const uint64_t m = 9, k = 16;
    const std::vector<T> a = random_values<T>(m * k, random), w = random_values<T>(k * n, random);
    chip.memory().write(kData, a.data(), a.size() * sizeof(T));
    chip.memory().write(kData + 0x4000, w.data(), w.size() * sizeof(T));
    const auto program = isa::assemble(
        fmt::format("li r2, {0}\n dma.ld.b8 r0, r1, r2, 1\n li r3, 0x4000\n add r4, r1, r3\n li r2, {1}\n"
                    " dma.ld.b8 r3, r4, r2, 1\n fence\n li r5, {2}\n li r6, {3}\n li r7, {4}\n"
                    " mx.ldw.{5} r3, r5, r6\n mx.mac.{5} r0, r0, r7, 0\n mx.mac.{5} r0, r0, r7, 1\n li r8, {6}\n"
                    " li r9, 0x8000\n mx.st.{7} r9, r0, r8\n fence\n add r10, r1, r9\n li r2, {8}\n"
                    " dma.st.b8 r10, r9, r2, 1\n fence\n halt\n",
                    a.size() * sizeof(T), w.size() * sizeof(T), k, n, m, type, m * n, out_type, m * n * 4),
        "matrix.s");
    chip.memory().write(kProgram, program.data(), program.size() * 8);
    ASSERT_FALSE(chip.run_kernel(0, kProgram, kData));
    std::vector<Acc> out(m * n);
    chip.memory().read(kData + 0x8000, out.data(), out.size() * sizeof(Acc));
    for (uint64_t row = 0; row < m; ++row)
      for (uint64_t col = 0; col < n; ++col) {
        Acc partial{};
        for (uint64_t depth = 0; depth < k; ++depth) {
          if constexpr (std::is_integral_v<Acc>)
            partial = static_cast<Acc>(static_cast<uint32_t>(partial) +
                                       static_cast<uint32_t>(a[row * k + depth] * w[depth * n + col]));
          else
            partial += static_cast<float>(a[row * k + depth]) * static_cast<float>(w[depth * n + col]);
        }
        EXPECT_EQ(out[row * n + col], static_cast<Acc>(partial + partial)) << type << " " << row << "," << col;
      }
  }
}
TEST(MatrixTiles, MatchAPlainReferenceLoopOnRandomDataForEveryInputType) {
  check_matrix_against_reference<float, float>("f32", "f32");
  check_matrix_against_reference<Half, float>("f16", "f32");
  check_matrix_against_reference<BFloat16, float>("bf16", "f32");
  check_matrix_against_reference<int8_t, int32_t>("i8", "i32");
}

// Elementwise arithmetic on random elements of each numeric type (as many as a 4 KiB slot holds, up to 1000)
// against the same operation in a loop.
template <typename T>
void check_vector_against_reference(Semantics& test, const std::string& type) {
  std::mt19937 random(9);
  const size_t count = std::min<size_t>(1000, kSlotBytes / sizeof(T));
  const std::vector<T> a = random_values<T>(count, random), b = random_values<T>(count, random);
  const auto reference = [&](auto operation) {
    std::vector<T> expected(a.size());
    for (size_t k = 0; k < a.size(); ++k) {
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        expected[k] = T(operation(static_cast<float>(a[k]), static_cast<float>(b[k])));
      else
        expected[k] = static_cast<T>(operation(static_cast<int64_t>(a[k]), static_cast<int64_t>(b[k])));
    }
    return expected;
  };
  const auto bits_of = [](const std::vector<T>& values) { return bytes_of(values); };
  EXPECT_EQ(bits_of(test.vector_op<T>(fmt::format("vadd.{} r13, r10, r11, r14", type), a, b)),
            bits_of(reference([](auto x, auto y) { return x + y; })))
      << type;
  EXPECT_EQ(bits_of(test.vector_op<T>(fmt::format("vsub.{} r13, r10, r11, r14", type), a, b)),
            bits_of(reference([](auto x, auto y) { return x - y; })))
      << type;
  EXPECT_EQ(bits_of(test.vector_op<T>(fmt::format("vmul.{} r13, r10, r11, r14", type), a, b)),
            bits_of(reference([](auto x, auto y) { return x * y; })))
      << type;
  EXPECT_EQ(bits_of(test.vector_op<T>(fmt::format("vmax.{} r13, r10, r11, r14", type), a, b)),
            bits_of(reference([](auto x, auto y) { return x < y ? y : x; })))
      << type;
}
class VectorTiles : public Semantics {};
TEST_F(VectorTiles, MatchAPlainReferenceLoopOnRandomDataForEveryNumericType) {
  check_vector_against_reference<float>(*this, "f32");
  check_vector_against_reference<Half>(*this, "f16");
  check_vector_against_reference<BFloat16>(*this, "bf16");
  check_vector_against_reference<int8_t>(*this, "i8");
  check_vector_against_reference<uint8_t>(*this, "u8");
  check_vector_against_reference<int32_t>(*this, "i32");
  check_vector_against_reference<int64_t>(*this, "i64");
}

// Every row of the table has a suite above named after it.
TEST(InstructionTable, EveryInstructionHasASemanticsTest) {
  std::set<std::string> suites;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int k = 0; k < unit.total_test_suite_count(); ++k) suites.insert(unit.GetTestSuite(k)->name());
  for (const isa::InstructionInfo& row : isa::kInstructionTable)
    EXPECT_TRUE(suites.contains(std::string(row.name)))
        << row.name << " (" << row.mnemonic << ") has no semantics test";
}

}  // namespace
}  // namespace npusim::emulator
