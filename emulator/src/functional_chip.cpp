// The functional chip: when the command processor waits for a launch, the cores run (in parallel on the worker
// pool's host threads), each until it halts or reaches a barrier; when every core is at the barrier they all go on.
#include "npusim/emulator/functional_chip.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "npusim/emulator/semantics.h"
#include "npusim/emulator/step.h"

namespace npusim::emulator {

class FunctionalChip::CoreContext : public ExecContext {
 public:
  CoreContext(FunctionalChip& chip, int index)
      : ExecContext(state_),
        chip_(chip),
        index_(index),
        scratchpad_(chip.config_.scratchpad_bytes()),
        accumulator_(chip.config_.accumulator_bytes()),
        decoded_(chip.memory_) {
    weights_.max_rows = chip.config_.core_systolic_rows;
    weights_.max_cols = chip.config_.core_systolic_cols;
  }

  void read_dram(uint64_t address, void* destination, uint64_t bytes) override {
    chip_.memory_.read(address, destination, bytes);
    state_.stats.dram_bytes_read += bytes;
  }
  void write_dram(uint64_t address, const void* source, uint64_t bytes) override {
    check_dram_store(address, bytes);
    chip_.memory_.write(address, source, bytes);
    state_.stats.dram_bytes_written += bytes;
  }
  void check_dram_store(uint64_t address, uint64_t bytes) override { chip_.memory_.check_kernel_store(address, bytes); }
  void read_dram_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows, void* destination) override {
    chip_.memory_.read_rows(address, stride, row_bytes, rows, destination);
    state_.stats.dram_bytes_read += row_bytes * rows;
  }
  void write_dram_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows,
                       const void* source) override {
    if (row_bytes == 0) return;  // as ExecContext's: no bytes, whatever the count of rows
    for (uint64_t r = 0; r < rows; ++r) check_dram_store(address + r * stride, row_bytes);
    chip_.memory_.write_rows(address, stride, row_bytes, rows, source);
    state_.stats.dram_bytes_written += row_bytes * rows;
  }
  uint64_t fetch_word(uint64_t address) override {  // instruction fetch is not data traffic
    return chip_.memory_.fetch_word(address);
  }
  const DecodedInstruction& fetch_decoded() override { return decoded_.fetch(pc); }
  uint64_t read_csr(isa::Csr csr) override {
    switch (csr) {
      case isa::Csr::CoreId: return static_cast<uint64_t>(index_);
      case isa::Csr::CoreCount: return static_cast<uint64_t>(chip_.config_.chip_cores);
      case isa::Csr::Cycle: return 0;
      case isa::Csr::InstructionsRetired: return state_.instructions_retired;
    }
    throw Trap(fmt::format("unknown control/status register {}", static_cast<int>(csr)));
  }

  MatrixWeights& matrix_weights() override { return weights_; }
  DmaShape& dma_shape() override { return dma_shape_; }
  std::span<std::byte> peer_scratchpad(uint64_t core) override {
    if (core >= chip_.cores_.size())
      throw Trap(fmt::format("dma.c2c to core {}, which does not exist; the chip has {}", core, chip_.cores_.size()));
    return chip_.cores_[core]->scratchpad_;
  }
  void semaphore_post(int semaphore) override { semaphores_.post(semaphore); }
  void semaphore_wait(int semaphore) override { semaphores_.wait(semaphore); }
  void barrier() override {
    at_barrier_ = true;
    barrier_pc_ = pc;
  }

  void start(uint64_t program, uint64_t arguments) {
    state_ = ScalarState{};
    weights_.rows = weights_.cols = 0;
    dma_shape_ = DmaShape{};
    semaphores_.reset();
    at_barrier_ = false;
    state_.pc = program;
    state_.registers[1] = arguments;
  }
  // Runs until the core halts, traps or reaches a barrier.
  std::optional<KernelFault> resume() {
    at_barrier_ = false;
    const auto budget = static_cast<uint64_t>(chip_.config_.runtime_watchdog_instructions);
    return run_until(
        *this, index_, [&] { return state_.halted || at_barrier_; }, budget, &chip_.stop_flag());
  }
  // A single core alone: each barrier it reaches completes at once.
  std::optional<KernelFault> run(uint64_t program, uint64_t arguments) {
    start(program, arguments);
    std::optional<KernelFault> fault = resume();
    while (!fault && at_barrier()) fault = resume();
    return fault;
  }
  bool at_barrier() const { return at_barrier_ && !state_.halted; }
  int index() const { return index_; }
  KernelFault barrier_deadlock(const std::string& why) {
    at_barrier_ = false;
    return make_fault(*this, index_, barrier_pc_, BarrierDeadlock(why));
  }

  const ScalarState& state() const { return state_; }
  void clear_memories() {
    std::fill(scratchpad_.begin(), scratchpad_.end(), std::byte{0});
    std::fill(accumulator_.begin(), accumulator_.end(), std::byte{0});
  }

 protected:
  std::span<std::byte> scratchpad_memory() override { return scratchpad_; }
  std::span<std::byte> accumulator_memory() override { return accumulator_; }

 private:
  ScalarState state_;
  FunctionalChip& chip_;
  int index_;
  std::vector<std::byte> scratchpad_;
  std::vector<std::byte> accumulator_;
  MatrixWeights weights_;
  DmaShape dma_shape_;
  SemaphoreLedger semaphores_;
  DecodeCache decoded_;
  bool at_barrier_ = false;
  uint64_t barrier_pc_ = 0;
};

class FunctionalChip::CommandProcessorContext : public ExecContext {
 public:
  explicit CommandProcessorContext(FunctionalChip& chip) : ExecContext(state_), chip_(chip), decoded_(chip.memory_) {}
  const DecodedInstruction& fetch_decoded() override { return decoded_.fetch(pc); }

  void read_dram(uint64_t address, void* destination, uint64_t bytes) override {
    chip_.memory_.read(address, destination, bytes);
  }
  void write_dram(uint64_t address, const void* source, uint64_t bytes) override {
    chip_.memory_.write(address, source, bytes);
  }
  uint64_t read_csr(isa::Csr csr) override {
    return csr == isa::Csr::CoreCount ? static_cast<uint64_t>(chip_.config_.chip_cores) : 0;
  }

  void wait_for_doorbell() override {
    if (pending_doorbells_ > 0) {
      --pending_doorbells_;
      return;
    }
    // Sleep on this instruction, as the timed model does: the wake-up executes wfd again and takes the doorbell.
    next_pc = pc;
    sleeping_ = true;
  }
  void launch_cores(uint64_t program, uint64_t arguments, uint64_t core_mask) override {
    check_core_mask(core_mask, chip_.config_.chip_cores);
    launch_ = {program, arguments, core_mask};
  }
  uint64_t wait_cores() override {
    if (!launch_) throw Trap("wait without a launch");
    LaunchRecord record{launch_->core_mask, launch_->program};
    std::vector<CoreContext*> running;
    for (int core = 0; core < static_cast<int>(chip_.cores_.size()); ++core) {
      if (!(launch_->core_mask >> core & 1)) continue;
      running.push_back(chip_.cores_[core].get());
      running.back()->start(launch_->program, launch_->arguments);
    }
    std::vector<KernelFault> faults;
    const auto report = [&](std::optional<KernelFault> fault) {
      if (fault) faults.push_back(std::move(*fault));
    };
    // Each round runs every core until it halts, traps or reaches the barrier; a round where some cores wait at the
    // barrier and another has ended can never complete.
    std::vector<CoreContext*> waiting;
    std::string ended;
    while (!running.empty()) {
      waiting.clear();
      std::vector<std::optional<KernelFault>> outcomes(running.size());
      chip_.workers_.run(running.size(), [&](size_t k) { outcomes[k] = running[k]->resume(); });
      for (size_t k = 0; k < running.size(); ++k) {  // in core order, so the outcome does not depend on timing
        if (!outcomes[k] && running[k]->at_barrier())
          waiting.push_back(running[k]);
        else
          ended = fmt::format("core {} {} instead", running[k]->index(), outcomes[k] ? "trapped" : "halted");
        report(std::move(outcomes[k]));
      }
      if (waiting.size() != running.size()) {
        for (CoreContext* context : waiting) report(context->barrier_deadlock(ended));
        break;
      }
      running = waiting;
    }
    for (int core = 0; core < static_cast<int>(chip_.cores_.size()); ++core)
      if (launch_->core_mask >> core & 1) record.stats.add(chip_.cores_[core]->state().stats);
    uint64_t status = 0;
    if (std::optional<KernelFault> fault = reported_fault(std::move(faults))) {
      status = static_cast<uint64_t>(fault->core) + 1;
      record.fault = std::move(fault);
    }
    chip_.launch_records_.push_back(record);
    launch_.reset();
    return status;
  }
  void copy_host_to_device(uint64_t device_address, uint64_t host_address, uint64_t bytes) override {
    chip_.memory_.write(device_address, reinterpret_cast<const void*>(host_address), bytes);
  }
  void copy_device_to_host(uint64_t host_address, uint64_t device_address, uint64_t bytes) override {
    chip_.memory_.read(device_address, reinterpret_cast<void*>(host_address), bytes);
  }
  void copy_device_to_device(uint64_t destination, uint64_t source, uint64_t bytes) override {
    chip_.memory_.require_range(source, bytes, "read");
    chip_.memory_.require_range(destination, bytes, "write");
    std::vector<std::byte> buffer(std::min(bytes, kCopyChunkBytes));
    for (uint64_t done = 0; done < bytes; done += buffer.size()) {
      const uint64_t chunk = std::min<uint64_t>(buffer.size(), bytes - done);
      chip_.memory_.read(source + done, buffer.data(), chunk);
      chip_.memory_.write(destination + done, buffer.data(), chunk);
    }
  }

  void boot(uint64_t entry) {
    state_ = ScalarState{};
    state_.pc = entry;
    pending_doorbells_ = 0;
    launch_.reset();
    run();
  }
  void ring() {
    ++pending_doorbells_;
    run();
  }

 protected:
  std::span<std::byte> scratchpad_memory() override { return {}; }

 private:
  struct PendingLaunch {
    uint64_t program, arguments, core_mask;
  };

  void run() {
    sleeping_ = false;
    const uint64_t budget = state_.instructions_retired + kCommandProcessorBudget;
    const auto asleep = [&] {
      if (!sleeping_ && state_.instructions_retired >= budget) throw command_processor_watchdog_trap();
      return sleeping_;
    };
    if (auto fault = run_until(*this, -1, asleep, UINT64_MAX)) throw CommandProcessorFault(*fault);
  }

  ScalarState state_;
  FunctionalChip& chip_;
  DecodeCache decoded_;
  bool sleeping_ = false;
  int pending_doorbells_ = 0;
  std::optional<PendingLaunch> launch_;
};

FunctionalChip::FunctionalChip(config::ChipConfig config)
    : config_(std::move(config)),
      memory_(config_.dram_capacity_bytes()),
      workers_(WorkerPool::threads_for(config_.chip_cores)) {
  for (int core = 0; core < config_.chip_cores; ++core) cores_.push_back(std::make_unique<CoreContext>(*this, core));
  command_processor_ = std::make_unique<CommandProcessorContext>(*this);
}

FunctionalChip::~FunctionalChip() = default;

void FunctionalChip::boot(uint64_t firmware_entry) { command_processor_->boot(firmware_entry); }
void FunctionalChip::ring_doorbell() { command_processor_->ring(); }

std::vector<LaunchRecord> FunctionalChip::take_launch_records() { return std::exchange(launch_records_, {}); }

std::optional<KernelFault> FunctionalChip::run_kernel(int core, uint64_t program, uint64_t arguments) {
  if (core < 0 || core >= static_cast<int>(cores_.size()))
    throw std::out_of_range(fmt::format("core {} does not exist; the chip has {}", core, cores_.size()));
  return cores_[core]->run(program, arguments);
}

const ScalarState& FunctionalChip::core_state(int core) const { return cores_.at(core)->state(); }

void FunctionalChip::clear_core_memories() {
  for (auto& core : cores_) core->clear_memories();
}

}  // namespace npusim::emulator
