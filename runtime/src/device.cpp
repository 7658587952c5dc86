// Host side of the command ring: write a slot, ring the doorbell, read the completion the firmware published.
#include "npusim/runtime/device.h"

#include <fmt/format.h>

#include <bit>
#include <chrono>
#include <cstdlib>
#include <set>

#include "npusim/emulator/functional_chip.h"
#include "npusim/firmware/ring_abi.h"
#include "npusim/sim/timed_chip.h"

namespace npusim::runtime {

namespace abi = npusim::firmware;

Mode parse_mode(const std::string& text) {
  if (text == "functional") return Mode::Functional;
  if (text == "timed") return Mode::Timed;
  throw std::invalid_argument(fmt::format("unknown mode '{}': expected 'functional' or 'timed'", text));
}

std::string mode_name(Mode mode) { return mode == Mode::Functional ? "functional" : "timed"; }

namespace {
std::unique_ptr<emulator::Chip> make_chip(const config::ChipConfig& config, Mode mode) {
  if (mode == Mode::Timed) return sim::make_timed_chip(config);
  return std::make_unique<emulator::FunctionalChip>(config);
}

// Program images live in their own region below the heap: 1/64 of the device memory, at most 256 MiB.
uint64_t code_region_end(const config::ChipConfig& config) {
  return abi::HEAP_BASE + std::min<uint64_t>(config.dram_capacity_bytes() / 64, uint64_t{256} << 20);
}

}  // namespace

namespace {
// A hazard makes a kernel's result depend on timing: an error with NPUSIM_HAZARDS=error, else a warning on stderr
// once per kernel.
void report_hazard(const std::string& kernel_name, const std::string& hazard) {
  const char* setting = std::getenv("NPUSIM_HAZARDS");
  if (setting && std::string(setting) == "error")
    throw DeviceError(fmt::format("npusim kernel '{}' has a hazard (NPUSIM_HAZARDS=error): {}", kernel_name, hazard));
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  if (warned.insert(kernel_name).second)
    fmt::print(stderr, "npusim: warning: kernel '{}' has a hazard: {}\n", kernel_name, hazard);
}
}  // namespace

Device::Device(const config::ChipConfig& config, Mode mode)
    : mode_(mode),
      chip_(make_chip(config, mode)),
      code_allocator_(abi::HEAP_BASE, code_region_end(config)),
      allocator_(code_region_end(config), config.dram_capacity_bytes()) {
  boot_firmware();
}

Device::~Device() = default;

void Device::boot_firmware() {
  emulator::DeviceMemory& memory = chip_->memory();
  memory.fill(abi::RING_BASE, 0, abi::RING_SLOTS + abi::RING_CAPACITY * sizeof(abi::CommandSlot));
  memory.write(abi::FIRMWARE_BASE, abi::firmware_image(), abi::firmware_image_words() * sizeof(uint64_t));
  chip_->boot(abi::FIRMWARE_BASE);
}

Device::Submitted Device::submit(uint64_t kind, uint64_t arg0, uint64_t arg1, uint64_t arg2) {
  emulator::DeviceMemory& memory = chip_->memory();
  uint64_t tail = 0;
  const int64_t host_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  memory.read(abi::RING_BASE + abi::RING_TAIL, &tail, sizeof tail);
  const abi::CommandSlot slot{kind, arg0, arg1, arg2, next_sequence_++, {}};
  const uint64_t slot_address = abi::RING_BASE + abi::RING_SLOTS + (tail % abi::RING_CAPACITY) * sizeof slot;
  memory.write(slot_address, &slot, sizeof slot);
  ++tail;
  memory.write(abi::RING_BASE + abi::RING_TAIL, &tail, sizeof tail);

  const uint64_t cycles_before = chip_->elapsed_cycles();
  try {
    chip_->ring_doorbell();
  } catch (const emulator::CommandProcessorFault& fault) {
    boot_firmware();  // the ring is reset with it, so the device is usable again
    throw DeviceError(fmt::format("npusim firmware failed on command {} ({}): {}", slot.sequence, kind, fault.what()));
  }
  uint64_t completed = 0, status = 0;
  memory.read(abi::RING_BASE + abi::RING_COMPLETED, &completed, sizeof completed);
  memory.read(abi::RING_BASE + abi::RING_STATUS, &status, sizeof status);
  if (completed != slot.sequence)
    throw DeviceError(
        fmt::format("npusim firmware completed command {} while {} was expected", completed, slot.sequence));
  ++completed_commands_;
  completed_cycles_ = chip_->elapsed_cycles();
  return {status, cycles_before, chip_->elapsed_cycles() - cycles_before, host_ns};
}

void Device::record_copy(const char* name, uint64_t bytes, const Submitted& done) {
  if (!recording_ && !observer_) return;
  CommandRecord record{name, scope_, bytes, done.start_cycle, 0, 0, done.device_cycles};
  record.host_ns = done.host_ns;
  record.op = op_;
  keep(std::move(record));
}

void Device::keep(CommandRecord record) {
  if (observer_) observer_(record);
  if (recording_) records_.push_back(std::move(record));
}

void Device::set_observer(std::function<void(const CommandRecord&)> observer) {
  std::lock_guard lock(submit_mutex_);
  observer_ = std::move(observer);
}

void Device::copy_host_to_device(uint64_t destination, const void* source, uint64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(submit_mutex_);
  const Submitted done = submit(abi::COMMAND_COPY_H2D, destination, reinterpret_cast<uint64_t>(source), bytes);
  record_copy("copy_h2d", bytes, done);
}

void Device::copy_device_to_host(void* destination, uint64_t source, uint64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(submit_mutex_);
  const Submitted done = submit(abi::COMMAND_COPY_D2H, reinterpret_cast<uint64_t>(destination), source, bytes);
  record_copy("copy_d2h", bytes, done);
}

void Device::copy_device_to_device(uint64_t destination, uint64_t source, uint64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(submit_mutex_);
  const Submitted done = submit(abi::COMMAND_COPY_D2D, destination, source, bytes);
  record_copy("copy_d2d", bytes, done);
}

uint64_t Device::load_program(std::span<const uint64_t> words) {
  std::lock_guard lock(submit_mutex_);  // the chip may be running another thread's command
  const uint64_t address = code_allocator_.allocate(words.size_bytes());
  chip_->memory().write(address, words.data(), words.size_bytes());
  return address;
}

void Device::launch(const std::string& kernel_name, uint64_t program, std::span<const uint64_t> arguments,
                    uint64_t core_mask) {
  try {
    emulator::check_core_mask(core_mask, config().chip_cores);
  } catch (const emulator::Trap& bad_mask) {
    throw std::invalid_argument(fmt::format("launch of '{}': {}", kernel_name, bad_mask.what()));
  }
  std::lock_guard lock(submit_mutex_);
  const uint64_t argument_block = allocator_.allocate(std::max<uint64_t>(arguments.size_bytes(), 8));
  chip_->memory().write(argument_block, arguments.data(), arguments.size_bytes());
  Submitted done{};
  try {
    done = submit(abi::COMMAND_LAUNCH, program, argument_block, core_mask);
  } catch (...) {
    allocator_.free(argument_block);
    throw;
  }
  allocator_.free(argument_block);
  std::vector<emulator::LaunchRecord> launches = chip_->take_launch_records();
  CommandRecord record{
      kernel_name, scope_, 0, done.start_cycle, static_cast<uint64_t>(std::popcount(core_mask)), 0, done.device_cycles};
  for (auto& launch : launches) {
    record.stats.add(launch.stats);
    record.kernel_cycles += launch.end_cycle - launch.start_cycle;
    record.trace.insert(record.trace.end(), launch.trace.begin(), launch.trace.end());
    if (record.first_hazard.empty()) record.first_hazard = launch.first_hazard;
  }
  record.bytes = record.stats.dram_bytes_read + record.stats.dram_bytes_written;
  record.host_ns = done.host_ns;
  record.op = op_;
  if (!record.first_hazard.empty()) report_hazard(kernel_name, record.first_hazard);
  keep(std::move(record));
  if (done.status != 0) {
    const std::optional<emulator::KernelFault> fault = chip_->take_kernel_fault();
    throw DeviceError(fmt::format("npusim kernel '{}' failed: {}", kernel_name,
                                  fault ? fault->describe() : fmt::format("status {}", done.status)));
  }
}

void Device::set_scope(std::string scope) {
  std::lock_guard lock(submit_mutex_);
  scope_ = std::move(scope);
}

void Device::set_op(std::string op) {
  std::lock_guard lock(submit_mutex_);
  op_ = std::move(op);
}

void Device::set_recording(bool enabled) {
  std::lock_guard lock(submit_mutex_);
  recording_ = enabled;
}

void Device::set_tracing(bool enabled) {
  std::lock_guard lock(submit_mutex_);
  chip_->set_tracing(enabled);
}

std::vector<CommandRecord> Device::take_records() {
  std::lock_guard lock(submit_mutex_);
  return std::exchange(records_, {});
}

}  // namespace npusim::runtime
