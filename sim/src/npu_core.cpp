// NPU core timing: the scalar unit spends one cycle per instruction (plus a refill after taken branches) and
// decouples from SystemC time with a quantum keeper; engines advance time once per tile instruction.
#include "npu_core.h"

#include <fmt/format.h>
#include <tlm_utils/tlm_quantumkeeper.h>

#include <algorithm>
#include <systemc>

#include "npusim/emulator/semantics.h"
#include "npusim/emulator/step.h"
#include "npusim/isa/disassembler.h"
#include "tlm_port.h"

namespace npusim::sim {

using emulator::Trap;

class NpuCore::ScalarContext : public emulator::ExecContext {
 public:
  ScalarContext(NpuCore& core, tlm_utils::tlm_quantumkeeper& keeper)
      : ExecContext(core.state_), core_(core), keeper_(keeper) {}

  void read_dram(uint64_t address, void* destination, uint64_t bytes) override {
    access(tlm::TLM_READ_COMMAND, address, destination, bytes);
  }
  void write_dram(uint64_t address, const void* source, uint64_t bytes) override {
    check_dram_store(address, bytes);
    access(tlm::TLM_WRITE_COMMAND, address, const_cast<void*>(source), bytes);
  }
  void check_dram_store(uint64_t address, uint64_t bytes) override { core_.memory_.check_kernel_store(address, bytes); }
  uint64_t fetch_word(uint64_t address) override { return core_.memory_.fetch_word(address); }
  uint64_t read_csr(isa::Csr csr) override {
    switch (csr) {
      case isa::Csr::CoreId: return static_cast<uint64_t>(core_.index_);
      case isa::Csr::CoreCount: return static_cast<uint64_t>(core_.config_.chip_cores);
      case isa::Csr::Cycle: return core_.clock_.to_cycles(keeper_.get_current_time());
      case isa::Csr::InstructionsRetired: return core_.state_.instructions_retired;
    }
    throw Trap(fmt::format("unknown control/status register {}", static_cast<int>(csr)));
  }
  void fence() override {
    keeper_.sync();
    const sc_core::sc_time waiting_since = sc_core::sc_time_stamp();
    core_.wait_engines_idle();
    core_.stall_time_fence_ += sc_core::sc_time_stamp() - waiting_since;
  }
  void barrier() override {  // the semantics fenced first
    const sc_core::sc_time waiting_since = sc_core::sc_time_stamp();
    core_.barrier_->arrive();
    core_.stall_time_barrier_ += sc_core::sc_time_stamp() - waiting_since;
  }

 protected:
  std::span<std::byte> scratchpad_memory() override { return core_.scratchpad_; }

 private:
  void access(tlm::tlm_command command, uint64_t address, void* data, uint64_t bytes) {
    const sc_core::sc_time issued = keeper_.get_local_time();
    sc_core::sc_time delay = issued;
    transport(core_.scalar_port, command, address, data, bytes, delay);
    keeper_.set(delay);
    core_.stall_time_scalar_memory_ += delay - issued;
    core_.count_dram_bytes(command, bytes);
  }

  NpuCore& core_;
  tlm_utils::tlm_quantumkeeper& keeper_;
};

// Runs one issued tile instruction. All its DRAM transactions start together (the DMA engine pipelines them); the
// instruction completes when the last one does. A read of exactly the bytes the instruction read last (a stride-0
// broadcast) is served from the DMA engine's buffer, without a DRAM transaction.
class NpuCore::EngineContext : public emulator::ExecContext {
 public:
  EngineContext(NpuCore& core, emulator::ScalarState& snapshot, uint64_t ticket)
      : ExecContext(snapshot), core_(core), ticket_(ticket) {}

  void read_dram(uint64_t address, void* destination, uint64_t bytes) override {
    access(tlm::TLM_READ_COMMAND, address, destination, bytes);
  }
  void write_dram(uint64_t address, const void* source, uint64_t bytes) override {
    check_dram_store(address, bytes);
    access(tlm::TLM_WRITE_COMMAND, address, const_cast<void*>(source), bytes);
  }
  void check_dram_store(uint64_t address, uint64_t bytes) override { core_.memory_.check_kernel_store(address, bytes); }
  uint64_t fetch_word(uint64_t address) override { return core_.memory_.fetch_word(address); }
  uint64_t read_csr(isa::Csr) override { throw Trap("engines cannot read control/status registers"); }
  emulator::MatrixWeights& matrix_weights() override { return core_.weights_; }
  emulator::DmaShape& dma_shape() override { return core_.dma_shape_; }
  std::span<std::byte> peer_scratchpad(uint64_t core) override {
    if (core >= core_.cores_.size())
      throw Trap(fmt::format("dma.c2c to core {}, which does not exist; the chip has {}", core, core_.cores_.size()));
    return core_.cores_[core]->scratchpad_;
  }
  emulator::KernelStats& stats() override { return core_.state_.stats; }
  // Semaphore numbers were checked at issue.
  void semaphore_post(int semaphore) override {
    ++core_.engine_posts_[semaphore];
    core_.semaphore_event_.notify(sc_core::SC_ZERO_TIME);
  }
  void semaphore_wait(int semaphore) override {
    const sc_core::sc_time waiting_since = sc_core::sc_time_stamp();
    // A faulted core runs no more posts: a waiting engine gives up, so that the launch ends and reports the fault.
    while (core_.engine_posts_[semaphore] < ticket_ && !core_.fault_) sc_core::wait(core_.semaphore_event_);
    core_.stall_time_semaphore_ += sc_core::sc_time_stamp() - waiting_since;
  }

  sc_core::sc_time memory_time = sc_core::SC_ZERO_TIME;

 protected:
  std::span<std::byte> scratchpad_memory() override { return core_.scratchpad_; }
  std::span<std::byte> accumulator_memory() override { return core_.accumulator_; }

 private:
  void access(tlm::tlm_command command, uint64_t address, void* data, uint64_t bytes) {
    core_.count_dram_bytes(command, bytes);
    const bool read = command == tlm::TLM_READ_COMMAND;
    if (read && address == last_read_address_ && bytes == last_read_bytes_) {
      core_.memory_.read(address, data, bytes);
      return;
    }
    // A write ends the reuse: dma.stxadd reads an element again after adding to it.
    last_read_address_ = read ? address : UINT64_MAX;
    last_read_bytes_ = bytes;
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    transport(core_.dma_port, command, address, data, bytes, delay);
    memory_time = std::max(memory_time, delay);
  }

  NpuCore& core_;
  uint64_t ticket_;
  uint64_t last_read_address_ = UINT64_MAX, last_read_bytes_ = 0;
};

NpuCore::NpuCore(sc_core::sc_module_name name, int index, const config::ChipConfig& config,
                 emulator::DeviceMemory& memory, const std::atomic<bool>& stop)
    : sc_module(name),
      scalar_port("scalar_port"),
      dma_port("dma_port"),
      index_(index),
      config_(config),
      memory_(memory),
      stop_(stop),
      clock_(config.chip_clock_ghz),
      scratchpad_(config.scratchpad_bytes()),
      accumulator_(config.accumulator_bytes()),
      banks_(config),
      array_(config, clock_),
      dma_queue_("dma_queue", static_cast<int>(config.core_engine_queue_depth)),
      vector_queue_("vector_queue", static_cast<int>(config.core_engine_queue_depth)),
      matrix_queue_("matrix_queue", static_cast<int>(config.core_engine_queue_depth)) {
  weights_.max_rows = config.core_systolic_rows;
  weights_.max_cols = config.core_systolic_cols;
  SC_HAS_PROCESS(NpuCore);
  SC_THREAD(scalar_unit);
  SC_THREAD(dma_engine);
  SC_THREAD(vector_engine);
  SC_THREAD(matrix_engine);
}

void NpuCore::start(uint64_t program, uint64_t arguments) {
  program_ = program;
  arguments_ = arguments;
  busy_ = true;
  start_event_.notify(sc_core::SC_ZERO_TIME);
}

void NpuCore::scalar_unit() {
  while (true) {
    sc_core::wait(start_event_);
    run_kernel();
    busy_ = false;
    done_event_.notify(sc_core::SC_ZERO_TIME);
  }
}

void NpuCore::count_dram_bytes(tlm::tlm_command command, uint64_t bytes) {
  (command == tlm::TLM_READ_COMMAND ? state_.stats.dram_bytes_read : state_.stats.dram_bytes_written) += bytes;
}

void NpuCore::count_buffer_bytes(const std::vector<emulator::BufferAccess>& accesses) {
  for (const emulator::BufferAccess& access : accesses)
    (access.buffer == emulator::Buffer::Scratchpad ? state_.stats.scratchpad_bytes : state_.stats.accumulator_bytes) +=
        access.end - access.begin;
}

void NpuCore::run_kernel() {
  fault_.reset();
  trace_.clear();
  issued_state_ = {};
  ordered_before_ = {};
  array_.reset();
  dma_shape_ = {};
  issued_semaphores_.reset();
  for (auto& posts : issued_posts_) posts.clear();
  engine_posts_.fill(0);
  busy_time_.fill(sc_core::SC_ZERO_TIME);
  stall_time_fence_ = stall_time_queue_full_ = stall_time_scalar_memory_ = sc_core::SC_ZERO_TIME;
  stall_time_barrier_ = stall_time_semaphore_ = sc_core::SC_ZERO_TIME;
  const sc_core::sc_time started = sc_core::sc_time_stamp();
  uint64_t issue_cycles = 0;
  state_ = emulator::ScalarState{};
  weights_.rows = weights_.cols = 0;
  state_.pc = program_;
  state_.registers[1] = arguments_;
  tlm_utils::tlm_quantumkeeper keeper;
  keeper.reset();
  ScalarContext context(*this, keeper);
  const auto budget = static_cast<uint64_t>(config_.runtime_watchdog_instructions);
  try {
    while (!state_.halted && !fault_) {
      if (state_.instructions_retired >= budget) throw emulator::watchdog_trap(budget);
      if (stop_.load(std::memory_order_relaxed)) throw emulator::stopped_trap();
      context.pc = state_.pc;
      const emulator::DecodedInstruction& decoded = decoded_.fetch(state_.pc);
      const isa::Instruction& instruction = decoded.instruction;
      const isa::TimingClass timing = decoded.timing;
      if (std::optional<emulator::Engine> engine = engine_of(timing)) {
        keeper.sync();  // the engine sees the instruction at the scalar unit's local time
        const uint64_t id = next_tile_id_++;
        uint64_t ticket = 0;
        issue_semaphore(instruction, *engine, id, ticket);
        PendingTile tile{id, *engine, state_.pc, instruction,
                         emulator::buffer_accesses(instruction, state_.registers, issued_state_)};
        check_hazards(tile);
        pending_.push_back(std::move(tile));
        const sc_core::sc_time issuing_since = sc_core::sc_time_stamp();
        queue_for(*engine).write(
            IssuedInstruction{id, instruction, state_.pc, state_.registers, ticket, sc_core::sc_time_stamp()});
        stall_time_queue_full_ += sc_core::sc_time_stamp() - issuing_since;
        ++outstanding_;
        context.next_pc = state_.pc + isa::kInstructionBytes;
      } else {
        emulator::execute(context, instruction);
      }
      uint64_t cycles = 1;
      if (timing == isa::TimingClass::Branch && context.next_pc != state_.pc + isa::kInstructionBytes)
        cycles += static_cast<uint64_t>(config_.core_branch_taken_penalty_cycles);
      keeper.inc(clock_.cycles(cycles));
      issue_cycles += cycles;
      state_.pc = context.next_pc;
      ++state_.instructions_retired;
      state_.stats.count_instruction(timing);
      if (keeper.need_sync()) keeper.sync();
    }
  } catch (const Trap& trap) {
    record_fault(context, state_.pc, trap);
  }
  keeper.sync();
  wait_engines_idle();
  barrier_->leave(index_, fault_.has_value());
  emulator::KernelStats& stats = state_.stats;
  stats.busy_cycles_scalar = issue_cycles;
  stats.busy_cycles_dma = clock_.to_cycles(busy_time_[static_cast<int>(emulator::Engine::Dma)]);
  stats.busy_cycles_vector = clock_.to_cycles(busy_time_[static_cast<int>(emulator::Engine::Vector)]);
  stats.busy_cycles_matrix = clock_.to_cycles(busy_time_[static_cast<int>(emulator::Engine::Matrix)]);
  stats.array_cycles = clock_.to_cycles(array_.working_time());
  stats.stall_cycles_fence = clock_.to_cycles(stall_time_fence_);
  stats.stall_cycles_queue_full = clock_.to_cycles(stall_time_queue_full_);
  stats.stall_cycles_scalar_memory = clock_.to_cycles(stall_time_scalar_memory_);
  stats.stall_cycles_barrier = clock_.to_cycles(stall_time_barrier_);
  stats.semaphore_wait_cycles = clock_.to_cycles(stall_time_semaphore_);
  if (tracing_)
    trace_.push_back({index_, emulator::Engine::Scalar, program_, isa::Instruction{isa::Opcode::Halt},
                      started.to_seconds() * 1e9, sc_core::sc_time_stamp().to_seconds() * 1e9});
}

std::optional<emulator::Engine> NpuCore::engine_of(isa::TimingClass timing) {
  switch (timing) {
    case isa::TimingClass::Dma: return emulator::Engine::Dma;
    case isa::TimingClass::Vector:
    case isa::TimingClass::VectorSpecial: return emulator::Engine::Vector;
    case isa::TimingClass::Matrix: return emulator::Engine::Matrix;
    default: return std::nullopt;
  }
}

sc_core::sc_fifo<IssuedInstruction>& NpuCore::queue_for(emulator::Engine engine) {
  switch (engine) {
    case emulator::Engine::Dma: return dma_queue_;
    case emulator::Engine::Vector: return vector_queue_;
    default: return matrix_queue_;
  }
}

// Semaphores are matched in program order here, so a wait that can never complete traps at its own pc, exactly as
// in the emulator; the engines then only wait for the post their ticket names.
void NpuCore::issue_semaphore(const isa::Instruction& instruction, emulator::Engine engine, uint64_t id,
                              uint64_t& ticket) {
  using isa::Opcode;
  switch (instruction.opcode) {
    case Opcode::SemPostDma:
    case Opcode::SemPostVector:
    case Opcode::SemPostMatrix:
      issued_semaphores_.post(instruction.imm);
      issued_posts_[instruction.imm].push_back({id, engine, ordered_before_[static_cast<int>(engine)]});
      return;
    case Opcode::SemWaitDma:
    case Opcode::SemWaitVector:
    case Opcode::SemWaitMatrix: {
      ticket = issued_semaphores_.wait(instruction.imm);
      const IssuedPost& post = issued_posts_[instruction.imm][ticket - 1];
      EngineOrder& ordered = ordered_before_[static_cast<int>(engine)];
      for (size_t other = 0; other < ordered.size(); ++other)
        ordered[other] = std::max(ordered[other], post.engine_ordered_after[other]);
      uint64_t& direct = ordered[static_cast<int>(post.engine)];
      direct = std::max(direct, post.id);
      return;
    }
    default: return;
  }
}

sc_core::sc_time NpuCore::engine_time(const IssuedInstruction& item, const sc_core::sc_time& memory_time,
                                      uint64_t vector_elements) const {
  const auto operand = [&](uint8_t reg) { return item.registers[reg]; };
  const auto lanes = static_cast<uint64_t>(config_.core_vector_lanes);
  const isa::Instruction& instruction = item.instruction;
  switch (instruction.opcode) {  // engine bookkeeping: semaphores take no engine time, dma.dim one cycle
    case isa::Opcode::SemPostDma:
    case isa::Opcode::SemPostVector:
    case isa::Opcode::SemPostMatrix:
    case isa::Opcode::SemWaitDma:
    case isa::Opcode::SemWaitVector:
    case isa::Opcode::SemWaitMatrix: return sc_core::SC_ZERO_TIME;
    case isa::Opcode::DmaDim: return clock_.cycles(1);
    case isa::Opcode::DmaCoreToCore:  // over the core link, not DRAM
      return clock_.cycles(static_cast<uint64_t>(config_.core_dma_setup_cycles) +
                           (operand(instruction.rs3) + config_.core_core_link_bytes_per_cycle - 1) /
                               static_cast<uint64_t>(config_.core_core_link_bytes_per_cycle));
    default: break;
  }
  const uint64_t lane_groups = (vector_elements + lanes - 1) / lanes;
  switch (isa::info(instruction.opcode).timing) {
    case isa::TimingClass::Dma:
      return clock_.cycles(static_cast<uint64_t>(config_.core_dma_setup_cycles)) + memory_time;
    case isa::TimingClass::Vector:
      return clock_.cycles(static_cast<uint64_t>(config_.core_vector_pipeline_cycles) + lane_groups);
    case isa::TimingClass::VectorSpecial:
      return clock_.cycles(static_cast<uint64_t>(config_.core_vector_pipeline_cycles) +
                           lane_groups * static_cast<uint64_t>(config_.core_vector_special_function_cycles));
    default: break;
  }
  return clock_.cycles(array_.own_cycles(instruction, item.registers, weights_));
}

uint64_t NpuCore::bank_stall_cycles(const IssuedInstruction& item, const std::vector<emulator::BufferAccess>& accesses,
                                    uint64_t vector_elements) {
  const isa::Instruction& instruction = item.instruction;
  const auto operand = [&](uint8_t reg) { return item.registers[reg]; };
  const auto lanes = static_cast<uint64_t>(config_.core_vector_lanes);
  const uint64_t lane_groups = (vector_elements + lanes - 1) / lanes;
  switch (isa::info(instruction.opcode).timing) {
    case isa::TimingClass::Vector: return banks_.stall_cycles(accesses, lane_groups, 1);
    case isa::TimingClass::VectorSpecial:
      return banks_.stall_cycles(accesses, lane_groups,
                                 static_cast<uint64_t>(config_.core_vector_special_function_cycles));
    default: break;
  }
  switch (instruction.opcode) {  // matrix steps: a weight row, an input row, an accumulator row
    case isa::Opcode::MatrixLoadWeights:
    case isa::Opcode::MatrixMultiply: return banks_.stall_cycles(accesses, operand(instruction.rs2), 1);
    case isa::Opcode::MatrixLoadWeightsTransposed:
      return banks_.transposed_load_stall_cycles(operand(instruction.rs1), operand(instruction.rs2),
                                                 operand(instruction.rs3), isa::element_bytes(instruction.type));
    case isa::Opcode::MatrixStore: {
      const auto cols = static_cast<uint64_t>(config_.core_systolic_cols);
      return banks_.stall_cycles(accesses, (operand(instruction.rs2) + cols - 1) / cols, 1);
    }
    default: return 0;  // DMA: the scratchpad outpaces DRAM
  }
}

void NpuCore::engine_loop(sc_core::sc_fifo<IssuedInstruction>& queue, emulator::Engine engine) {
  while (true) {
    IssuedInstruction item = queue.read();
    if (!fault_) {
      emulator::ScalarState snapshot;
      snapshot.registers = item.registers;
      EngineContext context(*this, snapshot, item.ticket);
      context.pc = item.pc;
      sc_core::sc_time busy = sc_core::SC_ZERO_TIME;
      try {
        const uint64_t elements_before = state_.stats.vector_elements;
        emulator::execute(context, item.instruction);
        const uint64_t elements = state_.stats.vector_elements - elements_before;
        const auto tile = std::find_if(pending_.begin(), pending_.end(),
                                       [&](const PendingTile& pending) { return pending.id == item.id; });
        const uint64_t bank_stall = bank_stall_cycles(item, tile->accesses, elements);
        state_.stats.bank_conflict_cycles += bank_stall;
        count_buffer_bytes(tile->accesses);
        busy = engine_time(item, context.memory_time, elements) + clock_.cycles(bank_stall);
        if (engine == emulator::Engine::Matrix)
          busy = array_.schedule(item.instruction, item.registers, item.issued_at, busy, sc_core::sc_time_stamp());
      } catch (const Trap& trap) {
        record_fault(context, item.pc, trap);
      }
      busy_time_[static_cast<int>(engine)] += busy;
      if (tracing_) {
        const double start_ns = sc_core::sc_time_stamp().to_seconds() * 1e9;
        trace_.push_back({index_, engine, item.pc, item.instruction, start_ns, start_ns + busy.to_seconds() * 1e9});
      }
      sc_core::wait(busy);
    }
    std::erase_if(pending_, [&](const PendingTile& tile) { return tile.id == item.id; });
    --outstanding_;
    engine_idle_event_.notify();
  }
}

// Engines run concurrently: an instruction touching bytes another engine has not finished with reads or writes them
// at an undefined moment, and the result may differ from the emulator's program order. Counted, and the first one
// described with both instructions.
void NpuCore::check_hazards(const PendingTile& issued) {
  for (const PendingTile& pending : pending_) {
    if (pending.engine == issued.engine) continue;  // one engine runs its queue in order
    if (pending.id < ordered_before_[static_cast<int>(issued.engine)][static_cast<int>(pending.engine)]) continue;
    for (const emulator::BufferAccess& access : issued.accesses) {
      for (const emulator::BufferAccess& other : pending.accesses) {
        if (!emulator::conflicts(access, other)) continue;
        ++state_.stats.hazards;
        if (first_hazard_.empty())
          first_hazard_ = fmt::format(
              "core {}: pc 0x{:x} ({}) {} while pc 0x{:x} ({}) on the {} engine still {}, with no fence between",
              index_, issued.pc, isa::disassemble(issued.instruction, issued.pc), emulator::describe(access),
              pending.pc, isa::disassemble(pending.instruction, pending.pc),
              emulator::kEngineNames[static_cast<int>(pending.engine)], emulator::describe(other));
        return;
      }
    }
  }
}

void NpuCore::wait_engines_idle() {
  while (outstanding_ > 0) sc_core::wait(engine_idle_event_);
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  if (array_.drained() > now) sc_core::wait(array_.drained() - now);  // the last product's results
}

void NpuCore::record_fault(emulator::ExecContext& context, uint64_t pc, const Trap& trap) {
  if (fault_) return;
  fault_ = emulator::make_fault(context, index_, pc, trap);
  semaphore_event_.notify(sc_core::SC_ZERO_TIME);  // wakes engines waiting on posts that will never run
}

}  // namespace npusim::sim
