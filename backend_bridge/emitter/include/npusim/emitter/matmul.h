// Emits ISA programs for C = A @ B on the matrix engine: tiles of K x N weights (the systolic array's size) and of
// M rows (what the scratchpad and accumulator hold), accumulated over K in the accumulator buffer.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

// fp32 operands; strides in elements: A[m][k] at A + m*a_row + k*a_col, likewise B[k][n] and C[m][n].
struct MatmulSpec {
  int64_t m = 0, k = 0, n = 0;
  int64_t a_row = 0, a_col = 0;
  int64_t b_row = 0, b_col = 0;
  int64_t c_row = 0, c_col = 0;
};

// The argument block is the addresses of C, A, B. Throws Unsupported for strides beyond the immediate field.
Kernel emit_matmul(const MatmulSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
