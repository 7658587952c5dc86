// Native topk, in float32, float16 and bfloat16 and in the integer types sort takes. For small k (mixture-of-experts
// routing picks 1 to 8 of a few experts per token): k rounds of the native row extremum with its index, each chosen
// element then taken out of the running by a scatter of -inf (+inf for the smallest), so the values come sorted, NaN
// first for the largest as on the CPU (the order of equal elements' indices is not specified, here the lower index
// first). Larger k (top-k sampling's 50 of a vocabulary), integers, and rows the rounds cannot order as the CPU does
// (one that holds the marking infinity could give a chosen index twice; the smallest of a row with NaN would pick
// it: one check on the device, a bool to the host) take the first k of the native stable sort (sort_ops.cpp).
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/any.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/max.h>
#include <ATen/ops/min.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/sort.h>
#include <torch/library.h>

#include <limits>

#include "bridge.h"

namespace npusim::bridge {
namespace {

constexpr int64_t kMostRounds = 16;

// Elements the rounds could not order as the CPU does: the infinity that marks a taken element, and (for the
// smallest) NaN, which the CPU ranks above every number where the native minimum would pick it first.
at::Tensor out_of_the_running(const at::Tensor& self, bool largest, double taken) {
  const at::Tensor marked = at::eq(self, taken);
  return largest ? marked : marked.logical_or(at::ne(self, self));
}

std::tuple<at::Tensor&, at::Tensor&> npusim_topk_out(const at::Tensor& self, int64_t k, int64_t dim_, bool largest,
                                                     bool sorted, at::Tensor& values, at::Tensor& indices) {
  const int64_t dim = at::maybe_wrap_dim(dim_, self.dim());
  if (self.dim() == 0 && k == 1 && values.device() == self.device() && indices.device() == self.device() &&
      values.scalar_type() == self.scalar_type() && indices.scalar_type() == at::kLong) {  // one element: itself
    at::native::resize_output(values, {});
    at::native::resize_output(indices, {});
    values.copy_(self);
    indices.zero_();
    return {values, indices};
  }
  const double taken = largest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  const bool on_device = self.dim() > 0 && k >= 0 && k <= self.size(dim) &&
                         values.scalar_type() == self.scalar_type() && indices.scalar_type() == at::kLong &&
                         values.device() == self.device() && indices.device() == self.device() &&
                         self.is_privateuseone() && element_type(self.scalar_type()) && self.scalar_type() != at::kBool;
  if (!on_device) {
    torch::jit::Stack stack{self, k, dim_, largest, sorted, values, indices};
    call_cpu_fallback("aten::topk", "values", stack);
    return {values, indices};
  }
  const bool by_rounds = is_float_kind(self.scalar_type()) && k >= 1 && k <= kMostRounds && self.numel() > 0 &&
                         !out_of_the_running(self, largest, taken).any().item<bool>();
  if (!by_rounds) {
    const auto [sorted_values, sorted_indices] = at::sort(self, /*stable=*/true, dim, /*descending=*/largest);
    at::native::resize_output(values, sorted_values.narrow(dim, 0, k).sizes());
    at::native::resize_output(indices, sorted_values.narrow(dim, 0, k).sizes());
    values.copy_(sorted_values.narrow(dim, 0, k));
    indices.copy_(sorted_indices.narrow(dim, 0, k));
    return {values, indices};
  }
  std::vector<int64_t> shape = self.sizes().vec();
  shape[dim] = k;
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  at::Tensor running = self.clone();
  for (int64_t round = 0; round < k; ++round) {
    auto [value, index] = largest ? at::max(running, dim, /*keepdim=*/true) : at::min(running, dim, /*keepdim=*/true);
    values.narrow(dim, round, 1).copy_(value);
    indices.narrow(dim, round, 1).copy_(index);
    if (round + 1 < k) running.scatter_(dim, index, taken);
  }
  return {values, indices};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("topk.values", npusim_topk_out); }

}  // namespace npusim::bridge
