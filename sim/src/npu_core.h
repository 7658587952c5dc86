// One NPU core: a scalar unit that runs the program in order and issues tile instructions into per-engine queues;
// DMA, vector and matrix engines that drain their queues concurrently; the scratchpad and the accumulator buffer.
#pragma once

#include <tlm_utils/simple_initiator_socket.h>
#include <algorithm>

#include <array>
#include <atomic>
#include <optional>
#include <ostream>
#include <systemc>
#include <tlm>
#include <utility>
#include <vector>

#include "clock.h"
#include "core_barrier.h"
#include "npusim/config/chip_config.h"
#include "npusim/emulator/buffer_accesses.h"
#include "npusim/emulator/device_memory.h"
#include "npusim/emulator/exec_context.h"
#include "npusim/emulator/trap.h"
#include "scratchpad_banks.h"
#include "systolic_array.h"

namespace npusim::sim {

// A tile instruction in an engine queue, with the scalar registers as they were when it was issued.
struct IssuedInstruction {
  uint64_t id = 0;  // issue order within the kernel
  isa::Instruction instruction;
  uint64_t pc = 0;
  std::array<uint64_t, isa::kRegisterCount> registers{};
  uint64_t ticket = 0;  // for sem.wait: the post number it waits for
  sc_core::sc_time issued_at;
};
// sc_fifo requires a printer for its element type.
inline std::ostream& operator<<(std::ostream& out, const IssuedInstruction& item) {
  return out << "instruction at pc 0x" << std::hex << item.pc << std::dec;
}

class NpuCore : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<NpuCore> scalar_port;
  tlm_utils::simple_initiator_socket<NpuCore> dma_port;

  // `stop`: the chip's request to stop running kernels (emulator::Chip::request_stop).
  NpuCore(sc_core::sc_module_name name, int index, const config::ChipConfig& config, emulator::DeviceMemory& memory,
          const std::atomic<bool>& stop);
  // The chip's barrier and every core (this one included), for barrier and dma.c2c.
  void connect(CoreBarrier& barrier, std::vector<NpuCore*> cores) {
    barrier_ = &barrier;
    cores_ = std::move(cores);
  }

  // Called by the command processor's thread.
  void start(uint64_t program, uint64_t arguments);
  bool busy() const { return busy_; }
  const sc_core::sc_event& done_event() const { return done_event_; }
  std::optional<emulator::KernelFault> take_fault() { return std::exchange(fault_, std::nullopt); }
  // Statistics and (when tracing) engine activity of the last kernel.
  const emulator::KernelStats& stats() const { return state_.stats; }
  const std::array<uint64_t, isa::kRegisterCount>& registers() const { return state_.registers; }
  // Host side, between simulation runs: scratchpad and accumulator zeroed.
  void clear_memories() {
    std::fill(scratchpad_.begin(), scratchpad_.end(), std::byte{0});
    std::fill(accumulator_.begin(), accumulator_.end(), std::byte{0});
  }
  std::vector<emulator::EngineInterval> take_trace() { return std::exchange(trace_, {}); }
  void set_tracing(bool enabled) { tracing_ = enabled; }
  std::string take_first_hazard() { return std::exchange(first_hazard_, {}); }

 private:
  class ScalarContext;
  class EngineContext;

  void scalar_unit();
  void run_kernel();
  void dma_engine() { engine_loop(dma_queue_, emulator::Engine::Dma); }
  void vector_engine() { engine_loop(vector_queue_, emulator::Engine::Vector); }
  void matrix_engine() { engine_loop(matrix_queue_, emulator::Engine::Matrix); }
  void engine_loop(sc_core::sc_fifo<IssuedInstruction>& queue, emulator::Engine engine);
  void count_dram_bytes(tlm::tlm_command command, uint64_t bytes);
  void count_buffer_bytes(const std::vector<emulator::BufferAccess>& accesses);
  static std::optional<emulator::Engine> engine_of(isa::TimingClass timing);  // none: the scalar unit runs it
  sc_core::sc_fifo<IssuedInstruction>& queue_for(emulator::Engine engine);
  // Time an engine is busy with one instruction (docs/timing.md); `memory_time` is its DRAM transactions' share,
  // `vector_elements` the elements a vector instruction processed.
  sc_core::sc_time engine_time(const IssuedInstruction& item, const sc_core::sc_time& memory_time,
                               uint64_t vector_elements) const;
  // Cycles the instruction waits for scratchpad banks (scratchpad_banks.h); `accesses` as found at its issue.
  uint64_t bank_stall_cycles(const IssuedInstruction& item, const std::vector<emulator::BufferAccess>& accesses,
                             uint64_t vector_elements);
  void wait_engines_idle();
  void record_fault(emulator::ExecContext& context, uint64_t pc, const emulator::Trap& trap);

  int index_;
  const config::ChipConfig& config_;
  emulator::DeviceMemory& memory_;
  const std::atomic<bool>& stop_;
  emulator::DecodeCache decoded_{memory_};
  Clock clock_;
  std::vector<std::byte> scratchpad_;
  std::vector<std::byte> accumulator_;
  emulator::MatrixWeights weights_;
  ScratchpadBanks banks_;
  SystolicArray array_;
  emulator::ScalarState state_;
  sc_core::sc_fifo<IssuedInstruction> dma_queue_, vector_queue_, matrix_queue_;
  sc_core::sc_event start_event_, done_event_, engine_idle_event_;
  int outstanding_ = 0;
  bool busy_ = false;
  uint64_t program_ = 0, arguments_ = 0;
  std::optional<emulator::KernelFault> fault_;
  std::array<sc_core::sc_time, emulator::kEngineNames.size()> busy_time_{};
  sc_core::sc_time stall_time_fence_, stall_time_queue_full_, stall_time_scalar_memory_, stall_time_barrier_,
      stall_time_semaphore_;
  CoreBarrier* barrier_ = nullptr;
  std::vector<NpuCore*> cores_;
  emulator::DmaShape dma_shape_;
  // Semaphores: checked and matched in program order at issue; posted and waited for by the engines.
  emulator::SemaphoreLedger issued_semaphores_;
  // Per semaphore, its posts in program order: the post's id, its engine, and what that engine was ordered after
  // when it posted (a wait inherits it: order is transitive through a chain of semaphores).
  using EngineOrder = std::array<uint64_t, emulator::kEngineNames.size()>;
  struct IssuedPost {
    uint64_t id;
    emulator::Engine engine;
    EngineOrder engine_ordered_after;
  };
  std::array<std::vector<IssuedPost>, emulator::kSemaphoreCount> issued_posts_;
  std::array<uint64_t, emulator::kSemaphoreCount> engine_posts_{};
  sc_core::sc_event semaphore_event_;
  void issue_semaphore(const isa::Instruction& instruction, emulator::Engine engine, uint64_t id, uint64_t& ticket);
  // Tile instructions issued and not yet finished, with their buffer accesses, for hazard detection.
  struct PendingTile {
    uint64_t id;
    emulator::Engine engine;
    uint64_t pc;
    isa::Instruction instruction;
    std::vector<emulator::BufferAccess> accesses;
  };
  void check_hazards(const PendingTile& issued);
  std::vector<PendingTile> pending_;
  emulator::IssuedEngineState issued_state_;
  // ordered_before_[Y][X]: engine X's tiles issued before this id finish before engine Y's later tiles start (a
  // semaphore wait on Y matched a post on X, or on an engine that was itself ordered after them), so they cannot race
  // with them.
  std::array<EngineOrder, emulator::kEngineNames.size()> ordered_before_{};
  uint64_t next_tile_id_ = 0;
  std::string first_hazard_;
  bool tracing_ = false;
  std::vector<emulator::EngineInterval> trace_;
};

}  // namespace npusim::sim
