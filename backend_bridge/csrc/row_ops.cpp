// Native kernels along the last dimension of float32 tensors: softmax, log_softmax, sum and mean (the sum, then a
// native division). Other dims, dtypes and cases take the CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/library.h>

#include "bridge.h"
#include "kernel_launcher.h"

namespace npusim::bridge {
namespace {

using emitter::RowOp;

// Runs a row kernel over `self` (made contiguous on the device first) into `out`, already of the result's shape.
// Returns false, having changed nothing, when the emitter cannot express it.
bool launch_row_op(RowOp op, const at::Tensor& self, at::Tensor& out) {
  const at::Tensor input = self.contiguous();
  const int64_t cols = input.dim() == 0 ? 1 : input.size(-1);
  const emitter::RowSpec spec{op, cols == 0 ? 0 : input.numel() / cols, cols};
  if (spec.rows == 0 || spec.cols == 0) return false;
  at::Tensor result = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  const uint64_t addresses[] = {device_address(result), device_address(input)};
  try {
    launch_rows(out.device().index(), runtime_device(out), spec, addresses);
  } catch (const emitter::Unsupported&) {
    return false;
  } catch (const runtime::DeviceError& error) {
    TORCH_CHECK(false, error.what());
  }
  if (!result.is_same(out)) out.copy_(result);
  return true;
}

bool is_last_dim(const at::Tensor& self, int64_t dim) {
  return self.dim() > 0 && at::maybe_wrap_dim(dim, self.dim()) == self.dim() - 1;
}

template <RowOp Op>
at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  if (self.scalar_type() == at::kFloat && !half_to_float && is_last_dim(self, dim)) {
    at::native::resize_output(out, self.sizes());
    if (out.scalar_type() == at::kFloat && launch_row_op(Op, self, out)) return out;
  }
  torch::jit::Stack stack{self, dim, half_to_float, out};
  call_cpu_fallback(Op == RowOp::SoftmaxF32 ? "aten::_softmax" : "aten::_log_softmax", "out", stack);
  return out;
}
template <RowOp Op>
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  at::Tensor out = at::empty({0}, self.options().dtype(half_to_float ? at::kFloat : self.scalar_type()));
  return softmax_out<Op>(self, dim, half_to_float, out);
}

// sum over exactly the last dimension, in float32.
at::Tensor& npusim_sum_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                           std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const bool last_only = dims.has_value() && dims->size() == 1 && is_last_dim(self, (*dims)[0]);
  if (self.scalar_type() == at::kFloat && (!dtype || *dtype == at::kFloat) && last_only && self.size(-1) > 0 &&
      out.scalar_type() == at::kFloat) {
    std::vector<int64_t> shape = self.sizes().vec();
    if (keepdim)
      shape.back() = 1;
    else
      shape.pop_back();
    at::native::resize_output(out, shape);
    if (out.numel() == 0 || launch_row_op(RowOp::SumF32, self, out)) return out;
  }
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

// mean over the last dimension: the row sum divided by its length, both on the device.
at::Tensor& npusim_mean_out(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim,
                            std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const bool last_only = dims.has_value() && dims->size() == 1 && is_last_dim(self, (*dims)[0]);
  if (self.scalar_type() == at::kFloat && (!dtype || *dtype == at::kFloat) && last_only && self.size(-1) > 0 &&
      out.scalar_type() == at::kFloat) {
    npusim_sum_out(self, dims, keepdim, dtype, out);
    return out.div_(at::scalar_tensor(static_cast<double>(self.size(-1)), out.options().device(c10::kCPU)));
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", softmax<RowOp::SoftmaxF32>);
  m.impl("_softmax.out", softmax_out<RowOp::SoftmaxF32>);
  m.impl("_log_softmax", softmax<RowOp::LogSoftmaxF32>);
  m.impl("_log_softmax.out", softmax_out<RowOp::LogSoftmaxF32>);
  m.impl("sum.dim_IntList", npusim_sum);
  m.impl("sum.IntList_out", npusim_sum_out);
  m.impl("mean.dim", npusim_mean);
  m.impl("mean.out", npusim_mean_out);
}

}  // namespace npusim::bridge
