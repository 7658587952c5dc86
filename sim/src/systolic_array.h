// The systolic array's schedule within a kernel (docs/timing.md): what each matrix-engine instruction costs on a
// weight- or output-stationary R x C array, given the products before it still streaming or draining, and the cycles
// the array works in all.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <systemc>

#include "clock.h"
#include "npusim/config/chip_config.h"
#include "npusim/emulator/exec_context.h"
#include "npusim/isa/isa.h"

namespace npusim::sim {

class SystolicArray {
 public:
  SystolicArray(const config::ChipConfig& config, const Clock& clock);

  void reset();  // a kernel starts with an empty array
  // The cycles a matrix-engine instruction takes by itself, before schedule(): `weights` as the emulator left them
  // after running it (the K x N tile an mx.mac multiplies by).
  uint64_t own_cycles(const isa::Instruction& instruction, const std::array<uint64_t, isa::kRegisterCount>& registers,
                      const emulator::MatrixWeights& weights) const;
  // The matrix engine's time for the instruction starting at `now`, issued at `issued_at`, that takes `busy` by
  // itself (own cycles and bank stalls): it adds the waits and overlaps the array's pipeline imposes.
  sc_core::sc_time schedule(const isa::Instruction& instruction,
                            const std::array<uint64_t, isa::kRegisterCount>& registers, sc_core::sc_time issued_at,
                            sc_core::sc_time busy, sc_core::sc_time now);
  // When the last product's results reach the accumulator: mx.st, fences and the kernel's end wait for it.
  sc_core::sc_time drained() const { return drained_; }
  // Time the array loaded weights, streamed operands or drained results, overlaps counted once.
  sc_core::sc_time working_time() const;

 private:
  void occupy(sc_core::sc_time from, sc_core::sc_time to);
  sc_core::sc_time weight_stationary(const isa::Instruction& instruction, sc_core::sc_time issued_at,
                                     sc_core::sc_time busy, sc_core::sc_time now);
  sc_core::sc_time output_stationary(const isa::Instruction& instruction,
                                     const std::array<uint64_t, isa::kRegisterCount>& registers, sc_core::sc_time busy,
                                     sc_core::sc_time now);

  const config::ChipConfig& config_;
  const Clock& clock_;
  uint64_t rows_, cols_;
  sc_core::sc_time drain_;          // R + C - 2 for the skewed wavefront, + the accumulator write
  sc_core::sc_time write_;          // the accumulator write alone
  bool after_product_ = false;      // an mx.mac ran and no mx.st since: a weight load may overlap it
  sc_core::sc_time product_start_;  // the last mx.mac's first row entered the array
  sc_core::sc_time drained_;        // its last result reached the accumulator
  sc_core::sc_time idle_set_free_;  // the product before it drained: the other weight set is free
  sc_core::sc_time ordered_;        // the last sem.wait.mx returned
  // Output-stationary: the accumulator tile whose outputs the PEs hold (address, rows), until mx.st or a
  // product into another tile.
  std::optional<std::array<uint64_t, 2>> held_tile_;
  // Output-stationary: the last product's drain, counted once it happens (not when the next K step keeps the outputs).
  bool drain_pending_ = false;
  sc_core::sc_time pending_drain_start_;
  sc_core::sc_time working_, working_until_;
};

}  // namespace npusim::sim
