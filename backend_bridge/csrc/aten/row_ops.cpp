// Native row kernels on float32 tensors: softmax and log_softmax over the last dimension, and their backward; sum and
// mean over any dimensions (each moved last by a device copy when needed and summed as rows, one dimension at a
// time, a long row walked in chunks by its kernel or, when there are fewer rows than cores, split across them; float16
// and bfloat16 summed in float32, complex64 as its parts; mean is the sum, then a native division); layer_norm's
// forward; mse_loss and its
// backward, composed from native kernels. Other dims, dtypes and cases take the CPU fallback.
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>

#include "bridge.h"
#include "complex_arithmetic.h"
#include "integer_sum.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {

using emitter::RowOp;

bool launch_row_op(RowOp op, const at::Tensor& self, at::Tensor& out, const at::Tensor& forward) {
  const at::Tensor input = self.contiguous();
  const at::Tensor second = forward.defined() ? forward.contiguous() : input;
  const int64_t cols = input.dim() == 0 ? 1 : input.size(-1);
  emitter::RowSpec spec{op, cols == 0 ? 0 : input.numel() / cols, cols};
  if (spec.rows == 0 || spec.cols == 0) return false;
  if (op == RowOp::MaxF32 || op == RowOp::MinF32 || op == RowOp::ArgMaxF32 || op == RowOp::ArgMinF32) {
    const std::optional<isa::ElementType> type = element_type(input.scalar_type());
    if (!type) return false;
    spec.type = *type == isa::ElementType::Bool ? isa::ElementType::U8 : *type;  // bools as the bytes 0 and 1
  }
  at::Tensor result = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  const uint64_t addresses[] = {device_address(result), device_address(input), device_address(second)};
  if (!launched_natively([&] { launch_rows(out.device().index(), runtime_device(out), spec, addresses); }))
    return false;
  if (!result.is_same(out)) out.copy_(result);
  return true;
}

bool split_long_rows_across_cores(const at::Tensor& rows_last, int64_t chunk) {
  const int64_t length = rows_last.dim() == 0 ? 1 : rows_last.size(-1);
  return length > 2 * chunk && rows_last.numel() / length < runtime_device(rows_last).config().chip_cores;
}

namespace {

bool is_last_dim(const at::Tensor& self, int64_t dim) {
  return self.dim() > 0 && at::maybe_wrap_dim(dim, self.dim()) == self.dim() - 1;
}

bool is_half(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kHalf || tensor.scalar_type() == at::kBFloat16;
}

// float16 and bfloat16 rows are widened to float32 (exactly), run through the float32 kernel and rounded once into
// the result, as the CPU computes them; with half_to_float the result stays float32. Another dimension than the last
// is moved last for the kernel and back.
template <RowOp Op>
at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  if (self.dim() == 0 && self.device() == out.device()) {  // one element (dimension 0 or -1): a row of one
    at::maybe_wrap_dim(dim, int64_t{0});
    at::Tensor row = at::empty({0}, out.options());
    softmax_out<Op>(self.reshape({1}), 0, half_to_float, row);
    at::native::resize_output(out, {});
    return out.copy_(row.reshape({}));
  }
  const at::ScalarType result_type = half_to_float ? at::kFloat : self.scalar_type();
  if (self.numel() == 0 && self.device() == out.device() && out.scalar_type() == result_type &&
      (self.scalar_type() == at::kFloat || is_half(self))) {  // no rows: an empty result of the same shape
    at::maybe_wrap_dim(dim, self.dim());
    at::native::resize_output(out, self.sizes());
    return out;
  }
  if (self.scalar_type() == at::kFloat && !half_to_float && is_last_dim(self, dim)) {
    at::native::resize_output(out, self.sizes());
    if (out.scalar_type() == at::kFloat && launch_row_op(Op, self, out)) return out;
  }
  // Otherwise (half precision, or a dimension other than the last): rows along `dim` in float32, moved last.
  if ((self.scalar_type() == at::kFloat || is_half(self)) && self.dim() > 0 && self.device() == out.device() &&
      out.scalar_type() == (half_to_float ? at::kFloat : self.scalar_type())) {
    dim = at::maybe_wrap_dim(dim, self.dim());
    const at::Tensor rows = self.to(at::kFloat).movedim(dim, -1);
    at::Tensor result = at::empty(rows.sizes(), rows.options());
    if (launch_row_op(Op, rows, result)) {
      at::native::resize_output(out, self.sizes());
      return out.copy_(result.movedim(-1, dim));
    }
  }
  torch::jit::Stack stack{self, dim, half_to_float, out};
  call_cpu_fallback(Op == RowOp::SoftmaxF32 ? "aten::_softmax" : "aten::_log_softmax", "out", stack);
  return out;
}
// Softmax that gives 0 for rows of only -inf (scaled_dot_product_attention's math path calls it). Like softmax_out:
// half precision through float32, another dimension than the last moved last and back.
at::Tensor npusim_safe_softmax(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  const at::ScalarType result_type = dtype.value_or(self.scalar_type());
  if (self.scalar_type() == at::kFloat && result_type == at::kFloat && is_last_dim(self, dim)) {
    at::Tensor out = at::empty(self.sizes(), self.options());
    if (launch_row_op(RowOp::SafeSoftmaxF32, self, out)) return out;
  }
  if ((self.scalar_type() == at::kFloat || is_half(self)) &&
      (result_type == self.scalar_type() || result_type == at::kFloat)) {
    const at::Tensor shaped = self.dim() == 0 ? self.reshape({1}) : self;  // one element: a row of one
    dim = at::maybe_wrap_dim(dim, shaped.dim());
    const at::Tensor rows = shaped.to(at::kFloat).movedim(dim, -1);
    at::Tensor result = at::empty(rows.sizes(), rows.options());
    at::Tensor out = at::empty(self.sizes(), self.options().dtype(result_type));
    if (rows.numel() == 0) return out;
    if (launch_row_op(RowOp::SafeSoftmaxF32, rows, result))
      return out.copy_(result.movedim(-1, dim).view(self.sizes()));
  }
  torch::jit::Stack stack{self, dim, dtype};
  call_cpu_fallback("aten::_safe_softmax", "", stack);
  return stack[0].toTensor();
}

// The backward of softmax (from its output) or log_softmax (from its output), over the last dimension.
template <RowOp Op>
at::Tensor& softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 at::ScalarType input_dtype, at::Tensor& grad_input) {
  if (grad_output.scalar_type() == at::kFloat && output.scalar_type() == at::kFloat && input_dtype == at::kFloat &&
      grad_output.sizes() == output.sizes() && is_last_dim(output, dim)) {
    at::native::resize_output(grad_input, output.sizes());
    if (grad_input.scalar_type() == at::kFloat && launch_row_op(Op, grad_output, grad_input, output)) return grad_input;
  }
  if ((grad_output.scalar_type() == at::kFloat || is_half(grad_output)) &&
      output.scalar_type() == grad_output.scalar_type() && input_dtype == output.scalar_type() &&
      grad_input.scalar_type() == input_dtype && grad_output.sizes() == output.sizes() && output.dim() > 0 &&
      grad_output.device() == grad_input.device()) {
    dim = at::maybe_wrap_dim(dim, output.dim());
    const at::Tensor rows = grad_output.to(at::kFloat).movedim(dim, -1);
    at::Tensor result = at::empty(rows.sizes(), rows.options());
    if (launch_row_op(Op, rows, result, output.to(at::kFloat).movedim(dim, -1))) {
      at::native::resize_output(grad_input, output.sizes());
      return grad_input.copy_(result.movedim(-1, dim));
    }
  }
  torch::jit::Stack stack{grad_output, output, dim, input_dtype, grad_input};
  call_cpu_fallback(
      Op == RowOp::SoftmaxBackwardF32 ? "aten::_softmax_backward_data" : "aten::_log_softmax_backward_data", "out",
      stack);
  return grad_input;
}
template <RowOp Op>
at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype) {
  at::Tensor grad_input = at::empty({0}, grad_output.options().dtype(input_dtype));
  return softmax_backward_out<Op>(grad_output, output, dim, input_dtype, grad_input);
}

template <RowOp Op>
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  at::Tensor out = at::empty({0}, self.options().dtype(half_to_float ? at::kFloat : self.scalar_type()));
  return softmax_out<Op>(self, dim, half_to_float, out);
}

// The dimensions a reduction covers, wrapped and largest first; none given (or an empty list) means all of them.
std::vector<int64_t> reduced_dims(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  std::vector<int64_t> result;
  if (!dims.has_value() || dims->empty()) {
    for (int64_t dim = self.dim() - 1; dim >= 0; --dim) result.push_back(dim);
    return result;
  }
  for (int64_t dim : *dims) result.push_back(at::maybe_wrap_dim(dim, self.dim()));
  std::sort(result.rbegin(), result.rend());
  return result;
}

bool sums_natively(const at::Tensor& self, std::optional<at::ScalarType> dtype, const at::Tensor& out) {
  return self.scalar_type() == at::kFloat && (!dtype || *dtype == at::kFloat) && out.scalar_type() == at::kFloat &&
         self.dim() > 0;
}

// Rows split across the cores (split_long_rows_across_cores): the sums of their chunks of kSumChunk elements, summed
// in turn, plus the sum of the shorter tail.
constexpr int64_t kSumChunk = 4096;
at::Tensor sum_in_chunks(const at::Tensor& rows_last) {
  const int64_t length = rows_last.size(-1), chunks = length / kSumChunk;
  std::vector<int64_t> shape = rows_last.sizes().vec();
  shape.back() = chunks;
  shape.push_back(kSumChunk);
  at::Tensor total = at::sum(at::sum(rows_last.narrow(-1, 0, chunks * kSumChunk).reshape(shape), {-1}), {-1});
  if (length % kSumChunk != 0)
    total = at::add(total, at::sum(rows_last.narrow(-1, chunks * kSumChunk, length % kSumChunk), {-1}));
  return total;
}

// sum over one dimension, in float32: that dimension is moved last (a device copy when it is not already last),
// and each row summed in order. Over several dimensions (or all), one at a time, the largest first.
at::Tensor& npusim_sum_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                           std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const std::vector<int64_t> reduced = reduced_dims(self, dims);
  const bool distinct = std::adjacent_find(reduced.begin(), reduced.end()) == reduced.end();
  if (self.dim() == 0 && out.device() == self.device() && distinct) {  // one element: itself, in out's dtype
    at::native::resize_output(out, {});
    return out.copy_(self);
  }
  if (self.numel() == 0 && sums_natively(self, dtype, out) && distinct) {  // sums of nothing: zeros
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < self.dim(); ++d) {
      const bool summed = std::find(reduced.begin(), reduced.end(), d) != reduced.end();
      if (!summed || keepdim) shape.push_back(summed ? 1 : self.size(d));
    }
    at::native::resize_output(out, shape);
    return out.zero_();
  }
  // float16 and bfloat16: summed in float32 and rounded once, as the CPU does (widening is exact).
  const bool half = is_half(self);
  if (half && out.scalar_type() == self.scalar_type() && (!dtype || *dtype == self.scalar_type()) && self.dim() > 0 &&
      distinct && out.device() == self.device()) {
    const at::Tensor total = at::sum(self.to(at::kFloat), dims, keepdim);
    at::native::resize_output(out, total.sizes());
    return out.copy_(total);
  }
  if (sums_natively(self, dtype, out) && reduced.size() > 1 && distinct) {
    at::Tensor partial = self;
    for (int64_t dim : reduced) partial = at::sum(partial, {dim}, /*keepdim=*/true);
    if (!keepdim)
      for (int64_t dim : reduced) partial = partial.squeeze(dim);  // largest first, so the others keep their index
    at::native::resize_output(out, partial.sizes());
    return out.copy_(partial);
  }
  if (sums_natively(self, dtype, out) && reduced.size() == 1) {
    const int64_t dim = reduced[0];
    std::vector<int64_t> shape = self.sizes().vec();
    if (keepdim)
      shape[dim] = 1;
    else
      shape.erase(shape.begin() + dim);
    if (self.size(dim) > 0 && (out.is_contiguous() || out.numel() == 0)) {
      at::native::resize_output(out, shape);
      at::Tensor rows_last = self.movedim(dim, -1);
      at::Tensor sums = out.view(rows_last.sizes().slice(0, rows_last.dim() - 1));
      if (out.numel() == 0) return out;
      if (split_long_rows_across_cores(rows_last, kSumChunk)) {
        sums.copy_(sum_in_chunks(rows_last));
        return out;
      }
      if (launch_row_op(RowOp::SumF32, rows_last, sums)) return out;
    }
  }
  if ((!dtype || *dtype == at::kLong) && distinct && launch_integer_sum(self, reduced, keepdim, out)) return out;
  if ((!dtype || *dtype == self.scalar_type()) && distinct && complex_sum(self, dims, keepdim, out)) return out;
  torch::jit::Stack stack{self, dims, keepdim, dtype, out};
  call_cpu_fallback("aten::sum", "IntList_out", stack);
  return out;
}
at::Tensor npusim_sum(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                      std::optional<at::ScalarType> dtype) {
  const at::ScalarType result_type =
      dtype ? *dtype : (at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  at::Tensor out = at::empty({0}, self.options().dtype(result_type));
  return npusim_sum_out(self, dims, keepdim, dtype, out);
}

// sum of every element (x.sum()).
at::Tensor npusim_sum_all(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  return npusim_sum(self, std::nullopt, false, dtype);
}

// mean over any dimensions: the sum divided by the count it covers, both on the device.
at::Tensor& npusim_mean_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                            std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const auto averages = [](at::ScalarType type) { return is_float_kind(type) || type == at::kComplexFloat; };
  if (self.dim() == 0 && out.device() == self.device() && averages(self.scalar_type()) &&
      averages(dtype.value_or(self.scalar_type()))) {  // one element (dimension 0 or -1): itself, as sum's
    reduced_dims(self, dims);                          // for its check of the dimensions named
    at::native::resize_output(out, {});
    return out.copy_(self.to(dtype.value_or(self.scalar_type())));
  }
  const bool half = is_half(self);
  if (half && out.scalar_type() == self.scalar_type() && (!dtype || *dtype == self.scalar_type()) && self.dim() > 0 &&
      out.device() == self.device()) {  // in float32, rounded once, as the CPU does
    const at::Tensor average = at::mean(self.to(at::kFloat), dims, keepdim);
    at::native::resize_output(out, average.sizes());
    return out.copy_(average);
  }
  const bool complex_mean = self.scalar_type() == at::kComplexFloat && out.scalar_type() == at::kComplexFloat &&
                            (!dtype || *dtype == at::kComplexFloat) && self.dim() > 0 && out.device() == self.device();
  if (sums_natively(self, dtype, out) || complex_mean) {
    int64_t length = 1;
    for (int64_t dim : reduced_dims(self, dims)) length *= self.size(dim);
    if (length > 0) {
      npusim_sum_out(self, dims, keepdim, dtype, out);
      return out.div_(at::scalar_tensor(static_cast<double>(length), out.options().device(c10::kCPU)));
    }
  }
  torch::jit::Stack stack{self, dims, keepdim, dtype, out};
  call_cpu_fallback("aten::mean", "out", stack);
  return out;
}
at::Tensor npusim_mean(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                       std::optional<at::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(dtype ? *dtype : self.scalar_type()));
  return npusim_mean_out(self, dims, keepdim, dtype, out);
}

// A 0-dim CPU tensor, the form in which native kernels take a scalar operand.
at::Tensor cpu_scalar(double value) { return at::scalar_tensor(value, at::TensorOptions().dtype(at::kFloat)); }

// The sum of every element into a 0-dim tensor: one row, or its chunks spread over the cores.
bool sum_all(const at::Tensor& self, at::Tensor& out) {
  if (self.scalar_type() != at::kFloat || self.numel() == 0) return false;
  at::native::resize_output(out, {});
  at::Tensor one_row = self.contiguous().view({1, self.numel()});
  at::Tensor sums = out.view({1});
  if (split_long_rows_across_cores(one_row, kSumChunk)) {
    sums.copy_(sum_in_chunks(one_row));
    return true;
  }
  return launch_row_op(RowOp::SumF32, one_row, sums);
}

// mse_loss from native pieces: the difference, its square, and (for sum and mean) the one-row sum.
at::Tensor npusim_mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  if (self.scalar_type() == at::kFloat && target.scalar_type() == at::kFloat && self.device() == target.device() &&
      self.sizes() == target.sizes()) {
    const at::Tensor difference = at::sub(self, target);
    const at::Tensor squares = at::mul(difference, difference);
    if (reduction == at::Reduction::None) return squares;
    at::Tensor total = at::empty({}, self.options());
    if (sum_all(squares, total))
      return reduction == at::Reduction::Sum ? total : at::div(total, cpu_scalar(self.numel()));
  }
  torch::jit::Stack stack{self, target, reduction};
  call_cpu_fallback("aten::mse_loss", "", stack);
  return stack.back().toTensor();
}

// d loss / d self = 2 (self - target) grad_output, divided by the element count for the mean.
at::Tensor npusim_mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                    int64_t reduction) {
  if (self.scalar_type() == at::kFloat && target.scalar_type() == at::kFloat &&
      grad_output.scalar_type() == at::kFloat && self.device() == target.device() &&
      grad_output.device() == self.device() && self.sizes() == target.sizes()) {
    const double scale = reduction == at::Reduction::Mean ? 2.0 / static_cast<double>(self.numel()) : 2.0;
    return at::mul(at::sub(self, target), at::mul(grad_output, cpu_scalar(scale)));
  }
  torch::jit::Stack stack{grad_output, self, target, reduction};
  call_cpu_fallback("aten::mse_loss_backward", "", stack);
  return stack.back().toTensor();
}

// Layer normalisation over the trailing `normalized_shape` dims: a row kernel over rows of their product, giving the
// output and each row's mean and 1/std (the saved tensors of the backward, which takes the CPU fallback).
std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_native_layer_norm(const at::Tensor& input,
                                                                        c10::IntArrayRef normalized_shape,
                                                                        const std::optional<at::Tensor>& weight,
                                                                        const std::optional<at::Tensor>& bias,
                                                                        double eps) {
  const auto usable = [&](const std::optional<at::Tensor>& parameter, int64_t cols) {
    return !parameter || !parameter->defined() ||
           (parameter->scalar_type() == at::kFloat && parameter->device() == input.device() &&
            parameter->numel() == cols);
  };
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  int64_t cols = 1;
  for (int64_t size : normalized_shape) cols *= size;
  if (input.scalar_type() == at::kFloat && axis >= 0 && input.sizes().slice(axis).equals(normalized_shape) &&
      input.numel() > 0 && cols > 0 && usable(weight, cols) && usable(bias, cols)) {
    const at::Tensor x = input.contiguous();
    const bool has_weight = weight && weight->defined(), has_bias = bias && bias->defined();
    const at::Tensor w = has_weight ? weight->contiguous() : at::Tensor(),
                     b = has_bias ? bias->contiguous() : at::Tensor();
    std::vector<int64_t> stat_shape = input.sizes().slice(0, axis).vec();
    stat_shape.resize(input.dim(), 1);
    at::Tensor out = at::empty(input.sizes(), x.options()), mean = at::empty(stat_shape, x.options()),
               rstd = at::empty(stat_shape, x.options());
    const emitter::RowSpec spec{RowOp::LayerNormF32, x.numel() / cols, cols,
                                has_weight,          has_bias,         static_cast<float>(eps)};
    const uint64_t addresses[] = {
        device_address(out),  device_address(x),   has_weight ? device_address(w) : 0, has_bias ? device_address(b) : 0,
        device_address(mean), device_address(rstd)};
    if (launched_natively([&] { launch_rows(out.device().index(), runtime_device(out), spec, addresses); }))
      return {out, mean, rstd};
  }
  torch::jit::Stack stack{input, normalized_shape, weight, bias, eps};
  call_cpu_fallback("aten::native_layer_norm", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

// nansum: the sum with NaNs counted as zero (where(isnan(x), 0, x), summed); integers are their sum.
at::Tensor& npusim_nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                              std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (self.device() == out.device() && !self.is_complex()) {
    const at::Tensor kept =
        is_float_kind(self.scalar_type()) ? at::where(at::isnan(self), at::zeros({}, self.options()), self) : self;
    const at::Tensor total = at::sum(kept, dims, keepdim, dtype);
    at::native::resize_output(out, total.sizes());
    return out.copy_(total);
  }
  torch::jit::Stack stack{self, dims, keepdim, dtype, out};
  call_cpu_fallback("aten::nansum", "out", stack);
  return out;
}
at::Tensor npusim_nansum(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                         std::optional<at::ScalarType> dtype) {
  const at::ScalarType type = dtype                                          ? *dtype
                              : at::isIntegralType(self.scalar_type(), true) ? at::kLong
                                                                             : self.scalar_type();
  at::Tensor out = at::empty({0}, self.options().dtype(type));
  return npusim_nansum_out(self, dims, keepdim, dtype, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nansum", npusim_nansum);
  m.impl("nansum.out", npusim_nansum_out);
  m.impl("_softmax", softmax<RowOp::SoftmaxF32>);
  m.impl("_softmax.out", softmax_out<RowOp::SoftmaxF32>);
  m.impl("_log_softmax", softmax<RowOp::LogSoftmaxF32>);
  m.impl("_safe_softmax", npusim_safe_softmax);
  m.impl("_log_softmax.out", softmax_out<RowOp::LogSoftmaxF32>);
  m.impl("_softmax_backward_data", softmax_backward<RowOp::SoftmaxBackwardF32>);
  m.impl("_softmax_backward_data.out", softmax_backward_out<RowOp::SoftmaxBackwardF32>);
  m.impl("_log_softmax_backward_data", softmax_backward<RowOp::LogSoftmaxBackwardF32>);
  m.impl("_log_softmax_backward_data.out", softmax_backward_out<RowOp::LogSoftmaxBackwardF32>);
  m.impl("sum", npusim_sum_all);
  m.impl("sum.dim_IntList", npusim_sum);
  m.impl("sum.IntList_out", npusim_sum_out);
  m.impl("mean.dim", npusim_mean);
  m.impl("mean.out", npusim_mean_out);
  m.impl("native_layer_norm", npusim_native_layer_norm);
  m.impl("mse_loss", npusim_mse_loss);
  m.impl("mse_loss_backward", npusim_mse_loss_backward);
}

}  // namespace npusim::bridge
