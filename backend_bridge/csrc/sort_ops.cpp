// Sorting along one dimension (torch.sort, argsort, msort; stable or not, ascending or descending) by ranks: one fused
// kernel counts, for each element, the elements that come before it in the sorted order (smaller, or equal and
// earlier: a stable order, with NaN above everything as PyTorch orders it), and a second adds each element and its
// index at its rank into outputs filled with the additive identity (dma.stxadd: -0 + x is x for every float). That is
// n^2 comparisons per row of n, on the vector engine, so rows of up to kLongestRow elements sort natively and longer
// ones take the fallback. The CPU's sort is stable, so values and indices both match it.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "bridge.h"
#include "kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;
using isa::ElementType;

constexpr int64_t kLongestRow = 4096;

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

// Each element's rank along `dim` into `ranks` (int64, [rows, n] contiguous, rows the other dims in order). The space
// is [other dims..., i, j] with j reduced: element j comes before element i when it is smaller (ascending; larger
// when descending), NaN being above every number, or when both are equal (or both NaN) and j < i.
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
  const ElementType type = *element_type(self.scalar_type()), boolean = ElementType::Bool;
  const auto op = [&](FusedOpcode opcode, int a, int b, ElementType result = ElementType::Bool) {
    return k.op(opcode, a, b, -1, result);
  };
  const bool floats = isa::is_float(type);
  const int nan_i = floats ? op(FusedOpcode::Ne, x_i, x_i) : -1, nan_j = floats ? op(FusedOpcode::Ne, x_j, x_j) : -1;
  // j before i by value: x_j < x_i (ascending) or x_j > x_i, with NaN the largest
  int before = op(descending ? FusedOpcode::Gt : FusedOpcode::Lt, x_j, x_i);
  int equal = op(FusedOpcode::Eq, x_j, x_i);
  if (floats) {
    const int nan_side = descending ? op(FusedOpcode::And, nan_j, k.op(FusedOpcode::Not, nan_i, -1, -1, boolean))
                                    : op(FusedOpcode::And, nan_i, k.op(FusedOpcode::Not, nan_j, -1, -1, boolean));
    before = op(FusedOpcode::Or, before, nan_side);
    equal = op(FusedOpcode::Or, equal, op(FusedOpcode::And, nan_i, nan_j));
  }
  const int earlier = op(FusedOpcode::Lt, k.load(iota, along_j), k.load(iota, along_i));
  const int counted = op(FusedOpcode::Or, before, op(FusedOpcode::And, equal, earlier));
  const int ones = k.op(FusedOpcode::Convert, counted, -1, -1, ElementType::I64);
  k.store(k.op(FusedOpcode::ReduceSum, ones, -1, -1, ElementType::I64), ranks, rank_strides);
  return k.launch(self);
}

// values[row, rank] = self[row, i] and indices[row, rank] = i, into [rows, n] contiguous outputs.
bool place(const at::Tensor& self, int64_t dim, const at::Tensor& ranks, const at::Tensor& iota,
           const at::Tensor& values, const at::Tensor& indices) {
  const int64_t n = self.size(dim), rows = ranks.size(0);
  const OtherDims others(self, dim);
  std::vector<int64_t> sizes = others.sizes, self_strides = others.strides;
  const size_t outer = sizes.size();
  sizes.push_back(n);
  self_strides.push_back(self.stride(dim));
  std::vector<int64_t> flat(outer + 1, 0), row_starts_strides(outer + 1, 0), along_i(outer + 1, 0);
  for (int64_t d = static_cast<int64_t>(outer), stride = 1; d >= 0; --d) {
    flat[d] = stride;
    stride *= sizes[d];
  }
  for (size_t d = 0; d < outer; ++d) row_starts_strides[d] = flat[d] / n;  // the row's number
  along_i[outer] = 1;
  const at::Tensor row_starts = at::arange(0, rows * n, n, at::kLong).to(iota.device());  // one copy to the device

  TensorKernel k(TensorKernel::name_for("sort_place", self), sizes, 0);
  const int at =
      k.op(FusedOpcode::Add, k.load(row_starts, row_starts_strides), k.load(ranks, flat), -1, ElementType::I64);
  k.scatter_add(k.load(self, self_strides), values, at);
  k.scatter_add(k.load(iota, along_i), indices, at);
  return k.launch(self);
}

std::tuple<at::Tensor&, at::Tensor&> npusim_sort_out(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                                     bool descending, at::Tensor& values, at::Tensor& indices) {
  const int64_t wrapped = c10::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.dim() == 0 ? 1 : self.size(wrapped);
  if (sortable(self) && values.device() == self.device() && indices.device() == self.device() &&
      values.scalar_type() == self.scalar_type() && indices.scalar_type() == at::kLong && n <= kLongestRow) {
    at::native::resize_output(values, self.sizes());
    at::native::resize_output(indices, self.sizes());
    if (self.numel() == 0) return {values, indices};
    if (self.dim() == 0 || n == 1) {
      values.copy_(self);
      indices.zero_();
      return {values, indices};
    }
    const at::TensorOptions longs = self.options().dtype(at::kLong);
    const int64_t rows = self.numel() / n;
    const at::Tensor iota = at::arange(n, at::kLong).to(self.device());  // one copy to the device
    const at::Tensor ranks = at::empty({rows, n}, longs);
    // Sorted rows, [other dims..., n] (the outputs themselves when they are laid out so): filled with -0 (floats) or
    // 0 for the adds.
    std::vector<int64_t> row_sizes = OtherDims(self, wrapped).sizes;
    row_sizes.push_back(n);
    const bool in_place = wrapped == self.dim() - 1 && values.is_contiguous() && indices.is_contiguous() &&
                          !values.is_alias_of(self) && !indices.is_alias_of(self);
    at::Tensor sorted = in_place ? values : at::empty(row_sizes, self.options());
    at::Tensor order = in_place ? indices : at::empty(row_sizes, longs);
    sorted.fill_(at::isFloatingType(self.scalar_type()) ? -0.0 : 0.0);
    order.zero_();
    if (rank(self, wrapped, descending, ranks, iota) && place(self, wrapped, ranks, iota, sorted, order)) {
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
