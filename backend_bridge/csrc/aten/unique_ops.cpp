// torch.unique (_unique, _unique2) and torch.unique_consecutive over the flattened tensor, composed from native
// kernels on the device: a stable sort brings equal values together (unique sorts, as the CPU's does even when
// sorted=False), a run starts wherever a value differs from the one before it (so each NaN is a group of its own, as
// on the CPU), the runs' first values are the result, the running count of starts numbers each element's run (the
// inverse, put back at each element's place by the sort's order) and the distances between starts are the counts.
// Integers, bool (sorted as int32), float32 and half precision; float64 and unique over a dimension take the CPU
// fallback.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sort.h>
#include <torch/library.h>

#include <tuple>

#include "bridge.h"

namespace npusim::bridge {
namespace {

using Unique = std::tuple<at::Tensor, at::Tensor, at::Tensor>;  // values, inverse, counts

// The dtype npusim sorts and compares `type` in, if it does: bool and int16 widened to int32 (every value exact).
std::optional<at::ScalarType> sortable(at::ScalarType type) {
  switch (type) {
    case at::kBool:
    case at::kShort: return at::kInt;
    case at::kByte:
    case at::kChar:
    case at::kInt:
    case at::kLong:
    case at::kFloat:
    case at::kHalf:
    case at::kBFloat16: return type;
    default: return std::nullopt;
  }
}

bool takes(const at::Tensor& self) {
  return self.device().is_privateuseone() && sortable(self.scalar_type()).has_value();
}

// The runs of equal neighbours in the 1-D `ordered`: their first values (in self's dtype), each element's run number,
// and each run's length. The CPU returns an empty inverse and counts when they are not asked for.
Unique runs_of(const at::Tensor& ordered, at::ScalarType dtype, bool return_inverse, bool return_counts) {
  const int64_t n = ordered.numel();
  const at::TensorOptions longs = ordered.options().dtype(at::kLong);
  at::Tensor starts = at::ones({n}, ordered.options().dtype(at::kBool));
  if (n > 1) starts.narrow(0, 1, n - 1).copy_(at::ne(ordered.narrow(0, 1, n - 1), ordered.narrow(0, 0, n - 1)));
  const at::Tensor values = at::masked_select(ordered, starts).to(dtype);
  const at::Tensor run = return_inverse ? at::cumsum(starts, 0) - 1 : at::empty({0}, longs);
  at::Tensor counts = at::empty({0}, longs);
  if (return_counts && n > 0) {
    const at::Tensor positions = at::nonzero(starts).view({-1});
    counts = at::diff(positions, 1, 0, std::nullopt, at::scalar_tensor(n, longs).view({1}));
  }
  return {values, run, counts};
}

Unique sorted_unique(const at::Tensor& self, bool return_inverse, bool return_counts) {
  const at::Tensor flat = self.reshape({-1}).to(*sortable(self.scalar_type()));
  const auto [ordered, order] = at::sort(flat, /*stable=*/true, 0, /*descending=*/false);
  auto [values, run, counts] = runs_of(ordered, self.scalar_type(), return_inverse, return_counts);
  at::Tensor inverse = run;
  if (return_inverse) {  // element order[k] is in run[k]
    inverse = at::empty({flat.numel()}, run.options());
    if (flat.numel() > 0) inverse.scatter_(0, order, run);
    inverse = inverse.view(self.sizes());
  }
  return {values, inverse, counts};
}

Unique npusim_unique2(const at::Tensor& self, bool sorted, bool return_inverse, bool return_counts) {
  if (takes(self)) return sorted_unique(self, return_inverse, return_counts);
  torch::jit::Stack stack{self, sorted, return_inverse, return_counts};
  call_cpu_fallback("aten::_unique2", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

std::tuple<at::Tensor, at::Tensor> npusim_unique(const at::Tensor& self, bool sorted, bool return_inverse) {
  if (takes(self)) {
    auto [values, inverse, counts] = sorted_unique(self, return_inverse, false);
    return {values, inverse};
  }
  torch::jit::Stack stack{self, sorted, return_inverse};
  call_cpu_fallback("aten::_unique", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

Unique npusim_unique_consecutive(const at::Tensor& self, bool return_inverse, bool return_counts,
                                 std::optional<int64_t> dim) {
  if (takes(self) && (!dim.has_value() || self.dim() == 1)) {  // along the only dimension: the same runs
    const at::Tensor flat = self.reshape({-1}).to(*sortable(self.scalar_type()));
    auto [values, run, counts] = runs_of(flat, self.scalar_type(), return_inverse, return_counts);
    return {values, return_inverse ? run.view(self.sizes()) : run, counts};
  }
  torch::jit::Stack stack{self, return_inverse, return_counts, dim};
  call_cpu_fallback("aten::unique_consecutive", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique2", npusim_unique2);
  m.impl("_unique", npusim_unique);
  m.impl("unique_consecutive", npusim_unique_consecutive);
}

}  // namespace npusim::bridge
