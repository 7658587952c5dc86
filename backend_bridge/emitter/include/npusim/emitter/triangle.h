// Emits ISA programs that zero one triangle of each matrix in a batch, in place (tril and triu after a copy): for
// tril, every element above diagonal k (column > row + k); for triu, every element below it (column < row + k). Any
// element size: zero bytes are zero in every dtype.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

struct TriangleSpec {
  int64_t matrices = 1, rows = 0, cols = 0;  // contiguous [matrices x rows x cols]
  int element_bytes = 4;
  int64_t diagonal = 0;
  bool keep_lower = true;  // tril; false for triu
};

// The argument block is the tensor's address.
Kernel emit_zero_triangle(const TriangleSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
