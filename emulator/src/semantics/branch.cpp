// Branches and jumps. Targets are relative to the branch, in instructions.
#include "npusim/emulator/semantics.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;
int64_t as_signed(uint64_t value) { return static_cast<int64_t>(value); }
void branch_if(ExecContext& c, const Instruction& i, bool taken) {
  if (taken) c.next_pc = c.pc + static_cast<int64_t>(i.imm) * isa::kInstructionBytes;
}
}  // namespace

void Beq(ExecContext& c, const Instruction& i) { branch_if(c, i, c.reg(i.rs1) == c.reg(i.rs2)); }
void Bne(ExecContext& c, const Instruction& i) { branch_if(c, i, c.reg(i.rs1) != c.reg(i.rs2)); }
void Blt(ExecContext& c, const Instruction& i) { branch_if(c, i, as_signed(c.reg(i.rs1)) < as_signed(c.reg(i.rs2))); }
void Bge(ExecContext& c, const Instruction& i) { branch_if(c, i, as_signed(c.reg(i.rs1)) >= as_signed(c.reg(i.rs2))); }
void Bltu(ExecContext& c, const Instruction& i) { branch_if(c, i, c.reg(i.rs1) < c.reg(i.rs2)); }
void Bgeu(ExecContext& c, const Instruction& i) { branch_if(c, i, c.reg(i.rs1) >= c.reg(i.rs2)); }
void Jal(ExecContext& c, const Instruction& i) {
  c.set_reg(i.rd, c.next_pc);
  branch_if(c, i, true);
}
void Jalr(ExecContext& c, const Instruction& i) {
  const uint64_t target = c.reg(i.rs1) + static_cast<uint64_t>(static_cast<int64_t>(i.imm));
  c.set_reg(i.rd, c.next_pc);
  c.next_pc = target;
}

}  // namespace npusim::emulator::semantics
