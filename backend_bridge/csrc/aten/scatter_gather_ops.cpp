// torch.gather, scatter, scatter_add, index_add, index_put_ (so `x[idx] = v` and `x[idx] += v`'s accumulate) and
// advanced indexing with one index tensor (`x[:, idx]`, and so its gradient), natively, as indexed-DMA kernels. Each
// tensor is seen as outer x positions x inner around the indexed dimension; a tensor whose outer or inner dimensions do
// not collapse to one stride is made contiguous first. Indices are checked on the device: one outside the dimension is
// PyTorch's IndexError. Accumulating into complex64 accumulates each part. Boolean masks become the positions of their
// true elements (nonzero_ops.cpp); scatter_reduce and index_reduce are in scatter_reduce_ops.cpp.
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/broadcast_tensors.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include "bridge.h"
#include "pointwise_output.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

using emitter::IndexedMove;
using emitter::Strides3;

// The one stride of dimensions [begin, end) of a tensor with these sizes and strides, if they collapse to one.
std::optional<int64_t> collapsed_stride(at::IntArrayRef sizes, at::IntArrayRef strides, int64_t begin, int64_t end) {
  std::optional<int64_t> stride, next;  // next: the stride the next outer dimension must have
  for (int64_t k = end - 1; k >= begin; --k) {
    if (sizes[k] == 1) continue;
    if (next && strides[k] != *next) return std::nullopt;
    if (!stride) stride = strides[k];
    next = strides[k] * sizes[k];
  }
  return stride.value_or(0);
}

// A tensor's element strides over the iteration shape `sizes` (the index's), around `dim`.
std::optional<Strides3> strides_around(at::IntArrayRef sizes, at::IntArrayRef strides, int64_t dim) {
  const auto outer = collapsed_stride(sizes, strides, 0, dim);
  const auto inner = collapsed_stride(sizes, strides, dim + 1, static_cast<int64_t>(sizes.size()));
  if (!outer || !inner) return std::nullopt;
  return Strides3{*outer, strides[dim], *inner};
}

int64_t product(at::IntArrayRef sizes, int64_t begin, int64_t end) {
  int64_t result = 1;
  for (int64_t k = begin; k < end; ++k) result *= sizes[k];
  return result;
}

// One indexed move: `data` indexed along `dim` over the iteration shape `sizes`, `index` and `values` having that
// shape (or broadcasting to it through their strides). `data` is written in place by scatters. False when the
// emitter cannot express it.
bool move_indexed(IndexedMove move, const at::Tensor& data, int64_t dim, at::IntArrayRef sizes, const at::Tensor& index,
                  at::IntArrayRef index_strides, const at::Tensor& values, bool wrap_negative, const char* what) {
  const auto type = element_type(data.scalar_type());
  if (!type || values.scalar_type() != data.scalar_type() || index.device() != data.device() ||
      values.device() != data.device() || (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt))
    return false;
  const auto data_strides = strides_around(sizes, data.strides(), dim);
  const auto values_strides = strides_around(sizes, values.strides(), dim);
  const auto index_strides3 = strides_around(sizes, index_strides, dim);
  // Values a scatter reads, or an index of the iteration's shape, whose dimensions around `dim` do not collapse (a
  // permuted source, an index expanded over a leading dimension) are read through a dense copy.
  if (!values_strides && move != IndexedMove::Gather && values.sizes() == sizes)
    return move_indexed(move, data, dim, sizes, index, index_strides, values.contiguous(), wrap_negative, what);
  if (!index_strides3 && index.sizes() == sizes && index.strides() == index_strides) {
    const at::Tensor dense = index.contiguous();
    return move_indexed(move, data, dim, sizes, dense, dense.strides(), values, wrap_negative, what);
  }
  if (!data_strides || !values_strides || !index_strides3) return false;
  const int64_t rank = static_cast<int64_t>(sizes.size());
  emitter::IndexedElementsSpec spec;
  spec.move = move;
  spec.type = *type;
  spec.outer = product(sizes, 0, dim);
  spec.positions = sizes[dim];
  spec.inner = product(sizes, dim + 1, rank);
  spec.dim_size = data.size(dim);
  spec.data = *data_strides;
  spec.index = *index_strides3;
  spec.values = *values_strides;
  spec.index_bytes = static_cast<int>(index.element_size());
  spec.wrap_negative = wrap_negative;
  // Addresses of element (0, 0, 0); strides do the rest (an index tensor is addressed from its first element).
  const uint64_t addresses[] = {device_address(data), device_address(index), device_address(values)};
  return launched_checking_indices(
      runtime_device(data),
      [&] { launch_indexed_elements(data.device().index(), runtime_device(data), spec, addresses); }, what);
}

// The strides of a 1-D index over an iteration shape: its own along `dim`, 0 (the same index) elsewhere.
at::DimVector along(at::IntArrayRef sizes, int64_t dim, const at::Tensor& index) {
  at::DimVector strides(sizes.size(), 0);
  strides[dim] = index.stride(0);
  return strides;
}

// The part of `data` that an index of this shape reaches: all of `dim`, and the index's extent elsewhere.
at::Tensor reached_part(const at::Tensor& data, int64_t dim, at::IntArrayRef sizes) {
  at::Tensor part = data;
  for (int64_t k = 0; k < data.dim(); ++k)
    if (k != dim) part = part.narrow(k, 0, sizes[k]);
  return part;
}

// A scatter into `self` in place over the iteration shape `sizes`: through a contiguous copy of the part it reaches
// when that part's layout does not collapse. PyTorch's CPU scatter_add and index_add sum float16/bfloat16 in float32
// and round once, so those scatter-adds go through float32 copies (accumulate=True index_put_ rounds every sum, as the
// kernel does: `rounding_each_sum`). Their products, maxima and minima (scatter_reduce, index_reduce) go through
// float32 too.
bool scatter_in_place(IndexedMove move, const at::Tensor& self, int64_t dim, at::IntArrayRef sizes,
                      const at::Tensor& index, at::IntArrayRef index_strides, const at::Tensor& values,
                      bool wrap_negative, const char* what, bool rounding_each_sum = false) {
  const bool half = self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16;
  if (move != IndexedMove::Gather && move != IndexedMove::Scatter && half && !rounding_each_sum) {
    at::Tensor wide = self.to(at::kFloat);
    if (!scatter_in_place(move, wide, dim, sizes, index, index_strides, values.to(at::kFloat), wrap_negative, what))
      return false;
    self.copy_(wide);
    return true;
  }
  if (strides_around(sizes, self.strides(), dim))
    return move_indexed(move, self, dim, sizes, index, index_strides, values, wrap_negative, what);
  at::Tensor part = reached_part(self, dim, sizes), copy = part.contiguous();
  if (!move_indexed(move, copy, dim, sizes, index, index_strides, values, wrap_negative, what)) return false;
  part.copy_(copy);
  return true;
}

bool scatter_in_place(IndexedMove move, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                      const at::Tensor& values, const char* what) {
  return scatter_in_place(move, self, dim, index.sizes(), index, index.strides(), values, false, what);
}

// ---- gather
at::Tensor& npusim_gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                              at::Tensor& out) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  if (index.numel() == 0 && out.scalar_type() == self.scalar_type()) {  // PyTorch checks nothing else then
    at::native::resize_output(out, index.sizes());
    return out;
  }
  if (self.dim() == 0 && index.dim() <= 1 && out.scalar_type() == self.scalar_type()) {  // as a tensor of one element
    at::native::resize_output(out, index.sizes());
    at::Tensor flat = out.view({-1});
    npusim_gather_out(self.view({1}), 0, index.reshape({-1}), sparse_grad, flat);
    return out;
  }
  if (self.dim() > 0 && index.dim() == self.dim() && out.scalar_type() == self.scalar_type()) {
    at::native::gather_shape_check(self, wrapped, index);
    at::native::resize_output(out, index.sizes());
    if (out.numel() == 0) return out;
    at::Tensor result = out.is_contiguous() ? out : at::empty(index.sizes(), out.options());
    const at::Tensor data = strides_around(index.sizes(), self.strides(), wrapped)
                                ? self
                                : reached_part(self, wrapped, index.sizes()).contiguous();
    if (move_indexed(IndexedMove::Gather, data, wrapped, index.sizes(), index, index.strides(), result, false,
                     "index out of bounds in gather")) {
      if (!result.is_same(out)) out.copy_(result);
      return out;
    }
  }
  torch::jit::Stack stack{self, dim, index, sparse_grad, out};
  call_cpu_fallback("aten::gather", "out", stack);
  return out;
}

at::Tensor npusim_gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_gather_out(self, dim, index, sparse_grad, out);
}

// ---- scatter and scatter_add: into self in place (the functional forms scatter into a copy of self)
bool scatters_natively(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                       IndexedMove move) {
  if (index.numel() == 0 && src.scalar_type() == self.scalar_type()) return true;  // PyTorch checks nothing else then
  if (self.dim() == 0 && index.dim() <= 1 && src.dim() <= 1)  // a scalar, as a tensor of one element
    return scatters_natively(self.view({1}), 0, index.reshape({-1}), src.reshape({-1}), move);
  if (self.dim() == 0 || index.dim() != self.dim() || src.dim() != self.dim()) return false;
  at::native::scatter_shape_check(self, dim, index, src);
  if (index.numel() == 0) return true;
  // src is read over the index's shape: a view of its leading part.
  at::Tensor values = src;
  for (int64_t k = 0; k < src.dim(); ++k) values = values.narrow(k, 0, index.size(k));
  return scatter_in_place(
      move, self, dim, index, values,
      move == IndexedMove::ScatterAdd ? "index out of bounds in scatter_add" : "index out of bounds in scatter");
}

at::Tensor& npusim_scatter_src_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  if (scatters_natively(self, wrapped, index, src, IndexedMove::Scatter)) return self;
  torch::jit::Stack stack{self, dim, index, src};
  call_cpu_fallback("aten::scatter_", "src", stack);
  return self;
}

at::Tensor& npusim_scatter_value_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  // The value as a tensor broadcast over the index (stride 0 everywhere).
  const at::Tensor values = at::full({}, value, self.options()).expand(index.sizes());
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  if (self.dim() == 0 && index.dim() <= 1) {  // a scalar, as a tensor of one element
    at::Tensor element = self.view({1});
    npusim_scatter_value_(element, 0, index.reshape({-1}), value);
    return self;
  }
  if (self.dim() > 0 && index.dim() == self.dim()) {
    at::native::scatter_shape_check(self, wrapped, index, values);
    if (index.numel() == 0 ||
        scatter_in_place(IndexedMove::Scatter, self, wrapped, index, values, "index out of bounds in scatter"))
      return self;
  }
  torch::jit::Stack stack{self, dim, index, value};
  call_cpu_fallback("aten::scatter_", "value", stack);
  return self;
}

at::Tensor& npusim_scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, self.dim());
  if (is_float_kind(self.scalar_type()) || at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    if (scatters_natively(self, wrapped, index, src, IndexedMove::ScatterAdd)) return self;
  }
  torch::jit::Stack stack{self, dim, index, src};
  call_cpu_fallback("aten::scatter_add_", "", stack);
  return self;
}

// ---- index_add: out = self, then out.select(dim, index[j]) += alpha * source.select(dim, j), in j order
at::Tensor& npusim_index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                                 const at::Scalar& alpha, at::Tensor& out) {
  if (self.dim() == 0 && (dim == 0 || dim == -1) && index.numel() == 1 && source.numel() == 1 && source.dim() <= 1 &&
      out.scalar_type() == self.scalar_type()) {  // a scalar, as a tensor of one element
    at::native::resize_output(out, {});
    at::Tensor element = out.view({1});
    npusim_index_add_out(self.view({1}), 0, index.reshape({1}), source.reshape({1}), alpha, element);
    return out;
  }
  const int64_t wrapped = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  const bool addable = is_float_kind(self.scalar_type()) || at::isIntegralType(self.scalar_type(), false);
  bool native = addable && self.dim() > 0 && index.dim() <= 1 && source.dim() == self.dim() &&
                source.scalar_type() == self.scalar_type() && out.scalar_type() == self.scalar_type() &&
                index.device() == self.device() && source.device() == self.device() &&
                source.size(wrapped) == index.numel();
  for (int64_t k = 0; native && k < self.dim(); ++k) native = k == wrapped || source.size(k) == self.size(k);
  if (native) {
    if (!out.is_same(self)) {
      at::native::resize_output(out, self.sizes());
      out.copy_(self);
    }
    if (index.numel() == 0) return out;
    const at::Tensor flat = index.reshape({-1});
    const at::Tensor values = alpha.equal(1) ? source : source.mul(alpha);
    if (scatter_in_place(IndexedMove::ScatterAdd, out, wrapped, source.sizes(), flat,
                         along(source.sizes(), wrapped, flat), values, false, "index out of range in self"))
      return out;
  }
  torch::jit::Stack stack{self, dim, index, source, alpha, out};
  call_cpu_fallback("aten::index_add", "out", stack);
  return out;
}

at::Tensor npusim_index_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                            const at::Scalar& alpha) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return npusim_index_add_out(self, dim, index, source, alpha, out);
}

at::Tensor& npusim_index_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                              const at::Scalar& alpha) {
  return npusim_index_add_out(self, dim, index, source, alpha, self);
}

// The functional and out= forms: copy self into the result, then scatter in place.
template <typename Scatter, typename Source>
at::Tensor& scatter_into(const at::Tensor& self, at::Tensor& out, Scatter scatter, int64_t dim, const at::Tensor& index,
                         const Source& source) {
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  return scatter(out, dim, index, source);
}

at::Tensor npusim_scatter_src(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return scatter_into(self, out, npusim_scatter_src_, dim, index, src);
}
at::Tensor& npusim_scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   at::Tensor& out) {
  return scatter_into(self, out, npusim_scatter_src_, dim, index, src);
}
at::Tensor npusim_scatter_value(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return scatter_into(self, out, npusim_scatter_value_, dim, index, value);
}
at::Tensor& npusim_scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const at::Scalar& value, at::Tensor& out) {
  return scatter_into(self, out, npusim_scatter_value_, dim, index, value);
}
at::Tensor npusim_scatter_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  return scatter_into(self, out, npusim_scatter_add_, dim, index, src);
}
at::Tensor& npusim_scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   at::Tensor& out) {
  return scatter_into(self, out, npusim_scatter_add_, dim, index, src);
}

}  // namespace

bool gather_along(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& out,
                  bool wrap_negative, const char* what) {
  return move_indexed(IndexedMove::Gather, self, dim, out.sizes(), index, along(out.sizes(), dim, index), out,
                      wrap_negative, what);
}

bool scatter_along(IndexedMove move, const at::Tensor& self, int64_t dim, at::IntArrayRef sizes,
                   const at::Tensor& index, at::IntArrayRef index_strides, const at::Tensor& values, const char* what,
                   bool rounding_each_step) {
  return scatter_in_place(move, self, dim, sizes, index, index_strides, values, false, what, rounding_each_step);
}

namespace {

// ---- advanced indexing with one index tensor: x[:, idx] reads, x[:, idx] = v and x[:, idx] += v write
struct SingleIndex {
  int64_t dim;          // the indexed dimension of self
  at::Tensor index;     // flattened to 1-D, on self's device
  at::DimVector shape;  // self's shape with the indexed dimension replaced by the index's length
};

std::optional<SingleIndex> single_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  std::optional<SingleIndex> found;
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<at::Tensor> index = indices.get(k);
    if (!index || !index->defined()) {
      if (found) return std::nullopt;  // a slice after the index: PyTorch moves dimensions around
      continue;
    }
    if (found || (index->scalar_type() != at::kLong && index->scalar_type() != at::kInt)) return std::nullopt;
    if (static_cast<int64_t>(k) >= self.dim()) return std::nullopt;
    at::DimVector shape(self.sizes().begin(), self.sizes().end());
    shape[k] = index->numel();
    found = SingleIndex{static_cast<int64_t>(k), index->reshape({-1}).to(self.device()), shape};
  }
  return found;
}

// A boolean mask over self's leading dimensions as the only index (x[mask]), on self's device.
std::optional<at::Tensor> leading_mask(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  if (indices.size() != 1) return std::nullopt;
  const std::optional<at::Tensor> mask = indices.get(0);
  if (!mask || !mask->defined() || mask->scalar_type() != at::kBool || mask->dim() == 0 || mask->dim() > self.dim() ||
      mask->sizes() != self.sizes().slice(0, mask->dim()))
    return std::nullopt;
  return mask->to(self.device());
}

// self with its first `dims` dimensions flattened into one.
at::Tensor rows_of(const at::Tensor& self, int64_t dims) {
  at::DimVector shape{-1};
  shape.append(self.sizes().begin() + dims, self.sizes().end());
  return self.reshape(shape);
}

at::Tensor npusim_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices);

// Several integer index tensors on adjacent dimensions (x[i, j], x[:, i, j] = v): each is checked and its negative
// entries wrapped by a gather from the arange of its dimension, and they combine (broadcast) into one linear index
// over those dimensions flattened, so that the single-index kernels do the rest; as in PyTorch, the index shape
// takes the indexed dimensions' place.
struct CombinedIndex {
  int64_t first, count;                          // the indexed dimensions
  c10::List<std::optional<at::Tensor>> indices;  // for self with them flattened: slices, then the linear index
};
std::optional<CombinedIndex> combined_index(const at::Tensor& self,
                                            const c10::List<std::optional<at::Tensor>>& indices) {
  int64_t first = 0;
  std::vector<at::Tensor> tensors;
  bool after_indices = false;  // a slice followed the index tensors
  for (size_t k = 0; k < indices.size(); ++k) {
    const std::optional<at::Tensor> index = indices.get(k);
    if (!index || !index->defined()) {
      after_indices = !tensors.empty();
      continue;
    }
    if (after_indices || (index->scalar_type() != at::kLong && index->scalar_type() != at::kInt)) return std::nullopt;
    if (tensors.empty()) first = static_cast<int64_t>(k);
    tensors.push_back(*index);
  }
  const auto count = static_cast<int64_t>(tensors.size());
  if (count < 2 || first + count > self.dim()) return std::nullopt;
  for (at::Tensor& index : tensors) index = index.to(self.device(), at::kLong);
  const std::vector<at::Tensor> broadcast = at::broadcast_tensors(tensors);
  at::Tensor linear;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t size = self.size(first + k);
    const at::Tensor positions = at::arange(size, self.options().dtype(at::kLong));
    const at::Tensor wrapped = npusim_index(positions, c10::List<std::optional<at::Tensor>>({broadcast[k]}));
    linear = k == 0 ? wrapped : linear.mul(size).add_(wrapped);
  }
  c10::List<std::optional<at::Tensor>> flat(std::vector<std::optional<at::Tensor>>(first, std::nullopt));
  flat.push_back(linear);
  return CombinedIndex{first, count, flat};
}

at::Tensor npusim_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  if (const auto combined = combined_index(self, indices); combined && element_type(self.scalar_type()))
    return npusim_index(self.flatten(combined->first, combined->first + combined->count - 1), combined->indices);
  if (const auto mask = leading_mask(self, indices); mask && element_type(self.scalar_type()))
    return rows_of(self, mask->dim()).index_select(0, true_positions(*mask));
  const auto single = single_index(self, indices);
  if (single && element_type(self.scalar_type())) {
    at::Tensor out = at::empty(single->shape, self.options());
    if (out.numel() == 0 ||
        gather_along(self, single->dim, single->index, out, true, "index out of range in advanced indexing")) {
      // The index's own shape replaces the indexed dimension.
      const std::optional<at::Tensor> index = indices.get(single->dim);
      at::DimVector shape(self.sizes().begin(), self.sizes().begin() + single->dim);
      shape.append(index->sizes().begin(), index->sizes().end());
      shape.append(self.sizes().begin() + single->dim + 1, self.sizes().end());
      return out.view(shape);
    }
  }
  torch::jit::Stack stack{self, indices};
  call_cpu_fallback("aten::index", "Tensor", stack);
  return stack[0].toTensor();
}

at::Tensor& npusim_index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                                   const at::Tensor& values, bool accumulate, bool unsafe) {
  if (self.is_contiguous() && element_type(self.scalar_type()))
    if (const auto combined = combined_index(self, indices)) {
      at::Tensor flat = self.flatten(combined->first, combined->first + combined->count - 1);  // a view
      npusim_index_put_impl_(flat, combined->indices, values, accumulate, unsafe);
      return self;
    }
  if (const auto mask = leading_mask(self, indices); mask && values.scalar_type() == self.scalar_type()) {
    if (!accumulate && values.numel() == 1) {  // x[mask] = value: a masked fill, no compaction
      at::DimVector shape(mask->sizes().begin(), mask->sizes().end());
      shape.resize(self.dim(), 1);
      return self.masked_fill_(mask->view(shape), values.to(self.device()).reshape({}));
    }
    if (self.is_contiguous()) {
      at::Tensor rows = rows_of(self, mask->dim());
      npusim_index_put_impl_(rows, c10::List<std::optional<at::Tensor>>({true_positions(*mask)}), values, accumulate,
                             unsafe);
      return self;
    }
  }
  const auto single = single_index(self, indices);
  const bool addable = is_float_kind(self.scalar_type()) || at::isIntegralType(self.scalar_type(), false);
  if (single && values.scalar_type() == self.scalar_type() && (!accumulate || addable)) {
    if (single->index.numel() == 0 || self.numel() == 0) return self;
    // The values broadcast over the result of self[indices], then seen with the index flattened.
    const std::optional<at::Tensor> index = indices.get(single->dim);
    at::DimVector indexed_shape(self.sizes().begin(), self.sizes().begin() + single->dim);
    indexed_shape.append(index->sizes().begin(), index->sizes().end());
    indexed_shape.append(self.sizes().begin() + single->dim + 1, self.sizes().end());
    const at::Tensor spread = values.to(self.device()).expand(indexed_shape).reshape(single->shape);
    const IndexedMove move = accumulate ? IndexedMove::ScatterAdd : IndexedMove::Scatter;
    if (scatter_in_place(move, self, single->dim, single->shape, single->index,
                         along(single->shape, single->dim, single->index), spread, true,
                         "index out of range in index_put_", /*rounding_each_sum=*/true))
      return self;
  }
  // Accumulating into complex64: each part accumulates its own (the real views' trailing pair dimension is neither
  // indexed nor broadcast away).
  if (accumulate && self.scalar_type() == at::kComplexFloat && values.scalar_type() == at::kComplexFloat &&
      !self.is_conj() && self.device() == values.device()) {
    at::Tensor parts = at::view_as_real(self);
    npusim_index_put_impl_(parts, indices, at::view_as_real(values.resolve_conj()), accumulate, unsafe);
    return self;
  }
  torch::jit::Stack stack{self, indices, values, accumulate, unsafe};
  call_cpu_fallback("aten::_index_put_impl_", "", stack);
  return self;
}

// self[indices] laid out as PyTorch's meta function says (its TensorIterator follows the operands' memory order):
// the kernels' result is contiguous, which it is too when self and every index are.
at::Tensor npusim_index_laid_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  const at::Tensor result = npusim_index(self, indices);
  bool contiguous_operands = self.is_contiguous();
  for (const std::optional<at::Tensor>& index : indices)
    contiguous_operands &= !index || !index->defined() || index->is_contiguous();
  if (contiguous_operands || !result.is_privateuseone()) return result;
  c10::List<std::optional<at::Tensor>> meta_indices;
  for (const std::optional<at::Tensor>& index : indices)
    meta_indices.push_back(index && index->defined() ? std::optional<at::Tensor>(meta_like(*index)) : std::nullopt);
  return laid_out_as(result, at::index(meta_like(self), meta_indices));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather", npusim_gather);
  m.impl("gather.out", npusim_gather_out);
  m.impl("scatter.src", npusim_scatter_src);
  m.impl("scatter.src_out", npusim_scatter_src_out);
  m.impl("scatter_.src", npusim_scatter_src_);
  m.impl("scatter.value", npusim_scatter_value);
  m.impl("scatter.value_out", npusim_scatter_value_out);
  m.impl("scatter_.value", npusim_scatter_value_);
  m.impl("scatter_add", npusim_scatter_add);
  m.impl("scatter_add.out", npusim_scatter_add_out);
  m.impl("scatter_add_", npusim_scatter_add_);
  m.impl("index_add", npusim_index_add);
  m.impl("index_add.out", npusim_index_add_out);
  m.impl("index_add_", npusim_index_add_);
  m.impl("index.Tensor", npusim_index_laid_out);
  m.impl("_index_put_impl_", npusim_index_put_impl_);
}

}  // namespace npusim::bridge
