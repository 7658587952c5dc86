// Blocks of up to 8 rows x 16 columns keep their sums in vector registers across the k loop (GCC vector
// extensions, as wide as the host allows). This file is compiled with -ffp-contract=fast so that `sum += a * w`
// becomes one fused multiply-add; the matrix reference test checks it against std::fma, so a build where the
// compiler did not fuse fails there instead of giving host-dependent numbers.
#include "matrix_kernel.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace npusim::emulator::semantics {
namespace {

typedef float FloatVector __attribute__((vector_size(64)));
typedef uint32_t WordVector __attribute__((vector_size(64)));
constexpr uint64_t kBlockCols = 16;

// A tile word in the scratchpad or accumulator. Named through this trait, not a template argument, because a template
// argument drops the typedef's alignment and aliasing attributes.
template <typename Word>
struct TileOf;
template <>
struct TileOf<float> {
  using type = AliasingFloat;
};
template <>
struct TileOf<uint32_t> {
  using type = AliasingWord;
};
template <typename Word>
using Tile = typename TileOf<Word>::type;

template <typename Word>
Word multiply_add(Word a, Word w, Word sum) {
  if constexpr (std::is_same_v<Word, float>)
    return std::fma(a, w, sum);
  else
    return sum + a * w;
}

// One output at a time over columns [first_col, cols): the column edge, and every column on a host without FMA.
template <typename Word>
void portable(const Tile<Word>* a, uint64_t rows, uint64_t depth, const Word* w, uint64_t cols, uint64_t first_col,
              bool accumulate, Tile<Word>* acc) {
  for (uint64_t m = 0; m < rows; ++m)
    for (uint64_t n = first_col; n < cols; ++n) {
      Word sum = accumulate ? acc[m * cols + n] : Word{};
      for (uint64_t k = 0; k < depth; ++k) sum = multiply_add(a[m * depth + k], w[k * cols + n], sum);
      acc[m * cols + n] = sum;
    }
}

// kRows rows x 16 columns, starting at a's and acc's first row and w's and acc's first column.
template <int kRows, typename Word>
__attribute__((always_inline)) inline void block(const Tile<Word>* a, uint64_t depth, const Word* w, uint64_t cols,
                                                 bool accumulate, Tile<Word>* acc) {
  using Vector = std::conditional_t<std::is_same_v<Word, float>, FloatVector, WordVector>;
  static_assert(sizeof(Vector) == kBlockCols * sizeof(Word));
  Vector sums[kRows];
  for (int r = 0; r < kRows; ++r) {
    sums[r] = Vector{};
    if (accumulate) std::memcpy(&sums[r], acc + r * cols, sizeof(Vector));
  }
  for (uint64_t k = 0; k < depth; ++k) {
    Vector w_k;
    std::memcpy(&w_k, w + k * cols, sizeof w_k);
    for (int r = 0; r < kRows; ++r) sums[r] += a[r * depth + k] * w_k;
  }
  for (int r = 0; r < kRows; ++r) std::memcpy(acc + r * cols, &sums[r], sizeof(Vector));
}

template <typename Word>
__attribute__((always_inline)) inline void vectorised(const Tile<Word>* a, uint64_t rows, uint64_t depth, const Word* w,
                                                      uint64_t cols, bool accumulate, Tile<Word>* acc) {
  uint64_t n0 = 0;
  for (; n0 + kBlockCols <= cols; n0 += kBlockCols) {
    uint64_t m0 = 0;
    for (; m0 + 8 <= rows; m0 += 8) block<8>(a + m0 * depth, depth, w + n0, cols, accumulate, acc + m0 * cols + n0);
    for (; m0 + 4 <= rows; m0 += 4) block<4>(a + m0 * depth, depth, w + n0, cols, accumulate, acc + m0 * cols + n0);
    for (; m0 < rows; ++m0) block<1>(a + m0 * depth, depth, w + n0, cols, accumulate, acc + m0 * cols + n0);
  }
  if (n0 < cols) portable(a, rows, depth, w, cols, n0, accumulate, acc);
}

#if defined(__x86_64__)
template <typename Word>
__attribute__((target("arch=x86-64-v4"))) void vectorised_avx512(const Tile<Word>* a, uint64_t rows, uint64_t depth,
                                                                 const Word* w, uint64_t cols, bool accumulate,
                                                                 Tile<Word>* acc) {
  vectorised(a, rows, depth, w, cols, accumulate, acc);
}
template <typename Word>
__attribute__((target("arch=x86-64-v3"))) void vectorised_avx2(const Tile<Word>* a, uint64_t rows, uint64_t depth,
                                                               const Word* w, uint64_t cols, bool accumulate,
                                                               Tile<Word>* acc) {
  vectorised(a, rows, depth, w, cols, accumulate, acc);
}
#endif

#if defined(__x86_64__)
// GCC's __builtin_cpu_supports knows the x86-64-v3 and -v4 levels; clang 14's only the features they consist of (a CPU
// with these has the levels' remaining features, movbe, lzcnt and f16c, in practice).
bool supports_x86_64_v3() {
#if defined(__clang__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
         __builtin_cpu_supports("bmi2");
#else
  return __builtin_cpu_supports("x86-64-v3");
#endif
}
bool supports_x86_64_v4() {
#if defined(__clang__)
  return supports_x86_64_v3() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return __builtin_cpu_supports("x86-64-v4");
#endif
}
#endif

template <typename Word>
void dispatch(const Tile<Word>* a, uint64_t rows, uint64_t depth, const Word* w, uint64_t cols, bool accumulate,
              Tile<Word>* acc) {
#if defined(__x86_64__)
  static const bool avx512 = supports_x86_64_v4(), avx2 = supports_x86_64_v3();
  if (avx512) return vectorised_avx512(a, rows, depth, w, cols, accumulate, acc);
  if (avx2) return vectorised_avx2(a, rows, depth, w, cols, accumulate, acc);
  portable(a, rows, depth, w, cols, 0, accumulate, acc);
#elif defined(__FP_FAST_FMAF)
  vectorised(a, rows, depth, w, cols, accumulate, acc);
#else
  portable(a, rows, depth, w, cols, 0, accumulate, acc);
#endif
}

}  // namespace

void multiply_accumulate(const AliasingFloat* a, uint64_t rows, uint64_t depth, const float* w, uint64_t cols,
                         bool accumulate, AliasingFloat* acc) {
  dispatch<float>(a, rows, depth, w, cols, accumulate, acc);
}

void multiply_accumulate(const AliasingWord* a, uint64_t rows, uint64_t depth, const uint32_t* w, uint64_t cols,
                         bool accumulate, AliasingWord* acc) {
  dispatch<uint32_t>(a, rows, depth, w, cols, accumulate, acc);
}

}  // namespace npusim::emulator::semantics
