// Synchronisation, program end and command-processor instructions; the chip model behind the context does the work.
#include <fmt/format.h>

#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator::semantics {
using isa::Instruction;

void Fence(ExecContext& c, const Instruction&) { c.fence(); }
void Halt(ExecContext& c, const Instruction&) {
  c.fence();
  c.state().halted = true;
}
void Barrier(ExecContext& c, const Instruction&) {
  c.fence();
  c.barrier();
}
void SemPostDma(ExecContext& c, const Instruction& i) { c.semaphore_post(i.imm); }
void SemPostVector(ExecContext& c, const Instruction& i) { c.semaphore_post(i.imm); }
void SemPostMatrix(ExecContext& c, const Instruction& i) { c.semaphore_post(i.imm); }
void SemWaitDma(ExecContext& c, const Instruction& i) { c.semaphore_wait(i.imm); }
void SemWaitVector(ExecContext& c, const Instruction& i) { c.semaphore_wait(i.imm); }
void SemWaitMatrix(ExecContext& c, const Instruction& i) { c.semaphore_wait(i.imm); }
void RaiseTrap(ExecContext&, const Instruction& i) { throw Trap(fmt::format("trap instruction, code {}", i.imm)); }

void Wfd(ExecContext& c, const Instruction&) { c.wait_for_doorbell(); }
void Launch(ExecContext& c, const Instruction& i) { c.launch_cores(c.reg(i.rs1), c.reg(i.rs2), c.reg(i.rs3)); }
void Wait(ExecContext& c, const Instruction& i) { c.set_reg(i.rd, c.wait_cores()); }
void CopyH2D(ExecContext& c, const Instruction& i) { c.copy_host_to_device(c.reg(i.rd), c.reg(i.rs1), c.reg(i.rs2)); }
void CopyD2H(ExecContext& c, const Instruction& i) { c.copy_device_to_host(c.reg(i.rd), c.reg(i.rs1), c.reg(i.rs2)); }
void CopyD2D(ExecContext& c, const Instruction& i) { c.copy_device_to_device(c.reg(i.rd), c.reg(i.rs1), c.reg(i.rs2)); }

}  // namespace npusim::emulator::semantics
