// The instruction set as C++ types: opcodes, the per-instruction metadata table and the decoded instruction.
// Everything here is expanded from instructions.def, so adding a row there is the only change a new instruction needs
// in this component.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace npusim::isa {

// Which engine runs an instruction in the timed model, and which timing formula applies (docs/timing.md).
enum class TimingClass : uint8_t { Scalar, ScalarMemory, Branch, Dma, Vector, Matrix, Sync, System };

enum class Opcode : uint8_t {
#define NPUSIM_INSTRUCTION(Name, mnemonic, code, operands, timing, doc) Name = code,
#include "npusim/isa/instructions.def"
#undef NPUSIM_INSTRUCTION
};

struct InstructionInfo {
  Opcode opcode;
  std::string_view name;
  std::string_view mnemonic;
  std::string_view operands;  // e.g. "d,s,t"; letters are explained in instructions.def
  TimingClass timing;
  std::string_view doc;
};

inline constexpr std::array kInstructionTable = {
#define NPUSIM_INSTRUCTION(Name, mnemonic, code, operands, timing, doc) \
  InstructionInfo{Opcode::Name, #Name, mnemonic, operands, TimingClass::timing, doc},
#include "npusim/isa/instructions.def"
#undef NPUSIM_INSTRUCTION
};

// Control/status registers readable with csrr; the number is the instruction's imm field.
enum class Csr : int32_t { CoreId = 0, CoreCount = 1, Cycle = 2, InstructionsRetired = 3 };
inline constexpr std::array<std::pair<Csr, std::string_view>, 4> kCsrNames = {{{Csr::CoreId, "coreid"},
                                                                               {Csr::CoreCount, "ncores"},
                                                                               {Csr::Cycle, "cycle"},
                                                                               {Csr::InstructionsRetired, "instret"}}};

inline constexpr int kRegisterCount = 32;
inline constexpr int kInstructionBytes = 8;

// A decoded instruction: the opcode plus every field, unused fields zero.
struct Instruction {
  Opcode opcode{};
  uint8_t rd = 0, rs1 = 0, rs2 = 0, rs3 = 0;
  int32_t imm = 0;
  bool operator==(const Instruction&) const = default;
};

// The metadata row of an opcode, or nullptr for a byte that encodes no instruction.
const InstructionInfo* find_instruction(uint8_t opcode_byte);
const InstructionInfo& info(Opcode opcode);
const InstructionInfo* find_mnemonic(std::string_view mnemonic);
std::optional<Csr> find_csr(std::string_view name);
std::string_view csr_name(Csr csr);

// Fields an instruction's operand string uses; the others must be zero in a canonical encoding.
struct FieldUse {
  bool rd = false, rs1 = false, rs2 = false, rs3 = false, imm = false;
};
constexpr FieldUse field_use(std::string_view operands) {
  FieldUse use;
  for (char letter : operands) {
    switch (letter) {
      case 'd': use.rd = true; break;
      case 's': use.rs1 = true; break;
      case 't': use.rs2 = true; break;
      case 'u': use.rs3 = true; break;
      case 'i':
      case 'b':
      case 'c': use.imm = true; break;
      case 'm': use.rs1 = use.imm = true; break;
      default: break;
    }
  }
  return use;
}

}  // namespace npusim::isa
