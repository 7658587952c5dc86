// Matrix engine: a weight-stationary systolic array. Each output is an fp32 dot product summed in k order, so the
// emulator and the timed model (which run this same code) agree bit for bit.
#include <fmt/format.h>

#include <cstring>

#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

float load_f32(const std::byte* base, uint64_t index) {
  float value;
  std::memcpy(&value, base + index * sizeof(float), sizeof value);
  return value;
}
void store_f32(std::byte* base, uint64_t index, float value) {
  std::memcpy(base + index * sizeof(float), &value, sizeof value);
}

// Loads a K x N weight tile stored row-major (K rows of N) or, transposed, as N rows of K.
void load_weights(ExecContext& c, const Instruction& i, bool transposed) {
  MatrixWeights& weights = c.matrix_weights();
  const auto rows = static_cast<int64_t>(c.reg(i.rs2)), cols = static_cast<int64_t>(c.reg(i.rs3));
  if (rows < 1 || cols < 1 || rows > weights.max_rows || cols > weights.max_cols)
    throw Trap(fmt::format("weight tile {} x {} does not fit the {} x {} systolic array", rows, cols, weights.max_rows,
                           weights.max_cols));
  const std::byte* source = c.scratchpad(c.reg(i.rs1), rows * cols, sizeof(float)).data();
  weights.values.resize(rows * cols);
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t n = 0; n < cols; ++n)
      weights.values[k * cols + n] = load_f32(source, transposed ? n * rows + k : k * cols + n);
  weights.rows = rows;
  weights.cols = cols;
}
}  // namespace

void MatrixLoadWeightsF32(ExecContext& c, const Instruction& i) { load_weights(c, i, false); }
void MatrixLoadWeightsTransposedF32(ExecContext& c, const Instruction& i) { load_weights(c, i, true); }

void MatrixMultiplyF32(ExecContext& c, const Instruction& i) {
  const MatrixWeights& weights = c.matrix_weights();
  if (weights.rows == 0) throw Trap("mx.mac.f32 before any mx.ldw.f32 loaded weights");
  if (i.imm & ~1) throw Trap(fmt::format("mx.mac.f32 mode {} is not 0 (overwrite) or 1 (accumulate)", i.imm));
  const bool accumulate = i.imm & 1;
  const uint64_t rows = c.reg(i.rs2), depth = weights.rows, cols = weights.cols;
  const std::byte* input = c.scratchpad(c.reg(i.rs1), rows, depth * sizeof(float)).data();
  std::byte* output = c.accumulator(c.reg(i.rd), rows, cols * sizeof(float)).data();
  c.stats().matrix_macs += rows * depth * cols;
  for (uint64_t m = 0; m < rows; ++m) {
    for (uint64_t n = 0; n < cols; ++n) {
      float partial = 0.0f;
      for (uint64_t k = 0; k < depth; ++k) partial += load_f32(input, m * depth + k) * weights.values[k * cols + n];
      const uint64_t index = m * cols + n;
      store_f32(output, index, accumulate ? load_f32(output, index) + partial : partial);
    }
  }
}

void MatrixStoreF32(ExecContext& c, const Instruction& i) {
  const uint64_t count = c.reg(i.rs2);
  const std::byte* source = c.accumulator(c.reg(i.rs1), count, sizeof(float)).data();
  std::memcpy(c.scratchpad(c.reg(i.rd), count, sizeof(float)).data(), source, count * sizeof(float));
}

}  // namespace npusim::emulator::semantics
