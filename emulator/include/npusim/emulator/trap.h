// Errors raised by simulated hardware. A Trap is what an instruction raises (the cause only); the chip wraps it into
// a KernelFault that adds where it happened, and the runtime raises DeviceError with the kernel's name.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace npusim::emulator {

class Trap : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The trap of a core that ran past its instruction budget.
Trap watchdog_trap(uint64_t budget);

struct KernelFault {
  int core = 0;  // -1 for the command processor
  uint64_t pc = 0;
  std::string instruction;  // disassembly of the faulting instruction, or the raw word
  std::string cause;
  std::string describe() const;
};

}  // namespace npusim::emulator
