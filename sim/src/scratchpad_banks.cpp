// Bank conflicts per step. Every operand advances by the same number of bytes each step, so the steps' bank pattern
// repeats after at most banks x bank_bytes / gcd(step bytes) steps: one period is counted and the rest multiplied.
#include "scratchpad_banks.h"

#include <algorithm>
#include <numeric>

namespace npusim::sim {

ScratchpadBanks::ScratchpadBanks(const config::ChipConfig& config)
    : banks_(static_cast<uint64_t>(config.core_scratchpad_banks)),
      bank_bytes_(static_cast<uint64_t>(config.core_scratchpad_bank_bytes)),
      read_ports_(static_cast<uint64_t>(config.core_scratchpad_bank_read_ports)),
      reads_(banks_),
      writes_(banks_) {}

void ScratchpadBanks::clear() {
  std::fill(reads_.begin(), reads_.end(), 0);
  std::fill(writes_.begin(), writes_.end(), 0);
}

void ScratchpadBanks::touch(uint64_t address, uint64_t bytes, bool write) {
  if (bytes == 0) return;
  std::vector<uint64_t>& counts = write ? writes_ : reads_;
  const uint64_t first = address / bank_bytes_, last = (address + bytes - 1) / bank_bytes_;
  // A span of more than banks words wraps around; the count per bank still comes out right word by word.
  for (uint64_t word = first; word <= last; ++word) ++counts[word % banks_];
}

uint64_t ScratchpadBanks::step_cycles() const {
  uint64_t cycles = 1;
  for (uint64_t bank = 0; bank < banks_; ++bank)
    cycles = std::max({cycles, (reads_[bank] + read_ports_ - 1) / read_ports_, writes_[bank]});
  return cycles;
}

uint64_t ScratchpadBanks::stall_cycles(const std::vector<emulator::BufferAccess>& accesses, uint64_t steps,
                                       uint64_t cycles_per_step) {
  if (steps == 0) return 0;
  streams_.clear();
  const uint64_t round = banks_ * bank_bytes_;  // bytes after which the banks repeat
  uint64_t period = 1;
  for (const emulator::BufferAccess& access : accesses) {
    if (access.buffer != emulator::Buffer::Scratchpad) continue;
    // Less than a byte per step: a broadcast scalar or a reduction's results, held in the engine, not re-read.
    if (access.end - access.begin < steps) continue;
    const uint64_t step_bytes = (access.end - access.begin + steps - 1) / steps;
    streams_.push_back({access.begin, step_bytes, access.write});
    period = std::lcm(period, round / std::gcd(step_bytes, round));
  }
  // Stall of each step of one period, then whole periods and the leftover prefix. A period longer than
  // kMaxCountedSteps (operands of odd sizes per step) is estimated from its first steps.
  constexpr uint64_t kMaxCountedSteps = 64;
  const uint64_t counted = std::min({steps, period, kMaxCountedSteps});
  stall_before_.assign(counted + 1, 0);
  for (uint64_t step = 0; step < counted; ++step) {
    clear();
    for (const Stream& stream : streams_)
      touch(stream.begin + step * stream.step_bytes, stream.step_bytes, stream.write);
    stall_before_[step + 1] = stall_before_[step] + (std::max(step_cycles(), cycles_per_step) - cycles_per_step);
  }
  if (counted == steps) return stall_before_[counted];
  if (counted == period) return steps / counted * stall_before_[counted] + stall_before_[steps % counted];
  return stall_before_[counted] * steps / counted;
}

uint64_t ScratchpadBanks::transposed_load_stall_cycles(uint64_t base, uint64_t rows, uint64_t cols,
                                                       uint64_t element_bytes) {
  uint64_t stall = 0;
  for (uint64_t k = 0; k < rows; ++k) {
    clear();
    for (uint64_t n = 0; n < cols; ++n) touch(base + (n * rows + k) * element_bytes, element_bytes, false);
    stall += step_cycles() - 1;
  }
  return stall;
}

}  // namespace npusim::sim
