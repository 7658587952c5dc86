// Cores meet at the barrier in generations; each completed barrier starts the next one.
#include "core_barrier.h"

#include <fmt/format.h>

#include <bit>

#include "npusim/emulator/trap.h"

namespace npusim::sim {

void CoreBarrier::begin_launch(uint64_t core_mask) {
  participants_ = std::popcount(core_mask);
  arrived_ = 0;
  ended_.clear();
}

void CoreBarrier::arrive() {
  if (!ended_.empty()) throw emulator::BarrierDeadlock(ended_);
  if (++arrived_ == participants_) {
    arrived_ = 0;
    ++generation_;
    changed_.notify(sc_core::SC_ZERO_TIME);
    return;
  }
  const uint64_t generation = generation_;
  while (generation_ == generation && ended_.empty()) sc_core::wait(changed_);
  if (generation_ == generation) throw emulator::BarrierDeadlock(ended_);
}

void CoreBarrier::leave(int core, bool trapped) {
  if (!ended_.empty()) return;
  ended_ = fmt::format("core {} {} instead", core, trapped ? "trapped" : "halted");
  changed_.notify(sc_core::SC_ZERO_TIME);
}

}  // namespace npusim::sim
