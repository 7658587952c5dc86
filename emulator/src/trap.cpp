// Formatting of kernel faults for error messages.
#include "npusim/emulator/trap.h"

#include <fmt/format.h>

namespace npusim::emulator {

std::string KernelFault::describe() const {
  const std::string where = core < 0 ? std::string("command processor") : fmt::format("core {}", core);
  return fmt::format("{}, pc 0x{:x} ({}): {}", where, pc, instruction, cause);
}

}  // namespace npusim::emulator
