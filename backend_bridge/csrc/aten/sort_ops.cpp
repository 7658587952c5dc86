// Sorting along one dimension (torch.sort, argsort, msort; stable or not, ascending or descending), stable as the
// CPU's, so that values and indices both match it, NaN above every number as PyTorch orders it.
// - Rows of up to kLongestRankedRow elements, by ranks: one fused kernel counts, for each element, the elements that
//   come before it in the sorted order (before it by value, or tied and earlier), and a second adds each element and
//   its index at its rank into outputs filled with the additive identity (dma.stxadd: -0 + x is x for every float).
//   That is n^2 comparisons per row of n, on the vector engine.
// - Longer rows (a vocabulary's logits, which top-p sampling sorts), by a merge sort: padded with a value that sorts
//   last, sorted by ranks in blocks, then merged pass by pass, each element's place in the merged run found by a
//   binary search of the other run (merge_runs): n log n work, one kernel per pass.
#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/library.h>

#include <limits>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "bridge.h"
#include "runtime/kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;
using isa::ElementType;

// Rows up to this long are sorted by ranks (n^2 comparisons), longer ones by a merge sort over blocks of kBlock. The
// blocks' ranks cost width x kBlock comparisons and each merge pass width x (log2(run) + 1) gathers: small blocks
// trade the first for a few more passes, which in timed mode costs less (on a vocabulary, blocks of 32 about half
// the cycles of blocks of 256).
constexpr int64_t kLongestRankedRow = 4096;
constexpr int64_t kBlock = 32;

bool sortable(const at::Tensor& self) {
  const auto type = self.scalar_type();
  return self.is_privateuseone() && element_type(type) && type != at::kBool;
}

// The layout PyTorch's sort gives its outputs: the input's strides when they are dense, else dense ones like them.
std::vector<int64_t> output_strides(const at::Tensor& self) {
  return self.is_non_overlapping_and_dense() ? self.strides().vec()
                                             : at::infer_dense_strides(self.sizes(), self.strides());
}

// The dimensions other than `dim`, in order: their sizes and self's strides over them (a row of the sort per point).
struct OtherDims {
  std::vector<int64_t> sizes, strides;
  OtherDims(const at::Tensor& self, int64_t dim) {
    for (int64_t d = 0; d < self.dim(); ++d)
      if (d != dim) {
        sizes.push_back(self.size(d));
        strides.push_back(self.stride(d));
      }
  }
};

// The sorted order's comparisons as kernel nodes: value a comes strictly before value b (ascending: smaller;
// descending: larger; NaN above every number, as PyTorch orders it), or a and b tie (equal, or both NaN).
class SortOrder {
 public:
  SortOrder(TensorKernel& k, ElementType type, bool descending)
      : k_(k), floats_(isa::is_float(type)), descending_(descending) {}

  int before(int a, int b) {
    const int by_value = bool_op(descending_ ? FusedOpcode::Gt : FusedOpcode::Lt, a, b);
    if (!floats_) return by_value;
    const int nan_side = descending_ ? both(is_nan(a), negate(is_nan(b))) : both(is_nan(b), negate(is_nan(a)));
    return either(by_value, nan_side);
  }
  int tie(int a, int b) {
    const int equal = bool_op(FusedOpcode::Eq, a, b);
    return floats_ ? either(equal, both(is_nan(a), is_nan(b))) : equal;
  }
  int both(int a, int b) { return bool_op(FusedOpcode::And, a, b); }
  int either(int a, int b) { return bool_op(FusedOpcode::Or, a, b); }

 private:
  int bool_op(FusedOpcode opcode, int a, int b) { return k_.op(opcode, a, b, -1, ElementType::Bool); }
  int negate(int a) { return k_.op(FusedOpcode::Not, a, -1, -1, ElementType::Bool); }
  int is_nan(int a) {  // once per value
    auto [at, inserted] = nan_of_.try_emplace(a, -1);
    if (inserted) at->second = bool_op(FusedOpcode::Ne, a, a);
    return at->second;
  }

  TensorKernel& k_;
  bool floats_, descending_;
  std::map<int, int> nan_of_;
};

// Each element's rank along `dim` into `ranks` (int64, [rows, n] contiguous, rows the other dims in order). The space
// is [other dims..., i, j] with j reduced: element j comes before element i when it is before it in the sorted
// order, or when both tie and j < i.
bool rank(const at::Tensor& self, int64_t dim, bool descending, const at::Tensor& ranks, const at::Tensor& iota) {
  const int64_t n = self.size(dim);
  const OtherDims others(self, dim);
  std::vector<int64_t> sizes = others.sizes;
  const std::vector<int64_t>& outer_strides = others.strides;
  const size_t outer = sizes.size();
  sizes.push_back(n);
  sizes.push_back(n);
  const auto strides = [&](std::vector<int64_t> tail) {
    std::vector<int64_t> all = outer_strides;
    all.insert(all.end(), tail.begin(), tail.end());
    return all;
  };
  std::vector<int64_t> rank_strides(outer + 2, 0);  // [rows, n] row-major over the other dims, then i
  for (int64_t d = static_cast<int64_t>(outer), stride = 1; d >= 0; --d) {
    rank_strides[d] = stride;
    stride *= sizes[d];
  }
  std::vector<int64_t> along_i(outer + 2, 0), along_j(outer + 2, 0);
  along_i[outer] = 1;
  along_j[outer + 1] = 1;

  TensorKernel k(TensorKernel::name_for("sort_ranks", self), sizes, 1);
  const int x_i = k.load(self, strides({self.stride(dim), 0}));
  const int x_j = k.load(self, strides({0, self.stride(dim)}));
  SortOrder order(k, *element_type(self.scalar_type()), descending);
  const int earlier = k.op(FusedOpcode::Lt, k.load(iota, along_j), k.load(iota, along_i), -1, ElementType::Bool);
  const int counted = order.either(order.before(x_j, x_i), order.both(order.tie(x_j, x_i), earlier));
  const int ones = k.op(FusedOpcode::Convert, counted, -1, -1, ElementType::I64);
  k.store(k.op(FusedOpcode::ReduceSum, ones, -1, -1, ElementType::I64), ranks, rank_strides);
  return k.launch(self);
}

// values[row, rank] = self[row, i] and indices[row, rank] = the element's index (`index_source` at `index_strides`
// over [other dims..., i]), into [rows, n] contiguous outputs.
bool place(const at::Tensor& self, int64_t dim, const at::Tensor& ranks, const at::Tensor& index_source,
           std::span<const int64_t> index_strides, const at::Tensor& values, const at::Tensor& indices) {
  const int64_t n = self.size(dim), rows = ranks.size(0);
  const OtherDims others(self, dim);
  std::vector<int64_t> sizes = others.sizes, self_strides = others.strides;
  const size_t outer = sizes.size();
  sizes.push_back(n);
  self_strides.push_back(self.stride(dim));
  std::vector<int64_t> flat(outer + 1, 0), row_starts_strides(outer + 1, 0);
  for (int64_t d = static_cast<int64_t>(outer), stride = 1; d >= 0; --d) {
    flat[d] = stride;
    stride *= sizes[d];
  }
  for (size_t d = 0; d < outer; ++d) row_starts_strides[d] = flat[d] / n;                         // the row's number
  const at::Tensor row_starts = at::arange(0, rows * n, n, at::kLong).to(index_source.device());  // one copy

  TensorKernel k(TensorKernel::name_for("sort_place", self), sizes, 0);
  const int at =
      k.op(FusedOpcode::Add, k.load(row_starts, row_starts_strides), k.load(ranks, flat), -1, ElementType::I64);
  k.scatter_add(k.load(self, self_strides), values, at);
  k.scatter_add(k.load(index_source, index_strides), indices, at);
  return k.launch(self);
}

// Rows of up to kLongestRankedRow elements: each element's rank counted, then each element placed at its rank into
// `values` and `indices` ([other dims..., n] contiguous), which are filled with the additive identity first.
bool sort_by_ranks(const at::Tensor& self, int64_t dim, bool descending, const at::Tensor& values,
                   const at::Tensor& indices) {
  const int64_t n = self.size(dim);
  const at::Tensor iota = at::arange(n, at::kLong).to(self.device());  // one copy to the device
  const at::Tensor ranks = at::empty({self.numel() / n, n}, indices.options());
  values.fill_(at::isFloatingType(self.scalar_type()) ? -0.0 : 0.0);
  indices.zero_();
  std::vector<int64_t> index_strides(self.dim(), 0);  // [other dims..., i]: i
  index_strides.back() = 1;
  return rank(self, dim, descending, ranks, iota) && place(self, dim, ranks, iota, index_strides, values, indices);
}

// One pass of the merge sort over [rows, width] contiguous buffers made of sorted runs of `run` elements (and their
// original indices): runs 2p and 2p + 1 become one sorted run in `to_values`, `to_indices` (filled with the additive
// identity). An element's place in the merged run is its place in its own run plus the number of the other run's
// elements that come before it: those before it in the sorted order, and, when the other run is the earlier one,
// those that tie with it too (their original indices are lower), which keeps the sort stable. The count is a binary
// search of the other run (log2(run) + 1 steps, a gather each): steps of run / 2, ..., 2, 1 and 1 again, each adding
// its size to the count when the element just below count + size comes before the point's.
bool merge_runs(const at::Tensor& values, const at::Tensor& indices, int64_t run, bool descending,
                const at::Tensor& to_values, const at::Tensor& to_indices) {
  const int64_t pairs = values.numel() / (2 * run);
  const at::Device device = values.device();
  TensorKernel k(TensorKernel::name_for("sort_merge", values), {pairs, 2, run}, 0);
  const std::vector<int64_t> element{2 * run, run, 1};
  const int x = k.load(values, element);
  const int index = k.load(indices, element);
  const auto integer = [&](int64_t value) { return k.constant(static_cast<double>(value), ElementType::I64); };
  const auto add = [&](int a, int b) { return k.op(FusedOpcode::Add, a, b, -1, ElementType::I64); };
  // The tables live until the launch: the kernel holds their addresses.
  const at::Tensor pair_starts = at::arange(0, pairs * 2 * run, 2 * run, at::kLong).to(device);
  const at::Tensor later_half = TensorKernel::table<bool>({false, true}, at::kBool, device);
  const at::Tensor other_run_offsets = TensorKernel::table<int64_t>({run, 0}, at::kLong, device);
  const at::Tensor places_in_run = at::arange(run, at::kLong).to(device);
  const int pair_start = k.load(pair_starts, std::vector<int64_t>{1, 0, 0});
  const int in_later_run = k.load(later_half, std::vector<int64_t>{0, 1, 0});
  const int other_run = add(pair_start, k.load(other_run_offsets, std::vector<int64_t>{0, 1, 0}));
  const int place_in_run = k.load(places_in_run, std::vector<int64_t>{0, 0, 1});
  SortOrder order(k, *element_type(values.scalar_type()), descending);
  const int none = integer(0);
  int count = none;
  std::vector<int64_t> steps;
  for (int64_t step = run / 2; step >= 1; step /= 2) steps.push_back(step);
  steps.push_back(1);
  for (const int64_t step : steps) {
    const int other = k.gather(values, add(other_run, add(count, integer(step - 1))));
    const int comes_before = order.either(order.before(other, x), order.both(in_later_run, order.tie(other, x)));
    count = add(count, k.op(FusedOpcode::Where, comes_before, integer(step), none, ElementType::I64));
  }
  const int at = add(add(pair_start, place_in_run), count);
  k.scatter_add(x, to_values, at);
  k.scatter_add(index, to_indices, at);
  return k.launch(values);
}

// A value that sorts after every element (NaN ascending, -inf descending; an integer type's extreme), padding a row
// to the merge sort's width: equal to a real element, it still comes later, its index being higher.
at::Scalar sorts_last(at::ScalarType type, bool descending) {
  if (at::isFloatingType(type))
    return descending ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  return AT_DISPATCH_INTEGRAL_TYPES(type, "sorts_last", [&] {
    return at::Scalar(descending ? std::numeric_limits<scalar_t>::lowest() : std::numeric_limits<scalar_t>::max());
  });
}

// The sorted rows and their indices of `rows` ([rows, n]) into `values` and `indices` ([rows, n] contiguous), for rows
// longer than kLongestRankedRow: a merge sort. The rows, padded to kBlock times a power of two, are sorted in blocks
// of kBlock by ranks, then merged pass by pass: n log n work in log2(width / kBlock) + 2 kernels (and the fills).
bool merge_sort(const at::Tensor& rows, bool descending, const at::Tensor& values, const at::Tensor& indices) {
  const int64_t count = rows.size(0), n = rows.size(1);
  int64_t width = kBlock;
  while (width < n) width *= 2;
  at::Tensor padded = at::empty({count, width}, rows.options());
  padded.fill_(sorts_last(rows.scalar_type(), descending));
  padded.narrow(1, 0, n).copy_(rows);
  const at::Tensor iota = at::arange(width, at::kLong).to(rows.device());  // one copy to the device
  const at::Tensor blocks = padded.view({count, width / kBlock, kBlock});
  const at::Tensor ranks = at::empty({count * (width / kBlock), kBlock}, indices.options());
  const auto cleared = [&](const at::TensorOptions& options) {
    at::Tensor buffer = at::empty({count, width}, options);
    buffer.fill_(isFloatingType(options.dtype().toScalarType()) ? -0.0 : 0.0);  // the additive identity
    return buffer;
  };
  at::Tensor sorted = cleared(values.options()), order = cleared(indices.options());
  const int64_t block_index[] = {0, kBlock, 1};  // an element's index in its row
  if (!rank(blocks, 2, descending, ranks, iota) || !place(blocks, 2, ranks, iota, block_index, sorted, order))
    return false;
  for (int64_t run = kBlock; run < width; run *= 2) {
    at::Tensor merged = cleared(values.options()), merged_order = cleared(indices.options());
    if (!merge_runs(sorted, order, run, descending, merged, merged_order)) return false;
    sorted = merged;
    order = merged_order;
  }
  values.copy_(sorted.narrow(1, 0, n));
  indices.copy_(order.narrow(1, 0, n));
  return true;
}

std::tuple<at::Tensor&, at::Tensor&> npusim_sort_out(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                                     bool descending, at::Tensor& values, at::Tensor& indices) {
  const int64_t wrapped = c10::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.dim() == 0 ? 1 : self.size(wrapped);
  if (sortable(self) && values.device() == self.device() && indices.device() == self.device() &&
      values.scalar_type() == self.scalar_type() && indices.scalar_type() == at::kLong) {
    at::native::resize_output(values, self.sizes());
    at::native::resize_output(indices, self.sizes());
    if (self.numel() == 0) return {values, indices};
    if (self.dim() == 0 || n == 1) {
      values.copy_(self);
      indices.zero_();
      return {values, indices};
    }
    const int64_t rows = self.numel() / n;
    // Sorted rows, [other dims..., n]: the outputs themselves when they are laid out so.
    std::vector<int64_t> row_sizes = OtherDims(self, wrapped).sizes;
    row_sizes.push_back(n);
    const bool in_place = wrapped == self.dim() - 1 && values.is_contiguous() && indices.is_contiguous() &&
                          !values.is_alias_of(self) && !indices.is_alias_of(self);
    at::Tensor sorted = in_place ? values : at::empty(row_sizes, self.options());
    at::Tensor order = in_place ? indices : at::empty(row_sizes, self.options().dtype(at::kLong));
    const bool done = n <= kLongestRankedRow ? sort_by_ranks(self, wrapped, descending, sorted, order)
                                             : merge_sort(self.movedim(wrapped, -1).reshape({rows, n}), descending,
                                                          sorted.view({rows, n}), order.view({rows, n}));
    if (done) {
      if (!in_place) {
        values.copy_(sorted.movedim(-1, wrapped));
        indices.copy_(order.movedim(-1, wrapped));
      }
      return {values, indices};
    }
  }
  torch::jit::Stack stack{self, stable, dim, descending, values, indices};
  call_cpu_fallback("aten::sort", "values_stable", stack);
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> npusim_sort(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                               bool descending) {
  const std::vector<int64_t> strides = output_strides(self);
  at::Tensor values = at::empty_strided(self.sizes(), strides, self.options());
  at::Tensor indices = at::empty_strided(self.sizes(), strides, self.options().dtype(at::kLong));
  npusim_sort_out(self, stable, dim, descending, values, indices);
  return {values, indices};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.stable", npusim_sort);
  m.impl("sort.values_stable", npusim_sort_out);
}

}  // namespace npusim::bridge
