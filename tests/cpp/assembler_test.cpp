// Assembler features and diagnostics.
#include "npusim/isa/assembler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "npusim/isa/encoding.h"

namespace npusim::isa {
namespace {

AssemblyError error_of(const std::string& source) {
  try {
    assemble(source, "test.s");
  } catch (const AssemblyError& error) {
    return error;
  }
  ADD_FAILURE() << "no error for:\n" << source;
  return AssemblyError({}, "", "");
}

TEST(Assembler, EncodesOperandsInTableOrder) {
  const auto words = assemble("vadd.f32 r1, r2, r3, r4\n", "t.s");
  EXPECT_EQ(decode(words[0]), (Instruction{Opcode::Vadd, 1, 2, 3, 4}));
}

TEST(Assembler, EncodesTypeSuffixesAndTheOptionalImmediate) {
  const auto words = assemble("vmul.bf16 r1, r2, r3, r4, 2 + (8 << 2)\n vcvt.i8.f32 r5, r6, r7\n", "t.s");
  Instruction multiply{Opcode::Vmul, 1, 2, 3, 4, ElementType::BF16, 2 + (8 << 2)};
  EXPECT_EQ(decode(words[0]), multiply);
  Instruction convert{Opcode::Vcvt, 5, 6, 0, 7, ElementType::I8, static_cast<int32_t>(ElementType::F32)};
  EXPECT_EQ(decode(words[1]), convert);
}

TEST(Assembler, ResolvesForwardLabelsAsRelativeInstructionCounts) {
  const auto words = assemble("  beq r1, r2, done\n  li r3, 1\ndone: halt\n", "t.s");
  EXPECT_EQ(decode(words[0]).imm, 2);
}

TEST(Assembler, EvaluatesConstantsAndExpressions) {
  const auto words = assemble(".equ BASE, 0x1000\n.equ SLOT, 1 << 6\n  ld r1, BASE + 2*SLOT - 8(r2)\n", "t.s");
  EXPECT_EQ(decode(words[0]), (Instruction{Opcode::Ld, 1, 2, 0, 0, ElementType::F32, 0x1000 + 128 - 8}));
}

TEST(Assembler, EmitsDataWords) { EXPECT_EQ(assemble(".dword 7, -1\n", "t.s"), (std::vector<uint64_t>{7, ~0ull})); }

TEST(Assembler, FollowsIncludes) {
  const auto dir = std::filesystem::temp_directory_path() / "npusim_assembler_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "constants.inc") << ".equ ANSWER, 42\n";
  std::ofstream(dir / "main.s") << ".include \"constants.inc\"\n li r1, ANSWER\n";
  EXPECT_EQ(decode(assemble_file(dir / "main.s")[0]).imm, 42);
}

TEST(Assembler, RejectsUnknownMnemonicWithLocation) {
  const AssemblyError error = error_of("  halt\n  frobnicate r1\n");
  EXPECT_EQ(error.where().line, 2);
  EXPECT_EQ(error.where().column, 3);
  EXPECT_STREQ(error.what(), "test.s:2:3: unknown mnemonic 'frobnicate'\n  frobnicate r1\n  ^");
}

TEST(Assembler, RejectsWrongOperandCount) {
  EXPECT_NE(std::string(error_of("add r1, r2\n").what()).find("'add' takes 3 operands (d,s,t), found 2"),
            std::string::npos);
}

TEST(Assembler, RejectsBadRegisterAtItsColumn) {
  const AssemblyError error = error_of("add r1, r32, r2\n");
  EXPECT_EQ(error.where().column, 9);
  EXPECT_EQ(error.message(), "expected a register r0..r31, found 'r32'");
}

TEST(Assembler, RejectsImmediateThatDoesNotFit) {
  EXPECT_EQ(error_of("li r1, 0x100000000\n").message(), "value 4294967296 does not fit the signed 32-bit immediate");
}

TEST(Assembler, RejectsUndefinedSymbolAtItsColumn) {
  const AssemblyError error = error_of("li r1, 4 + MISSING\n");
  EXPECT_EQ(error.where().column, 12);
  EXPECT_EQ(error.message(), "undefined symbol 'MISSING'");
}

TEST(Assembler, ExpressionsWrapLikeRegistersAndRejectOverflowingDivision) {
  EXPECT_EQ(assemble(".dword 0x7fffffffffffffff + 1\n", "t.s")[0], uint64_t{1} << 63);
  EXPECT_EQ(error_of(".dword (1 << 63) / -1\n").message(), "division overflows 64 bits");
  EXPECT_EQ(error_of(".dword 5 % 0\n").message(), "division by zero in expression");
}

TEST(Assembler, RejectsDuplicateLabel) {
  EXPECT_EQ(error_of("a: halt\na: halt\n").message(), "'a' is already defined");
}

TEST(Assembler, RejectsUnknownDirective) { EXPECT_EQ(error_of(".bogus 1\n").message(), "unknown directive '.bogus'"); }

TEST(Assembler, RejectsMissingInclude) {
  EXPECT_EQ(error_of(".include \"nowhere.inc\"\n").message(), "cannot open include file 'nowhere.inc'");
}

}  // namespace
}  // namespace npusim::isa
