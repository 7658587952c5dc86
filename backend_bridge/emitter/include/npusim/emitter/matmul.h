// Emits ISA programs for C = A @ B on the matrix engine: tiles of K x N weights (the systolic array's size) and of
// M rows (what the scratchpad and accumulator hold), accumulated over K in the accumulator buffer.
#pragma once

#include <cstdint>
#include <optional>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

// Strides in elements: A[m][k] at A + m*a_row + k*a_col, likewise B[k][n] and C[m][n]. A and B hold `type` (f32,
// f16 or bf16); products accumulate in f32 and C, of `type` or f32 (output_type), is rounded once. For quantised
// inference, i8 operands accumulate exactly in i32 (wrapping) into an i32 C (output_type I32).
// A batch of `batch` products in one launch (bmm): entry e's A, B and C start e * a_batch, b_batch, c_batch
// elements on (a stride of 0 shares that operand).
// What each block of C goes through between the accumulator and memory, fused into the GEMM kernel (addmm, linear
// with a bias, baddbmm): C = alpha * (A @ B) + beta * bias, in f32, rounded once to C's type. bias[m][n] is at
// bias + m*bias_row + n*bias_col + e*bias_batch elements for batch entry e, of C's type; zero strides broadcast it
// (a row vector along m, a column along n, a scalar).
struct MatmulEpilogue {
  float alpha = 1.0f;
  bool bias = false;
  float beta = 1.0f;
  int64_t bias_row = 0, bias_col = 0, bias_batch = 0;
};

struct MatmulSpec {
  int64_t m = 0, k = 0, n = 0;
  int64_t a_row = 0, a_col = 0;
  int64_t b_row = 0, b_col = 0;
  int64_t c_row = 0, c_col = 0;
  isa::ElementType type = isa::ElementType::F32;
  std::optional<isa::ElementType> output_type;  // none: `type`
  int64_t batch = 1, a_batch = 0, b_batch = 0, c_batch = 0;
  MatmulEpilogue epilogue;
  // Implicit GEMM (gemm_loop.h): A's columns in runs of a_run, a_run_stride elements apart; 0: one run (k * a_col).
  // A kernel reading its A so is named conv_<type>: it is a convolution reading the patches where they lie.
  int64_t a_run = 0, a_run_stride = 0;
};

// Whether the GEMM loop reads an A whose columns come in runs of `run` (MatmulSpec::a_run): each run a whole number
// of K steps, the systolic array's rows.
bool reads_columns_in_runs(int64_t run, const config::ChipConfig& config);

// The argument block is the addresses of C, A, B, and the bias's with an epilogue bias. Throws Unsupported for
// strides beyond the immediate field. The kernel is named for what it fuses: matmul_f32, matmul_f32+bias, ...
Kernel emit_matmul(const MatmulSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
