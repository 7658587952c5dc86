// Matrix engine: a weight-stationary systolic array. Float inputs (f32, f16, bf16) widen exactly to f32 and each
// output accumulates its products in k order by fused multiply-adds in f32; i8 inputs sum in i32, wrapping. The
// emulator and the timed model run this same code, so they agree bit for bit.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "element_types.h"
#include "matrix_kernel.h"
#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

// Loads a K x N weight tile stored row-major (K rows of N) or, transposed, as N rows of K. Weights are kept as f32,
// which holds every f16, bf16 and i8 value exactly.
void load_weights(ExecContext& c, const Instruction& i, bool transposed) {
  MatrixWeights& weights = c.matrix_weights();
  const auto rows = static_cast<int64_t>(c.reg(i.rs2)), cols = static_cast<int64_t>(c.reg(i.rs3));
  if (rows < 1 || cols < 1 || rows > weights.max_rows || cols > weights.max_cols)
    throw Trap(fmt::format("weight tile {} x {} does not fit the {} x {} systolic array", rows, cols, weights.max_rows,
                           weights.max_cols));
  visit_type(i.type, [&]<typename T>(T) {
    const std::byte* source = c.scratchpad(c.reg(i.rs1), rows * cols, sizeof(T)).data();
    weights.values.resize(rows * cols);
    if constexpr (std::is_same_v<T, float>) {
      if (!transposed) {  // already the layout the array keeps
        copy_bytes(weights.values.data(), source, rows * cols * sizeof(float));
        return;
      }
    }
    for (int64_t k = 0; k < rows; ++k)
      for (int64_t n = 0; n < cols; ++n)
        weights.values[k * cols + n] =
            static_cast<float>(widen(load<T>(source, transposed ? n * rows + k : k * cols + n)));
  });
  weights.rows = rows;
  weights.cols = cols;
  weights.type = i.type;
}

// Reused between instructions, so a tile costs no allocation.
template <typename Word>
std::vector<Word>& scratch(int which) {
  thread_local std::vector<Word> buffers[2];
  return buffers[which];
}

template <typename T>
void multiply(ExecContext& c, const Instruction& i, const MatrixWeights& weights, bool accumulate) {
  const uint64_t rows = c.reg(i.rs2), depth = weights.rows, cols = weights.cols;
  const std::byte* input = c.scratchpad(c.reg(i.rs1), rows, depth * sizeof(T)).data();
  std::byte* output = c.accumulator(c.reg(i.rd), rows, cols * 4).data();
  KernelStats& stats = c.stats();
  const uint64_t macs = rows * depth * cols;
  stats.matrix_macs += macs;
  if constexpr (std::is_same_v<T, int8_t>)
    stats.matrix_macs_i8 += macs;
  else if constexpr (std::is_same_v<T, Eigen::half>)
    stats.matrix_macs_f16 += macs;
  else if constexpr (std::is_same_v<T, Eigen::bfloat16>)
    stats.matrix_macs_bf16 += macs;
  else
    stats.matrix_macs_f32 += macs;
  using Word = std::conditional_t<kIsFloat<T>, float, uint32_t>;
  const auto word = [](auto value) {
    if constexpr (kIsFloat<T>)
      return static_cast<float>(value);
    else
      return static_cast<uint32_t>(static_cast<int32_t>(value));
  };
  if constexpr (std::is_same_v<T, float>) {  // f32 tiles straight from the scratchpad into the accumulator
    multiply_accumulate(reinterpret_cast<const AliasingFloat*>(input), rows, depth, weights.values.data(), cols,
                        accumulate, reinterpret_cast<AliasingFloat*>(output));
    return;
  }
  std::vector<Word>& a = scratch<Word>(0);
  a.resize(rows * depth);
  for (uint64_t k = 0; k < rows * depth; ++k) a[k] = word(widen(load<T>(input, k)));
  if constexpr (kIsFloat<T>) {
    multiply_accumulate(a.data(), rows, depth, weights.values.data(), cols, accumulate,
                        reinterpret_cast<AliasingFloat*>(output));  // the weights are already f32
  } else {
    std::vector<Word>& converted = scratch<Word>(1);
    converted.resize(depth * cols);
    for (uint64_t k = 0; k < depth * cols; ++k) converted[k] = word(weights.values[k]);
    multiply_accumulate(a.data(), rows, depth, converted.data(), cols, accumulate,
                        reinterpret_cast<AliasingWord*>(output));
  }
}
}  // namespace

void MatrixLoadWeights(ExecContext& c, const Instruction& i) { load_weights(c, i, false); }
void MatrixLoadWeightsTransposed(ExecContext& c, const Instruction& i) { load_weights(c, i, true); }

void MatrixMultiply(ExecContext& c, const Instruction& i) {
  const MatrixWeights& weights = c.matrix_weights();
  if (weights.rows == 0) throw Trap("mx.mac before any mx.ldw loaded weights");
  if (i.imm & ~1) throw Trap(fmt::format("mx.mac mode {} is not 0 (overwrite) or 1 (accumulate)", i.imm));
  if (weights.type != i.type)
    throw Trap(fmt::format("mx.mac.{} inputs do not match the loaded {} weights", isa::type_name(i.type),
                           isa::type_name(weights.type)));
  visit_type(i.type, [&]<typename T>(T) {
    if constexpr (kIsFloat<T> || std::is_same_v<T, int8_t>) multiply<T>(c, i, weights, i.imm & 1);
  });
}

// f32 accumulators round to the output type; i32 accumulators (from i8 inputs) are stored as they are.
void MatrixStore(ExecContext& c, const Instruction& i) {
  const uint64_t count = c.reg(i.rs2);
  const std::byte* source = c.accumulator(c.reg(i.rs1), count, 4).data();
  visit_type(i.type, [&]<typename T>(T) {
    std::byte* out = c.scratchpad(c.reg(i.rd), count, sizeof(T)).data();
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, int32_t>) {
      copy_bytes(out, source, count * 4);
    } else if constexpr (kIsFloat<T>) {
      std::vector<T> rounded(count);
      for (uint64_t k = 0; k < count; ++k) rounded[k] = T(load<float>(source, k));
      copy_bytes(out, rounded.data(), count * sizeof(T));
    }
  });
}

}  // namespace npusim::emulator::semantics
