// The interface the host runtime drives, implemented by the functional emulator and by the timed SystemC model: device
// memory, a command processor that runs firmware and wakes on a doorbell, and per-launch records.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emulator/device_memory.h"
#include "npusim/emulator/kernel_stats.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator {

// One kernel launch as the chip saw it. Cycles are zero in functional mode.
struct LaunchRecord {
  uint64_t core_mask = 0;
  uint64_t program = 0;
  uint64_t start_cycle = 0, end_cycle = 0;
  KernelStats stats;                  // summed over the launched cores
  std::vector<EngineInterval> trace;  // engine activity, when tracing is on (timed mode)
  std::string first_hazard;           // the first hazard the timed model saw, or empty
  std::optional<KernelFault> fault;   // the trap that failed the launch (the first, if several cores trapped)
};

// The firmware itself trapped; the command processor must be booted again.
class CommandProcessorFault : public std::runtime_error {
 public:
  explicit CommandProcessorFault(KernelFault fault)
      : std::runtime_error("command processor fault: " + fault.describe()), fault_(std::move(fault)) {}
  const KernelFault& fault() const { return fault_; }

 private:
  KernelFault fault_;
};

// Traps unless `core_mask` names at least one core and only cores the chip has.
void check_core_mask(uint64_t core_mask, int64_t cores);

class Chip {
 public:
  virtual ~Chip() = default;

  virtual const config::ChipConfig& config() const = 0;
  virtual DeviceMemory& memory() = 0;

  // Starts the command processor at the firmware entry point and runs it until it waits for the doorbell.
  virtual void boot(uint64_t firmware_entry) = 0;
  // Wakes the command processor; returns once it waits for the doorbell again with every launched core idle.
  // Throws CommandProcessorFault if the firmware trapped.
  virtual void ring_doorbell() = 0;

  virtual std::vector<LaunchRecord> take_launch_records() = 0;
  virtual uint64_t elapsed_cycles() const = 0;
  // Record engine activity intervals into launch records (timed mode only; a no-op for the emulator).
  virtual void set_tracing(bool enabled) {}
  // A core's scalar registers as its last kernel left them.
  virtual std::array<uint64_t, isa::kRegisterCount> core_registers(int core) const = 0;
  // Zeroes every core's scratchpad and accumulator, which otherwise keep what the last kernels left (as on hardware),
  // so that runs after it do not depend on the ones before (the fuzz targets compare the two chips this way). Not while
  // a kernel runs.
  virtual void clear_core_memories() = 0;

  // Kernels may not store below `limit` from now on (DeviceMemory::protect_below): the firmware's own memory.
  void protect_below(uint64_t limit) { memory().protect_below(limit); }

  // From any thread: every kernel running or launched from now on traps at its next instruction (stopped_trap), until
  // clear_stop. The host abandons its work this way (an interrupted wait, process exit); the firmware runs on.
  void request_stop() { stop_.store(true, std::memory_order_relaxed); }
  void clear_stop() { stop_.store(false, std::memory_order_relaxed); }

 protected:
  const std::atomic<bool>& stop_flag() const { return stop_; }

 private:
  std::atomic<bool> stop_{false};
};

}  // namespace npusim::emulator
