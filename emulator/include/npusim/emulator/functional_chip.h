// The functional chip: the command processor and every NPU core run instructions in program order as fast as the
// host allows, the launched cores on parallel host threads between barriers. This is the golden reference for what
// programs compute.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "npusim/emulator/chip.h"
#include "npusim/emulator/exec_context.h"
#include "npusim/emulator/worker_pool.h"

namespace npusim::emulator {

class FunctionalChip : public Chip {
 public:
  explicit FunctionalChip(config::ChipConfig config);
  ~FunctionalChip() override;

  const config::ChipConfig& config() const override { return config_; }
  DeviceMemory& memory() override { return memory_; }

  void boot(uint64_t firmware_entry) override;
  void ring_doorbell() override;
  std::vector<LaunchRecord> take_launch_records() override;
  uint64_t elapsed_cycles() const override { return 0; }

  // Runs one program on one core to its halt, outside any firmware (used by npusim-exec and tests).
  // Returns the fault if the core trapped.
  std::optional<KernelFault> run_kernel(int core, uint64_t program, uint64_t arguments);
  const ScalarState& core_state(int core) const;
  std::array<uint64_t, isa::kRegisterCount> core_registers(int core) const override {
    return core_state(core).registers;
  }
  void clear_core_memories() override;

 private:
  class CoreContext;
  class CommandProcessorContext;
  friend class CommandProcessorContext;

  config::ChipConfig config_;
  DeviceMemory memory_;
  std::vector<std::unique_ptr<CoreContext>> cores_;
  std::unique_ptr<CommandProcessorContext> command_processor_;
  std::vector<LaunchRecord> launch_records_;
  WorkerPool workers_;  // emulates the launched cores in parallel
};

}  // namespace npusim::emulator
