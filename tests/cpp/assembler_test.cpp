// Assembler features and diagnostics.
#include "npusim/isa/assembler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

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

// LLVM-MC style: each line of data/encodings.s is one instruction with its expected word beside it.
TEST(Assembler, MatchesGoldenEncodings) {
  std::ifstream file(std::filesystem::path(NPUSIM_TEST_DATA_DIR) / "encodings.s");
  ASSERT_TRUE(file);
  std::set<std::string> covered;
  std::string line;
  while (std::getline(file, line)) {
    const size_t marker = line.find("# encoding: ");
    if (marker == std::string::npos || line.starts_with('#')) continue;
    const std::string text = line.substr(0, marker);
    const uint64_t expected = std::stoull(line.substr(marker + 12), nullptr, 16);
    const std::vector<uint64_t> words = assemble(text, "encodings.s");
    ASSERT_EQ(words.size(), 1u) << text;
    EXPECT_EQ(words[0], expected) << text;
    covered.insert(std::string(info(decode(words[0]).opcode).name));
  }
  EXPECT_EQ(covered.size(), kInstructionTable.size()) << "encodings.s should hold every instruction";
}

TEST(Assembler, PlacesDataAfterTextAndPacksDataDirectives) {
  const auto words = assemble(
      ".data\ntable: .byte 1, 2, -1\n .half 0x1234\n .word -2, 7\n .float 1.5\n"
      ".text\n la r2, table\n la r3, last\n halt\n"
      ".section .data\nlast: .dword 9\n",
      "sections.s");
  ASSERT_EQ(words.size(), 3u + 5u);
  EXPECT_EQ(decode(words[0]).imm, 3);      // la at 0 → table at 24: 3 instructions on
  EXPECT_EQ(decode(words[1]).imm, 3 + 3);  // la at 8 → last at 56
  EXPECT_EQ(words[3], 0x0000000000ff0201ull);
  EXPECT_EQ(words[4], 0x0000000000001234ull);
  EXPECT_EQ(words[5], 0x00000007fffffffeull);
  EXPECT_EQ(words[6], 0x000000003fc00000ull);
  EXPECT_EQ(words[7], 9u);
}

TEST(Assembler, ConstantsMayUseLabelsDefinedLater) {
  const auto words = assemble(".equ SIZE, end - start\nstart: li r1, SIZE\n halt\nend:\n", "t.s");
  EXPECT_EQ(decode(words[0]).imm, 16);
}

TEST(Assembler, RejectsTypeSuffixesAnInstructionDoesNotTake) {
  EXPECT_EQ(error_of("vexp.i32 r1, r2, r3\n").message(), "'vexp' does not take type i32; it takes f32 f16 bf16");
  EXPECT_EQ(error_of("vcvt.f32.i16 r1, r2, r3\n").message(),
            "'vcvt.f32.i16' needs destination and source type suffixes (f32 f16 bf16 i8 u8 i32 i64 bool f64), as in "
            "vcvt.f32.f32");
  EXPECT_EQ(error_of("vadd.f64 r1, r2, r3, r4\n").message(),
            "'vadd' does not take type f64; it takes f32 f16 bf16 i8 u8 i32 i64");  // f64 is only converted
  EXPECT_EQ(error_of("vadd r1, r2, r3, r4\n").message(),
            "'vadd' needs an element type suffix (f32 f16 bf16 i8 u8 i32 i64), as in vadd.f32");
  EXPECT_EQ(error_of("add.f32 r1, r2, r3\n").message(), "unknown mnemonic 'add.f32'");
}

TEST(Assembler, RejectsBadDataAndMisplacedInstructions) {
  EXPECT_EQ(error_of(".byte 256\n").message(), "value 256 does not fit .byte (8 bits)");
  EXPECT_EQ(error_of(".float 1.5x\n").message(), "expected a floating-point number, found '1.5x'");
  EXPECT_EQ(error_of(".float 1e50\n").message(), "1e50 is out of the range of f32");
  const AssemblyError misplaced = error_of(".data\n halt\n");
  EXPECT_EQ(misplaced.message(), "instructions belong in .text; this line is in .data");
  EXPECT_EQ(misplaced.where().line, 2);
  EXPECT_EQ(error_of(".section .bss\n").message(), "sections are .text (instructions) and .data (placed after .text)");
}

TEST(Assembler, OptionalImmediateMayBeOmittedButNotOthers) {
  EXPECT_EQ(assemble("vadd.f32 r1, r2, r3, r4\n", "t.s"), assemble("vadd.f32 r1, r2, r3, r4, 0\n", "t.s"));
  EXPECT_EQ(error_of("addi r1, r2\n").message(), "'addi' takes 3 operands (d,s,i), found 2");
}

}  // namespace
}  // namespace npusim::isa
