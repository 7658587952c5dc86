// Emits ISA programs that add rows into a table by index (embedding's backward): table[index[i]] += rows[i] for
// float32 rows, indices equal to `skip_index` (the padding index) left out. One core walks the indices in order, so
// repeated indices accumulate; an index outside the table stops the kernel with `trap 1`.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"
#include "npusim/emitter/gather.h"

namespace npusim::emitter {

struct ScatterAddRowsSpec {
  int64_t table_rows = 0;   // rows of the table
  int64_t row_length = 0;   // float32 elements per row
  int64_t indices = 0;      // rows to add
  int index_bytes = 8;      // 8 (int64) or 4 (int32) per index
  int64_t skip_index = -1;  // an index to leave out (no row matches a negative one)
};

// The argument block is the table's, the rows' and the indices' addresses.
Kernel emit_scatter_add_rows(const ScatterAddRowsSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
