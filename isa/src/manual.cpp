// Renders the instruction table as the Markdown ISA manual.
#include "npusim/isa/manual.h"

#include <fmt/format.h>

#include "npusim/isa/encoding.h"
#include "npusim/isa/isa.h"

namespace npusim::isa {
namespace {

std::string type_names(TypeForm form) {
  std::string text;
  for (int k = 0; k < kElementTypeCount; ++k)
    if (allowed_types(form) >> k & 1) text += fmt::format("{}{}", text.empty() ? "" : " ", kElementTypeNames[k]);
  return text.empty() ? "—" : text;
}

std::string_view timing_class_name(TimingClass timing) {
  switch (timing) {
    case TimingClass::Scalar: return "scalar";
    case TimingClass::ScalarMemory: return "scalar memory";
    case TimingClass::Branch: return "branch";
    case TimingClass::Dma: return "DMA engine";
    case TimingClass::Vector: return "vector engine";
    case TimingClass::VectorSpecial: return "vector engine, special functions";
    case TimingClass::Matrix: return "matrix engine";
    case TimingClass::Sync: return "sync";
    case TimingClass::System: return "command processor";
  }
  return "?";
}

std::string syntax(const InstructionInfo& row) {
  std::string text(row.mnemonic);
  if (row.types == TypeForm::Conversion)
    text += ".D.S";
  else if (row.typed())
    text += ".T";
  if (!row.operands.empty()) text += ' ';
  for (char letter : row.operands) {
    switch (letter) {
      case ',': text += ", "; break;
      case 'd': text += "rd"; break;
      case 's': text += "rs1"; break;
      case 't': text += "rs2"; break;
      case 'u': text += "rs3"; break;
      case 'i': text += "imm"; break;
      case 'o': text = text.substr(0, text.size() - 2) + "[, imm]"; break;
      case 'm': text += "imm(rs1)"; break;
      case 'b': text += "target"; break;
      case 'c': text += "csr"; break;
      default: break;
    }
  }
  return text;
}

}  // namespace

std::string render_manual_markdown() {
  std::string text =
      "# npusim ISA manual\n\n"
      "Generated from `isa/include/npusim/isa/instructions.def`; do not edit.\n\n"
      "## Encoding\n\n"
      "Every instruction is one 64-bit little-endian word:\n\n"
      "```\n"
      " 63                              32 31  28 27  23 22  18 17  13 12   8 7      0\n"
      "+----------------------------------+------+------+------+------+------+--------+\n"
      "|              imm (signed)        | type | rs3  | rs2  | rs1  |  rd  | opcode |\n"
      "+----------------------------------+------+------+------+------+------+--------+\n"
      "```\n\n"
      "Fields an instruction does not use must be zero; any other word is an illegal instruction. Branch targets are\n"
      "encoded in `imm` as a signed count of instructions relative to the branch. There are 32 64-bit scalar\n"
      "registers; `r0` reads as zero and ignores writes. A kernel starts with `r1` holding the address of its\n"
      "argument block (64-bit words in DRAM). DRAM accesses by `ld`/`st`/`lw`/`sw` must be naturally aligned; the\n"
      "scratchpad and the accumulator are byte-addressed, and tile operands there need no alignment. Tile shapes are\n"
      "register operands, so an edge tile is the same instruction with smaller counts: nothing outside the counted\n"
      "elements is read or written.\n\n"
      "Control/status registers (`csrr`):";
  for (const auto& [csr, name] : kCsrNames) text += fmt::format(" `{}` = {}", name, static_cast<int>(csr));
  text +=
      ".\n\n## Element types\n\n"
      "Typed instructions name their element type T as a mnemonic suffix (`vadd.bf16`) held in the 4-bit type field:";
  for (int k = 0; k < kElementTypeCount; ++k)
    text += fmt::format(" `{}` = {} ({} byte{})", kElementTypeNames[k], k, kElementTypeBytes[k],
                        kElementTypeBytes[k] == 1 ? "" : "s");
  text +=
      ". A type the instruction does not take is an illegal encoding.\n\n"
      "Numerics: f32 arithmetic is IEEE 754 binary32 with round-to-nearest-even; f16 and bf16 operands are widened to\n"
      "f32 exactly, the operation is done in f32 and the result rounded once to nearest-even. Integer arithmetic "
      "wraps\n"
      "(two's complement). Special functions (`vexp`, `vlog`, `vtanh`, `vsigmoid`, `verf`, `vrsqrt`, `vrecip`,\n"
      "`vsqrt`, `vsin`, `vcos`, `vlog1p`, `vexpm1`) are evaluated in binary64 from the f32 value and rounded to T, so\n"
      "they are within 1 ulp of the exact result and deterministic on every host; rounding to integers (`vfloor`,\n"
      "`vceil`, `vround`, `vtrunc`) is exact. The matrix engine accumulates each output in k order by fused\n"
      "multiply-adds in f32 (one rounding per product and sum, as a systolic array's processing element does).\n\n"
      "### Conversions\n\n"
      "`vcvt.D.S` converts S to D: float to float rounds to nearest-even (overflow gives ±inf); float to integer\n"
      "truncates toward zero and saturates to D's range, NaN giving 0; integer to float rounds to nearest-even "
      "(through\n"
      "f32 for f16 and bf16); integer to integer saturates; anything to bool gives 1 for non-zero (NaN included), "
      "bool\n"
      "to anything gives 0 or 1. f64 is a storage type that only `vcvt` takes: f64 to f16 or bf16 rounds through f32\n"
      "(twice, as PyTorch's conversions of float64 do), f64 to f32 and integers to f64 round once, to nearest-even.\n\n"
      "### Broadcast operand\n\n"
      "Binary vector instructions (and `vsel`) read their second operand b through the mode in `imm`: `imm & 3` = 0\n"
      "elementwise `rs2[k]`, 1 scalar `rs2[0]`, 2 repeating row `rs2[k mod L]`, 3 one value per row `rs2[k / L]`,\n"
      "with L = `imm >> 2`. Modes 2 and 3 with L = 0, and modes 0 and 1 with L other than 0, trap.\n\n"
      "### Random numbers\n\n"
      "`vrand` and `vrandn` draw from a counter-based stream: element k takes stream position p = rs2 + k under the\n"
      "64-bit key rs1, and its value is a pure function of (key, p), so the same numbers come out however a kernel\n"
      "splits the stream across tiles and cores. The words x0..x3 are Philox4x32-10 (Salmon et al., SC 2011) of\n"
      "counter (p mod 2^32, p div 2^32, 0, 0) and key (rs1 mod 2^32, rs1 div 2^32), matching Random123's known\n"
      "answers.\n\n"
      "## Instructions\n\n| opcode | syntax | types | engine | semantics |\n|---|---|---|---|---|\n";
  for (const auto& row : kInstructionTable)
    text += fmt::format("| 0x{:02x} | `{}` | {} | {} | {} |\n", static_cast<int>(row.opcode), syntax(row),
                        type_names(row.types), timing_class_name(row.timing), row.doc);
  text +=
      "\n## Exceptions\n\n"
      "A core traps, ending its kernel with an error that names the kernel, core, PC and instruction, on: an illegal\n"
      "instruction; a DRAM access outside the device's memory or not naturally aligned; a scratchpad or accumulator\n"
      "access outside its buffer; a weight tile larger than the systolic array, or `mx.mac` before any weights were\n"
      "loaded, or with inputs of another type than the weights; an integer division by zero; a broadcast period of 0;\n"
      "a `sem.wait` or `barrier` that can never complete (deadlock); `trap`; a command-processor instruction executed\n"
      "by an NPU core; exceeding the watchdog's instruction budget.\n";
  return text;
}

}  // namespace npusim::isa
