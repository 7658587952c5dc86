// What an instruction's semantics can touch: one core's registers and scratchpad, device DRAM, and the hooks for
// synchronisation and command-processor instructions. The emulator and the SystemC model each implement it, so both
// run the very same semantics functions and differ only in when things happen.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "npusim/emulator/decode_cache.h"
#include "npusim/emulator/kernel_stats.h"
#include "npusim/isa/isa.h"

namespace npusim::emulator {

struct ScalarState {
  std::array<uint64_t, isa::kRegisterCount> registers{};
  uint64_t pc = 0;
  uint64_t instructions_retired = 0;
  KernelStats stats;
  bool halted = false;
};

// The matrix engine's stationary operand: the weights last loaded into the systolic array.
struct MatrixWeights {
  int64_t max_rows = 0, max_cols = 0;  // the array's size
  int64_t rows = 0, cols = 0;          // the loaded K x N tile; 0 before the first load
  isa::ElementType type = isa::ElementType::F32;
  std::vector<float> values;  // row-major K x N; f32 holds every f16, bf16 and i8 value exactly
};

// The DMA engine's outer dimensions 1..3 of dma.ld4/dma.st4, set by dma.dim (dimension 0 is the instruction's own).
struct DmaShape {
  std::array<uint64_t, 3> counts{1, 1, 1};
  std::array<int64_t, 3> strides{};
};

inline constexpr int kSemaphoreCount = 16;

// Program-order bookkeeping of one core's semaphores: the n-th wait on a semaphore is matched with its n-th post,
// and a wait with no unmatched earlier post can never complete.
class SemaphoreLedger {
 public:
  void post(int semaphore);
  // Returns the wait's ticket n (1-based: it completes after the n-th post); traps on deadlock.
  uint64_t wait(int semaphore);
  void reset() { *this = SemaphoreLedger{}; }

 private:
  std::array<uint64_t, kSemaphoreCount> posts_{}, waits_{};
};

class ExecContext {
 public:
  explicit ExecContext(ScalarState& state) : state_(state) {}
  virtual ~ExecContext() = default;

  uint64_t reg(int index) const { return state_.registers[index]; }
  void set_reg(int index, uint64_t value) {
    if (index != 0) state_.registers[index] = value;
  }
  ScalarState& state() { return state_; }
  // Where the instruction's work is counted: the core's statistics (an engine running from a register snapshot
  // still counts into its core).
  virtual KernelStats& stats() { return state_.stats; }

  // Where the current instruction is and where execution continues (pc + 8 unless a branch changes it).
  uint64_t pc = 0;
  uint64_t next_pc = 0;

  virtual void read_dram(uint64_t address, void* destination, uint64_t bytes) = 0;
  // Instruction fetch; a timed model overrides it to bypass the data path (instructions come from an I-cache).
  virtual uint64_t fetch_word(uint64_t address) {
    uint64_t word = 0;
    read_dram(address, &word, sizeof word);
    return word;
  }
  // The instruction at pc, decoded; contexts with a DecodeCache decode each address once.
  virtual const DecodedInstruction& fetch_decoded();
  virtual void write_dram(uint64_t address, const void* source, uint64_t bytes) = 0;
  // Traps when this context may not store `bytes` at `address` (a kernel, in the command processor's memory);
  // checked for every row of a strided store before any row is written.
  virtual void check_dram_store(uint64_t address, uint64_t bytes) {}
  // Strided rows (2-D DMA): by default one read_dram/write_dram per row, which is what the timed model times.
  virtual void read_dram_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows, void* destination);
  virtual void write_dram_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows, const void* source);
  // `count` elements of `element_bytes` at byte `address` of this core's scratchpad or matrix accumulator buffer;
  // traps if any of it is outside (sizes are checked before they are multiplied, so they cannot wrap).
  std::span<std::byte> scratchpad(uint64_t address, uint64_t count, uint64_t element_bytes);
  std::span<std::byte> accumulator(uint64_t address, uint64_t count, uint64_t element_bytes);
  virtual MatrixWeights& matrix_weights();  // traps where there is no matrix engine
  virtual DmaShape& dma_shape();            // traps where there is no DMA engine
  // The scratchpad of another core of the chip, for dma.c2c; traps for a core that does not exist.
  virtual std::span<std::byte> peer_scratchpad(uint64_t core);
  virtual uint64_t read_csr(isa::Csr csr) = 0;

  // Synchronisation. The emulator runs engines in program order, so fences cost nothing there, and semaphores only
  // check that each wait has an earlier post; the timed model makes engines actually wait.
  virtual void fence() {}
  virtual void semaphore_post(int semaphore);
  virtual void semaphore_wait(int semaphore);
  virtual void barrier();  // traps where the chip has no barrier (the command processor)

  // Command-processor instructions. The defaults trap: NPU cores do not have them.
  virtual void wait_for_doorbell();
  virtual void launch_cores(uint64_t program, uint64_t arguments, uint64_t core_mask);
  virtual uint64_t wait_cores();
  virtual void copy_host_to_device(uint64_t device_address, uint64_t host_address, uint64_t bytes);
  virtual void copy_device_to_host(uint64_t host_address, uint64_t device_address, uint64_t bytes);
  virtual void copy_device_to_device(uint64_t destination, uint64_t source, uint64_t bytes);

 protected:
  virtual std::span<std::byte> scratchpad_memory() = 0;
  virtual std::span<std::byte> accumulator_memory() { return {}; }

 private:
  ScalarState& state_;
  DecodedInstruction last_fetched_{};
};

}  // namespace npusim::emulator
