// Every row of the instruction table survives encode → decode → disassemble → assemble with identical bytes, and the
// decoder accepts only canonical encodings.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "npusim/isa/assembler.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/encoding.h"
#include "npusim/isa/isa.h"

namespace npusim::isa {
namespace {

// A random legal instance of a row: random registers, immediate, and a type the row takes.
Instruction random_instance(const InstructionInfo& row, std::mt19937& random) {
  const FieldUse use = field_use(row);
  std::uniform_int_distribution<int> reg(0, kRegisterCount - 1);
  Instruction instruction{row.opcode};
  if (use.rd) instruction.rd = static_cast<uint8_t>(reg(random));
  if (use.rs1) instruction.rs1 = static_cast<uint8_t>(reg(random));
  if (use.rs2) instruction.rs2 = static_cast<uint8_t>(reg(random));
  if (use.rs3) instruction.rs3 = static_cast<uint8_t>(reg(random));
  if (use.imm) {
    const int32_t edges[] = {-1, 0, 1, INT32_MIN, INT32_MAX};
    instruction.imm = random() % 4 == 0 ? edges[random() % 5] : static_cast<int32_t>(random());
    if (row.operands.find('c') != std::string_view::npos) instruction.imm = static_cast<int32_t>(random() % 4);
  }
  std::vector<ElementType> types;
  for (int k = 0; k < kElementTypeCount; ++k)
    if (allowed_types(row.types) >> k & 1) types.push_back(static_cast<ElementType>(k));
  if (row.typed()) instruction.type = types[random() % types.size()];
  if (row.types == TypeForm::Conversion) instruction.imm = static_cast<int32_t>(types[random() % types.size()]);
  return instruction;
}

TEST(IsaRoundTrip, EveryInstructionWithRandomOperandsEncodesDecodesPrintsAndParses) {
  std::mt19937 random(2026);
  for (const InstructionInfo& row : kInstructionTable) {
    for (int variant = 0; variant < 64; ++variant) {
      const Instruction original = random_instance(row, random);
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
  EXPECT_EQ(classes.size(), 9u);
}

// Every opcode byte with every type field value and a spread of other fields: an undefined encoding raises
// IllegalInstruction with a message, and a defined one re-encodes to the same word.
TEST(Decoder, RejectsEveryUndefinedEncodingAndKeepsEveryDefinedOne) {
  std::mt19937_64 random(7);
  int accepted = 0, rejected = 0;
  for (uint64_t opcode = 0; opcode < 256; ++opcode) {
    for (uint64_t type = 0; type < 16; ++type) {
      for (int sample = 0; sample < 16; ++sample) {
        const uint64_t others = sample == 0 ? 0 : random() & ~0xf0000000ffull;
        const uint64_t word = opcode | type << 28 | others;
        try {
          EXPECT_EQ(encode(decode(word)), word);
          ++accepted;
        } catch (const IllegalInstruction& error) {
          EXPECT_NE(std::string(error.what()).find("0x"), std::string::npos);
          ++rejected;
        }
      }
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, accepted);
}

TEST(Decoder, RejectsTypesAnInstructionDoesNotTake) {
  Instruction exp{Opcode::Vexp, 1, 2, 0, 3};
  exp.type = ElementType::I32;  // exp exists for float types only
  EXPECT_THROW(decode(encode(exp)), IllegalInstruction);
  Instruction add{Opcode::Add, 1, 2, 3};
  add.type = ElementType::F16;  // untyped instructions keep the type field zero
  EXPECT_THROW(decode(encode(add)), IllegalInstruction);
  Instruction wide_add{Opcode::Vadd, 1, 2, 3, 4};
  wide_add.type = ElementType::F64;  // f64 is for vcvt only
  EXPECT_THROW(decode(encode(wide_add)), IllegalInstruction);
  Instruction convert{Opcode::Vcvt, 1, 2, 0, 3};
  convert.imm = 9;  // no element type 9
  EXPECT_THROW(decode(encode(convert)), IllegalInstruction);
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
  EXPECT_THROW(decode(halt | (1ull << 29)), IllegalInstruction);  // type
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
