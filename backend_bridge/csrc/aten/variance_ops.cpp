// var, std, var_mean and std_mean of float32 tensors over any dimensions, composed from native kernels: the mean
// (kept as a broadcastable row), the deviations, the sum of their squares, and a division by the element count less
// the correction (PyTorch's two-pass formula; a count at or below the correction gives inf or NaN, as on the CPU;
// an empty tensor's spread and mean are NaN). A complex64 tensor's variance is its real and imaginary parts' summed
// (the mean squared magnitude of the deviations: a float32 result), its mean complex.
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/add.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/div.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include <limits>

#include "bridge.h"

namespace npusim::bridge {
namespace {

bool computes_natively(const at::Tensor& self) {
  return (self.scalar_type() == at::kFloat || self.scalar_type() == at::kComplexFloat) && self.dim() > 0;
}

// The variance and the mean, each reduced over `dims` (all when none) with `keepdim`.
std::tuple<at::Tensor, at::Tensor> variance_and_mean(const at::Tensor& self, at::OptionalIntArrayRef dims,
                                                     const std::optional<at::Scalar>& correction, bool keepdim) {
  if (self.is_complex()) {
    const at::Tensor parts = at::view_as_real(self.resolve_conj());
    const auto [real_variance, real_mean] = variance_and_mean(parts.select(-1, 0), dims, correction, keepdim);
    const auto [imag_variance, imag_mean] = variance_and_mean(parts.select(-1, 1), dims, correction, keepdim);
    return {at::add(real_variance, imag_variance), at::complex(real_mean, imag_mean)};
  }
  std::vector<int64_t> reduced;
  if (dims.has_value() && !dims->empty())
    for (int64_t dim : *dims) reduced.push_back(at::maybe_wrap_dim(dim, self.dim()));
  else
    for (int64_t dim = 0; dim < self.dim(); ++dim) reduced.push_back(dim);
  int64_t count = 1;
  for (int64_t dim : reduced) count *= self.size(dim);
  const at::Tensor mean = at::mean(self, reduced, /*keepdim=*/true);
  const at::Tensor deviations = at::sub(self, mean);
  const at::Tensor squares = at::sum(at::mul(deviations, deviations), reduced, keepdim);
  const double divisor = std::max(0.0, static_cast<double>(count) - (correction ? correction->toDouble() : 1.0));
  if (divisor <= 0)
    TORCH_WARN("var(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor ",
               "(input numel divided by output numel).");
  const at::Tensor variance = at::div(squares, at::scalar_tensor(divisor, at::TensorOptions().dtype(at::kFloat)));
  return {variance, keepdim ? mean : mean.squeeze(reduced)};
}

// Of an empty tensor: each result element reduces no elements, so (0 / 0) NaN for the spread and the mean, as the
// CPU gives them (with its warning); reducing a non-empty dimension of an empty tensor leaves an empty result.
std::tuple<at::Tensor, at::Tensor> of_empty(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim) {
  std::vector<bool> reduced(self.dim(), !dims.has_value() || dims->empty());
  if (dims.has_value())
    for (int64_t dim : *dims) reduced[at::maybe_wrap_dim(dim, self.dim())] = true;
  std::vector<int64_t> shape;
  int64_t count = 1;
  for (int64_t dim = 0; dim < self.dim(); ++dim) {
    if (reduced[dim]) count *= self.size(dim);
    if (!reduced[dim] || keepdim) shape.push_back(reduced[dim] ? 1 : self.size(dim));
  }
  if (count == 0)
    TORCH_WARN("var(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor ",
               "(input numel divided by output numel).");
  // A complex tensor's spread is real; its mean complex (NaN in both parts).
  const at::Tensor nan = at::full(shape, std::numeric_limits<float>::quiet_NaN(), self.options().dtype(at::kFloat));
  return {nan, self.is_complex() ? at::complex(nan, nan) : nan.clone()};
}

template <bool StandardDeviation>
at::Tensor spread(const at::Tensor& self, at::OptionalIntArrayRef dims, const std::optional<at::Scalar>& correction,
                  bool keepdim) {
  if (computes_natively(self) && self.numel() > 0) {
    const at::Tensor variance = std::get<0>(variance_and_mean(self, dims, correction, keepdim));
    return StandardDeviation ? at::sqrt(variance) : variance;
  }
  if (computes_natively(self)) return std::get<0>(of_empty(self, dims, keepdim));
  torch::jit::Stack stack{self, dims, correction, keepdim};
  call_cpu_fallback(StandardDeviation ? "aten::std" : "aten::var", "correction", stack);
  return stack[0].toTensor();
}

template <bool StandardDeviation>
std::tuple<at::Tensor, at::Tensor> spread_and_mean(const at::Tensor& self, at::OptionalIntArrayRef dims,
                                                   const std::optional<at::Scalar>& correction, bool keepdim) {
  if (computes_natively(self) && self.numel() > 0) {
    auto [variance, mean] = variance_and_mean(self, dims, correction, keepdim);
    return {StandardDeviation ? at::sqrt(variance) : variance, mean};
  }
  if (computes_natively(self)) return of_empty(self, dims, keepdim);
  torch::jit::Stack stack{self, dims, correction, keepdim};
  call_cpu_fallback(StandardDeviation ? "aten::std_mean" : "aten::var_mean", "correction", stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("var.correction", spread<false>);
  m.impl("std.correction", spread<true>);
  m.impl("var_mean.correction", spread_and_mean<false>);
  m.impl("std_mean.correction", spread_and_mean<true>);
}

}  // namespace npusim::bridge
