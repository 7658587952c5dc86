// torch.unique (_unique, _unique2) and torch.unique_consecutive over the flattened tensor, composed from native
// kernels on the device: a stable sort brings equal values together (unique sorts, as the CPU's does even when
// sorted=False), a run starts wherever a value differs from the one before it (so each NaN is a group of its own, as
// on the CPU), the runs' first values are the result, the running count of starts numbers each element's run (the
// inverse, put back at each element's place by the sort's order) and the distances between starts are the counts.
// Unique slices along a dimension (unique_dim and its consecutive form) sort the slices as rows, lexicographically,
// by one stable sort per column. Integers, bool (sorted as int32), float32 and half precision; float64, empty
// tensors and slices of more than 256 elements take the CPU fallback.
#include <ATen/TensorOperators.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/any.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
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

// Lexicographic order of the rows of `rows` ([n, m]): stable sorts by each column, the last first, so that ties in a
// column keep the order of the columns after it.
at::Tensor row_order(const at::Tensor& rows) {
  at::Tensor order = at::arange(rows.size(0), rows.options().dtype(at::kLong));
  for (int64_t column = rows.size(1) - 1; column >= 0; --column) {
    const at::Tensor keys = rows.select(1, column).index_select(0, order);
    order = order.index_select(0, std::get<1>(at::sort(keys, /*stable=*/true, 0, /*descending=*/false)));
  }
  return order;
}

// Unique slices along `dim` (unique_dim, unique_dim_consecutive): the slices as rows, runs of equal neighbouring
// rows (a row starts a run where any element differs from the row before), in lexicographic order or as they come.
// The CPU computes the inverse and counts whether or not they are asked for.
constexpr int64_t kMostSortedColumns = 256;  // one sort per column: wider slices take the CPU fallback

bool takes_slices(const at::Tensor& self, int64_t dim) {
  if (!takes(self) || self.dim() == 0 || self.numel() == 0) return false;
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  return self.numel() / self.size(wrapped) <= kMostSortedColumns;
}

Unique unique_slices(const at::Tensor& self, int64_t dim, bool sort_rows) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor moved = self.movedim(dim, 0);
  const int64_t n = moved.size(0);
  const at::Tensor rows = moved.reshape({n, -1}).to(*sortable(self.scalar_type()));
  const at::Tensor order = sort_rows ? row_order(rows) : at::arange(n, rows.options().dtype(at::kLong));
  const at::Tensor ordered = rows.index_select(0, order);
  at::Tensor starts = at::ones({n}, rows.options().dtype(at::kBool));
  if (n > 1) starts.narrow(0, 1, n - 1).copy_(at::ne(ordered.narrow(0, 1, n - 1), ordered.narrow(0, 0, n - 1)).any(1));
  const at::Tensor run = at::cumsum(starts, 0) - 1;
  at::Tensor inverse = at::empty({n}, run.options());
  inverse.scatter_(0, order, run);
  const at::Tensor positions = at::nonzero(starts).view({-1});
  const at::Tensor counts = at::diff(positions, 1, 0, std::nullopt, at::scalar_tensor(n, run.options()).view({1}));
  std::vector<int64_t> shape = moved.sizes().vec();
  shape[0] = positions.numel();
  const at::Tensor values = moved.index_select(0, order.index_select(0, positions)).reshape(shape).movedim(0, dim);
  return {values.contiguous(), inverse, counts};
}

Unique npusim_unique_consecutive(const at::Tensor& self, bool return_inverse, bool return_counts,
                                 std::optional<int64_t> dim) {
  if (takes(self) && (!dim.has_value() || self.dim() == 1)) {  // along the only dimension: the same runs
    const at::Tensor flat = self.reshape({-1}).to(*sortable(self.scalar_type()));
    auto [values, run, counts] = runs_of(flat, self.scalar_type(), return_inverse, return_counts);
    return {values, return_inverse ? run.view(self.sizes()) : run, counts};
  }
  if (dim.has_value() && takes_slices(self, *dim)) return unique_slices(self, *dim, /*sort_rows=*/false);
  torch::jit::Stack stack{self, return_inverse, return_counts, dim};
  call_cpu_fallback("aten::unique_consecutive", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

Unique npusim_unique_dim(const at::Tensor& self, int64_t dim, bool sorted, bool return_inverse, bool return_counts) {
  if (takes_slices(self, dim)) return unique_slices(self, dim, /*sort_rows=*/true);
  torch::jit::Stack stack{self, dim, sorted, return_inverse, return_counts};
  call_cpu_fallback("aten::unique_dim", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

Unique npusim_unique_dim_consecutive(const at::Tensor& self, int64_t dim, bool return_inverse, bool return_counts) {
  if (takes_slices(self, dim)) return unique_slices(self, dim, /*sort_rows=*/false);
  torch::jit::Stack stack{self, dim, return_inverse, return_counts};
  call_cpu_fallback("aten::unique_dim_consecutive", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("unique_dim", npusim_unique_dim);
  m.impl("unique_dim_consecutive", npusim_unique_dim_consecutive);
  m.impl("_unique2", npusim_unique2);
  m.impl("_unique", npusim_unique);
  m.impl("unique_consecutive", npusim_unique_consecutive);
}

}  // namespace npusim::bridge
