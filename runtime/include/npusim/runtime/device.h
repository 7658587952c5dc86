// One simulated NPU as the host sees it: device memory, copies, program loading, kernel launches, streams and events,
// all carried out by the chip's own command-processor firmware through per-stream command rings. The chip runs on a
// host thread of its own (the device thread), so launches return at once and host code overlaps with simulation;
// CUDA-like semantics: commands on one stream run in order, streams are ordered with each other only by events, and
// an error in an asynchronous command surfaces at the next synchronising call.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emulator/chip.h"
#include "npusim/runtime/argument_ring.h"
#include "npusim/runtime/device_allocator.h"

namespace npusim::firmware {
struct CompletionEntry;  // ring_abi.h
}

namespace npusim::runtime {

enum class Mode { Functional, Timed };
Mode parse_mode(const std::string& text);  // throws std::invalid_argument naming the accepted values
std::string mode_name(Mode mode);

// A kernel trapped or the firmware failed; the message names the kernel, core, PC, instruction and cause.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stream: commands on one stream run in submission order. 0 is the default stream.
using StreamId = int64_t;
// As a stream argument: the calling thread's current stream on the device (set_current_stream; 0 until set).
inline constexpr StreamId kCurrentStream = -1;

// What the device did for one command, for reports.
struct CommandRecord {
  std::string name;             // kernel name, or copy_h2d / copy_d2h / copy_d2d
  std::string scope;            // what the host was doing when it issued the command (e.g. the module path)
  uint64_t bytes = 0;           // bytes copied (copies) or moved to and from DRAM (kernels)
  uint64_t start_cycle = 0;     // device time when the firmware took the command (timed mode)
  uint64_t cores = 0;           // cores the kernel ran on
  uint64_t kernel_cycles = 0;   // from launch to the last core's halt (timed mode)
  uint64_t device_cycles = 0;   // the whole command, firmware included (timed mode)
  emulator::KernelStats stats;  // kernels: summed over their cores
  std::string first_hazard;     // kernels: the first hazard the timed model saw, or empty
  std::vector<emulator::EngineInterval> trace;  // kernels, when tracing is on (timed mode)
  int64_t host_ns = 0;  // wall-clock time of the submission, ns since the epoch (places it on a profiler's timeline)
  std::string op;       // the PyTorch operator that issued the command, when a profiler names them (set_op)
  uint64_t correlation = 0;  // a profiler's id of that operator (set_correlation)
  StreamId stream = 0;

  uint64_t instructions() const {
    return stats.instructions_scalar + stats.instructions_dma + stats.instructions_vector + stats.instructions_matrix;
  }
};

class DeviceThread;
struct Command;
inline constexpr int kRings = 8;  // firmware::RING_COUNT: streams beyond it share rings

class Device {
 public:
  // A device with a device thread of its own.
  Device(const config::ChipConfig& config, Mode mode);
  // `count` devices of one configuration sharing one device thread (timed chips must: SystemC runs one design from
  // one host thread); std::logic_error if this process already built its timed chips.
  static std::vector<std::unique_ptr<Device>> open_devices(const config::ChipConfig& config, Mode mode, int count);
  ~Device();  // finishes the work already submitted

  const config::ChipConfig& config() const { return config_; }
  Mode mode() const { return mode_; }

  uint64_t allocate(uint64_t bytes);  // OutOfMemory once freed blocks still in use have been waited for
  // While a single stream has run commands, freed memory is reusable at once: work that reuses it runs after the
  // work that used it. Once several streams have, a freed block is reused only after every command submitted before
  // its free has completed, so that no stream's pending work sees its memory reused by another (stricter than CUDA's
  // caching allocator, which leaves cross-stream uses to record_stream).
  void free(uint64_t address);
  MemoryStats memory_stats() const { return allocator_.stats(); }
  void reset_peak_memory() { allocator_.reset_peak(); }
  void reset_accumulated_memory() { allocator_.reset_accumulated(); }

  // Copies with host memory return once done, so the host buffer may be reused (and read) at once; they synchronise
  // their stream. Device-to-device copies and launches return at once and run in stream order.
  void copy_host_to_device(uint64_t destination, const void* source, uint64_t bytes, StreamId stream = kCurrentStream);
  void copy_device_to_host(void* destination, uint64_t source, uint64_t bytes, StreamId stream = kCurrentStream);
  void copy_device_to_device(uint64_t destination, uint64_t source, uint64_t bytes, StreamId stream = kCurrentStream);

  // Places a program image in the device's code region (not counted in the memory statistics); the address stays
  // valid for the device's lifetime.
  uint64_t load_program(std::span<const uint64_t> words);
  // Frees a program image once every command submitted so far has run (it waits for them): for a host that builds
  // programs without end, as a fuzzer does; the kernel cache keeps its programs for the device's lifetime.
  void unload_program(uint64_t program);
  // Runs the program on the cores in `core_mask`; each core starts with r1 = address of `arguments`. Returns at once
  // (NPUSIM_LAUNCH_BLOCKING=1: once the kernel has run, raising its error there).
  void launch(const std::string& kernel_name, uint64_t program, std::span<const uint64_t> arguments,
              uint64_t core_mask = 1, StreamId stream = kCurrentStream);

  // Events: record() marks a point in a stream; wait() makes later commands of another stream wait for it (a
  // never-recorded event is complete, as in CUDA). The cycle is the simulated time the firmware recorded it at.
  int create_event();
  void destroy_event(int event);
  void record_event(int event, StreamId stream);
  void wait_event(int event, StreamId stream);
  bool event_done(int event);
  void synchronize_event(int event);
  uint64_t event_cycle(int event);  // synchronises the event first

  // The calling thread's current stream on this device, as torch.npusim.set_stream makes it.
  StreamId current_stream() const;
  void set_current_stream(StreamId stream);

  bool stream_done(StreamId stream);
  void synchronize_stream(StreamId stream);
  // Waits for every command submitted so far; raises the first error of an asynchronous command not yet reported.
  void synchronize();

  // Records of completed commands (synchronises first, so every submitted command has its record).
  std::vector<CommandRecord> take_records();
  // Whether commands leave records for take_records (on by default; a long run with nobody reading them turns it off).
  void set_recording(bool enabled);
  // Called on the device thread with the record of every command that completes from now on, whether or not records
  // are kept (a profiler's hook); an empty function removes it.
  void set_observer(std::function<void(const CommandRecord&)> observer);
  // A label stamped on the records of the commands that follow (the profiler sets the PyTorch module path).
  void set_scope(std::string scope);
  // The operator name stamped on the records of the commands that follow (the profiler sets the running aten op).
  void set_op(std::string op);
  void set_correlation(uint64_t correlation);
  // Waits for every command submitted so far without raising their errors (they stay for the next synchronising
  // call): for a profiler that must see every command before it stops.
  void wait_idle();
  // Gives up the work submitted so far: commands not yet started are dropped, running kernels stopped (they trap),
  // and the next synchronising call raises a DeviceError saying so. The device stays usable. An interrupted wait
  // (wait_interrupt.h) and process exit do this.
  void abandon_work();
  // The simulated clock once every submitted command has completed (synchronises).
  uint64_t elapsed_cycles();

  // Commands completed so far and the simulated clock after the last one: safe to read from any thread while the
  // device runs (a progress display's).
  struct Progress {
    uint64_t commands, cycles;
  };
  Progress progress() const { return {completed_commands_.load(), completed_cycles_.load()}; }
  // A core's scalar registers as its last kernel left them (synchronises); std::out_of_range for a core the chip
  // lacks.
  std::array<uint64_t, isa::kRegisterCount> core_registers(int core);
  // Engine activity intervals in kernel records (timed mode; costs host memory per tile instruction).
  void set_tracing(bool enabled);

 private:
  friend class DeviceThread;
  Device(const config::ChipConfig& config, Mode mode, std::shared_ptr<DeviceThread> thread);

  // Host side (any thread).
  void submit(Command command);
  uint64_t allocate_reserved(uint64_t bytes);
  StreamId resolve(StreamId stream) const { return stream == kCurrentStream ? current_stream() : stream; }
  void wait_until(const std::function<bool()>& done, std::unique_lock<std::mutex>& lock);
  void raise_pending_error(std::unique_lock<std::mutex>& lock);
  void abandon_unfinished();                // caller holds the lock
  bool completed(uint64_t sequence) const;  // caller holds the lock
  void free_deferred_blocks();              // caller holds the lock

  // Device thread.
  bool has_work() const;  // caller holds the lock
  void serve(std::unique_lock<std::mutex>& lock);
  void clear_events();
  void boot_firmware();
  void write_to_ring(const Command& command);
  std::vector<firmware::CompletionEntry> read_completions();
  void finish(Command& command, const firmware::CompletionEntry& completion,
              std::optional<emulator::LaunchRecord>& launch);
  void note_error(std::string message);
  void release(Command& command);

  config::ChipConfig config_;
  Mode mode_;
  std::shared_ptr<DeviceThread> thread_;
  std::unique_ptr<emulator::Chip> chip_;
  DeviceAllocator reserved_allocator_;  // program images (not in the memory statistics)
  ArgumentRing arguments_;              // launches' argument blocks
  DeviceAllocator allocator_;           // tensors

  // Guarded by the device thread's mutex.
  uint64_t next_sequence_ = 1;
  std::deque<Command> pending_;                  // submitted, not yet in a ring
  std::set<uint64_t> outstanding_;               // submitted, not yet completed
  std::map<StreamId, uint64_t> last_on_stream_;  // sequence of each stream's latest command
  struct EventState {
    uint64_t value = 0;            // how many times its slot was recorded, through all the slot's users
    uint64_t record_sequence = 0;  // the command of its latest recording (0: never recorded)
    uint64_t cycle = 0;
  };
  std::map<int, EventState> events_;
  std::vector<int> free_events_;
  std::optional<std::string> pending_error_;  // the first asynchronous error nobody has seen yet
  std::set<StreamId> streams_used_;           // streams that have submitted commands
  struct DeferredFree {
    uint64_t address, last_sequence;  // freed once every command up to last_sequence has completed
  };
  std::deque<DeferredFree> deferred_frees_;  // in sequence order
  std::set<uint64_t> deferred_addresses_;    // of deferred_frees_, to reject a second free
  std::function<void(const CommandRecord&)> observer_;
  bool recording_ = true;
  std::string scope_, op_;
  uint64_t correlation_ = 0;
  std::vector<CommandRecord> records_;

  bool serving_ = false;                  // the device thread is running this device's chip
  std::map<uint64_t, Command> in_rings_;  // sequence → command, written into a ring and not yet completed

  // Device thread only.
  std::array<uint64_t, kRings> ring_tail_{}, ring_head_{};
  uint64_t completions_seen_ = 0;
  uint64_t commands_written_ = 0;  // into all rings since the firmware booted

  std::atomic<uint64_t> completed_commands_{0}, completed_cycles_{0};
};

}  // namespace npusim::runtime
