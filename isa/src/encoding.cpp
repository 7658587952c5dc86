// Encoder and decoder. The decoder accepts only canonical words (fields an instruction does not use are zero), so
// encode(decode(w)) == w for every legal word.
#include "npusim/isa/encoding.h"

#include <fmt/format.h>

namespace npusim::isa {
namespace {

constexpr uint64_t field_mask(FieldLayout field) {
  return (field.bits == 64 ? ~0ull : ((1ull << field.bits) - 1)) << field.shift;
}
constexpr uint64_t put(FieldLayout field, uint64_t value) { return (value << field.shift) & field_mask(field); }
constexpr uint64_t get(FieldLayout field, uint64_t word) { return (word & field_mask(field)) >> field.shift; }

}  // namespace

uint64_t encode(const Instruction& instruction) {
  return put(kOpcodeField, static_cast<uint8_t>(instruction.opcode)) | put(kRdField, instruction.rd) |
         put(kRs1Field, instruction.rs1) | put(kRs2Field, instruction.rs2) | put(kRs3Field, instruction.rs3) |
         put(kTypeField, static_cast<uint8_t>(instruction.type)) |
         put(kImmField, static_cast<uint32_t>(instruction.imm));
}

Instruction decode(uint64_t word) {
  const InstructionInfo* row = find_instruction(static_cast<uint8_t>(get(kOpcodeField, word)));
  if (row == nullptr)
    throw IllegalInstruction(fmt::format("undefined opcode 0x{:02x} in word 0x{:016x}", word & 0xff, word));
  Instruction instruction{row->opcode,
                          static_cast<uint8_t>(get(kRdField, word)),
                          static_cast<uint8_t>(get(kRs1Field, word)),
                          static_cast<uint8_t>(get(kRs2Field, word)),
                          static_cast<uint8_t>(get(kRs3Field, word)),
                          static_cast<ElementType>(get(kTypeField, word)),
                          static_cast<int32_t>(static_cast<uint32_t>(get(kImmField, word)))};
  const FieldUse use = field_use(*row);
  const bool stray_field = (!row->typed() && get(kTypeField, word) != 0) || (!use.rd && instruction.rd) ||
                           (!use.rs1 && instruction.rs1) || (!use.rs2 && instruction.rs2) ||
                           (!use.rs3 && instruction.rs3) || (!use.imm && instruction.imm);
  if (stray_field)
    throw IllegalInstruction(fmt::format("word 0x{:016x} sets a field that '{}' does not use", word, row->mnemonic));
  const TypeSet allowed = allowed_types(row->types);
  if (row->typed() && (get(kTypeField, word) >= kElementTypeCount || !(allowed & type_bit(instruction.type))))
    throw IllegalInstruction(fmt::format("word 0x{:016x}: type field {} is not a type '{}' takes", word,
                                         get(kTypeField, word), row->mnemonic));
  if (row->types == TypeForm::Conversion && (instruction.imm < 0 || instruction.imm >= kElementTypeCount ||
                                             !(allowed & type_bit(static_cast<ElementType>(instruction.imm)))))
    throw IllegalInstruction(fmt::format("word 0x{:016x}: source type {} of '{}' is not an element type", word,
                                         instruction.imm, row->mnemonic));
  return instruction;
}

}  // namespace npusim::isa
