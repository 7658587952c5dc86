// Binary encoding of instructions: fixed 64-bit little-endian words.
//   bits  0..7  opcode      bits  8..12 rd     bits 13..17 rs1    bits 18..22 rs2    bits 23..27 rs3
//   bits 28..31 type (element type of typed instructions, else zero)                bits 32..63 imm (signed)
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "npusim/isa/isa.h"

namespace npusim::isa {

struct FieldLayout {
  int shift;
  int bits;
};
inline constexpr FieldLayout kOpcodeField{0, 8};
inline constexpr FieldLayout kRdField{8, 5};
inline constexpr FieldLayout kRs1Field{13, 5};
inline constexpr FieldLayout kRs2Field{18, 5};
inline constexpr FieldLayout kRs3Field{23, 5};
inline constexpr FieldLayout kTypeField{28, 4};
inline constexpr FieldLayout kImmField{32, 32};

// Raised for a word that is not a canonical encoding of any instruction.
class IllegalInstruction : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

uint64_t encode(const Instruction& instruction);
Instruction decode(uint64_t word);  // throws IllegalInstruction

}  // namespace npusim::isa
