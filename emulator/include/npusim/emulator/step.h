// The fetch–decode–execute loop shared by every scalar unit that runs instructions in program order.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <optional>

#include "npusim/emulator/exec_context.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator {

// Executes one instruction at the context's pc and advances it; returns the instruction. Traps propagate.
isa::Instruction step(ExecContext& context);

// Steps until `done()` or a trap; a trap, more than `budget` instructions, or `stop` set (by another thread) becomes
// the returned fault.
template <typename Done>
std::optional<KernelFault> run_until(ExecContext& context, int core, Done done, uint64_t budget,
                                     const std::atomic<bool>* stop = nullptr);

// The fault for a trap at `pc`: the disassembly of the word there when it decodes, else the raw word.
KernelFault make_fault(ExecContext& context, int core, uint64_t pc, const std::string& cause);
KernelFault make_fault(ExecContext& context, int core, uint64_t pc, const Trap& trap);

template <typename Done>
std::optional<KernelFault> run_until(ExecContext& context, int core, Done done, uint64_t budget,
                                     const std::atomic<bool>* stop) {
  ScalarState& state = context.state();
  try {
    while (!done()) {
      if (state.instructions_retired >= budget) throw watchdog_trap(budget);
      if (stop && stop->load(std::memory_order_relaxed)) throw stopped_trap();
      step(context);
    }
  } catch (const Trap& trap) {
    return make_fault(context, core, state.pc, trap);
  }
  return std::nullopt;
}

}  // namespace npusim::emulator
