// scatter_reduce (sum, prod, mean, amax, amin), scatter with reduce="add" or "multiply", and index_reduce (prod,
// mean, amax, amin), with or without self's own values, natively: the reduction of each scattered element into its
// destination is an indexed move of the emitter (`scatter_along`: indexed DMA adds for sums, a read, combine and
// write back per element for the others, in the order of the index), as PyTorch's CPU kernels combine them
// (scatter_reduce's in float32 for float16 and bfloat16, rounding once; index_reduce's in the type, rounding every
// step). Without self, the destinations first take the reduction's identity; a mean is a sum divided by how many
// values each destination received (floored for integers). What the kernels cannot express, and invalid arguments
// (so that PyTorch's own error is raised), take the CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "bridge.h"

namespace npusim::bridge {
namespace {

using emitter::IndexedMove;

enum class Reduction { Sum, Prod, Mean, Amax, Amin };

std::optional<Reduction> reduction_named(c10::string_view reduce) {
  if (reduce == "sum") return Reduction::Sum;
  if (reduce == "prod") return Reduction::Prod;
  if (reduce == "mean") return Reduction::Mean;
  if (reduce == "amax" || reduce == "max") return Reduction::Amax;  // scatter_reduce takes max and min too
  if (reduce == "amin" || reduce == "min") return Reduction::Amin;
  return std::nullopt;
}

IndexedMove move_of(Reduction reduction) {
  switch (reduction) {
    case Reduction::Prod: return IndexedMove::ScatterMul;
    case Reduction::Amax: return IndexedMove::ScatterMax;
    case Reduction::Amin: return IndexedMove::ScatterMin;
    case Reduction::Sum:
    case Reduction::Mean: break;
  }
  return IndexedMove::ScatterAdd;
}

// What a destination starts from when self's own value is left out: x combined with it is x.
at::Scalar identity(Reduction reduction, at::ScalarType type) {
  const bool floating = at::isFloatingType(type);
  switch (reduction) {
    case Reduction::Prod: return 1;
    case Reduction::Amax:
      return floating ? at::Scalar(-std::numeric_limits<double>::infinity())
                      : at::Scalar(type == at::kByte ? int64_t{0} : std::numeric_limits<int64_t>::lowest());
    case Reduction::Amin:
      return floating ? at::Scalar(std::numeric_limits<double>::infinity())
                      : at::Scalar(type == at::kByte ? int64_t{255} : std::numeric_limits<int64_t>::max());
    case Reduction::Sum:
    case Reduction::Mean: break;
  }
  return 0;
}

// The lowest and highest values of integer types narrower than int64, which a Scalar of int64's extremes would
// overflow when filled.
at::Scalar fitted(const at::Scalar& value, at::ScalarType type) {
  if (!value.isIntegral(false) || type == at::kLong || type == at::kByte) return value;
  const int64_t v = value.toLong();
  switch (type) {
    case at::kChar: return std::clamp<int64_t>(v, INT8_MIN, INT8_MAX);
    case at::kShort: return std::clamp<int64_t>(v, INT16_MIN, INT16_MAX);
    case at::kInt: return std::clamp<int64_t>(v, INT32_MIN, INT32_MAX);
    default: return value;
  }
}

// The types the kernels reduce: floats and the signed integers and uint8 (not bool or complex), on one device.
bool reducible(const at::Tensor& self, const at::Tensor& index, const at::Tensor& values, const at::Tensor& out) {
  const at::ScalarType type = self.scalar_type();
  const bool integer =
      type == at::kLong || type == at::kInt || type == at::kShort || type == at::kChar || type == at::kByte;
  return (is_float_kind(type) || integer) && values.scalar_type() == type && out.scalar_type() == type &&
         index.device() == self.device() && values.device() == self.device() && self.dim() > 0;
}

// Reduces `values` (over the iteration shape `sizes`) into `out` in place along `dim` at the positions of `index`
// (read through `index_strides`); half-precision values combine in float32 or, `rounding_each_step`, in their type.
// False when a kernel cannot express it; `out` may then be partly written, and the caller starts again from self.
bool reduce_into(Reduction reduction, bool include_self, const at::Tensor& out, int64_t dim, at::IntArrayRef sizes,
                 const at::Tensor& index, at::IntArrayRef index_strides, const at::Tensor& values, const char* what,
                 bool rounding_each_step) {
  if (!include_self) {
    const at::Tensor start =
        at::full({}, fitted(identity(reduction, out.scalar_type()), out.scalar_type()), out.options()).expand(sizes);
    if (!scatter_along(IndexedMove::Scatter, out, dim, sizes, index, index_strides, start, what)) return false;
  }
  if (!scatter_along(move_of(reduction), out, dim, sizes, index, index_strides, values, what, rounding_each_step))
    return false;
  if (reduction != Reduction::Mean) return true;
  at::Tensor counts = include_self ? at::ones_like(out) : at::zeros_like(out);
  if (!scatter_along(IndexedMove::ScatterAdd, counts, dim, sizes, index, index_strides,
                     at::ones({}, out.options()).expand(sizes), what, rounding_each_step))
    return false;
  if (!include_self) counts.masked_fill_(counts.eq(0), 1);  // a destination that received nothing keeps its value
  if (at::isFloatingType(out.scalar_type()))
    out.div_(counts);
  else
    out.div_(counts, "floor");
  return true;
}

// ---- scatter_reduce: out = self, then out[..., index[i], ...] (reduce)= src[i] along dim
at::Tensor& npusim_scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                      const at::Tensor& src, c10::string_view reduce, bool include_self,
                                      at::Tensor& out) {
  if (self.dim() == 0 && (dim == 0 || dim == -1) && index.dim() <= 1 && src.dim() <= 1 &&
      out.scalar_type() == self.scalar_type()) {  // a scalar, as a tensor of one element
    at::native::resize_output(out, {});
    at::Tensor element = out.view({1});
    npusim_scatter_reduce_out(self.view({1}), 0, index.reshape({-1}), src.reshape({-1}), reduce, include_self, element);
    return out;
  }
  const std::optional<Reduction> reduction = reduction_named(reduce);
  if (reduction && reducible(self, index, src, out) && index.dim() == self.dim() && src.dim() == self.dim()) {
    const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
    at::native::scatter_gather_dtype_check("scatter_reduce", self, index, src);
    at::native::scatter_shape_check(self, wrapped, index, src);
    at::native::resize_output(out, self.sizes());
    if (!out.is_same(self)) out.copy_(self);
    if (index.numel() == 0) return out;
    at::Tensor values = src;  // read over the index's shape: a view of its leading part
    for (int64_t k = 0; k < src.dim(); ++k) values = values.narrow(k, 0, index.size(k));
    const at::Tensor before = out.is_same(self) ? self.clone() : at::Tensor();
    if (reduce_into(*reduction, include_self, out, wrapped, index.sizes(), index, index.strides(), values,
                    "index out of bounds in scatter_reduce", /*rounding_each_step=*/false))
      return out;
    if (before.defined()) out.copy_(before);  // self for the fallback, as the caller gave it
  }
  if (reduce == "sum" && include_self && self.scalar_type() == at::kComplexFloat &&
      out.scalar_type() == at::kComplexFloat && src.scalar_type() == at::kComplexFloat &&
      self.device().is_privateuseone() && out.device() == self.device() && src.device() == self.device()) {
    // A complex sum is its parts' sums: scatter_add, which runs per part (complex_in_parts.cpp).
    at::native::resize_output(out, self.sizes());
    if (!out.is_same(self)) out.copy_(self);
    return out.scatter_add_(dim, index, src);
  }
  torch::jit::Stack stack{self, dim, index, src, std::string(reduce), include_self, out};
  call_cpu_fallback("aten::scatter_reduce", "two_out", stack);
  return out;
}

at::Tensor npusim_scatter_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                 c10::string_view reduce, bool include_self) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return npusim_scatter_reduce_out(self, dim, index, src, reduce, include_self, out);
}

at::Tensor& npusim_scatter_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   c10::string_view reduce, bool include_self) {
  return npusim_scatter_reduce_out(self, dim, index, src, reduce, include_self, self);
}

// ---- scatter with reduce="add" or "multiply" (the older form): scatter_reduce's sum or prod, self included
c10::string_view reduction_of_scatter(c10::string_view reduce) {
  TORCH_CHECK(reduce == "add" || reduce == "multiply", "reduce argument must be either add or multiply.");
  return reduce == "add" ? "sum" : "prod";
}

at::Tensor& npusim_scatter_src_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                          const at::Tensor& src, c10::string_view reduce, at::Tensor& out) {
  return npusim_scatter_reduce_out(self, dim, index, src, reduction_of_scatter(reduce), true, out);
}
at::Tensor npusim_scatter_src_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const at::Tensor& src, c10::string_view reduce) {
  return npusim_scatter_reduce(self, dim, index, src, reduction_of_scatter(reduce), true);
}
at::Tensor& npusim_scatter_src_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                       c10::string_view reduce) {
  return npusim_scatter_reduce_out(self, dim, index, src, reduction_of_scatter(reduce), true, self);
}

// The value as a tensor over the index (stride 0 everywhere).
at::Tensor value_over(const at::Tensor& self, const at::Tensor& index, const at::Scalar& value) {
  return at::full({}, value, self.options()).expand(index.sizes());
}
at::Tensor& npusim_scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                            const at::Scalar& value, c10::string_view reduce, at::Tensor& out) {
  return npusim_scatter_src_reduce_out(self, dim, index, value_over(self, index, value), reduce, out);
}
at::Tensor npusim_scatter_value_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                       const at::Scalar& value, c10::string_view reduce) {
  return npusim_scatter_src_reduce(self, dim, index, value_over(self, index, value), reduce);
}
at::Tensor& npusim_scatter_value_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index,
                                         const at::Scalar& value, c10::string_view reduce) {
  return npusim_scatter_src_reduce_(self, dim, index, value_over(self, index, value), reduce);
}

// ---- index_reduce: out = self, then out.select(dim, index[j]) (reduce)= source.select(dim, j), in j order
at::Tensor& npusim_index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                    const at::Tensor& source, c10::string_view reduce, bool include_self,
                                    at::Tensor& out) {
  if (self.dim() == 0 && (dim == 0 || dim == -1) && index.dim() <= 1 && source.dim() <= 1 &&
      out.scalar_type() == self.scalar_type()) {  // a scalar, as a tensor of one element
    at::native::resize_output(out, {});
    at::Tensor element = out.view({1});
    npusim_index_reduce_out(self.view({1}), 0, index.reshape({-1}), source.reshape({-1}), reduce, include_self,
                            element);
    return out;
  }
  const std::optional<Reduction> reduction = reduction_named(reduce);
  if (reduction && (reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin") &&
      reducible(self, index, source, out) && index.dim() <= 1 &&
      (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt) && source.dim() == self.dim()) {
    const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
    bool shapes_match = source.size(wrapped) == index.numel();
    for (int64_t k = 0; shapes_match && k < self.dim(); ++k)
      shapes_match = k == wrapped || source.size(k) == self.size(k);
    if (shapes_match) {
      at::native::resize_output(out, self.sizes());
      if (!out.is_same(self)) out.copy_(self);
      if (index.numel() == 0) return out;
      const at::Tensor flat = index.reshape({-1});
      // The index is the same at every point of the source but its position along dim.
      at::DimVector index_strides(source.dim(), 0);
      index_strides[wrapped] = flat.stride(0);
      const at::Tensor before = out.is_same(self) ? self.clone() : at::Tensor();
      if (reduce_into(*reduction, include_self, out, wrapped, source.sizes(), flat, index_strides, source,
                      "index out of range in self", /*rounding_each_step=*/true))
        return out;
      if (before.defined()) out.copy_(before);
    }
  }
  torch::jit::Stack stack{self, dim, index, source, std::string(reduce), include_self, out};
  call_cpu_fallback("aten::index_reduce", "out", stack);
  return out;
}

at::Tensor npusim_index_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                               c10::string_view reduce, bool include_self) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return npusim_index_reduce_out(self, dim, index, source, reduce, include_self, out);
}

at::Tensor& npusim_index_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                                 c10::string_view reduce, bool include_self) {
  return npusim_index_reduce_out(self, dim, index, source, reduce, include_self, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("scatter_reduce.two", npusim_scatter_reduce);
  m.impl("scatter_reduce.two_out", npusim_scatter_reduce_out);
  m.impl("scatter_reduce_.two", npusim_scatter_reduce_);
  m.impl("scatter.reduce", npusim_scatter_src_reduce);
  m.impl("scatter.reduce_out", npusim_scatter_src_reduce_out);
  m.impl("scatter_.reduce", npusim_scatter_src_reduce_);
  m.impl("scatter.value_reduce", npusim_scatter_value_reduce);
  m.impl("scatter.value_reduce_out", npusim_scatter_value_reduce_out);
  m.impl("scatter_.value_reduce", npusim_scatter_value_reduce_);
  m.impl("index_reduce", npusim_index_reduce);
  m.impl("index_reduce.out", npusim_index_reduce_out);
  m.impl("index_reduce_", npusim_index_reduce_);
}

}  // namespace npusim::bridge
