// Emits copies whose destination and source are contiguous along different dimensions: a transposed or permuted
// tensor made contiguous, or a contiguous one written into a transposed view. Moving such a copy element by element
// costs a DRAM transaction per element; this kernel instead moves tiles whose rows are contiguous on both sides and
// transposes them in the scratchpad with the vector engine's vtr, the DMA of one tile overlapping the transpose of
// the next (two buffer pairs ordered by semaphores).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

// A copy after collapsing (emit_elementwise's form): sizes, and byte strides of the destination and the source.
struct StridedCopy {
  int element_bytes = 4;  // 1, 2, 4 or 8
  std::vector<int64_t> sizes;
  std::vector<int64_t> destination_strides, source_strides;
};

// The transposing kernel for `copy`, or nothing when the copy is not of that form (its destination and source are
// contiguous along the same dimension, or along none, or a stride does not fit a DMA immediate). Its argument
// block is the destination's and the source's addresses.
std::optional<Kernel> emit_transpose_copy(const StridedCopy& copy, const config::ChipConfig& config);

}  // namespace npusim::emitter
