// Row kernels as fused kernels (fused.h) over the space [rows, cols] with the columns reduced, so that they share the
// fused kernels' loop (tiles of whole rows spread over the cores, double-buffered DMA). Each op is its formula in
// nodes, operation for operation the sequence of vector instructions it has always been:
//   softmax      m = rowmax(x); e = exp(x - m); y = e / rowsum(e)
//   safe softmax the same with m = 0 and the sum 1 for rows whose max is -inf, so those rows give 0, not NaN
//   log_softmax  d = x - rowmax(x); y = d - log(rowsum(exp(d)))
//   sum, max, min, argmax, argmin   one value per row
//   softmax backward      y (g - rowsum(g y))
//   log_softmax backward  g - exp(y) rowsum(g)
//   layer_norm   m = rowsum(x) / cols; d = x - m; r = rsqrt(rowsum(d d) / cols + eps); y = d r [* weight] [+ bias];
//                m and r are stored too
//   layer_norm backward  x̂ = (x - m) r (stored if asked); g = dy [* weight]; a = rowsum(g) / cols;
//                b = rowsum(g x̂) / cols; dx = ((g - a) - x̂ b) r
// The max subtraction keeps exp from overflowing, as PyTorch's CPU kernels do. Layer norm's weight and bias are the
// same in every row: the fused kernel loads one row of each per tile and reads it as a repeating row.
#include "npusim/emitter/rows.h"

#include <fmt/format.h>

#include <limits>
#include <vector>

#include "npusim/emitter/fused.h"

namespace npusim::emitter {
namespace {

using isa::ElementType;
using Op = FusedOpcode;

const char* name_of(RowOp op) {
  switch (op) {
    case RowOp::SoftmaxF32: return "softmax";
    case RowOp::LogSoftmaxF32: return "log_softmax";
    case RowOp::SumF32: return "row_sum";
    case RowOp::LayerNormF32: return "layer_norm";
    case RowOp::SafeSoftmaxF32: return "safe_softmax";
    case RowOp::SoftmaxBackwardF32: return "softmax_backward";
    case RowOp::LogSoftmaxBackwardF32: return "log_softmax_backward";
    case RowOp::MaxF32: return "row_max";
    case RowOp::MinF32: return "row_min";
    case RowOp::ArgMaxF32: return "row_argmax";
    case RowOp::ArgMinF32: return "row_argmin";
    case RowOp::LayerNormBackwardF32: return "layer_norm_backward";
  }
  return "?";
}

// The spec of a row kernel: loads and stores of the argument block's tensors by their shape (a full [rows, cols]
// tensor, one value per row, or one row shared by every row), and operations (f32 but for the extrema's).
class RowGraph {
 public:
  RowGraph(const RowSpec& spec, int arguments) : cols_(spec.cols) {
    spec_.name = fmt::format("{}_{}", name_of(spec.op), isa::type_name(spec.type));  // softmax_f32
    spec_.sizes = {spec.rows, spec.cols};
    spec_.reduced_dims = 1;
    spec_.arguments = arguments;
  }

  int full(int argument, ElementType type = ElementType::F32) { return load(argument, {cols_, 1}, type); }
  int per_row(int argument) { return load(argument, {1, 0}); }
  int shared_row(int argument) { return load(argument, {0, 1}); }
  void store_full(int value, int argument) { store(value, argument, {cols_, 1}); }
  void store_per_row(int value, int argument) { store(value, argument, {1, 0}); }

  int op(Op opcode, int a, int b = -1, int c = -1, ElementType type = ElementType::F32) {
    return add({.op = opcode, .type = type, .a = a, .b = b, .c = c});
  }
  int constant(float value, ElementType type = ElementType::F32) {
    return add({.op = Op::Constant, .type = type, .constant = value});
  }
  // Each row's sum times `inverse` (1/cols): its mean.
  int row_mean(int value, float inverse) { return op(Op::Mul, op(Op::ReduceSum, value), constant(inverse)); }

  FusedSpec& spec() { return spec_; }

 private:
  int add(FusedNode node) {
    spec_.nodes.push_back(node);
    return static_cast<int>(spec_.nodes.size()) - 1;
  }
  int load(int argument, std::vector<int64_t> strides, ElementType type = ElementType::F32) {
    spec_.loads.push_back({argument, type, 0, std::move(strides)});
    return add({.op = Op::Load, .type = type, .access = static_cast<int>(spec_.loads.size()) - 1});
  }
  void store(int value, int argument, std::vector<int64_t> strides) {
    const ElementType type = spec_.nodes[value].type;
    spec_.stores.push_back({argument, type, 0, std::move(strides)});
    add({.op = Op::Store, .type = type, .a = value, .access = static_cast<int>(spec_.stores.size()) - 1});
  }

  int64_t cols_;
  FusedSpec spec_;
};

// Arguments: 0 the output, 1 the input.
void softmax(RowGraph& g, bool safe) {
  const int x = g.full(1);
  int max = g.op(Op::ReduceMax, x);
  const int masked =
      safe ? g.op(Op::Eq, max, g.constant(-std::numeric_limits<float>::infinity()), -1, ElementType::Bool) : -1;
  if (safe) max = g.op(Op::Where, masked, g.constant(0), max);
  const int e = g.op(Op::Exp, g.op(Op::Sub, x, max));
  int sum = g.op(Op::ReduceSum, e);
  if (safe) sum = g.op(Op::Where, masked, g.constant(1), sum);
  g.store_full(g.op(Op::Div, e, sum), 0);
}

void log_softmax(RowGraph& g) {
  const int x = g.full(1);
  const int shifted = g.op(Op::Sub, x, g.op(Op::ReduceMax, x));
  const int log_sum = g.op(Op::Log, g.op(Op::ReduceSum, g.op(Op::Exp, shifted)));
  g.store_full(g.op(Op::Sub, shifted, log_sum), 0);
}

// Arguments: 0 the per-row results, 1 the input.
void reduction(RowGraph& g, Op opcode, ElementType type) {
  const bool index = opcode == Op::ReduceArgMax || opcode == Op::ReduceArgMin;
  g.store_per_row(g.op(opcode, g.full(1, type), -1, -1, index ? ElementType::I64 : type), 0);
}

// Arguments: 0 the input's gradient, 1 the output's gradient, 2 the forward's output.
void softmax_backward(RowGraph& g) {
  const int gradient = g.full(1), y = g.full(2);
  const int dot = g.op(Op::ReduceSum, g.op(Op::Mul, gradient, y));
  g.store_full(g.op(Op::Mul, g.op(Op::Sub, gradient, dot), y), 0);
}
void log_softmax_backward(RowGraph& g) {
  const int gradient = g.full(1), y = g.full(2);
  const int sum = g.op(Op::ReduceSum, gradient);
  g.store_full(g.op(Op::Sub, gradient, g.op(Op::Mul, g.op(Op::Exp, y), sum)), 0);
}

// Arguments: 0 y, 1 x, 2 the weight, 3 the bias, 4 the means, 5 the 1/stds.
void layer_norm(RowGraph& g, const RowSpec& spec) {
  const float inverse = 1.0f / static_cast<float>(spec.cols);
  const int x = g.full(1);
  const int mean = g.row_mean(x, inverse);
  const int centred = g.op(Op::Sub, x, mean);
  const int variance = g.row_mean(g.op(Op::Mul, centred, centred), inverse);
  const int rstd = g.op(Op::Rsqrt, g.op(Op::Add, variance, g.constant(spec.eps)));
  int y = g.op(Op::Mul, centred, rstd);
  if (spec.weight) y = g.op(Op::Mul, y, g.shared_row(2));
  if (spec.bias) y = g.op(Op::Add, y, g.shared_row(3));
  g.store_full(y, 0);
  g.store_per_row(mean, 4);
  g.store_per_row(rstd, 5);
}

// Arguments: 0 dx, 1 dy, 2 x, 3 the weight, 4 the means, 5 the 1/stds. In the order of the composition this
// kernel replaced, so that every rounding is the same: 1/cols as a double rounded to float, as its scalar multiply
// took it.
void layer_norm_backward(RowGraph& g, const RowSpec& spec) {
  const auto inverse = static_cast<float>(1.0 / static_cast<double>(spec.cols));
  const int dy = g.full(1), x = g.full(2), mean = g.per_row(4), rstd = g.per_row(5);
  const int normalized = g.op(Op::Mul, g.op(Op::Sub, x, mean), rstd);
  const int scaled = spec.weight ? g.op(Op::Mul, dy, g.shared_row(3)) : dy;
  const int a = g.row_mean(scaled, inverse);
  const int b = g.row_mean(g.op(Op::Mul, scaled, normalized), inverse);
  const int difference = g.op(Op::Sub, g.op(Op::Sub, scaled, a), g.op(Op::Mul, normalized, b));
  g.store_full(g.op(Op::Mul, difference, rstd), 0);
}

int argument_count(RowOp op) {
  switch (op) {
    case RowOp::LayerNormF32: return 6;
    case RowOp::LayerNormBackwardF32: return 6;
    case RowOp::SoftmaxBackwardF32:
    case RowOp::LogSoftmaxBackwardF32: return 3;
    default: return 2;
  }
}

}  // namespace

Kernel emit_rows(const RowSpec& spec, const config::ChipConfig& config) {
  if (spec.rows < 1 || spec.cols < 1)
    throw std::invalid_argument(fmt::format("a row kernel over {} x {} has no elements", spec.rows, spec.cols));
  if (static_cast<int>(spec.type) >= isa::kElementTypeCount)
    throw std::invalid_argument(fmt::format("{}: rows of no element type", name_of(spec.op)));
  const bool any_type = spec.op == RowOp::MaxF32 || spec.op == RowOp::MinF32 || spec.op == RowOp::ArgMaxF32 ||
                        spec.op == RowOp::ArgMinF32;
  if (spec.type != ElementType::F32 && (!any_type || spec.type == ElementType::Bool))
    throw std::invalid_argument(
        fmt::format("{} of {} rows: only max, min and their indices take rows of another type than f32 (u8 for "
                    "bools)",
                    name_of(spec.op), isa::type_name(spec.type)));
  RowGraph g(spec, argument_count(spec.op));
  switch (spec.op) {
    case RowOp::SoftmaxF32: softmax(g, false); break;
    case RowOp::SafeSoftmaxF32: softmax(g, true); break;
    case RowOp::LogSoftmaxF32: log_softmax(g); break;
    case RowOp::SumF32: reduction(g, Op::ReduceSum, spec.type); break;
    case RowOp::MaxF32: reduction(g, Op::ReduceMax, spec.type); break;
    case RowOp::MinF32: reduction(g, Op::ReduceMin, spec.type); break;
    case RowOp::ArgMaxF32: reduction(g, Op::ReduceArgMax, spec.type); break;
    case RowOp::ArgMinF32: reduction(g, Op::ReduceArgMin, spec.type); break;
    case RowOp::SoftmaxBackwardF32: softmax_backward(g); break;
    case RowOp::LogSoftmaxBackwardF32: log_softmax_backward(g); break;
    case RowOp::LayerNormF32: layer_norm(g, spec); break;
    case RowOp::LayerNormBackwardF32: layer_norm_backward(g, spec); break;
  }
  return emit_fused(g.spec(), config);  // Unsupported names the kernel when a row does not fit
}

}  // namespace npusim::emitter
