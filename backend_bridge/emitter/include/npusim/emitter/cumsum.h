// Emits ISA programs for the running sum (or product) along the rows of a contiguous [rows x cols] tensor (cumsum or
// cumprod over its last dimension), in f32, i32 or i64: each tile of rows is loaded transposed, so that column j of
// every row is one contiguous run and the scan is one vector add (multiply) per column, in column order, as a
// sequential sum (product).
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

struct CumsumSpec {
  int64_t rows = 0, cols = 0;
  isa::ElementType type = isa::ElementType::F32;  // f32, i32 or i64 (integers wrap)
  bool product = false;                           // the running product (cumprod_<type>) instead of the sum
};

// The argument block is the output's and the input's addresses (both contiguous; they may be the same tensor). A row
// too long for the scratchpad is scanned in chunks of columns.
Kernel emit_cumsum(const CumsumSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
