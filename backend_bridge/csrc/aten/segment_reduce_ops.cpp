// torch._segment_reduce: sum, mean, max, min or prod over consecutive segments of one dimension, the segments given by
// their lengths or offsets (one row of them per index of the dimensions before it), composed from native kernels:
// each element's segment is the number of segment ends at or before it (a searchsorted of the running lengths), and
// a scatter_reduce along the dimension folds the elements into a result filled with `initial` (or the reduction's
// identity), as the CPU folds `initial` into every segment. A mean is that sum over the segment's length; an empty
// segment keeps `initial`, or gets the identity (NaN for a mean). Indices instead of lengths take the CPU fallback,
// which refuses them as PyTorch does. float16 and bfloat16 data is reduced in float32 and rounded once. The gradient
// (_segment_reduce_backward) gathers each segment's gradient back to its elements the same way.
#include <ATen/TensorOperators.h>
#include <ATen/ops/all.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/scatter_add.h>
#include <ATen/ops/scatter_reduce.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <limits>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// The fold's identity (what an element left out contributes), the value of a segment of no elements when no
// `initial` is given, and scatter_reduce's name for the fold.
struct Reduction {
  double identity;
  double empty;
  const char* scatter;
};

std::optional<Reduction> reduction(c10::string_view reduce) {
  constexpr double infinity = std::numeric_limits<double>::infinity();
  if (reduce == "max") return Reduction{-infinity, -infinity, "amax"};
  if (reduce == "min") return Reduction{infinity, infinity, "amin"};
  if (reduce == "sum") return Reduction{0.0, 0.0, "sum"};
  if (reduce == "prod") return Reduction{1.0, 1.0, "prod"};
  if (reduce == "mean") return Reduction{0.0, std::numeric_limits<double>::quiet_NaN(), "sum"};  // then divided
  return {};
}

// Each element's segment along `axis`: `index` (data's shape; clamped to the last segment) and whether it is in one
// (`inside`, broadcast over the dimensions after the axis). With unsafe=True the lengths may cover less than the
// dimension: the elements past the last segment are in none.
struct Membership {
  at::Tensor index;
  at::Tensor inside;
};
Membership membership(const at::Tensor& data, const at::Tensor& segment_lengths, int64_t axis) {
  const int64_t elements = data.size(axis), segments = segment_lengths.size(-1);
  const at::Tensor ends = at::cumsum(segment_lengths, -1);
  // Element j of each row is in the segment of the first end past j.
  std::vector<int64_t> row_shape = segment_lengths.sizes().vec();
  row_shape.back() = elements;
  const at::Tensor positions = at::arange(elements, ends.options()).expand(row_shape).contiguous();
  const at::Tensor segment = at::searchsorted(ends.contiguous(), positions, /*out_int32=*/false, /*right=*/true);
  std::vector<int64_t> index_shape = segment.sizes().vec();
  index_shape.resize(data.dim(), 1);  // broadcast over the dimensions after the axis
  const at::Tensor inside = at::lt(segment, segments);
  return {at::where(inside, segment, segments - 1).reshape(index_shape).expand(data.sizes()),
          inside.reshape(index_shape)};
}

// Whether an optional tensor is given: autograd hands a saved None back as an undefined tensor.
bool given(const std::optional<at::Tensor>& tensor) { return tensor.has_value() && tensor->defined(); }

// The lengths of the segments, from lengths or offsets.
at::Tensor lengths_of(const std::optional<at::Tensor>& lengths, const std::optional<at::Tensor>& offsets) {
  return (given(lengths) ? *lengths : at::diff(*offsets, 1, -1)).to(at::kLong);
}

at::Tensor npusim_segment_reduce(const at::Tensor& data, c10::string_view reduce,
                                 const std::optional<at::Tensor>& lengths, const std::optional<at::Tensor>& indices,
                                 const std::optional<at::Tensor>& offsets, int64_t axis, bool unsafe,
                                 const std::optional<at::Scalar>& initial) {
  const std::optional<Reduction> kind = reduction(reduce);
  const at::Tensor bounds = given(lengths) ? *lengths : (given(offsets) ? *offsets : at::Tensor());
  const bool native = kind && !indices && bounds.defined() && bounds.device() == data.device() &&
                      is_float_kind(data.scalar_type()) && data.dim() > 0 && !at::isFloatingType(bounds.scalar_type());
  if (!native || axis < 0 || axis >= data.dim() || bounds.dim() != axis + 1) {
    torch::jit::Stack stack{data, std::string(reduce), lengths, indices, offsets, axis, unsafe, initial};
    call_cpu_fallback("aten::segment_reduce", "", stack);
    return stack[0].toTensor();
  }
  if (data.scalar_type() != at::kFloat)
    return npusim_segment_reduce(data.to(at::kFloat), reduce, lengths, indices, offsets, axis, unsafe, initial)
        .to(data.scalar_type());
  const at::Tensor segment_lengths = lengths_of(lengths, offsets);
  const int64_t elements = data.size(axis), segments = segment_lengths.size(-1);
  const at::Tensor ends = at::cumsum(segment_lengths, -1);
  if (!unsafe) {  // the CPU's checks (each a wait for the device)
    TORCH_CHECK(at::all(at::ge(segment_lengths, 0)).item<bool>(), "lengths contains negative value!");
    TORCH_CHECK(segments == 0 || at::all(at::eq(ends.select(-1, segments - 1), elements)).item<bool>(),
                "Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) when !unsafe.");
  }
  std::vector<int64_t> result_shape = data.sizes().vec();
  result_shape[axis] = segments;
  const double empty_value = initial ? initial->toDouble() : kind->empty;
  if (segments == 0 || elements == 0) return at::full(result_shape, empty_value, data.options());
  const at::Tensor start = at::full(result_shape, initial ? initial->toDouble() : kind->identity, data.options());
  const Membership member = membership(data, segment_lengths, axis);
  // Elements in no segment join the last one as the fold's identity, which changes nothing.
  const at::Tensor folded = at::where(member.inside, data, at::scalar_tensor(kind->identity, data.options()));
  const at::Tensor& index = member.index;
  const at::Tensor result = at::scatter_reduce(start, axis, index, folded, kind->scatter, /*include_self=*/true);
  if (reduce != "mean") return result.contiguous();
  std::vector<int64_t> count_shape = segment_lengths.sizes().vec();
  count_shape.resize(data.dim(), 1);
  const at::Tensor counts = segment_lengths.reshape(count_shape).to(at::kFloat);
  const at::Tensor empty = at::scalar_tensor(empty_value, data.options());
  return at::where(at::gt(counts, 0), at::div(result, counts), empty).contiguous();  // as PyTorch lays it out
}

// The gradient of each element, as the CPU's kernel defines it: its segment's gradient for a sum, divided by the
// segment's length for a mean; for max and min, the segment's gradient on the elements equal to the result (or NaN),
// shared among them when there are several (only where it is positive: the CPU divides no other); for prod, the
// segment's gradient times the result over the element, or, for a zero or NaN element, times the product of the
// segment's other elements and `initial`.
at::Tensor npusim_segment_reduce_backward(const at::Tensor& grad, const at::Tensor& output, const at::Tensor& data,
                                          c10::string_view reduce, const std::optional<at::Tensor>& lengths,
                                          const std::optional<at::Tensor>& offsets, int64_t axis,
                                          const std::optional<at::Scalar>& initial) {
  const std::optional<Reduction> kind = reduction(reduce);
  const at::Tensor bounds = given(lengths) ? *lengths : (given(offsets) ? *offsets : at::Tensor());
  const bool native = kind && bounds.defined() && is_float_kind(data.scalar_type()) && data.dim() > 0 &&
                      grad.scalar_type() == data.scalar_type() && output.scalar_type() == data.scalar_type() &&
                      !at::isFloatingType(bounds.scalar_type()) && axis >= 0 && axis < data.dim() &&
                      bounds.dim() == axis + 1 && grad.sizes() == output.sizes() && grad.dim() == data.dim();
  const at::Device device = data.device();
  if (!native || bounds.device() != device || grad.device() != device || output.device() != device) {
    torch::jit::Stack stack{grad, output, data, std::string(reduce), lengths, offsets, axis, initial};
    call_cpu_fallback("aten::_segment_reduce_backward", "", stack);
    return stack[0].toTensor();
  }
  if (data.scalar_type() != at::kFloat)
    return npusim_segment_reduce_backward(grad.to(at::kFloat), output.to(at::kFloat), data.to(at::kFloat), reduce,
                                          lengths, offsets, axis, initial)
        .to(data.scalar_type());
  const at::Tensor segment_lengths = lengths_of(lengths, offsets);
  if (segment_lengths.size(-1) == 0 || data.numel() == 0) return at::zeros(data.sizes(), data.options());
  const Membership member = membership(data, segment_lengths, axis);
  const auto per_element = [&](const at::Tensor& per_segment) { return at::gather(per_segment, axis, member.index); };
  const at::Tensor zero = at::scalar_tensor(0.0, data.options());
  // How many elements of each segment satisfy `condition`, at each element.
  const auto segment_count = [&](const at::Tensor& condition) {
    const at::Tensor counted = at::where(member.inside, condition.to(at::kFloat), zero);
    return per_element(at::zeros(grad.sizes(), data.options()).scatter_add_(axis, member.index, counted));
  };
  at::Tensor gradient;
  if (reduce == "sum") {
    gradient = per_element(grad);
  } else if (reduce == "mean") {
    std::vector<int64_t> count_shape = segment_lengths.sizes().vec();
    count_shape.resize(data.dim(), 1);
    gradient = per_element(grad / at::clamp_min(segment_lengths.reshape(count_shape).to(at::kFloat), 1));
  } else if (reduce == "max" || reduce == "min") {
    const at::Tensor picked = at::logical_or(at::isnan(data), at::eq(data, per_element(output)));
    const at::Tensor shared = at::where(picked, per_element(grad), zero);
    const at::Tensor pickers = segment_count(picked);
    gradient = at::where(at::logical_and(at::ge(pickers, 2), at::gt(shared, 0)), shared / pickers, shared);
  } else {  // prod
    const at::Tensor special = at::logical_or(at::isnan(data), at::eq(data, 0));
    const at::Tensor nans = segment_count(at::isnan(data)) - at::isnan(data).to(at::kFloat);  // the others'
    const at::Tensor zeros = segment_count(at::eq(data, 0)) - at::eq(data, 0).to(at::kFloat);
    const at::Tensor ordinary = at::where(at::logical_and(member.inside, at::logical_not(special)), data, 1.0);
    const double start = initial ? initial->toDouble() : 1.0;
    const at::Tensor product = per_element(
        at::full(grad.sizes(), start, data.options()).scatter_reduce_(axis, member.index, ordinary, "prod", true));
    const at::Tensor nan = at::scalar_tensor(std::numeric_limits<double>::quiet_NaN(), data.options());
    const at::Tensor others = at::where(at::gt(nans, 0), nan, at::where(at::gt(zeros, 0), product * 0, product));
    gradient = at::where(special, per_element(grad) * others, per_element(grad * output) / data);
  }
  return at::where(member.inside, gradient, zero).contiguous();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("segment_reduce", npusim_segment_reduce);
  m.impl("_segment_reduce_backward", npusim_segment_reduce_backward);
}

}  // namespace npusim::bridge
