// One simulated NPU as the host sees it: device memory, copies, program loading and kernel launches, all carried
// out by the chip's own command-processor firmware through the command ring. Launches are synchronous for now.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emulator/chip.h"
#include "npusim/runtime/device_allocator.h"

namespace npusim::runtime {

enum class Mode { Functional, Timed };
Mode parse_mode(const std::string& text);  // throws std::invalid_argument naming the accepted values
std::string mode_name(Mode mode);

// A kernel trapped or the firmware failed; the message names the kernel, core, PC, instruction and cause.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the device did for one command, for reports.
struct CommandRecord {
  std::string name;             // kernel name, or copy_h2d / copy_d2h / copy_d2d
  std::string scope;            // what the host was doing when it issued the command (e.g. the module path)
  uint64_t bytes = 0;           // bytes copied (copies) or moved to and from DRAM (kernels)
  uint64_t start_cycle = 0;     // device time when the host submitted the command (timed mode)
  uint64_t cores = 0;           // cores the kernel ran on
  uint64_t kernel_cycles = 0;   // from launch to the last core's halt (timed mode)
  uint64_t device_cycles = 0;   // the whole command, firmware included (timed mode)
  emulator::KernelStats stats;  // kernels: summed over their cores
  std::string first_hazard;     // kernels: the first hazard the timed model saw, or empty
  std::vector<emulator::EngineInterval> trace;  // kernels, when tracing is on (timed mode)
  int64_t host_ns = 0;  // wall-clock time of the submission, ns since the epoch (places it on a profiler's timeline)
  std::string op;       // the PyTorch operator that issued the command, when a profiler names them (set_op)

  uint64_t instructions() const {
    return stats.instructions_scalar + stats.instructions_dma + stats.instructions_vector + stats.instructions_matrix;
  }
};

class Device {
 public:
  Device(const config::ChipConfig& config, Mode mode);
  ~Device();

  const config::ChipConfig& config() const { return chip_->config(); }
  Mode mode() const { return mode_; }

  uint64_t allocate(uint64_t bytes) { return allocator_.allocate(bytes); }
  void free(uint64_t address) { allocator_.free(address); }
  MemoryStats memory_stats() const { return allocator_.stats(); }
  void reset_peak_memory() { allocator_.reset_peak(); }

  void copy_host_to_device(uint64_t destination, const void* source, uint64_t bytes);
  void copy_device_to_host(void* destination, uint64_t source, uint64_t bytes);
  void copy_device_to_device(uint64_t destination, uint64_t source, uint64_t bytes);

  // Places a program image in the device's code region (not counted in the memory statistics); the address stays
  // valid for the device's lifetime.
  uint64_t load_program(std::span<const uint64_t> words);
  // Runs the program on the cores in `core_mask`; each core starts with r1 = address of `arguments`.
  void launch(const std::string& kernel_name, uint64_t program, std::span<const uint64_t> arguments,
              uint64_t core_mask = 1);

  std::vector<CommandRecord> take_records();
  // Whether commands leave records for take_records (on by default; a long run with nobody reading them turns it off).
  void set_recording(bool enabled);
  // Called with the record of every command that completes from now on, whether or not records are kept (a
  // profiler's hook); an empty function removes it.
  void set_observer(std::function<void(const CommandRecord&)> observer);
  // A label stamped on the records of the commands that follow (the profiler sets the PyTorch module path).
  void set_scope(std::string scope);
  // The operator name stamped on the records of the commands that follow (the profiler sets the running aten op).
  void set_op(std::string op);
  uint64_t elapsed_cycles() const { return chip_->elapsed_cycles(); }

  // Commands completed so far and the simulated clock after the last one: safe to read from any thread while the
  // device runs (a progress display's).
  struct Progress {
    uint64_t commands, cycles;
  };
  Progress progress() const { return {completed_commands_.load(), completed_cycles_.load()}; }
  // A core's scalar registers as its last kernel left them; std::out_of_range for a core the chip lacks.
  std::array<uint64_t, isa::kRegisterCount> core_registers(int core) const {
    if (core < 0 || core >= config().chip_cores)
      throw std::out_of_range("core " + std::to_string(core) + " does not exist; the chip has " +
                              std::to_string(config().chip_cores));
    return chip_->core_registers(core);
  }
  // Engine activity intervals in kernel records (timed mode; costs host memory per tile instruction).
  void set_tracing(bool enabled);

 private:
  struct Submitted {
    uint64_t status;
    uint64_t start_cycle;
    uint64_t device_cycles;
    int64_t host_ns;
  };
  void record_copy(const char* name, uint64_t bytes, const Submitted& done);
  void keep(CommandRecord record);
  std::function<void(const CommandRecord&)> observer_;
  Submitted submit(uint64_t kind, uint64_t arg0, uint64_t arg1, uint64_t arg2);
  void boot_firmware();

  Mode mode_;
  std::unique_ptr<emulator::Chip> chip_;
  DeviceAllocator code_allocator_;  // program images
  DeviceAllocator allocator_;       // tensors and argument blocks
  std::mutex submit_mutex_;
  uint64_t next_sequence_ = 1;
  std::atomic<uint64_t> completed_commands_{0}, completed_cycles_{0};
  bool recording_ = true;
  std::string scope_, op_;
  std::vector<CommandRecord> records_;
};

}  // namespace npusim::runtime
