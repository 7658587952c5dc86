// Emits ISA programs that gather rows by index (index_select along dim 0, so embedding lookups): out[i] =
// table[index[i]] for whole rows of any element size. Each row goes DRAM → scratchpad → DRAM on the DMA engine;
// an index outside the table stops the kernel with `trap 1`, never a read outside it.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

inline constexpr int kIndexOutOfRangeTrap = 1;  // the trap code of an index outside the table

struct GatherSpec {
  int64_t table_rows = 0;  // rows of the table
  int64_t row_bytes = 0;   // bytes of one row
  int64_t indices = 0;     // rows to gather
  int index_bytes = 8;     // 8 (int64) or 4 (int32) per index
};

// The argument block is the output's, the table's and the indices' addresses.
Kernel emit_gather(const GatherSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
