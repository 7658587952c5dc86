// Every row of the instruction table survives encode → decode → disassemble → assemble with identical bytes, and the
// decoder accepts only canonical encodings.
#include <gtest/gtest.h>

#include <set>

#include "npusim/isa/assembler.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/encoding.h"
#include "npusim/isa/isa.h"

namespace npusim::isa {
namespace {

// An instruction with a distinct value in every field its operands use.
Instruction sample(const InstructionInfo& row, int variant) {
  const FieldUse use = field_use(row.operands);
  Instruction instruction{row.opcode};
  if (use.rd) instruction.rd = static_cast<uint8_t>((3 + variant) % kRegisterCount);
  if (use.rs1) instruction.rs1 = static_cast<uint8_t>((7 + 5 * variant) % kRegisterCount);
  if (use.rs2) instruction.rs2 = static_cast<uint8_t>((31 - variant) % kRegisterCount);
  if (use.rs3) instruction.rs3 = static_cast<uint8_t>((12 + variant) % kRegisterCount);
  if (use.imm) {
    const int32_t immediates[] = {-1, 1234567, INT32_MIN, INT32_MAX, 0};
    instruction.imm = immediates[variant % 5];
    if (row.operands.find('c') != std::string_view::npos) instruction.imm = variant % 4;  // a named CSR
  }
  return instruction;
}

TEST(IsaRoundTrip, EveryInstructionEncodesDecodesDisassemblesAndReassembles) {
  for (const InstructionInfo& row : kInstructionTable) {
    for (int variant = 0; variant < 5; ++variant) {
      const Instruction original = sample(row, variant);
      const uint64_t word = encode(original);
      ASSERT_EQ(decode(word), original) << row.mnemonic;
      const std::string text = disassemble(original, 0);
      const std::vector<uint64_t> reassembled = assemble(text, "round_trip.s");
      ASSERT_EQ(reassembled.size(), 1u) << text;
      EXPECT_EQ(reassembled[0], word) << row.mnemonic << ": '" << text << "'";
    }
  }
}

TEST(IsaRoundTrip, TableCoversEveryEngine) {
  std::set<TimingClass> classes;
  for (const auto& row : kInstructionTable) classes.insert(row.timing);
  EXPECT_EQ(classes.size(), 8u);
}

TEST(Decoder, RejectsUndefinedOpcode) {
  EXPECT_EQ(find_instruction(0x00), nullptr);
  EXPECT_THROW(decode(0x00), IllegalInstruction);
  EXPECT_THROW(decode(0xff), IllegalInstruction);
}

TEST(Decoder, RejectsFieldsTheInstructionDoesNotUse) {
  const uint64_t halt = encode(Instruction{Opcode::Halt});
  EXPECT_NO_THROW(decode(halt));
  EXPECT_THROW(decode(halt | (1ull << 8)), IllegalInstruction);   // rd
  EXPECT_THROW(decode(halt | (1ull << 40)), IllegalInstruction);  // imm
  EXPECT_THROW(decode(halt | (1ull << 29)), IllegalInstruction);  // reserved
}

TEST(Disassembler, ProgramListingUsesLabelsForBranchTargets) {
  const auto words = assemble("top:\n addi r1, r1, -1\n bne r1, r0, top\n halt\n", "loop.s");
  const std::string listing = disassemble_program(words);
  EXPECT_NE(listing.find("L0000:"), std::string::npos) << listing;
  EXPECT_NE(listing.find("bne r1, r0, L0000"), std::string::npos) << listing;
  EXPECT_EQ(assemble(listing, "listing.s"), words);
}

}  // namespace
}  // namespace npusim::isa
