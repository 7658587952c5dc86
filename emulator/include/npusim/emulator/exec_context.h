// What an instruction's semantics can touch: one core's registers and scratchpad, device DRAM, and the hooks for
// synchronisation and command-processor instructions. The emulator and the SystemC model each implement it, so both
// run the very same semantics functions and differ only in when things happen.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

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
  std::vector<float> values;           // row-major K x N
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
  virtual void write_dram(uint64_t address, const void* source, uint64_t bytes) = 0;
  // `count` elements of `element_bytes` at byte `address` of this core's scratchpad or matrix accumulator buffer;
  // traps if any of it is outside (sizes are checked before they are multiplied, so they cannot wrap).
  std::span<std::byte> scratchpad(uint64_t address, uint64_t count, uint64_t element_bytes);
  std::span<std::byte> accumulator(uint64_t address, uint64_t count, uint64_t element_bytes);
  virtual MatrixWeights& matrix_weights();  // traps where there is no matrix engine
  virtual uint64_t read_csr(isa::Csr csr) = 0;

  // Synchronisation; the emulator runs engines in program order, so these only matter to the timed model.
  virtual void fence() {}

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
};

}  // namespace npusim::emulator
