// One in-order step and the description of a faulting instruction.
#include "npusim/emulator/step.h"

#include "npusim/emulator/semantics.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/encoding.h"

namespace npusim::emulator {

isa::Instruction step(ExecContext& context) {
  ScalarState& state = context.state();
  context.pc = state.pc;
  const DecodedInstruction& decoded = context.fetch_decoded();
  execute(context, decoded.instruction);
  state.pc = context.next_pc;
  ++state.instructions_retired;
  state.stats.count_instruction(decoded.timing);
  return decoded.instruction;
}

KernelFault make_fault(ExecContext& context, int core, uint64_t pc, const std::string& cause) {
  KernelFault fault{core, pc, "", cause};
  uint64_t word = 0;
  try {
    word = context.fetch_word(pc);
    fault.instruction = isa::disassemble(isa::decode(word), pc);
  } catch (const isa::IllegalInstruction&) {
    fault.instruction = fmt::format(".dword 0x{:016x}", word);
  } catch (const Trap&) {
    fault.instruction = "<pc outside DRAM>";
  }
  return fault;
}

KernelFault make_fault(ExecContext& context, int core, uint64_t pc, const Trap& trap) {
  KernelFault fault = make_fault(context, core, pc, std::string(trap.what()));
  fault.waiting_on_other_core = dynamic_cast<const BarrierDeadlock*>(&trap) != nullptr;
  return fault;
}

}  // namespace npusim::emulator
