// Emits ISA programs for operations along the last dimension of a contiguous tensor viewed as rows x cols: softmax
// and log_softmax (row to row), the row sum, maximum and minimum (row to one value) and the index of the maximum or
// minimum (row to one int64), layer normalisation (row to row, plus each row's mean and 1/std) and its input
// gradient; float32 rows, but for the extrema and their indices, which take any numeric type. Each is a fused kernel
// (fused.h) over the space [rows, cols] with the columns reduced: tiles of whole rows, reduced with the vector
// engine's row reductions and broadcast operands, shared by the cores.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

enum class RowOp {
  SoftmaxF32,
  LogSoftmaxF32,
  SumF32,
  LayerNormF32,
  SafeSoftmaxF32,         // softmax, but 0 for a row whose every element is -inf (attention's fully masked rows)
  SoftmaxBackwardF32,     // from the gradient and softmax's output: y * (g - rowsum(g * y))
  LogSoftmaxBackwardF32,  // from the gradient and log_softmax's output: g - exp(y) * rowsum(g)
  MaxF32,                 // NaN if the row has one
  MinF32,
  ArgMaxF32,  // int64: the first index of the maximum, a NaN counting as the maximum (as PyTorch's CPU kernels)
  ArgMinF32,
  // layer_norm's input gradient in one pass, from dy, x and the forward's per-row mean and 1/std (and the weight):
  // x̂ = (x - mean) rstd, g = dy weight; dx = ((g - rowsum(g) / cols) - x̂ rowsum(g x̂) / cols) rstd, in the order the
  // composition it replaces computed it.
  LayerNormBackwardF32,
};

struct RowSpec {
  RowOp op = RowOp::SoftmaxF32;
  int64_t rows = 0, cols = 0;
  // Layer normalisation only: y = (x - mean) / sqrt(var + eps) [* weight] [+ bias], var biased.
  bool weight = false, bias = false;
  float eps = 0.0f;
  // The rows' type: max, min and their indices take any numeric type (u8 for bools), every other op f32. The
  // results are of the rows' type, the indices int64.
  isa::ElementType type = isa::ElementType::F32;
};

// The argument block is the output's and the input's addresses (for the backward ops: the gradient's, then the
// forward output's); layer normalisation adds the weight's, the bias's (each 0 when absent), the means' and the
// 1/std's; layer_norm's backward is dx, dy, x, the weight (0 when absent), the means and the 1/stds. A row too long
// for the scratchpad is walked in chunks (fused_looped.h); the index of an extremum of another type than f32 over
// one throws Unsupported.
Kernel emit_rows(const RowSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
