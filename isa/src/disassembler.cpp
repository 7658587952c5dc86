// Disassembler driven by each instruction's operand string from the table.
#include "npusim/isa/disassembler.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <vector>

#include "npusim/isa/encoding.h"

namespace npusim::isa {
namespace {

uint64_t branch_target(const Instruction& instruction, uint64_t pc) {
  return pc + static_cast<int64_t>(instruction.imm) * kInstructionBytes;
}

std::string format_operands(const Instruction& instruction, uint64_t pc,
                            const std::map<uint64_t, std::string>* labels) {
  const InstructionInfo& row = info(instruction.opcode);
  std::string text;
  for (char letter : row.operands) {
    switch (letter) {
      case ',': text += ", "; break;
      case 'd': text += fmt::format("r{}", instruction.rd); break;
      case 's': text += fmt::format("r{}", instruction.rs1); break;
      case 't': text += fmt::format("r{}", instruction.rs2); break;
      case 'u': text += fmt::format("r{}", instruction.rs3); break;
      case 'i': text += fmt::format("{}", instruction.imm); break;
      case 'o':  // an optional immediate is written only when it is not 0
        if (instruction.imm != 0)
          text += fmt::format("{}", instruction.imm);
        else if (text.ends_with(", "))
          text.resize(text.size() - 2);
        break;
      case 'm': text += fmt::format("{}(r{})", instruction.imm, instruction.rs1); break;
      case 'c': {
        const std::string_view name = csr_name(static_cast<Csr>(instruction.imm));
        text += name.empty() ? fmt::format("{}", instruction.imm) : std::string(name);
        break;
      }
      case 'b': {
        const uint64_t target = branch_target(instruction, pc);
        const auto label = labels ? labels->find(target) : std::map<uint64_t, std::string>::const_iterator{};
        text += labels && label != labels->end() ? label->second : fmt::format("{}", static_cast<int64_t>(target));
        break;
      }
      default: break;
    }
  }
  return text;
}

}  // namespace

std::string disassemble(const Instruction& instruction, uint64_t pc) {
  const InstructionInfo& row = info(instruction.opcode);
  if (row.operands.empty()) return full_mnemonic(instruction);
  return fmt::format("{} {}", full_mnemonic(instruction), format_operands(instruction, pc, nullptr));
}

std::string disassemble_program(std::span<const uint64_t> words) {
  std::map<uint64_t, std::string> labels;
  std::vector<std::optional<Instruction>> decoded;
  for (size_t index = 0; index < words.size(); ++index) {
    try {
      decoded.push_back(decode(words[index]));
    } catch (const IllegalInstruction&) {
      decoded.push_back(std::nullopt);
      continue;
    }
    if (info(decoded.back()->opcode).operands.find('b') != std::string_view::npos) {
      const uint64_t target = branch_target(*decoded.back(), index * kInstructionBytes);
      if (target < words.size() * kInstructionBytes) labels.emplace(target, fmt::format("L{:04x}", target));
    }
  }
  std::string text;
  for (size_t index = 0; index < words.size(); ++index) {
    const uint64_t pc = index * kInstructionBytes;
    if (auto label = labels.find(pc); label != labels.end()) text += fmt::format("{}:\n", label->second);
    if (!decoded[index]) {
      text += fmt::format("    .dword 0x{:016x}\n", words[index]);
      continue;
    }
    const InstructionInfo& row = info(decoded[index]->opcode);
    text += row.operands.empty() ? fmt::format("    {}\n", full_mnemonic(*decoded[index]))
                                 : fmt::format("    {} {}\n", full_mnemonic(*decoded[index]),
                                               format_operands(*decoded[index], pc, &labels));
  }
  return text;
}

}  // namespace npusim::isa
