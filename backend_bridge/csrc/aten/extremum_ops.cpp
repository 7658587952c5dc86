// Native maxima and minima: max/min along a dimension (values and indices), amax/amin over any dimensions,
// argmax/argmin, and the max/min of every element, of float32, float16, bfloat16, int64, int32, int8, uint8 and bool
// tensors (argmax/argmin not of bools, which PyTorch refuses). Each moves the reduced dimension last and runs the row
// kernels (vrmax/vrmin for values, vargmax/vargmin for the first index, NaN counting as the extremum, as on the CPU),
// exact in every type; values of rows too long for the scratchpad are reduced in chunks. Other dtypes (int16, double)
// take the CPU fallback.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

using emitter::RowOp;

constexpr int64_t kChunk = 4096;

// The shape `self` reduces to along `dim`.
std::vector<int64_t> reduced_shape(const at::Tensor& self, int64_t dim, bool keepdim) {
  std::vector<int64_t> shape = self.sizes().vec();
  if (keepdim)
    shape[dim] = 1;
  else
    shape.erase(shape.begin() + dim);
  return shape;
}

// The max (or min) of each row of `rows_last` longer than a chunk: of its chunks, then of those, with the tail's.
at::Tensor extremum_in_chunks(bool is_max, const at::Tensor& rows_last) {
  const int64_t length = rows_last.size(-1), chunks = length / kChunk;
  std::vector<int64_t> shape = rows_last.sizes().vec();
  shape.back() = chunks;
  shape.push_back(kChunk);
  const auto reduce = [&](const at::Tensor& t) { return is_max ? at::amax(t, {-1}) : at::amin(t, {-1}); };
  at::Tensor result = reduce(reduce(rows_last.narrow(-1, 0, chunks * kChunk).reshape(shape)));
  if (length % kChunk == 0) return result;
  const at::Tensor tail = reduce(rows_last.narrow(-1, chunks * kChunk, length % kChunk));
  return is_max ? at::maximum(result, tail) : at::minimum(result, tail);
}

// Whether the row kernels take `self`'s type for the op: any type the vector engine has, but argmax/argmin of bools.
bool native_type(RowOp op, const at::Tensor& self) {
  if (!element_type(self.scalar_type())) return false;
  return self.scalar_type() != at::kBool || op == RowOp::MaxF32 || op == RowOp::MinF32;
}

// Reduces `self` (at least 1-D, the dimension not empty) along `dim` with a row op into `out`, resized to the reduced
// shape. False when it cannot (the caller falls back).
bool reduce_along(RowOp op, const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  if (!native_type(op, self) || out.device() != self.device()) return false;
  if (self.dim() == 0) {  // one element (dimension 0 or -1 names it): a row of one, the result 0-dim
    at::maybe_wrap_dim(dim, int64_t{0});
    at::Tensor row = at::empty({0}, out.options());
    if (!reduce_along(op, self.reshape({1}), 0, false, row)) return false;
    at::native::resize_output(out, {});
    out.copy_(row.reshape({}));
    return true;
  }
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (self.size(dim) == 0) return false;  // the CPU raises PyTorch's own error
  at::native::resize_output(out, reduced_shape(self, dim, keepdim));
  if (out.numel() == 0) return true;
  const at::Tensor rows_last = self.movedim(dim, -1);
  at::Tensor result = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  at::Tensor per_row = result.view(rows_last.sizes().slice(0, rows_last.dim() - 1));
  // Values of long rows split across the cores, or of rows the row kernel cannot walk in chunks (types other than
  // f32 and i32), are reduced in chunks by two launches.
  const bool values = op == RowOp::MaxF32 || op == RowOp::MinF32;
  if ((values && split_long_rows_across_cores(rows_last, kChunk)) || !launch_row_op(op, rows_last, per_row)) {
    if (!values || rows_last.size(-1) <= kChunk) return false;
    per_row.copy_(extremum_in_chunks(op == RowOp::MaxF32, rows_last));
  }
  if (!result.is_same(out)) out.copy_(result);
  return true;
}

template <bool IsMax>
constexpr RowOp kValues = IsMax ? RowOp::MaxF32 : RowOp::MinF32;
template <bool IsMax>
constexpr RowOp kIndex = IsMax ? RowOp::ArgMaxF32 : RowOp::ArgMinF32;
template <bool IsMax>
constexpr const char* kName = IsMax ? "aten::max" : "aten::min";

template <bool IsMax>
std::tuple<at::Tensor&, at::Tensor&> along_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                   at::Tensor& values, at::Tensor& indices) {
  // The indices of bools are those of their bytes (argmax itself refuses bools).
  const at::Tensor searched = self.scalar_type() == at::kBool ? self.view(at::kByte) : self;
  if (indices.scalar_type() == at::kLong && values.scalar_type() == self.scalar_type() &&
      native_type(kValues<IsMax>, self) && native_type(kIndex<IsMax>, searched) &&
      reduce_along(kValues<IsMax>, self, dim, keepdim, values) &&
      reduce_along(kIndex<IsMax>, searched, dim, keepdim, indices))
    return {values, indices};
  torch::jit::Stack stack{self, dim, keepdim, values, indices};
  call_cpu_fallback(kName<IsMax>, IsMax ? "dim_max" : "dim_min", stack);
  return {values, indices};
}
template <bool IsMax>
std::tuple<at::Tensor, at::Tensor> along_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  at::Tensor values = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(at::kLong));
  along_dim_out<IsMax>(self, dim, keepdim, values, indices);
  return {values, indices};
}

// amax/amin over several dimensions: one at a time, the largest first, so the others keep their index.
template <bool IsMax>
at::Tensor& over_dims_out(const at::Tensor& self, at::IntArrayRef dims, bool keepdim, at::Tensor& out) {
  std::vector<int64_t> reduced;
  for (int64_t dim : dims) reduced.push_back(at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1)));
  if (reduced.empty())
    for (int64_t dim = 0; dim < self.dim(); ++dim) reduced.push_back(dim);
  std::sort(reduced.rbegin(), reduced.rend());
  const bool distinct = std::adjacent_find(reduced.begin(), reduced.end()) == reduced.end();
  if (native_type(kValues<IsMax>, self) && out.scalar_type() == self.scalar_type() && distinct &&
      out.device() == self.device()) {
    at::Tensor partial = self;
    bool native = true;
    for (int64_t dim : reduced) {
      at::Tensor next = at::empty({0}, self.options());
      native = native && reduce_along(kValues<IsMax>, partial, dim, /*keepdim=*/true, next);
      partial = next;
    }
    if (native) {
      if (!keepdim)
        for (int64_t dim : reduced) partial = partial.squeeze(dim);
      at::native::resize_output(out, partial.sizes());
      return out.copy_(partial);
    }
  }
  torch::jit::Stack stack{self, dims.vec(), keepdim, out};
  call_cpu_fallback(IsMax ? "aten::amax" : "aten::amin", "out", stack);
  return out;
}
template <bool IsMax>
at::Tensor over_dims(const at::Tensor& self, at::IntArrayRef dims, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options());
  return over_dims_out<IsMax>(self, dims, keepdim, out);
}

// The max or min of every element, as a 0-dim tensor.
template <bool IsMax>
at::Tensor of_all(const at::Tensor& self) {
  at::Tensor out = at::empty({}, self.options());
  if (self.numel() > 0 && reduce_along(kValues<IsMax>, self.reshape({-1}), 0, false, out)) return out;
  torch::jit::Stack stack{self};
  call_cpu_fallback(kName<IsMax>, "", stack);
  return stack[0].toTensor();
}

// argmax/argmin along a dimension, or of the flattened tensor without one.
template <bool IsMax>
at::Tensor& arg_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  if (out.scalar_type() == at::kLong && self.numel() > 0) {
    if (dim.has_value() && reduce_along(kIndex<IsMax>, self, *dim, keepdim, out)) return out;
    if (!dim.has_value() && reduce_along(kIndex<IsMax>, self.reshape({-1}), 0, false, out)) {
      if (keepdim) out.resize_(std::vector<int64_t>(self.dim(), 1));
      return out;
    }
  }
  torch::jit::Stack stack{self, dim, keepdim, out};
  call_cpu_fallback(IsMax ? "aten::argmax" : "aten::argmin", "out", stack);
  return out;
}
template <bool IsMax>
at::Tensor arg(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return arg_out<IsMax>(self, dim, keepdim, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max.dim", along_dim<true>);
  m.impl("max.dim_max", along_dim_out<true>);
  m.impl("min.dim", along_dim<false>);
  m.impl("min.dim_min", along_dim_out<false>);
  m.impl("amax", over_dims<true>);
  m.impl("amax.out", over_dims_out<true>);
  m.impl("amin", over_dims<false>);
  m.impl("amin.out", over_dims_out<false>);
  m.impl("max", of_all<true>);
  m.impl("min", of_all<false>);
  m.impl("argmax", arg<true>);
  m.impl("argmax.out", arg_out<true>);
  m.impl("argmin", arg<false>);
  m.impl("argmin.out", arg_out<false>);
}

}  // namespace npusim::bridge
