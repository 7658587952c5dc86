// Command processor timing: one cycle per firmware instruction, DRAM and host-link transactions through TLM, and
// real waits for the cores it launched.
#include "command_processor.h"

#include <fmt/format.h>

#include <tlm_utils/tlm_quantumkeeper.h>
#include <algorithm>

#include <systemc>

#include "npusim/emulator/step.h"
#include "tlm_port.h"

namespace npusim::sim {

using emulator::Trap;

class CommandProcessor::FirmwareContext : public emulator::ExecContext {
 public:
  FirmwareContext(CommandProcessor& cp, tlm_utils::tlm_quantumkeeper& keeper)
      : ExecContext(cp.state_), cp_(cp), keeper_(keeper) {}

  void read_dram(uint64_t address, void* destination, uint64_t bytes) override {
    access(cp_.dram_port, tlm::TLM_READ_COMMAND, address, destination, bytes);
  }
  void write_dram(uint64_t address, const void* source, uint64_t bytes) override {
    access(cp_.dram_port, tlm::TLM_WRITE_COMMAND, address, const_cast<void*>(source), bytes);
  }
  uint64_t fetch_word(uint64_t address) override { return cp_.memory_.fetch_word(address); }
  const emulator::DecodedInstruction& fetch_decoded() override { return cp_.decoded_.fetch(pc); }
  uint64_t read_csr(isa::Csr csr) override {
    switch (csr) {
      case isa::Csr::CoreCount: return static_cast<uint64_t>(cp_.config_.chip_cores);
      case isa::Csr::Cycle: return cp_.clock_.to_cycles(keeper_.get_current_time());
      case isa::Csr::InstructionsRetired: return cp_.state_.instructions_retired;
      default: return 0;
    }
  }

  void wait_for_doorbell() override {
    keeper_.sync();
    while (cp_.pending_doorbells_ == 0 && !cp_.boot_requested_) sc_core::wait(cp_.doorbell_event_ | cp_.boot_event_);
    if (cp_.boot_requested_) throw Reboot{};
    --cp_.pending_doorbells_;
    cp_.awake_instructions_ = 0;
  }

  void launch_cores(uint64_t program, uint64_t arguments, uint64_t core_mask) override {
    emulator::check_core_mask(core_mask, static_cast<int64_t>(cp_.cores_.size()));
    keeper_.sync();
    launch_ = emulator::LaunchRecord{core_mask, program};
    launch_start_ = sc_core::sc_time_stamp();
    launch_->start_cycle = cp_.clock_.to_cycles(launch_start_);
    cp_.barrier_.begin_launch(core_mask);
    for (size_t core = 0; core < cp_.cores_.size(); ++core)
      if (core_mask >> core & 1) cp_.cores_[core]->start(program, arguments);
  }

  uint64_t wait_cores() override {
    if (!launch_) throw Trap("wait without a launch");
    keeper_.sync();
    std::vector<emulator::KernelFault> faults;
    for (size_t core = 0; core < cp_.cores_.size(); ++core) {
      if (!(launch_->core_mask >> core & 1)) continue;
      NpuCore& npu = *cp_.cores_[core];
      while (npu.busy()) sc_core::wait(npu.done_event());
      launch_->stats.add(npu.stats());
      if (std::string hazard = npu.take_first_hazard(); launch_->first_hazard.empty())
        launch_->first_hazard = std::move(hazard);
      std::vector<emulator::EngineInterval> trace = npu.take_trace();
      launch_->trace.insert(launch_->trace.end(), trace.begin(), trace.end());
      if (auto fault = npu.take_fault()) faults.push_back(std::move(*fault));
    }
    uint64_t status = 0;
    if (std::optional<emulator::KernelFault> fault = emulator::reported_fault(std::move(faults))) {
      status = static_cast<uint64_t>(fault->core) + 1;
      launch_->fault = std::move(fault);
    }
    launch_->end_cycle = launch_->start_cycle + cp_.clock_.to_cycles(sc_core::sc_time_stamp() - launch_start_);
    cp_.launch_records_.push_back(*launch_);
    launch_.reset();
    return status;
  }

  // Copies are store-and-forward through a staging buffer, one chunk at a time: read side, then write side.
  void copy_host_to_device(uint64_t device_address, uint64_t host_address, uint64_t bytes) override {
    cp_.memory_.require_range(device_address, bytes, "write");
    copy_in_chunks(cp_.host_port, host_address, cp_.dram_port, device_address, bytes);
  }
  void copy_device_to_host(uint64_t host_address, uint64_t device_address, uint64_t bytes) override {
    cp_.memory_.require_range(device_address, bytes, "read");
    copy_in_chunks(cp_.dram_port, device_address, cp_.host_port, host_address, bytes);
  }
  void copy_device_to_device(uint64_t destination, uint64_t source, uint64_t bytes) override {
    cp_.memory_.require_range(source, bytes, "read");
    cp_.memory_.require_range(destination, bytes, "write");
    copy_in_chunks(cp_.dram_port, source, cp_.dram_port, destination, bytes);
  }

 protected:
  std::span<std::byte> scratchpad_memory() override { return {}; }

 private:
  template <typename Source, typename Destination>
  void copy_in_chunks(Source& source_port, uint64_t source, Destination& destination_port, uint64_t destination,
                      uint64_t bytes) {
    std::vector<std::byte> buffer(std::min(bytes, emulator::kCopyChunkBytes));
    for (uint64_t done = 0; done < bytes; done += buffer.size()) {
      const uint64_t chunk = std::min<uint64_t>(buffer.size(), bytes - done);
      access(source_port, tlm::TLM_READ_COMMAND, source + done, buffer.data(), chunk);
      access(destination_port, tlm::TLM_WRITE_COMMAND, destination + done, buffer.data(), chunk);
    }
  }

  template <typename Socket>
  void access(Socket& socket, tlm::tlm_command command, uint64_t address, void* data, uint64_t bytes) {
    if (bytes == 0) return;
    sc_core::sc_time delay = keeper_.get_local_time();
    transport(socket, command, address, data, bytes, delay);
    keeper_.set(delay);
  }

  CommandProcessor& cp_;
  tlm_utils::tlm_quantumkeeper& keeper_;
  std::optional<emulator::LaunchRecord> launch_;
  sc_core::sc_time launch_start_;
};

CommandProcessor::CommandProcessor(sc_core::sc_module_name name, const config::ChipConfig& config,
                                   emulator::DeviceMemory& memory, std::vector<NpuCore*> cores, CoreBarrier& barrier)
    : sc_module(name),
      dram_port("dram_port"),
      host_port("host_port"),
      config_(config),
      memory_(memory),
      cores_(std::move(cores)),
      barrier_(barrier),
      clock_(config.chip_clock_ghz) {
  SC_HAS_PROCESS(CommandProcessor);
  SC_THREAD(run);
}

void CommandProcessor::boot(uint64_t firmware_entry) {
  firmware_entry_ = firmware_entry;
  pending_doorbells_ = 0;
  boot_requested_ = true;
  boot_event_.notify(sc_core::SC_ZERO_TIME);
}

void CommandProcessor::ring_doorbell() {
  ++pending_doorbells_;
  doorbell_event_.notify(sc_core::SC_ZERO_TIME);
}

// Each boot runs the firmware until it traps or the host boots it again (as the functional chip does).
void CommandProcessor::run() {
  while (true) {
    if (!boot_requested_) sc_core::wait(boot_event_);
    boot_requested_ = false;
    state_ = emulator::ScalarState{};
    state_.pc = firmware_entry_;
    tlm_utils::tlm_quantumkeeper keeper;
    keeper.reset();
    FirmwareContext context(*this, keeper);
    try {
      awake_instructions_ = 0;
      while (true) {
        if (++awake_instructions_ > emulator::kCommandProcessorBudget)
          throw emulator::command_processor_watchdog_trap();
        emulator::step(context);
        keeper.inc(clock_.cycles(1));
        if (keeper.need_sync()) keeper.sync();
      }
    } catch (const Trap& trap) {
      firmware_fault_ = emulator::make_fault(context, -1, state_.pc, trap.what());
    } catch (const Reboot&) {
    }
    keeper.sync();
  }
}

}  // namespace npusim::sim
