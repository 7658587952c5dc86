// Scalar arithmetic, logic, memory, control flow and CSRs.
#include "semantics_fixture.h"

namespace npusim::emulator::semantics_test {

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

}  // namespace npusim::emulator::semantics_test
