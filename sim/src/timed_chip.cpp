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
#include "interconnect.h"
#include "npu_core.h"

// libsystemc.so refers to sc_main; this library drives the kernel with sc_start instead, so it is never called.
int sc_main(int, char*[]) { return 1; }

namespace npusim::sim {
namespace {

class TimedChip : public emulator::Chip {
 public:
  // `prefix` keeps the module names of several chips in one design apart.
  TimedChip(const config::ChipConfig& config, const std::string& prefix)
      : config_(config),
        memory_(config_.dram_capacity_bytes()),
        clock_(config_.chip_clock_ghz),
        dram_((prefix + "dram").c_str(), config_, memory_),
        interconnect_((prefix + "interconnect").c_str(), config_, config_.chip_cores + 1),
        host_link_((prefix + "host_link").c_str(), config_) {
    std::vector<NpuCore*> core_pointers;
    for (int index = 0; index < config_.chip_cores; ++index) {
      cores_.push_back(std::make_unique<NpuCore>(fmt::format("{}core{}", prefix, index).c_str(), index, config_,
                                                 memory_, stop_flag()));
      interconnect_.attach(cores_.back()->scalar_port, index);
      interconnect_.attach(cores_.back()->dma_port, index);
      core_pointers.push_back(cores_.back().get());
    }
    for (auto& core : cores_) core->connect(barrier_, core_pointers);
    command_processor_ = std::make_unique<CommandProcessor>((prefix + "command_processor").c_str(), config_, memory_,
                                                            core_pointers, barrier_);
    interconnect_.attach(command_processor_->dram_port,
                         config_.chip_cores);  // the last link is the command processor's
    interconnect_.dram_port.bind(dram_.socket);
    command_processor_->host_port.bind(host_link_.socket);
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
  void clear_core_memories() override {
    for (auto& core : cores_) core->clear_memories();
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
  Interconnect interconnect_;
  HostLink host_link_;
  CoreBarrier barrier_;
  std::vector<std::unique_ptr<NpuCore>> cores_;
  std::unique_ptr<CommandProcessor> command_processor_;
};

bool timed_chip_built = false;

}  // namespace

std::vector<std::unique_ptr<emulator::Chip>> make_timed_chips(const config::ChipConfig& config, int count) {
  if (timed_chip_built)
    throw std::logic_error(
        "timed (SystemC) chips were already built in this process; SystemC elaborates one design per process");
  timed_chip_built = true;
  setenv("SYSC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  std::vector<std::unique_ptr<emulator::Chip>> chips;
  for (int index = 0; index < count; ++index)
    chips.push_back(std::make_unique<TimedChip>(config, count == 1 ? "" : fmt::format("npu{}_", index)));
  tlm_utils::tlm_quantumkeeper::set_global_quantum(sc_core::sc_time(1, sc_core::SC_US));
  // Finish elaboration and let every thread reach its first wait, so later notifications find them waiting.
  sc_core::sc_start(sc_core::SC_ZERO_TIME);
  return chips;
}

}  // namespace npusim::sim
