// Renders the instruction table as the Markdown ISA manual.
#include "npusim/isa/manual.h"

#include <fmt/format.h>

#include "npusim/isa/encoding.h"
#include "npusim/isa/isa.h"

namespace npusim::isa {
namespace {

std::string_view timing_class_name(TimingClass timing) {
  switch (timing) {
    case TimingClass::Scalar: return "scalar";
    case TimingClass::ScalarMemory: return "scalar memory";
    case TimingClass::Branch: return "branch";
    case TimingClass::Dma: return "DMA engine";
    case TimingClass::Vector: return "vector engine";
    case TimingClass::Matrix: return "matrix engine";
    case TimingClass::Sync: return "sync";
    case TimingClass::System: return "command processor";
  }
  return "?";
}

std::string syntax(const InstructionInfo& row) {
  std::string text(row.mnemonic);
  if (!row.operands.empty()) text += ' ';
  for (char letter : row.operands) {
    switch (letter) {
      case ',': text += ", "; break;
      case 'd': text += "rd"; break;
      case 's': text += "rs1"; break;
      case 't': text += "rs2"; break;
      case 'u': text += "rs3"; break;
      case 'i': text += "imm"; break;
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
      "|              imm (signed)        | res. | rs3  | rs2  | rs1  |  rd  | opcode |\n"
      "+----------------------------------+------+------+------+------+------+--------+\n"
      "```\n\n"
      "Fields an instruction does not use must be zero; any other word is an illegal instruction. Branch targets are\n"
      "encoded in `imm` as a signed count of instructions relative to the branch. There are 32 64-bit scalar\n"
      "registers; `r0` reads as zero and ignores writes. A kernel starts with `r1` holding the address of its\n"
      "argument block (64-bit words in DRAM).\n\n"
      "Control/status registers (`csrr`):";
  for (const auto& [csr, name] : kCsrNames) text += fmt::format(" `{}` = {}", name, static_cast<int>(csr));
  text += ".\n\n## Instructions\n\n| opcode | syntax | engine | semantics |\n|---|---|---|---|\n";
  for (const auto& row : kInstructionTable)
    text += fmt::format("| 0x{:02x} | `{}` | {} | {} |\n", static_cast<int>(row.opcode), syntax(row),
                        timing_class_name(row.timing), row.doc);
  text +=
      "\n## Exceptions\n\n"
      "A core traps, ending its kernel with an error that names the kernel, core, PC and instruction, on: an illegal\n"
      "instruction; a DRAM access outside the device's memory or not naturally aligned; a scratchpad or accumulator\n"
      "access outside its buffer; a weight tile larger than the systolic array, or `mx.mac` before any weights were\n"
      "loaded; a command-processor instruction executed by an NPU core; exceeding the watchdog's instruction budget.\n";
  return text;
}

}  // namespace npusim::isa
