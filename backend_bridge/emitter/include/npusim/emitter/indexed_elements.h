// Emits ISA programs that move single elements by index along one dimension (torch.gather, scatter, scatter_add,
// scatter_reduce, index_reduce and index_put): each tensor is seen as outer x positions x inner with its own strides,
// the index tensor holds a position along the data's indexed dimension for each of its elements, and the kernel moves
// them with indexed DMA after checking every index with vcheck (an index outside the dimension stops the kernel with
// `trap 1`).
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"
#include "npusim/isa/isa.h"

namespace npusim::emitter {

enum class IndexedMove {
  Gather,      // values[o, j, i] = data[o, index[o, j, i], i]
  Scatter,     // data[o, index[o, j, i], i] = values[o, j, i]; a repeated index keeps the last j
  ScatterAdd,  // data[o, index[o, j, i], i] += values[o, j, i], in j order
  // data[o, index[o, j, i], i] = max (min, product) of itself and values[o, j, i], in j order, one element at a time
  // (no DMA combines as it stores): NaN if either is NaN, as scatter_reduce's amax and amin; products wrap for integers
  ScatterMax,
  ScatterMin,
  ScatterMul,
};

// Element strides of a tensor seen as outer x positions x inner.
struct Strides3 {
  int64_t outer = 0, position = 0, inner = 0;
};

struct IndexedElementsSpec {
  IndexedMove move = IndexedMove::Gather;
  isa::ElementType type = isa::ElementType::F32;  // of data and values
  int64_t outer = 1, positions = 1, inner = 1;    // the index tensor's (and values') shape
  int64_t dim_size = 1;                           // the data's size along the indexed dimension
  Strides3 data, index, values;
  int index_bytes = 8;         // 8 (int64) or 4 (int32) per index
  bool wrap_negative = false;  // an index in [-dim_size, 0) counts from the end (index_put, advanced indexing)
};

// The argument block is the data's, the index's and the values' addresses. Cores take (outer, inner) columns in
// turn, so scatters from different cores never write the same element and a scatter-add sums in j order.
Kernel emit_indexed_elements(const IndexedElementsSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
