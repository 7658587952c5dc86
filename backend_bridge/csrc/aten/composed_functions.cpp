// Functions the CPU computes in one kernel of its own that npusim composes from its native kernels, each step on the
// device: rsub, equal, isnan, logaddexp, log_sigmoid and its gradient, clamp with tensor bounds. rsub, equal and isnan
// in whatever dtypes their kernels take, logaddexp in complex64 too, clamp in int64 and int32 too; the others in
// float32 (in half precision the CPU rounds once, so those arguments reach them through the float32 widening of the
// fallback, float32_compute.cpp). Other dtypes and devices take the CPU fallback, which also raises PyTorch's own
// errors.
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/all.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/real.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>
#include <initializer_list>
#include <vector>

#include "bridge.h"
#include "complex_functions.h"
#include "pointwise_output.h"

namespace npusim::bridge {
namespace {

// float32 tensors on one npusim device.
bool float32_on_device(std::initializer_list<at::Tensor> tensors) {
  const at::Tensor& first = *tensors.begin();
  for (const at::Tensor& t : tensors)
    if (t.scalar_type() != at::kFloat || !t.device().is_privateuseone() || t.device() != first.device()) return false;
  return true;
}

at::Tensor fallback(const char* name, const char* overload, torch::jit::Stack stack) {
  call_cpu_fallback(name, overload, stack);
  return stack[0].toTensor();
}

// other - alpha self, as the CPU's rsub is sub with its operands swapped.
// Real tensors, and complex64 ones (complex_arithmetic.h, complex_functions.h).
bool computes_natively(const at::Tensor& self) { return !self.is_complex() || self.scalar_type() == at::kComplexFloat; }

at::Tensor npusim_rsub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (self.device() == other.device() && self.dtype() == other.dtype() && computes_natively(self))
    return at::sub(other, self, alpha);
  return fallback("aten::rsub", "Tensor", {self, other, alpha});
}

// Same sizes and every element equal (NaN equals nothing), as a comparison kernel and a reduction.
bool npusim_equal(const at::Tensor& self, const at::Tensor& other) {
  if (self.device() == other.device() && self.dtype() == other.dtype() && computes_natively(self)) {
    if (!self.is_same_size(other)) return false;
    return at::eq(self, other).all().item<bool>();
  }
  torch::jit::Stack stack{self, other};
  call_cpu_fallback("aten::equal", "", stack);
  return stack[0].toBool();
}

at::Tensor npusim_isnan(const at::Tensor& self) {
  if (at::isFloatingType(self.scalar_type()) && self.device().is_privateuseone()) return at::ne(self, self);
  if (at::isIntegralType(self.scalar_type(), true) && self.device().is_privateuseone())
    return at::zeros(self.sizes(), self.options().dtype(at::kBool));
  at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));
  if (complex_isnan(self, out)) return out;
  return fallback("aten::isnan", "", {self});
}

// The CPU's complex logaddexp (its _log_add_exp_helper, which logcumsumexp scans with too): of the operand with the
// smaller real part (`low`) and the other (`high`; a NaN in b, else in a, is both), log1p(exp(low - high)) + high;
// NaN where low has a NaN part, low where both real parts are -inf, log(exp(low) + exp(high)) where both are +inf.
at::Tensor complex_log_add_exp(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor nan_a = at::isnan(a), nan_b = at::isnan(b), a_lower = at::lt(at::real(a), at::real(b));
  const at::Tensor low = at::where(nan_b, b, at::where(nan_a, a, at::where(a_lower, a, b)));
  const at::Tensor high = at::where(nan_b, b, at::where(nan_a, a, at::where(a_lower, b, a)));
  const at::Tensor low_real = at::real(low), high_real = at::real(high);
  const at::Tensor infinite = at::where(at::lt(low_real, 0), low, at::log(at::exp(low) + at::exp(high)));
  const at::Tensor general = at::log1p(at::exp(low - high)) + high;
  const at::Tensor nan = at::full({}, c10::complex<float>(NAN, NAN), low.options());
  const at::Tensor both_infinite = at::logical_and(at::isinf(low_real), at::eq(low_real, high_real));
  return at::where(at::isnan(low), nan, at::where(both_infinite, infinite, general));
}

// The CPU's formula: max + log1p(exp(-|a - b|)), and a itself where both are the same infinity.
at::Tensor& npusim_logaddexp_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const bool complex64 = out.scalar_type() == at::kComplexFloat && self.device() == out.device() &&
                         other.device() == out.device() && out.device().is_privateuseone() &&
                         at::result_type(self, other) == at::kComplexFloat;
  if (complex64) {
    const at::Tensor result = complex_log_add_exp(self.to(at::kComplexFloat), other.to(at::kComplexFloat));
    resize_to_broadcast(out, {self, other});
    return out.copy_(result);
  }
  if (!float32_on_device({out, self, other})) {
    torch::jit::Stack stack{self, other, out};
    call_cpu_fallback("aten::logaddexp", "out", stack);
    return out;
  }
  const at::Tensor sum = at::maximum(self, other) + at::log1p(at::exp(-at::abs(self - other)));
  const at::Tensor result = at::where(at::logical_and(at::isinf(self), at::eq(self, other)), self, sum);
  resize_to_broadcast(out, {self, other});
  return out.copy_(result);
}
at::Tensor npusim_logaddexp(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::result_type(self, other)));
  return npusim_logaddexp_out(self, other, out);
}

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), the CPU's formula. The buffer is empty, as CUDA's: the backward
// recomputes what it needs from the input.
std::tuple<at::Tensor, at::Tensor> npusim_log_sigmoid_forward(const at::Tensor& self) {
  if (!float32_on_device({self})) {
    torch::jit::Stack stack{self};
    call_cpu_fallback("aten::log_sigmoid_forward", "", stack);
    return {stack[0].toTensor(), stack[1].toTensor()};
  }
  const at::Tensor output = at::minimum(self, at::zeros({}, self.options())) - at::log1p(at::exp(-at::abs(self)));
  return {output, at::empty({0}, self.options())};
}

// d/dx log(sigmoid(x)) with z = exp(-|x|): 1 - z / (1 + z) for x < 0, else z / (1 + z), as the CPU computes it.
at::Tensor npusim_log_sigmoid_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                       const at::Tensor& buffer) {
  if (!float32_on_device({grad_output, self}))
    return fallback("aten::log_sigmoid_backward", "", {grad_output, self, buffer});
  const at::Tensor z = at::exp(-at::abs(self));
  const at::Tensor ratio = z / (z + 1);
  return grad_output * at::where(self < 0, 1 - ratio, ratio);
}

// Tensors of one dtype whose maximum and minimum npusim computes natively (float32, int64, int32), on one device.
bool comparable_on_device(const std::vector<at::Tensor>& tensors) {
  const at::ScalarType type = tensors.front().scalar_type();
  if (type != at::kFloat && type != at::kLong && type != at::kInt) return false;
  for (const at::Tensor& t : tensors)
    if (t.scalar_type() != type || !t.device().is_privateuseone() || t.device() != tensors.front().device())
      return false;
  return true;
}

// clamp with tensor bounds: max(x, min), then min(that, max); both propagate NaN, as the CPU's clamp does. float32
// and integers, all of one dtype.
at::Tensor& npusim_clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                                    const std::optional<at::Tensor>& max, at::Tensor& out) {
  std::vector<at::Tensor> operands{out, self};
  if (min) operands.push_back(*min);
  if (max) operands.push_back(*max);
  const bool native = comparable_on_device(operands) && (min || max);
  if (!native) {
    torch::jit::Stack stack{self, min, max, out};
    call_cpu_fallback("aten::clamp", "Tensor_out", stack);
    return out;
  }
  at::Tensor result = min ? at::maximum(self, *min) : self;
  if (max) result = at::minimum(result, *max);
  resize_to_broadcast(out, {self, min.value_or(at::Tensor()), max.value_or(at::Tensor())});
  return out.copy_(result);
}
at::Tensor npusim_clamp_tensor(const at::Tensor& self, const std::optional<at::Tensor>& min,
                               const std::optional<at::Tensor>& max) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_clamp_tensor_out(self, min, max, out);
}
at::Tensor& npusim_clamp_tensor_(at::Tensor& self, const std::optional<at::Tensor>& min,
                                 const std::optional<at::Tensor>& max) {
  return npusim_clamp_tensor_out(self, min, max, self);
}

// clamp_min and clamp_max with a tensor bound: clamp with the other bound absent.
template <bool IsMin>
at::Tensor& npusim_clamp_bound_out(const at::Tensor& self, const at::Tensor& bound, at::Tensor& out) {
  return IsMin ? npusim_clamp_tensor_out(self, bound, std::nullopt, out)
               : npusim_clamp_tensor_out(self, std::nullopt, bound, out);
}
template <bool IsMin>
at::Tensor npusim_clamp_bound(const at::Tensor& self, const at::Tensor& bound) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_clamp_bound_out<IsMin>(self, bound, out);
}
template <bool IsMin>
at::Tensor& npusim_clamp_bound_(at::Tensor& self, const at::Tensor& bound) {
  return npusim_clamp_bound_out<IsMin>(self, bound, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("clamp_min.Tensor", npusim_clamp_bound<true>);
  m.impl("clamp_min_.Tensor", npusim_clamp_bound_<true>);
  m.impl("clamp_min.Tensor_out", npusim_clamp_bound_out<true>);
  m.impl("clamp_max.Tensor", npusim_clamp_bound<false>);
  m.impl("clamp_max_.Tensor", npusim_clamp_bound_<false>);
  m.impl("clamp_max.Tensor_out", npusim_clamp_bound_out<false>);
  m.impl("rsub.Tensor", npusim_rsub);
  m.impl("equal", npusim_equal);
  m.impl("isnan", npusim_isnan);
  m.impl("logaddexp", npusim_logaddexp);
  m.impl("logaddexp.out", npusim_logaddexp_out);
  m.impl("log_sigmoid_forward", npusim_log_sigmoid_forward);
  m.impl("log_sigmoid_backward", npusim_log_sigmoid_backward);
  m.impl("clamp.Tensor", npusim_clamp_tensor);
  m.impl("clamp_.Tensor", npusim_clamp_tensor_);
  m.impl("clamp.Tensor_out", npusim_clamp_tensor_out);
}

}  // namespace npusim::bridge
