// The top level of the SystemC model: builds the modules from the configuration, binds their sockets, and runs the
// simulation whenever the host wakes the command processor.
#include "npusim/sim/timed_chip.h"

// SystemC before the TLM utilities, which assume it.
#include <systemc>

#include <fmt/format.h>
#include <tlm_utils/tlm_quantumkeeper.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "command_processor.h"
#include "dram.h"
#include "host_link.h"
#include "npu_core.h"

// libsystemc.so refers to sc_main; this library drives the kernel with sc_start instead, so it is never called.
int sc_main(int, char*[]) { return 1; }

namespace npusim::sim {
namespace {

class TimedChip : public emulator::Chip {
 public:
  explicit TimedChip(const config::ChipConfig& config)
      : config_(config),
        memory_(config_.dram_capacity_bytes()),
        clock_(config_.chip_clock_ghz),
        dram_("dram", config_, memory_),
        host_link_("host_link", config_) {
    std::vector<NpuCore*> core_pointers;
    for (int index = 0; index < config_.chip_cores; ++index) {
      cores_.push_back(std::make_unique<NpuCore>(fmt::format("core{}", index).c_str(), index, config_, memory_));
      cores_.back()->scalar_port.bind(dram_.socket);
      cores_.back()->dma_port.bind(dram_.socket);
      core_pointers.push_back(cores_.back().get());
    }
    for (auto& core : cores_) core->connect(barrier_, core_pointers);
    command_processor_ =
        std::make_unique<CommandProcessor>("command_processor", config_, memory_, core_pointers, barrier_);
    command_processor_->dram_port.bind(dram_.socket);
    command_processor_->host_port.bind(host_link_.socket);
    tlm_utils::tlm_quantumkeeper::set_global_quantum(sc_core::sc_time(1, sc_core::SC_US));
    // Finish elaboration and let every thread reach its first wait, so later notifications find them waiting.
    sc_core::sc_start(sc_core::SC_ZERO_TIME);
  }

  const config::ChipConfig& config() const override { return config_; }
  emulator::DeviceMemory& memory() override { return memory_; }

  void boot(uint64_t firmware_entry) override {
    command_processor_->boot(firmware_entry);
    simulate();
  }
  void ring_doorbell() override {
    command_processor_->ring_doorbell();
    simulate();
  }
  std::optional<emulator::KernelFault> take_kernel_fault() override { return command_processor_->take_kernel_fault(); }
  std::vector<emulator::LaunchRecord> take_launch_records() override {
    return command_processor_->take_launch_records();
  }
  uint64_t elapsed_cycles() const override { return clock_.to_cycles(sc_core::sc_time_stamp()); }
  void set_tracing(bool enabled) override {
    for (auto& core : cores_) core->set_tracing(enabled);
  }
  std::array<uint64_t, isa::kRegisterCount> core_registers(int core) const override {
    return cores_.at(core)->registers();
  }

 private:
  // Runs until nothing is left to do: the firmware sleeps in wfd and every core and engine is idle.
  void simulate() {
    sc_core::sc_start();
    if (auto fault = command_processor_->take_firmware_fault()) throw emulator::CommandProcessorFault(*fault);
  }

  config::ChipConfig config_;
  emulator::DeviceMemory memory_;
  Clock clock_;
  Dram dram_;
  HostLink host_link_;
  CoreBarrier barrier_;
  std::vector<std::unique_ptr<NpuCore>> cores_;
  std::unique_ptr<CommandProcessor> command_processor_;
};

bool timed_chip_built = false;

}  // namespace

std::unique_ptr<emulator::Chip> make_timed_chip(const config::ChipConfig& config) {
  if (timed_chip_built)
    throw std::logic_error(
        "a timed (SystemC) chip was already built in this process; SystemC elaborates one design per process");
  timed_chip_built = true;
  setenv("SYSC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  return std::make_unique<TimedChip>(config);
}

}  // namespace npusim::sim
