// The iteration space of a fused kernel (fused.h) as its tiles see it: the outer and the reduced dimensions collapsed
// over every access of the spec, with byte strides.
#pragma once

#include <cstdint>
#include <vector>

#include "npusim/emitter/fused.h"

namespace npusim::emitter::fused {

inline constexpr int kDmaDims = 4;         // a 4-D DMA moves a tile: the reduced dimensions, the block and the chunk
inline constexpr int kMaxReducedDims = 3;  // so that a row and the chunk fit those four
inline constexpr int kMaxLoopDims = 4;     // outer dimensions outside a tile, a register each

struct Layout {
  // Outer sizes (at least one), outermost first; reduced sizes (none when a row is one element).
  std::vector<int64_t> outer, reduced;
  // Per access (the loads, then the stores, then the positions when positions >= 0), in bytes.
  std::vector<std::vector<int64_t>> outer_strides, reduced_strides;
  // With random numbers: the access of their stream positions, a view of one-byte elements with the space's
  // row-major strides (so that a tile's first position is computed as an address is, and dimensions merge only where
  // positions run on too).
  int positions = -1;
  int64_t row_length = 1;  // elements of a row: the product of the reduced sizes

  // Whether the access reads or writes different elements along a row.
  bool varies_along_rows(int access) const;
};

// The outer dimensions ordered by the first store's strides, largest first (so that the innermost walks its memory
// in order; the order of the outer points does not change any value, except a scatter-add's, which keeps the
// space's order), the reduced ones in their order (a row sums in that order). Size-1 dimensions are dropped and
// neighbours contiguous in every access merged. Throws Unsupported when more than kMaxReducedDims reduced dimensions
// remain. The spec must be valid and have no empty dimension. With segments, the one dimension is the longest
// segment's.
Layout collapse(const FusedSpec& spec);

}  // namespace npusim::emitter::fused
