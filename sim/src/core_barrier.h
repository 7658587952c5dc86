// The barrier the cores of one launch meet at. A core that halts or traps while others wait (or before they
// arrive) makes the barrier impossible: the waiting cores trap with a BarrierDeadlock instead of hanging.
#pragma once

#include <cstdint>
#include <string>
#include <systemc>

namespace npusim::sim {

class CoreBarrier {
 public:
  // Called by the command processor when it starts the cores in `core_mask`.
  void begin_launch(uint64_t core_mask);
  // Called from a core's scalar unit thread; returns once every core of the launch has arrived.
  void arrive();
  // Called when core `core`'s kernel ends, by halting or trapping: it will never arrive again.
  void leave(int core, bool trapped);

 private:
  int participants_ = 0, arrived_ = 0;
  uint64_t generation_ = 0;
  std::string ended_;  // which core ended first, once one has
  sc_core::sc_event changed_;
};

}  // namespace npusim::sim
