// Matrix engine: a weight-stationary systolic array. Float inputs (f32, f16, bf16) widen exactly to f32 and each
// output is an f32 dot product summed in k order; i8 inputs sum in i32, wrapping. The emulator and the timed model
// run this same code, so they agree bit for bit.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "element_types.h"
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
        std::memcpy(weights.values.data(), source, rows * cols * sizeof(float));
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

// out[m][n] = previous[m][n] + (sum over k, in k order, of a[m][k] * w[k][n]) for a rows x depth tile and
// depth x cols weights; without `previous`, just the sum.
// Blocks of 4 rows x 16 columns keep their sums in vector registers across the k loop (GCC vector extensions, as
// wide as the host allows); each output still gets its products added one at a time in k order, starting from
// zero, with no fused multiply-add (-ffp-contract=off), so the result is the same on every host.
typedef float FloatVector __attribute__((vector_size(64)));
typedef uint32_t WordVector __attribute__((vector_size(64)));
// The scratchpad and accumulator are byte buffers; f32 tiles are read and written in place through this type,
// which GCC allows to alias them.
typedef float __attribute__((may_alias)) AliasingFloat;

// `previous` may be `out` itself: each output is read before it is written.
template <typename Word, typename Tile>
__attribute__((always_inline)) inline void tile_times_weights_body(const Tile* a, uint64_t rows, uint64_t depth,
                                                                   const Word* w, uint64_t cols, const Tile* previous,
                                                                   Tile* out) {
  constexpr uint64_t kRows = 4, kCols = 16;
  using Vector = std::conditional_t<std::is_same_v<Word, float>, FloatVector, WordVector>;
  static_assert(sizeof(Vector) == kCols * sizeof(Word));
  for (uint64_t m0 = 0; m0 < rows; m0 += kRows) {
    const uint64_t block_rows = std::min(kRows, rows - m0);
    for (uint64_t n0 = 0; n0 < cols; n0 += kCols) {
      const uint64_t block_cols = std::min(kCols, cols - n0);
      if (block_rows == kRows && block_cols == kCols) {
        Vector sum0{}, sum1{}, sum2{}, sum3{};
        const Tile *a0 = a + m0 * depth, *a1 = a0 + depth, *a2 = a1 + depth, *a3 = a2 + depth;
        for (uint64_t k = 0; k < depth; ++k) {
          Vector w_k;
          std::memcpy(&w_k, w + k * cols + n0, sizeof w_k);
          sum0 += a0[k] * w_k;
          sum1 += a1[k] * w_k;
          sum2 += a2[k] * w_k;
          sum3 += a3[k] * w_k;
        }
        Vector* sums[] = {&sum0, &sum1, &sum2, &sum3};
        for (uint64_t r = 0; r < kRows; ++r) {
          const uint64_t at = (m0 + r) * cols + n0;
          if (previous) {
            Vector before;
            std::memcpy(&before, previous + at, sizeof before);
            *sums[r] = before + *sums[r];
          }
          std::memcpy(out + at, sums[r], sizeof(Vector));
        }
        continue;
      }
      for (uint64_t r = 0; r < block_rows; ++r)  // an edge block, one output at a time
        for (uint64_t n = 0; n < block_cols; ++n) {
          Word sum{};
          for (uint64_t k = 0; k < depth; ++k) sum += a[(m0 + r) * depth + k] * w[k * cols + n0 + n];
          const uint64_t at = (m0 + r) * cols + n0 + n;
          out[at] = previous ? previous[at] + sum : sum;
        }
    }
  }
}
__attribute__((target_clones("avx512f", "avx2", "default"))) void tile_times_weights(const AliasingFloat* a,
                                                                                     uint64_t rows, uint64_t depth,
                                                                                     const float* w, uint64_t cols,
                                                                                     const AliasingFloat* previous,
                                                                                     AliasingFloat* out) {
  tile_times_weights_body<float>(a, rows, depth, w, cols, previous, out);
}
// i8 inputs as two's-complement 32-bit words: unsigned products and sums wrap exactly like i32.
__attribute__((target_clones("avx512f", "avx2", "default"))) void tile_times_weights(const uint32_t* a, uint64_t rows,
                                                                                     uint64_t depth, const uint32_t* w,
                                                                                     uint64_t cols,
                                                                                     const uint32_t* previous,
                                                                                     uint32_t* out) {
  tile_times_weights_body(a, rows, depth, w, cols, previous, out);
}

// Reused between instructions, so a tile costs no allocation.
template <typename Word>
std::vector<Word>& scratch(int which) {
  thread_local std::vector<Word> buffers[4];
  return buffers[which];
}

template <typename T>
void multiply(ExecContext& c, const Instruction& i, const MatrixWeights& weights, bool accumulate) {
  const uint64_t rows = c.reg(i.rs2), depth = weights.rows, cols = weights.cols;
  const std::byte* input = c.scratchpad(c.reg(i.rs1), rows, depth * sizeof(T)).data();
  std::byte* output = c.accumulator(c.reg(i.rd), rows, cols * 4).data();
  c.stats().matrix_macs += rows * depth * cols;
  using Word = std::conditional_t<kIsFloat<T>, float, uint32_t>;
  const auto word = [](auto value) {
    if constexpr (kIsFloat<T>)
      return static_cast<float>(value);
    else
      return static_cast<uint32_t>(static_cast<int32_t>(value));
  };
  if constexpr (std::is_same_v<T, float>) {  // f32 tiles straight from the scratchpad into the accumulator
    auto* out = reinterpret_cast<AliasingFloat*>(output);
    tile_times_weights(reinterpret_cast<const AliasingFloat*>(input), rows, depth, weights.values.data(), cols,
                       accumulate ? out : nullptr, out);
    return;
  }
  std::vector<Word>& a = scratch<Word>(0);
  std::vector<Word>& sums = scratch<Word>(2);
  a.resize(rows * depth);
  sums.resize(rows * cols);
  for (uint64_t k = 0; k < rows * depth; ++k) a[k] = word(widen(load<T>(input, k)));
  const Word* w = nullptr;
  if constexpr (kIsFloat<T>) {
    w = weights.values.data();  // already f32
  } else {
    std::vector<Word>& converted = scratch<Word>(1);
    converted.resize(depth * cols);
    for (uint64_t k = 0; k < depth * cols; ++k) converted[k] = word(weights.values[k]);
    w = converted.data();
  }
  const Word* previous = nullptr;
  if (accumulate) {
    std::vector<Word>& before = scratch<Word>(3);
    before.resize(rows * cols);
    std::memcpy(before.data(), output, rows * cols * 4);
    previous = before.data();
  }
  tile_times_weights(a.data(), rows, depth, w, cols, previous, sums.data());
  std::memcpy(output, sums.data(), rows * cols * 4);
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
      std::memmove(out, source, count * 4);
    } else if constexpr (kIsFloat<T>) {
      std::vector<T> rounded(count);
      for (uint64_t k = 0; k < count; ++k) rounded[k] = T(load<float>(source, k));
      std::memcpy(out, rounded.data(), count * sizeof(T));
    }
  });
}

}  // namespace npusim::emulator::semantics
