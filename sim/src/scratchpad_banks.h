// Scratchpad bank conflicts. The scratchpad is `core.scratchpad_banks` banks interleaved in words of
// `core.scratchpad_bank_bytes`; per cycle a bank serves `core.scratchpad_bank_read_ports` reads and one write. An
// engine instruction moves through its operands in equal steps (a lane group of the vector engine, a row of the
// matrix engine), all operands together; a step whose words need more from one bank than that takes as many cycles
// as its busiest bank needs. A single contiguous operand never conflicts with itself; operands that share banks in
// the same step (more than the read ports, or two writes) and strided accesses (mx.ldwt's columns) do.
#pragma once

#include <cstdint>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emulator/buffer_accesses.h"

namespace npusim::sim {

class ScratchpadBanks {
 public:
  explicit ScratchpadBanks(const config::ChipConfig& config);

  // Cycles beyond `cycles_per_step` per step that an instruction taking `steps` steps through its scratchpad
  // `accesses` (each moving through its span evenly) waits for banks.
  uint64_t stall_cycles(const std::vector<emulator::BufferAccess>& accesses, uint64_t steps, uint64_t cycles_per_step);
  // mx.ldwt: step k reads column k of the row-major `cols` x `rows` tile at `base`: `cols` elements `rows` apart.
  uint64_t transposed_load_stall_cycles(uint64_t base, uint64_t rows, uint64_t cols, uint64_t element_bytes);

 private:
  void clear();
  void touch(uint64_t address, uint64_t bytes, bool write);  // the words of [address, address + bytes)
  uint64_t step_cycles() const;                              // of the words touched since clear()

  struct Stream {  // an operand: where it starts, how far it advances per step
    uint64_t begin, step_bytes;
    bool write;
  };

  uint64_t banks_, bank_bytes_, read_ports_;
  std::vector<uint64_t> reads_, writes_;
  // Reused by every call: stall_cycles runs once per vector or matrix instruction.
  std::vector<Stream> streams_;
  std::vector<uint64_t> stall_before_;
};

}  // namespace npusim::sim
