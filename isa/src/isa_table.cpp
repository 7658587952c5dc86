// Lookups into the instruction table, and the compile-time checks that keep the table consistent.
#include <fmt/format.h>

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
      if (separator ? letter != ',' : std::string_view("dstuiombc").find(letter) == std::string_view::npos)
        return false;
      if (letter == 'o' && k + 1 != row.operands.size()) return false;  // only the last operand may be omitted
    }
    // A conversion's source type lives in imm, so it cannot have an immediate operand too.
    if (row.types == TypeForm::Conversion && field_use(row.operands).imm) return false;
  }
  return true;
}
static_assert(operand_letters_are_known(), "an operand string in instructions.def is malformed");

constexpr bool fields_fit() {
  const FieldLayout fields[] = {kOpcodeField, kRdField, kRs1Field, kRs2Field, kRs3Field, kTypeField, kImmField};
  int next_bit = 0;
  for (const auto& field : fields) {
    if (field.shift != next_bit) return false;
    next_bit += field.bits;
  }
  return next_bit == 64 && (1 << kRdField.bits) == kRegisterCount;
}
static_assert(fields_fit(), "instruction fields must tile the 64-bit word exactly");
static_assert(kElementTypeCount <= (1 << kTypeField.bits), "every element type must fit the type field");

constexpr bool every_row_has_a_timing_class_and_documentation() {
  for (const auto& row : kInstructionTable)
    if (row.doc.empty() || static_cast<int>(row.timing) > static_cast<int>(TimingClass::System)) return false;
  return true;
}
static_assert(every_row_has_a_timing_class_and_documentation(), "a row of instructions.def lacks timing or doc");

// Typed and untyped rows share one namespace of mnemonics: "vadd" + ".f32" must not be another row's name.
constexpr bool mnemonics_are_unambiguous() {
  for (const auto& typed : kInstructionTable) {
    if (!typed.typed()) continue;
    for (const auto& other : kInstructionTable) {
      if (&other != &typed && other.mnemonic == typed.mnemonic) return false;
      for (std::string_view suffix : kElementTypeNames)
        if (other.mnemonic.size() == typed.mnemonic.size() + 1 + suffix.size() &&
            other.mnemonic.starts_with(typed.mnemonic) && other.mnemonic[typed.mnemonic.size()] == '.' &&
            other.mnemonic.ends_with(suffix))
          return false;
    }
  }
  return true;
}
static_assert(mnemonics_are_unambiguous(), "a typed mnemonic plus a type suffix names another instruction");

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

namespace {
const InstructionInfo* find_row(std::string_view mnemonic) {
  auto it = std::find_if(kInstructionTable.begin(), kInstructionTable.end(),
                         [&](const InstructionInfo& row) { return row.mnemonic == mnemonic; });
  return it == kInstructionTable.end() ? nullptr : &*it;
}

// Splits "base.suffix" at the last dot when the suffix names an element type.
std::optional<std::pair<std::string_view, ElementType>> split_type_suffix(std::string_view text) {
  const size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::optional<ElementType> type = find_element_type(text.substr(dot + 1));
  if (!type) return std::nullopt;
  return std::pair{text.substr(0, dot), *type};
}
}  // namespace

std::optional<ElementType> find_element_type(std::string_view name) {
  for (int k = 0; k < kElementTypeCount; ++k)
    if (kElementTypeNames[k] == name) return static_cast<ElementType>(k);
  return std::nullopt;
}

TypedMnemonic find_mnemonic(std::string_view mnemonic) {
  if (const InstructionInfo* row = find_row(mnemonic); row && !row->typed()) return {row};
  const auto last = split_type_suffix(mnemonic);
  if (!last) return {};
  if (const InstructionInfo* row = find_row(last->first); row && row->typed() && row->types != TypeForm::Conversion)
    return {row, last->second};
  const auto first = split_type_suffix(last->first);
  if (!first) return {};
  if (const InstructionInfo* row = find_row(first->first); row && row->types == TypeForm::Conversion)
    return {row, first->second, last->second};
  return {};
}

std::string full_mnemonic(const Instruction& instruction) {
  const InstructionInfo& row = info(instruction.opcode);
  std::string text(row.mnemonic);
  if (row.typed()) text += fmt::format(".{}", type_name(instruction.type));
  if (row.types == TypeForm::Conversion)
    text += fmt::format(".{}", type_name(static_cast<ElementType>(instruction.imm)));
  return text;
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
