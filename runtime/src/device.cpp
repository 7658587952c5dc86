// Host side of the command rings: commands are queued by any host thread, written into the stream's ring by the
// device thread, executed by the firmware, and finished from the completion queue the firmware writes.
#include "npusim/runtime/device.h"

#include <fmt/format.h>

#include <bit>
#include <chrono>
#include <cstdlib>

#include "device_thread.h"
#include "npusim/emulator/functional_chip.h"
#include "npusim/firmware/ring_abi.h"
#include "npusim/runtime/wait_interrupt.h"
#include "npusim/sim/timed_chip.h"

namespace npusim::runtime {

namespace abi = npusim::firmware;
static_assert(kRings == abi::RING_COUNT);

// One command on its way through the device.
struct Command {
  uint64_t kind = 0, arg0 = 0, arg1 = 0, arg2 = 0;
  StreamId stream = 0;
  uint64_t sequence = 0;
  uint64_t argument_block = 0;  // launches: freed once the kernel has run
  int event = -1;               // event commands
  bool keeps_record = true;     // kernels and copies leave records; event and fence commands do not
  CommandRecord record;         // what the host knew at submission; the device thread adds the rest
};

Mode parse_mode(const std::string& text) {
  if (text == "functional") return Mode::Functional;
  if (text == "timed") return Mode::Timed;
  throw std::invalid_argument(fmt::format("unknown mode '{}': expected 'functional' or 'timed'", text));
}

std::string mode_name(Mode mode) { return mode == Mode::Functional ? "functional" : "timed"; }

namespace {

// Program images and argument blocks live in their own region below the heap: 1/64 of the device memory, at most
// 256 MiB.
uint64_t code_region_end(const config::ChipConfig& config) {
  return abi::HEAP_BASE + std::min<uint64_t>(config.dram_capacity_bytes() / 64, uint64_t{256} << 20);
}

// The code region's last quarter (at most 16 MiB) holds the argument ring; program images take the rest.
uint64_t argument_ring_bytes(const config::ChipConfig& config) {
  return std::min<uint64_t>((code_region_end(config) - abi::HEAP_BASE) / 4, uint64_t{16} << 20);
}
uint64_t programs_end(const config::ChipConfig& config) {
  return code_region_end(config) - argument_ring_bytes(config);
}

int ring_of(StreamId stream) { return static_cast<int>(static_cast<uint64_t>(stream) % abi::RING_COUNT); }

uint64_t ring_header(int ring) { return abi::RING_BASE + (static_cast<uint64_t>(ring) << abi::RING_SHIFT); }

uint64_t event_address(int event) { return abi::EVENT_BASE + (static_cast<uint64_t>(event) << abi::EVENT_SHIFT); }

int64_t host_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool launch_blocking() {
  const char* setting = std::getenv("NPUSIM_LAUNCH_BLOCKING");
  return setting && std::string(setting) == "1";
}

// A hazard makes a kernel's result depend on timing: an error with NPUSIM_HAZARDS=error, else a warning on stderr
// once per kernel.
std::optional<std::string> report_hazard(const std::string& kernel_name, const std::string& hazard) {
  const char* setting = std::getenv("NPUSIM_HAZARDS");
  if (setting && std::string(setting) == "error")
    return fmt::format("npusim kernel '{}' has a hazard (NPUSIM_HAZARDS=error): {}", kernel_name, hazard);
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  if (warned.insert(kernel_name).second)
    fmt::print(stderr, "npusim: warning: kernel '{}' has a hazard: {}\n", kernel_name, hazard);
  return std::nullopt;
}

}  // namespace

Device::Device(const config::ChipConfig& config, Mode mode) : Device(config, mode, std::make_shared<DeviceThread>()) {
  chip_ = thread_->call([&] {
    std::unique_ptr<emulator::Chip> chip;
    if (mode == Mode::Timed) {
      chip = std::move(sim::make_timed_chips(config, 1).front());
    } else {
      chip = std::make_unique<emulator::FunctionalChip>(config);
    }
    return chip;
  });
  thread_->call([&] {
    clear_events();
    boot_firmware();
  });
  thread_->attach(this);
}

Device::Device(const config::ChipConfig& config, Mode mode, std::shared_ptr<DeviceThread> thread)
    : config_(config),
      mode_(mode),
      thread_(std::move(thread)),
      reserved_allocator_(abi::HEAP_BASE, programs_end(config)),
      arguments_(programs_end(config), argument_ring_bytes(config)),
      allocator_(code_region_end(config), config.dram_capacity_bytes()) {
  for (int event = abi::EVENT_COUNT - 1; event >= 0; --event) free_events_.push_back(event);
}

std::vector<std::unique_ptr<Device>> Device::open_devices(const config::ChipConfig& config, Mode mode, int count) {
  auto thread = std::make_shared<DeviceThread>();
  std::vector<std::unique_ptr<Device>> devices;
  for (int index = 0; index < count; ++index)
    devices.push_back(std::unique_ptr<Device>(new Device(config, mode, thread)));
  thread->call([&] {
    if (mode == Mode::Timed) {
      std::vector<std::unique_ptr<emulator::Chip>> chips = sim::make_timed_chips(config, count);
      for (int index = 0; index < count; ++index) devices[index]->chip_ = std::move(chips[index]);
    } else {
      for (auto& device : devices) device->chip_ = std::make_unique<emulator::FunctionalChip>(config);
    }
    for (auto& device : devices) {
      device->clear_events();
      device->boot_firmware();
    }
  });
  for (auto& device : devices) thread->attach(device.get());
  return devices;
}

Device::~Device() {
  thread_->detach(this);
  thread_->call([this] { chip_.reset(); });  // the chip is the device thread's, to the end
}

// ---- host side -------------------------------------------------------------------------------------------------

namespace {
thread_local std::map<const Device*, StreamId> current_streams;
}

StreamId Device::current_stream() const {
  const auto current = current_streams.find(this);
  return current == current_streams.end() ? 0 : current->second;
}

void Device::set_current_stream(StreamId stream) {
  if (stream < 0) throw std::invalid_argument(fmt::format("npusim: stream {} is not a stream", stream));
  current_streams[this] = stream;
}

void Device::submit(Command command) {
  command.stream = resolve(command.stream);
  command.record.host_ns = host_now_ns();
  command.record.stream = command.stream;
  {
    std::lock_guard lock(thread_->mutex());
    if (command.kind == abi::COMMAND_EVENT_RECORD) {
      // Under the same lock as the submission, so that a wait on another thread sees the recording whole.
      EventState& event = events_.at(command.event);
      command.arg1 = ++event.value;
      event.record_sequence = next_sequence_;
    }
    const uint64_t sequence = command.sequence = next_sequence_++;
    command.record.scope = scope_;
    command.record.op = op_;
    command.record.correlation = correlation_;
    outstanding_.insert(sequence);
    last_on_stream_[command.stream] = sequence;
    streams_used_.insert(command.stream);
    pending_.push_back(std::move(command));
  }
  thread_->wake();
}

bool Device::completed(uint64_t sequence) const { return !outstanding_.contains(sequence); }

uint64_t Device::allocate(uint64_t bytes) {
  try {
    return allocator_.allocate(bytes);
  } catch (const OutOfMemory&) {
    {
      std::lock_guard lock(thread_->mutex());
      if (deferred_frees_.empty()) throw;
    }
    wait_idle();  // the deferred blocks are free once the work before them is done
    return allocator_.allocate(bytes);
  }
}

void Device::free(uint64_t address) {
  std::lock_guard lock(thread_->mutex());
  if (streams_used_.size() <= 1 || outstanding_.empty()) {
    allocator_.free(address);
    return;
  }
  allocator_.check_freeable(address);
  if (!deferred_addresses_.insert(address).second)
    throw std::invalid_argument(fmt::format("free of device address 0x{:x}, already freed", address));
  deferred_frees_.push_back({address, next_sequence_ - 1});
}

void Device::free_deferred_blocks() {
  const uint64_t first_unfinished = outstanding_.empty() ? UINT64_MAX : *outstanding_.begin();
  while (!deferred_frees_.empty() && deferred_frees_.front().last_sequence < first_unfinished) {
    allocator_.free(deferred_frees_.front().address);
    deferred_addresses_.erase(deferred_frees_.front().address);
    deferred_frees_.pop_front();
  }
}

void Device::wait_until(const std::function<bool()>& done, std::unique_lock<std::mutex>& lock) {
  while (!thread_->changed().wait_for(lock, kWaitInterruptPeriod, done)) {
    lock.unlock();
    try {
      check_wait_interrupt();
    } catch (...) {
      lock.lock();
      abandon_unfinished();
      throw;
    }
    lock.lock();
  }
}

void Device::abandon_work() {
  std::lock_guard lock(thread_->mutex());
  abandon_unfinished();
}

void Device::abandon_unfinished() {
  if (outstanding_.empty()) return;
  const size_t unfinished = outstanding_.size();
  for (Command& command : pending_) release(command);
  pending_.clear();
  chip_->request_stop();  // the commands in the rings: their kernels trap at once, cleared by the next round
  note_error(
      fmt::format("npusim: {} unfinished command{} abandoned when the host stopped waiting (an interrupt); "
                  "the tensors they were writing hold undefined values",
                  unfinished, unfinished == 1 ? " was" : "s were"));
}

void Device::raise_pending_error(std::unique_lock<std::mutex>& lock) {
  if (!pending_error_) return;
  const std::string message = std::exchange(pending_error_, std::nullopt).value();
  throw DeviceError(message);
}

void Device::copy_host_to_device(uint64_t destination, const void* source, uint64_t bytes, StreamId stream) {
  if (bytes == 0) return;
  Command command{abi::COMMAND_COPY_H2D, destination, reinterpret_cast<uint64_t>(source), bytes, stream};
  command.record.name = "copy_h2d";
  command.record.bytes = bytes;
  submit(std::move(command));
  synchronize_stream(resolve(stream));  // the host buffer is read by the device thread; it must outlive the copy
}

void Device::copy_device_to_host(void* destination, uint64_t source, uint64_t bytes, StreamId stream) {
  if (bytes == 0) return;
  Command command{abi::COMMAND_COPY_D2H, reinterpret_cast<uint64_t>(destination), source, bytes, stream};
  command.record.name = "copy_d2h";
  command.record.bytes = bytes;
  submit(std::move(command));
  synchronize_stream(resolve(stream));
}

void Device::copy_device_to_device(uint64_t destination, uint64_t source, uint64_t bytes, StreamId stream) {
  if (bytes == 0) return;
  Command command{abi::COMMAND_COPY_D2D, destination, source, bytes, stream};
  command.record.name = "copy_d2d";
  command.record.bytes = bytes;
  submit(std::move(command));
}

// Program images share the code region with the argument ring: when their part is full, the host waits for the device
// to catch up before it gives up.
uint64_t Device::allocate_reserved(uint64_t bytes) {
  try {
    return reserved_allocator_.allocate(bytes);
  } catch (const OutOfMemory&) {
    wait_idle();
    return reserved_allocator_.allocate(bytes);
  }
}

uint64_t Device::load_program(std::span<const uint64_t> words) {
  // Device memory may be written while the chip runs: pages appear atomically, and a write to code is noticed by the
  // decoded-instruction caches.
  const uint64_t address = allocate_reserved(words.size_bytes());
  chip_->memory().write(address, words.data(), words.size_bytes());
  return address;
}

void Device::unload_program(uint64_t program) {
  wait_idle();
  reserved_allocator_.free(program);
}

void Device::launch(const std::string& kernel_name, uint64_t program, std::span<const uint64_t> arguments,
                    uint64_t core_mask, StreamId stream) {
  try {
    emulator::check_core_mask(core_mask, config_.chip_cores);
  } catch (const emulator::Trap& bad_mask) {
    throw std::invalid_argument(fmt::format("launch of '{}': {}", kernel_name, bad_mask.what()));
  }
  uint64_t argument_block = arguments_.allocate(arguments.size_bytes());
  if (argument_block == 0) {  // the ring is full of launches not yet run: wait for them, then the same block is free
    wait_idle();
    argument_block = arguments_.allocate(arguments.size_bytes());
  }
  chip_->memory().write(argument_block, arguments.data(), arguments.size_bytes());
  Command command{abi::COMMAND_LAUNCH, program, argument_block, core_mask, stream};
  command.argument_block = argument_block;
  command.record.name = kernel_name;
  command.record.cores = static_cast<uint64_t>(std::popcount(core_mask));
  submit(std::move(command));
  if (launch_blocking()) synchronize_stream(resolve(stream));
}

int Device::create_event() {
  std::lock_guard lock(thread_->mutex());
  if (free_events_.empty())
    throw std::runtime_error(fmt::format("npusim: all {} device events are in use", abi::EVENT_COUNT));
  const int event = free_events_.back();
  free_events_.pop_back();
  // The slot's value only grows, through every use of the slot: a wait of the new event must not be satisfied by a
  // value a previous user recorded.
  EventState& state = events_[event];
  state.record_sequence = 0;
  state.cycle = 0;
  return event;
}

void Device::destroy_event(int event) {
  // The event's slot is reused only once its last recording has completed.
  synchronize_event(event);
  std::lock_guard lock(thread_->mutex());
  free_events_.push_back(event);
}

void Device::record_event(int event, StreamId stream) {
  Command command{abi::COMMAND_EVENT_RECORD, event_address(event), 0, 0, stream};  // submit() sets the value
  command.event = event;
  command.keeps_record = false;
  submit(std::move(command));
}

void Device::wait_event(int event, StreamId stream) {
  uint64_t value = 0;
  {
    std::lock_guard lock(thread_->mutex());
    const EventState& state = events_.at(event);
    if (state.record_sequence == 0) return;  // never recorded: nothing to wait for
    value = state.value;
  }
  Command command{abi::COMMAND_EVENT_WAIT, event_address(event), value, 0, stream};
  command.keeps_record = false;
  submit(std::move(command));
}

bool Device::event_done(int event) {
  std::lock_guard lock(thread_->mutex());
  return completed(events_.at(event).record_sequence);
}

void Device::synchronize_event(int event) {
  std::unique_lock lock(thread_->mutex());
  const uint64_t sequence = events_.at(event).record_sequence;
  wait_until([&] { return completed(sequence); }, lock);
  raise_pending_error(lock);
}

uint64_t Device::event_cycle(int event) {
  synchronize_event(event);
  std::lock_guard lock(thread_->mutex());
  return events_.at(event).cycle;
}

bool Device::stream_done(StreamId stream) {
  stream = resolve(stream);
  std::lock_guard lock(thread_->mutex());
  auto last = last_on_stream_.find(stream);
  return last == last_on_stream_.end() || completed(last->second);
}

void Device::synchronize_stream(StreamId stream) {
  stream = resolve(stream);
  std::unique_lock lock(thread_->mutex());
  auto last = last_on_stream_.find(stream);
  if (last != last_on_stream_.end()) {
    const uint64_t sequence = last->second;
    wait_until([&] { return completed(sequence); }, lock);
  }
  raise_pending_error(lock);
}

void Device::synchronize() {
  std::unique_lock lock(thread_->mutex());
  wait_until([&] { return outstanding_.empty(); }, lock);
  raise_pending_error(lock);
}

std::vector<CommandRecord> Device::take_records() {
  wait_idle();
  std::lock_guard lock(thread_->mutex());
  return std::exchange(records_, {});
}

void Device::set_observer(std::function<void(const CommandRecord&)> observer) {
  std::lock_guard lock(thread_->mutex());
  observer_ = std::move(observer);
}

void Device::set_scope(std::string scope) {
  std::lock_guard lock(thread_->mutex());
  scope_ = std::move(scope);
}

void Device::set_op(std::string op) {
  std::lock_guard lock(thread_->mutex());
  op_ = std::move(op);
}

void Device::set_correlation(uint64_t correlation) {
  std::lock_guard lock(thread_->mutex());
  correlation_ = correlation;
}

void Device::wait_idle() {
  std::unique_lock lock(thread_->mutex());
  wait_until([&] { return outstanding_.empty(); }, lock);
}

void Device::set_recording(bool enabled) {
  std::lock_guard lock(thread_->mutex());
  recording_ = enabled;
}

uint64_t Device::elapsed_cycles() {
  wait_idle();
  return thread_->call([this] { return chip_->elapsed_cycles(); });
}

std::array<uint64_t, isa::kRegisterCount> Device::core_registers(int core) {
  if (core < 0 || core >= config_.chip_cores)
    throw std::out_of_range(
        fmt::format("core {} does not exist; the chip has {}", core, static_cast<int>(config_.chip_cores)));
  wait_idle();
  return thread_->call([this, core] { return chip_->core_registers(core); });
}

void Device::set_tracing(bool enabled) {
  thread_->call([this, enabled] { chip_->set_tracing(enabled); });
}

// ---- device thread ---------------------------------------------------------------------------------------------

bool Device::has_work() const { return serving_ || !pending_.empty(); }

// Once per device, not at a reboot: events recorded before a firmware fault stay recorded.
void Device::clear_events() { chip_->memory().fill(abi::EVENT_BASE, 0, abi::EVENT_COUNT << abi::EVENT_SHIFT); }

void Device::boot_firmware() {
  emulator::DeviceMemory& memory = chip_->memory();
  memory.fill(abi::RING_BASE, 0, abi::RING_COUNT << abi::RING_SHIFT);
  memory.fill(abi::COMPLETION_BASE, 0, abi::COMPLETION_ENTRIES + (abi::COMPLETION_CAPACITY << abi::COMPLETION_SHIFT));
  ring_head_.fill(0);
  ring_tail_.fill(0);
  completions_seen_ = 0;
  commands_written_ = 0;
  memory.write(abi::FIRMWARE_BASE, abi::firmware_image(), abi::firmware_image_words() * sizeof(uint64_t));
  chip_->protect_below(abi::HEAP_BASE);  // a kernel's store there traps instead of corrupting the rings or firmware
  chip_->boot(abi::FIRMWARE_BASE);
}

void Device::write_to_ring(const Command& command) {
  emulator::DeviceMemory& memory = chip_->memory();
  const int ring = ring_of(command.stream);
  const uint64_t header = ring_header(ring);
  const abi::CommandSlot slot{command.kind, command.arg0, command.arg1, command.arg2, command.sequence, {}};
  memory.write(header + abi::RING_SLOTS + (ring_tail_[ring] % abi::RING_CAPACITY) * sizeof slot, &slot, sizeof slot);
  ++ring_tail_[ring];
  memory.write(header + abi::RING_TAIL, &ring_tail_[ring], sizeof(uint64_t));
  ++commands_written_;
  memory.write(abi::COMPLETION_BASE + abi::COMPLETION_SUBMITTED, &commands_written_, sizeof(uint64_t));
}

// One round: moves waiting commands into their rings (in submission order, stopping at the first whose ring is full,
// so a command in a ring never depends on one still waiting), runs the chip until the firmware sleeps, and finishes
// the commands it completed. Called with the lock held; releases it while the chip runs.
//
// In timed mode a round takes one command: how many commands are waiting depends on host thread timing, and the
// firmware's path (sleeping between commands or going straight on) changes the simulated clock, so one command per
// doorbell keeps simulated time a function of the program alone. Functional mode has no clock and takes them all.
void Device::serve(std::unique_lock<std::mutex>& lock) {
  serving_ = true;
  chip_->clear_stop();  // commands submitted after an abandonment run
  std::vector<uint64_t> written;
  std::array<uint64_t, kRings> filled = ring_tail_;
  const size_t most = mode_ == Mode::Timed ? 1 : pending_.size();
  while (!pending_.empty() && written.size() < most) {
    const int ring = ring_of(pending_.front().stream);
    if (filled[ring] - ring_head_[ring] >= abi::RING_CAPACITY) break;
    ++filled[ring];
    written.push_back(pending_.front().sequence);
    in_rings_.emplace(pending_.front().sequence, std::move(pending_.front()));
    pending_.pop_front();
  }
  lock.unlock();

  for (uint64_t sequence : written) write_to_ring(in_rings_.at(sequence));
  std::optional<std::string> firmware_failure;
  try {
    chip_->ring_doorbell();
  } catch (const emulator::CommandProcessorFault& fault) {
    firmware_failure = fault.what();
  }
  std::vector<abi::CompletionEntry> completions = read_completions();
  std::deque<emulator::LaunchRecord> launches;
  for (emulator::LaunchRecord& launch : chip_->take_launch_records()) launches.push_back(std::move(launch));

  lock.lock();
  for (const abi::CompletionEntry& completion : completions) {
    auto found = in_rings_.find(completion.sequence);
    if (found == in_rings_.end()) {
      note_error(fmt::format("npusim firmware completed command {}, which was not submitted", completion.sequence));
      continue;
    }
    Command command = std::move(found->second);
    in_rings_.erase(found);
    ++ring_head_[ring_of(command.stream)];
    std::optional<emulator::LaunchRecord> launch;
    if (command.kind == abi::COMMAND_LAUNCH && !launches.empty()) {
      launch = std::move(launches.front());
      launches.pop_front();
    }
    finish(command, completion, launch);
  }
  if (firmware_failure) {
    // Whatever was still in the rings is lost with the firmware's state: those commands fail, the firmware reboots.
    for (auto& [sequence, command] : in_rings_) {
      note_error(fmt::format("npusim firmware failed on command {} ({}): {}", sequence, command.record.name,
                             *firmware_failure));
      release(command);
    }
    in_rings_.clear();
    lock.unlock();
    boot_firmware();
    lock.lock();
  }
  serving_ = false;
}

std::vector<abi::CompletionEntry> Device::read_completions() {
  emulator::DeviceMemory& memory = chip_->memory();
  uint64_t tail = 0;
  memory.read(abi::COMPLETION_BASE + abi::COMPLETION_TAIL, &tail, sizeof tail);
  std::vector<abi::CompletionEntry> completions;
  for (; completions_seen_ < tail; ++completions_seen_) {
    abi::CompletionEntry completion;
    const uint64_t slot = completions_seen_ % abi::COMPLETION_CAPACITY;
    memory.read(abi::COMPLETION_BASE + abi::COMPLETION_ENTRIES + (slot << abi::COMPLETION_SHIFT), &completion,
                sizeof completion);
    completions.push_back(completion);
  }
  return completions;
}

// Fills in the record of a completed command, keeps it, and notes its error. Called with the lock held.
void Device::finish(Command& command, const abi::CompletionEntry& completion,
                    std::optional<emulator::LaunchRecord>& launch) {
  CommandRecord& record = command.record;
  record.start_cycle = completion.start_cycle;
  record.device_cycles = completion.end_cycle - completion.start_cycle;
  if (launch) {
    record.stats = launch->stats;
    record.kernel_cycles = launch->end_cycle - launch->start_cycle;
    record.trace = std::move(launch->trace);
    record.first_hazard = launch->first_hazard;
    record.bytes = record.stats.dram_bytes_read + record.stats.dram_bytes_written;
    if (!record.first_hazard.empty())
      if (std::optional<std::string> error = report_hazard(record.name, record.first_hazard)) note_error(*error);
  }
  if (command.kind == abi::COMMAND_LAUNCH && completion.status != 0)
    note_error(
        fmt::format("npusim kernel '{}' failed: {}", record.name,
                    launch && launch->fault ? launch->fault->describe() : fmt::format("status {}", completion.status)));
  else if (completion.status == abi::STATUS_UNKNOWN_COMMAND)
    note_error(fmt::format("npusim firmware did not know command kind {}", command.kind));
  else if (completion.status == abi::STATUS_BAD_EVENT)
    note_error(fmt::format("npusim firmware rejected event address 0x{:x}: outside the event table", command.arg0));
  if (command.kind == abi::COMMAND_EVENT_RECORD) {
    uint64_t cycle = 0;
    chip_->memory().read(event_address(command.event) + abi::EVENT_CYCLE, &cycle, sizeof cycle);
    if (auto event = events_.find(command.event); event != events_.end()) event->second.cycle = cycle;
  }
  ++completed_commands_;
  completed_cycles_ = completion.end_cycle;
  if (command.keeps_record) {
    if (observer_) observer_(record);
    if (recording_) records_.push_back(std::move(record));
  }
  release(command);
}

void Device::note_error(std::string message) {
  if (!pending_error_) pending_error_ = std::move(message);
}

// The command is over: its argument block is free and waiters may see it complete. Called with the lock held.
void Device::release(Command& command) {
  if (command.argument_block) arguments_.release(command.argument_block);
  outstanding_.erase(command.sequence);
  free_deferred_blocks();
}

}  // namespace npusim::runtime
