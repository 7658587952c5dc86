// Formatting of kernel faults for error messages.
#include "npusim/emulator/trap.h"
#include "npusim/emulator/chip.h"

#include <fmt/format.h>

namespace npusim::emulator {

Trap watchdog_trap(uint64_t budget) {
  return Trap(fmt::format(
      "watchdog: more than {} instructions on this core (raise runtime.watchdog_instructions or NPUSIM_WATCHDOG)",
      budget));
}

Trap stopped_trap() { return Trap("stopped: the host abandoned the device's unfinished work"); }

Trap command_processor_watchdog_trap() {
  return Trap(fmt::format(
      "watchdog: more than {} firmware instructions without sleeping (the rings or the firmware were overwritten?)",
      kCommandProcessorBudget));
}

BarrierDeadlock::BarrierDeadlock(const std::string& why)
    : Trap(fmt::format("deadlock: this barrier can never complete: {}", why)) {}

std::optional<KernelFault> reported_fault(std::vector<KernelFault> faults) {
  std::optional<KernelFault> chosen;
  for (KernelFault& fault : faults) {
    const bool better = !chosen || (chosen->waiting_on_other_core && !fault.waiting_on_other_core) ||
                        (chosen->waiting_on_other_core == fault.waiting_on_other_core && fault.core < chosen->core);
    if (better) chosen = std::move(fault);
  }
  return chosen;
}

void check_core_mask(uint64_t core_mask, int64_t cores) {
  const bool beyond = cores < 64 && (core_mask >> cores) != 0;
  if (core_mask == 0 || beyond)
    throw Trap(fmt::format("launch core mask 0x{:x} names no core or cores the chip does not have ({} cores)",
                           core_mask, cores));
}

std::string KernelFault::describe() const {
  const std::string where = core < 0 ? std::string("command processor") : fmt::format("core {}", core);
  return fmt::format("{}, pc 0x{:x} ({}): {}", where, pc, instruction, cause);
}

}  // namespace npusim::emulator
