// The semantics of every instruction: semantics::Name for each row of instructions.def. A row without a definition
// fails the link, which is the build-time check that every instruction has semantics.
#pragma once

#include "npusim/emulator/exec_context.h"
#include "npusim/isa/isa.h"

namespace npusim::emulator {
namespace semantics {
#define NPUSIM_INSTRUCTION(Name, mnemonic, code, operands, timing, types, doc) \
  void Name(ExecContext& context, const isa::Instruction& instruction);
#include "npusim/isa/instructions.def"
#undef NPUSIM_INSTRUCTION
}  // namespace semantics

// Runs one decoded instruction: sets context.next_pc to the fall-through address, then applies its semantics.
void execute(ExecContext& context, const isa::Instruction& instruction);

// Fetches and decodes the instruction at the context's pc; an illegal word raises Trap.
isa::Instruction fetch(ExecContext& context);
// The two checks of a fetch, each raising Trap: the pc is instruction-aligned; the word decodes.
void check_pc_alignment(uint64_t pc);
isa::Instruction decode_word(uint64_t word);

}  // namespace npusim::emulator
