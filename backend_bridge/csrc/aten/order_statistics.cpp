// Order statistics from the native sort (which puts NaN last, as the CPU orders them):
//   median      of all elements or along a dimension: the lower of the two middle values, NaN if there is one (with
//               the first NaN's index)
//   nanmedian   the same with NaN ignored: the lower middle of the values that are not NaN
//   kthvalue    the k-th smallest along a dimension, with its index, from a stable sort
// The position to read is computed on the device (no synchronisation). float32, int64 and int32 on npusim; other
// cases take the CPU fallback, which also raises PyTorch's own errors.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/any.h>
#include <ATen/ops/div.h>
#include <ATen/ops/full.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <limits>

#include "bridge.h"

namespace npusim::bridge {
namespace {

bool sorts_natively(const at::Tensor& self) {
  return self.device().is_privateuseone() &&
         (self.scalar_type() == at::kFloat || self.scalar_type() == at::kLong || self.scalar_type() == at::kInt);
}

at::Tensor nan_of(const at::Tensor& self) {
  return at::full({}, std::numeric_limits<double>::quiet_NaN(), self.options());
}

// The selected value and index of each row (kept as a dimension of size 1, dropped when `squeeze`) into the outputs.
std::tuple<at::Tensor&, at::Tensor&> write_selected(at::Tensor value, at::Tensor index, int64_t dim, bool squeeze,
                                                    at::Tensor& values, at::Tensor& indices) {
  if (squeeze) {
    value = value.squeeze(dim);
    index = index.squeeze(dim);
  }
  at::native::resize_output(values, value.sizes());
  at::native::resize_output(indices, index.sizes());
  values.copy_(value);
  indices.copy_(index);
  return {values, indices};
}

// Per row of the sorted values along `dim` (keeping it): the lower middle of the values that are not NaN, 0 when all
// are NaN (which reads a NaN).
at::Tensor middle_of_numbers(const at::Tensor& sorted, int64_t dim) {
  const at::Tensor count = at::sum(at::logical_not(at::isnan(sorted)), dim, /*keepdim=*/true);
  return at::where(at::gt(count, 0), at::div(at::sub(count, 1), 2, "floor"), at::zeros_like(count));
}

// median (Ignoring NaN: nanmedian) along a dimension, values and indices from a stable sort: the lower middle, or
// with a NaN in the row (median) the first NaN, as the CPU reports it.
template <bool IgnoringNan>
std::tuple<at::Tensor&, at::Tensor&> median_along(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                                  at::Tensor& indices, const char* name) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (sorts_natively(self) && self.numel() > 0 && values.scalar_type() == self.scalar_type() &&
      indices.scalar_type() == at::kLong) {
    const at::Tensor source = self.dim() == 0 ? self.reshape({1}) : self;
    auto [sorted, order] = at::sort(source, /*stable=*/true, wrapped, /*descending=*/false);
    const int64_t n = source.size(wrapped);
    at::Tensor position = middle_of_numbers(sorted, wrapped);
    if (!IgnoringNan) {  // the first NaN, at the numbers' count, where there is one
      const at::Tensor numbers = at::sum(at::logical_not(at::isnan(sorted)), wrapped, /*keepdim=*/true);
      position = at::where(at::lt(numbers, n), numbers, at::full_like(numbers, (n - 1) / 2));
    }
    return write_selected(at::gather(sorted, wrapped, position), at::gather(order, wrapped, position), wrapped,
                          !keepdim || self.dim() == 0, values, indices);
  }
  torch::jit::Stack stack{self, dim, keepdim, values, indices};
  call_cpu_fallback(name, "dim_values", stack);
  return {values, indices};
}
template <bool IgnoringNan>
std::tuple<at::Tensor, at::Tensor> median_along_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  at::Tensor values = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(at::kLong));
  median_along<IgnoringNan>(self, dim, keepdim, values, indices, IgnoringNan ? "aten::nanmedian" : "aten::median");
  return {values, indices};
}
template <bool IgnoringNan>
std::tuple<at::Tensor&, at::Tensor&> median_along_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                          at::Tensor& values, at::Tensor& indices) {
  return median_along<IgnoringNan>(self, dim, keepdim, values, indices,
                                   IgnoringNan ? "aten::nanmedian" : "aten::median");
}

at::Tensor npusim_median(const at::Tensor& self) {
  if (sorts_natively(self)) {
    if (self.numel() == 0) return nan_of(self);  // the CPU's median of nothing
    const at::Tensor sorted = std::get<0>(at::sort(self.reshape({-1})));
    const at::Tensor middle = sorted[(self.numel() - 1) / 2];
    if (!at::isFloatingType(self.scalar_type())) return middle.clone();
    return at::where(at::any(at::isnan(self)), nan_of(self), middle);
  }
  torch::jit::Stack stack{self};
  call_cpu_fallback("aten::median", "", stack);
  return stack[0].toTensor();
}

at::Tensor npusim_nanmedian(const at::Tensor& self) {
  if (sorts_natively(self) && at::isFloatingType(self.scalar_type())) {
    if (self.numel() == 0) return nan_of(self);
    const at::Tensor sorted = std::get<0>(at::sort(self.reshape({-1})));
    const at::Tensor position = middle_of_numbers(sorted, 0);
    return at::index_select(sorted, 0, position.reshape({1})).reshape({});
  }
  if (sorts_natively(self)) return npusim_median(self);  // integers have no NaN
  torch::jit::Stack stack{self};
  call_cpu_fallback("aten::nanmedian", "", stack);
  return stack[0].toTensor();
}

std::tuple<at::Tensor&, at::Tensor&> npusim_kthvalue_out(const at::Tensor& self, c10::SymInt k_, int64_t dim,
                                                         bool keepdim, at::Tensor& values, at::Tensor& indices) {
  const int64_t k = k_.expect_int();
  const int64_t wrapped = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t length = self.dim() == 0 ? 1 : self.size(wrapped);
  if (sorts_natively(self) && k >= 1 && k <= length && values.scalar_type() == self.scalar_type() &&
      indices.scalar_type() == at::kLong) {
    const at::Tensor source = self.dim() == 0 ? self.reshape({1}) : self;
    auto [sorted, order] = at::sort(source, /*stable=*/true, wrapped, /*descending=*/false);
    return write_selected(sorted.narrow(wrapped, k - 1, 1), order.narrow(wrapped, k - 1, 1), wrapped,
                          !keepdim || self.dim() == 0, values, indices);
  }
  torch::jit::Stack stack{self, k, dim, keepdim, values, indices};
  call_cpu_fallback("aten::kthvalue", "values", stack);
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> npusim_kthvalue(const at::Tensor& self, c10::SymInt k, int64_t dim, bool keepdim) {
  at::Tensor values = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(at::kLong));
  npusim_kthvalue_out(self, k, dim, keepdim, values, indices);
  return {values, indices};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("median", npusim_median);
  m.impl("nanmedian", npusim_nanmedian);
  m.impl("median.dim", median_along_dim<false>);
  m.impl("median.dim_values", median_along_dim_out<false>);
  m.impl("nanmedian.dim", median_along_dim<true>);
  m.impl("nanmedian.dim_values", median_along_dim_out<true>);
  m.impl("kthvalue", npusim_kthvalue);
  m.impl("kthvalue.values", npusim_kthvalue_out);
}

}  // namespace npusim::bridge
