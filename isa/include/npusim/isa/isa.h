// The instruction set as C++ types: opcodes, the per-instruction metadata table and the decoded instruction.
// Everything here is expanded from instructions.def, so adding a row there is the only change a new instruction needs
// in this component.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace npusim::isa {

// Which engine runs an instruction in the timed model, and which timing formula applies (docs/timing.md).
// VectorSpecial runs on the vector engine's special-function path (division, transcendentals), which takes
// core.vector_special_function_cycles per lane group instead of one.
enum class TimingClass : uint8_t { Scalar, ScalarMemory, Branch, Dma, Vector, VectorSpecial, Matrix, Sync, System };

// Element types of typed instructions, encoded in the 4-bit type field. bool is one byte holding 0 or 1. f64 is a
// storage type only: `vcvt` converts to and from it (so that float64 tensors convert on the device), and nothing
// computes in it.
enum class ElementType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I8 = 3, U8 = 4, I32 = 5, I64 = 6, Bool = 7, F64 = 8 };
inline constexpr int kElementTypeCount = 9;
inline constexpr std::array<std::string_view, kElementTypeCount> kElementTypeNames = {"f32", "f16", "bf16", "i8", "u8",
                                                                                      "i32", "i64", "bool", "f64"};
inline constexpr std::array<uint8_t, kElementTypeCount> kElementTypeBytes = {4, 2, 2, 1, 1, 4, 8, 1, 8};
constexpr std::string_view type_name(ElementType type) { return kElementTypeNames[static_cast<int>(type)]; }
constexpr uint64_t element_bytes(ElementType type) { return kElementTypeBytes[static_cast<int>(type)]; }
// The float types the vector engine computes in (f64 is not one).
constexpr bool is_float(ElementType type) { return static_cast<int>(type) <= static_cast<int>(ElementType::BF16); }
std::optional<ElementType> find_element_type(std::string_view name);

// Which element types an instruction takes (instructions.def explains each form).
enum class TypeForm : uint8_t { None, Float, Numeric, Integer, Any, MatrixInput, MatrixOutput, Conversion };
using TypeSet = uint16_t;  // bit k set: ElementType k allowed
constexpr TypeSet type_bit(ElementType type) { return static_cast<TypeSet>(1u << static_cast<int>(type)); }
constexpr TypeSet allowed_types(TypeForm form) {
  using enum ElementType;
  const TypeSet floats = type_bit(F32) | type_bit(F16) | type_bit(BF16);
  const TypeSet integers = type_bit(I8) | type_bit(U8) | type_bit(I32) | type_bit(I64);
  switch (form) {
    case TypeForm::None: return 0;
    case TypeForm::Float: return floats;
    case TypeForm::Numeric: return floats | integers;
    case TypeForm::Integer: return integers;
    case TypeForm::Any: return floats | integers | type_bit(Bool);
    case TypeForm::Conversion: return floats | integers | type_bit(Bool) | type_bit(F64);
    case TypeForm::MatrixInput: return floats | type_bit(I8);
    case TypeForm::MatrixOutput: return floats | type_bit(I32);
  }
  return 0;
}

enum class Opcode : uint8_t {
#define NPUSIM_INSTRUCTION(Name, mnemonic, code, operands, timing, types, doc) Name = code,
#include "npusim/isa/instructions.def"
#undef NPUSIM_INSTRUCTION
};

struct InstructionInfo {
  Opcode opcode;
  std::string_view name;
  std::string_view mnemonic;  // without the type suffix of typed instructions
  std::string_view operands;  // e.g. "d,s,t"; letters are explained in instructions.def
  TimingClass timing;
  TypeForm types;
  std::string_view doc;
  constexpr bool typed() const { return types != TypeForm::None; }
};

inline constexpr std::array kInstructionTable = {
#define NPUSIM_INSTRUCTION(Name, mnemonic, code, operands, timing, types, doc) \
  InstructionInfo{Opcode::Name, #Name, mnemonic, operands, TimingClass::timing, TypeForm::types, doc},
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

// A decoded instruction: the opcode plus every field, unused fields zero. `type` is the element type of typed
// instructions (F32, the zero encoding, for untyped ones); a conversion's source type is in imm.
struct Instruction {
  Opcode opcode{};
  uint8_t rd = 0, rs1 = 0, rs2 = 0, rs3 = 0;
  ElementType type = ElementType::F32;
  int32_t imm = 0;
  bool operator==(const Instruction&) const = default;
};

// The metadata row of an opcode, or nullptr for a byte that encodes no instruction.
const InstructionInfo* find_instruction(uint8_t opcode_byte);
const InstructionInfo& info(Opcode opcode);
// The row of an assembly mnemonic with its type suffixes: "add", "vadd.bf16", "vcvt.f16.f32". For a conversion,
// `source` receives the second suffix. nullptr when no row matches.
struct TypedMnemonic {
  const InstructionInfo* row = nullptr;
  ElementType type = ElementType::F32;
  ElementType source = ElementType::F32;
};
TypedMnemonic find_mnemonic(std::string_view mnemonic);
// The mnemonic an instruction is written with, suffixes included.
std::string full_mnemonic(const Instruction& instruction);
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
      case 'o':
      case 'b':
      case 'c': use.imm = true; break;
      case 'm': use.rs1 = use.imm = true; break;
      default: break;
    }
  }
  return use;
}
constexpr FieldUse field_use(const InstructionInfo& row) {
  FieldUse use = field_use(row.operands);
  if (row.types == TypeForm::Conversion) use.imm = true;
  return use;
}

}  // namespace npusim::isa
