// The command processor: a scalar core running the firmware. It sleeps until the host rings the doorbell, reads
// commands from the ring in DRAM, starts NPU cores and waits for them, and moves data over the host link.
#pragma once

#include <tlm_utils/simple_initiator_socket.h>

#include <optional>
#include <systemc>
#include <tlm>
#include <vector>

#include "clock.h"
#include "npu_core.h"
#include "npusim/emulator/chip.h"

namespace npusim::sim {

class CommandProcessor : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<CommandProcessor> dram_port;
  tlm_utils::simple_initiator_socket<CommandProcessor> host_port;

  CommandProcessor(sc_core::sc_module_name name, const config::ChipConfig& config, emulator::DeviceMemory& memory,
                   std::vector<NpuCore*> cores, CoreBarrier& barrier);

  // Host side, called between simulation runs. A boot restarts the firmware whether it failed or sleeps in wfd.
  void boot(uint64_t firmware_entry);
  void ring_doorbell();
  std::optional<emulator::KernelFault> take_firmware_fault() { return std::exchange(firmware_fault_, std::nullopt); }
  std::vector<emulator::LaunchRecord> take_launch_records() { return std::exchange(launch_records_, {}); }

 private:
  class FirmwareContext;
  struct Reboot {};  // thrown out of a sleeping firmware's wfd when the host boots it again

  void run();

  const config::ChipConfig& config_;
  emulator::DeviceMemory& memory_;
  emulator::DecodeCache decoded_{memory_};
  std::vector<NpuCore*> cores_;
  CoreBarrier& barrier_;
  Clock clock_;
  emulator::ScalarState state_;
  sc_core::sc_event boot_event_, doorbell_event_;
  uint64_t firmware_entry_ = 0;
  bool boot_requested_ = false;
  int pending_doorbells_ = 0;
  uint64_t awake_instructions_ = 0;  // since the firmware last woke (emulator::kCommandProcessorBudget)
  std::optional<emulator::KernelFault> firmware_fault_;
  std::vector<emulator::LaunchRecord> launch_records_;
};

}  // namespace npusim::sim
