// linalg_vector_norm (torch.linalg.vector_norm, Tensor.norm, F.normalize, clip_grad_norm_) of float32, float16 and
// bfloat16 tensors over any dimensions, composed from native kernels in float32 and rounded once: ord 2 as
// sqrt(sum(x²)), 1 as sum(|x|), ±inf as amax/amin(|x|), any other positive p as sum(|x|^p)^(1/p). A complex64
// tensor's norm is its magnitudes' (a float32 result, as PyTorch gives it). Other orders and types take the CPU
// fallback.
#include <ATen/native/Resize.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include <cmath>

#include "bridge.h"

namespace npusim::bridge {
namespace {

at::Tensor& vector_norm_out(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                            std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (self.scalar_type() == at::kComplexFloat && (!dtype || *dtype == at::kComplexFloat) &&
      out.scalar_type() == at::kFloat && self.device() == out.device())
    return vector_norm_out(at::abs(self), ord, dim, keepdim, std::nullopt, out);  // complex64's norm is float32
  if (self.dim() == 0 && self.device() == out.device() && is_float_kind(self.scalar_type()) &&
      is_float_kind(dtype.value_or(self.scalar_type()))) {
    // One element (dimension 0 or -1 names it). Over every dimension the CPU gives its magnitude whatever the
    // order (no overflow of its power), or whether it is not zero for order 0; over a named one, the formula.
    at::Tensor norm;
    if (dim.has_value() && !dim->empty()) {
      for (int64_t d : *dim) at::maybe_wrap_dim(d, int64_t{0});
      norm = at::empty({0}, out.options());
      vector_norm_out(self.reshape({1}), ord, at::IntArrayRef{0}, false, dtype, norm);
    } else {
      norm = ord.toDouble() == 0 ? at::ne(self, 0) : at::abs(self);
    }
    at::native::resize_output(out, {});
    return out.copy_(norm.reshape({}));
  }
  const double p = ord.toDouble();
  const at::ScalarType result_type = dtype ? *dtype : self.scalar_type();
  if (is_float_kind(self.scalar_type()) && is_float_kind(result_type) && out.scalar_type() == result_type &&
      out.device() == self.device() && (self.numel() > 0 || !std::isinf(p)) && self.dim() > 0) {
    const at::Tensor x = self.to(at::kFloat);
    const std::vector<int64_t> dims = dim.has_value() ? dim->vec() : std::vector<int64_t>{};
    at::Tensor norm;
    if (p == 0)  // how many are not zero
      norm = at::sum(at::ne(x, 0).to(at::kFloat), dims, keepdim);
    else if (p == 2)
      norm = at::sqrt(at::sum(at::mul(x, x), dims, keepdim));
    else if (p == 1)
      norm = at::sum(at::abs(x), dims, keepdim);
    else if (std::isinf(p))
      norm = p > 0 ? at::amax(at::abs(x), dims, keepdim) : at::amin(at::abs(x), dims, keepdim);
    else
      norm = at::pow(at::sum(at::pow(at::abs(x), p), dims, keepdim), 1.0 / p);
    at::native::resize_output(out, norm.sizes());
    return out.copy_(norm);
  }
  torch::jit::Stack stack{self, ord, dim, keepdim, dtype, out};
  call_cpu_fallback("aten::linalg_vector_norm", "out", stack);
  return out;
}

at::Tensor vector_norm(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<at::ScalarType> dtype) {
  const at::ScalarType real_type = c10::toRealValueType(self.scalar_type());  // a complex tensor's norm is real
  at::Tensor out = at::empty({0}, self.options().dtype(dtype ? c10::toRealValueType(*dtype) : real_type));
  return vector_norm_out(self, ord, dim, keepdim, dtype, out);
}

// The older torch.norm over named dimensions (what torch.dist and pairwise_distance call): the vector norm of order
// p (2 when None), as PyTorch's own norm kernel computes it.
at::Tensor& norm_out(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                     at::Tensor& out) {
  return vector_norm_out(self, p.value_or(2), dim, keepdim, std::nullopt, out);
}
at::Tensor& norm_dtype_out(const at::Tensor& self, const std::optional<at::Scalar>& p, at::IntArrayRef dim,
                           bool keepdim, at::ScalarType dtype, at::Tensor& out) {
  return vector_norm_out(self, p.value_or(2), dim, keepdim, dtype, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_vector_norm", vector_norm);
  m.impl("linalg_vector_norm.out", vector_norm_out);
  m.impl("norm.out", norm_out);
  m.impl("norm.dtype_out", norm_dtype_out);
}

}  // namespace npusim::bridge
