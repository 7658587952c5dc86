// Lookups into the instruction table, and the compile-time checks that keep the table consistent.
#include <algorithm>

#include "npusim/isa/encoding.h"
#include "npusim/isa/isa.h"

namespace npusim::isa {
namespace {

constexpr bool opcodes_are_unique() {
  for (size_t i = 0; i < kInstructionTable.size(); ++i)
    for (size_t j = i + 1; j < kInstructionTable.size(); ++j)
      if (kInstructionTable[i].opcode == kInstructionTable[j].opcode) return false;
  return true;
}
static_assert(opcodes_are_unique(), "two rows of instructions.def share an opcode");

constexpr bool operand_letters_are_known() {
  for (const auto& row : kInstructionTable) {
    for (size_t k = 0; k < row.operands.size(); ++k) {
      const char letter = row.operands[k];
      const bool separator = k % 2 == 1;
      if (separator ? letter != ',' : std::string_view("dstuimbc").find(letter) == std::string_view::npos) return false;
    }
  }
  return true;
}
static_assert(operand_letters_are_known(), "an operand string in instructions.def is malformed");

constexpr bool fields_fit() {
  const FieldLayout fields[] = {kOpcodeField, kRdField, kRs1Field, kRs2Field, kRs3Field, kReservedField, kImmField};
  int next_bit = 0;
  for (const auto& field : fields) {
    if (field.shift != next_bit) return false;
    next_bit += field.bits;
  }
  return next_bit == 64 && (1 << kRdField.bits) == kRegisterCount;
}
static_assert(fields_fit(), "instruction fields must tile the 64-bit word exactly");

constexpr std::array<int16_t, 256> build_opcode_index() {
  std::array<int16_t, 256> index{};
  index.fill(-1);
  for (size_t i = 0; i < kInstructionTable.size(); ++i)
    index[static_cast<uint8_t>(kInstructionTable[i].opcode)] = static_cast<int16_t>(i);
  return index;
}
constexpr auto kOpcodeIndex = build_opcode_index();

}  // namespace

const InstructionInfo* find_instruction(uint8_t opcode_byte) {
  const int16_t row = kOpcodeIndex[opcode_byte];
  return row < 0 ? nullptr : &kInstructionTable[row];
}

const InstructionInfo& info(Opcode opcode) { return kInstructionTable[kOpcodeIndex[static_cast<uint8_t>(opcode)]]; }

const InstructionInfo* find_mnemonic(std::string_view mnemonic) {
  auto it = std::find_if(kInstructionTable.begin(), kInstructionTable.end(),
                         [&](const InstructionInfo& row) { return row.mnemonic == mnemonic; });
  return it == kInstructionTable.end() ? nullptr : &*it;
}

std::optional<Csr> find_csr(std::string_view name) {
  for (const auto& [csr, csr_text] : kCsrNames)
    if (csr_text == name) return csr;
  return std::nullopt;
}

std::string_view csr_name(Csr csr) {
  for (const auto& [known, csr_text] : kCsrNames)
    if (known == csr) return csr_text;
  return {};
}

}  // namespace npusim::isa
