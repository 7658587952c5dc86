// Errors raised by simulated hardware. A Trap is what an instruction raises (the cause only); the chip wraps it into
// a KernelFault that adds where it happened, and the runtime raises DeviceError with the kernel's name.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace npusim::emulator {

class Trap : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The trap of a core that ran past its instruction budget.
Trap watchdog_trap(uint64_t budget);
// The trap of a core whose kernel the host stopped (Chip::request_stop).
Trap stopped_trap();

// The firmware's own budget between two sleeps: a doorbell's work takes at most some 10^5 instructions (every ring
// full, 512 commands, each pass over the rings finding one to run), so a command processor past this runs corrupted
// rings or code (a kernel may write anywhere in DRAM) and would otherwise never stop.
inline constexpr uint64_t kCommandProcessorBudget = uint64_t{1} << 24;
Trap command_processor_watchdog_trap();

// A barrier that can never complete because another core of the launch halted or trapped instead of reaching it.
class BarrierDeadlock : public Trap {
 public:
  explicit BarrierDeadlock(const std::string& why);
};

struct KernelFault {
  int core = 0;  // -1 for the command processor
  uint64_t pc = 0;
  std::string instruction;  // disassembly of the faulting instruction, or the raw word
  std::string cause;
  bool waiting_on_other_core = false;  // a BarrierDeadlock: another core's fault or halt is the root cause
  std::string describe() const;
};

// Of the faults of one launch, the one to report: the lowest core with a fault of its own, else the lowest core.
std::optional<KernelFault> reported_fault(std::vector<KernelFault> faults);

}  // namespace npusim::emulator
