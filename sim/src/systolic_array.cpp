// The systolic array's pipeline (systolic_array.h). Weight-stationary: an mx.mac holds the matrix engine only while its
// M input rows stream in; its results drain into the accumulator over the next R + C - 2 cycles (the skewed wavefront)
// and the accumulator write, while the next product may already stream. With two weight sets, a weight load after a
// product shifts into the idle set from the product's start (or from its own issue, or the last sem.wait.mx, if
// later), once the product before that one has drained out of it, and takes only the time that outlasts the product;
// with one set it waits until the last partial sum has left the array. Output-stationary: the PEs hold an R x C tile
// of outputs while both operands stream past them, so mx.ldw only names the weights a product streams; a product into
// the tile the PEs hold (accumulating, as the next K step of the same outputs) streams at once, and one into another
// tile waits until the held outputs have drained. mx.st reads the accumulator, so it waits for the drain, and so do
// fences and the kernel's end.
#include "systolic_array.h"

#include <algorithm>

namespace npusim::sim {

SystolicArray::SystolicArray(const config::ChipConfig& config, const Clock& clock)
    : config_(config),
      clock_(clock),
      rows_(static_cast<uint64_t>(config.core_systolic_rows)),
      cols_(static_cast<uint64_t>(config.core_systolic_cols)),
      drain_(clock.cycles(rows_ + cols_ - 2 + static_cast<uint64_t>(config.core_accumulator_write_cycles))),
      write_(clock.cycles(static_cast<uint64_t>(config.core_accumulator_write_cycles))) {}

void SystolicArray::reset() {
  after_product_ = false;
  product_start_ = drained_ = idle_set_free_ = ordered_ = pending_drain_start_ = sc_core::SC_ZERO_TIME;
  working_ = working_until_ = sc_core::SC_ZERO_TIME;
  held_tile_.reset();
  drain_pending_ = false;
}

uint64_t SystolicArray::own_cycles(const isa::Instruction& instruction,
                                   const std::array<uint64_t, isa::kRegisterCount>& registers,
                                   const emulator::MatrixWeights& weights) const {
  const uint64_t operand = registers[instruction.rs2];
  switch (instruction.opcode) {
    case isa::Opcode::MatrixLoadWeights:
    case isa::Opcode::MatrixLoadWeightsTransposed:
      if (config_.output_stationary()) return 0;                // the weights stream during the product
      return config_.weight_load_all_rows() ? rows_ : operand;  // one weight row shifts in per cycle
    case isa::Opcode::MatrixMultiply: {
      if (!config_.output_stationary()) return operand;  // M input rows stream in
      // Output-stationary: M rows are ceil(M / R) tiles of outputs, each streaming K operand pairs, each but the last
      // draining before the next starts.
      const uint64_t tiles = (operand + rows_ - 1) / rows_;
      return tiles * static_cast<uint64_t>(weights.rows) + (tiles - 1) * clock_.to_cycles(drain_);
    }
    default: return (operand + cols_ - 1) / cols_;  // mx.st: one accumulator row of `cols` elements per cycle
  }
}

sc_core::sc_time SystolicArray::schedule(const isa::Instruction& instruction,
                                         const std::array<uint64_t, isa::kRegisterCount>& registers,
                                         sc_core::sc_time issued_at, sc_core::sc_time busy, sc_core::sc_time now) {
  const auto after = [&](sc_core::sc_time end) { return end > now ? end - now : sc_core::SC_ZERO_TIME; };
  switch (instruction.opcode) {
    case isa::Opcode::MatrixStore:
      after_product_ = false;
      if (drain_pending_) occupy(pending_drain_start_, drained_);
      drain_pending_ = false;
      held_tile_.reset();
      return after(drained_) + busy;
    case isa::Opcode::SemWaitMatrix: ordered_ = now; return busy;
    case isa::Opcode::MatrixLoadWeights:
    case isa::Opcode::MatrixLoadWeightsTransposed:
    case isa::Opcode::MatrixMultiply:
      return config_.output_stationary() ? output_stationary(instruction, registers, busy, now)
                                         : weight_stationary(instruction, issued_at, busy, now);
    default: return busy;
  }
}

sc_core::sc_time SystolicArray::weight_stationary(const isa::Instruction& instruction, sc_core::sc_time issued_at,
                                                  sc_core::sc_time busy, sc_core::sc_time now) {
  if (instruction.opcode == isa::Opcode::MatrixMultiply) {
    idle_set_free_ = drained_;  // the set the previous product used
    product_start_ = now;
    drained_ = now + busy + drain_;
    after_product_ = true;
    occupy(now, drained_);
    return busy;
  }
  sc_core::sc_time start = now;
  if (after_product_ && config_.core_weight_buffers > 1)
    start = std::max({issued_at, product_start_, idle_set_free_, ordered_});
  else if (after_product_)  // the one set is in use until the last partial sum leaves the array
    start = std::max(now, drained_ - write_);
  occupy(start, start + busy);
  return start + busy > now ? start + busy - now : sc_core::SC_ZERO_TIME;
}

sc_core::sc_time SystolicArray::output_stationary(const isa::Instruction& instruction,
                                                  const std::array<uint64_t, isa::kRegisterCount>& registers,
                                                  sc_core::sc_time busy, sc_core::sc_time now) {
  if (instruction.opcode != isa::Opcode::MatrixMultiply) return busy;  // a weight load only names the weights
  const uint64_t rows = registers[instruction.rs2];
  const std::array<uint64_t, 2> tile{registers[instruction.rd], rows};
  const bool next_k_step =
      (instruction.imm & 1) && held_tile_ && (*held_tile_)[0] == tile[0] && (*held_tile_)[1] == rows && rows <= rows_;
  // Another tile of outputs takes the PEs once the held one has drained out of them; the next K step of the held tile
  // keeps its outputs in the PEs, so their drain never happened.
  const sc_core::sc_time start = next_k_step ? now : std::max(now, drained_);
  if (!next_k_step && drain_pending_) occupy(pending_drain_start_, drained_);
  occupy(start, start + busy);
  drain_pending_ = true;
  pending_drain_start_ = start + busy;
  drained_ = start + busy + drain_;
  held_tile_ = rows <= rows_ ? std::optional(tile) : std::nullopt;
  return start + busy - now;
}

sc_core::sc_time SystolicArray::working_time() const {
  if (!drain_pending_) return working_;
  // Output-stationary: the held tile's drain, which the kernel's end waits for.
  const sc_core::sc_time begin = std::max(pending_drain_start_, working_until_);
  return drained_ > begin ? working_ + (drained_ - begin) : working_;
}

void SystolicArray::occupy(sc_core::sc_time from, sc_core::sc_time to) {
  const sc_core::sc_time begin = std::max(from, working_until_);
  if (to > begin) working_ += to - begin;
  working_until_ = std::max(working_until_, to);
}

}  // namespace npusim::sim
