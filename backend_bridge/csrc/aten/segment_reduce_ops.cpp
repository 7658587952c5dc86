// torch._segment_reduce: sum, mean, max, min or prod over consecutive segments of one dimension, the segments given by
// their lengths or offsets (one row of them per index of the dimensions before it), composed from native kernels:
// each element's segment is the number of segment ends at or before it (a searchsorted of the running lengths), and
// a scatter_reduce along the dimension folds the elements into a result filled with `initial` (or the reduction's
// identity), as the CPU folds `initial` into every segment. A mean is that sum over the segment's length; an empty
// segment keeps `initial`, or gets the identity (NaN for a mean). Indices instead of lengths take the CPU fallback,
// which refuses them as PyTorch does. float16 and bfloat16 data is reduced in float32 and rounded once.
#include <ATen/ops/all.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/scatter_reduce.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/where.h>
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

at::Tensor npusim_segment_reduce(const at::Tensor& data, c10::string_view reduce,
                                 const std::optional<at::Tensor>& lengths, const std::optional<at::Tensor>& indices,
                                 const std::optional<at::Tensor>& offsets, int64_t axis, bool unsafe,
                                 const std::optional<at::Scalar>& initial) {
  const std::optional<Reduction> kind = reduction(reduce);
  const at::Tensor& given = lengths ? *lengths : (offsets ? *offsets : at::Tensor());
  const bool native = kind && !indices && given.defined() && given.device() == data.device() &&
                      is_float_kind(data.scalar_type()) && data.dim() > 0 && !at::isFloatingType(given.scalar_type());
  if (!native || axis < 0 || axis >= data.dim() || given.dim() != axis + 1) {
    torch::jit::Stack stack{data, std::string(reduce), lengths, indices, offsets, axis, unsafe, initial};
    call_cpu_fallback("aten::segment_reduce", "", stack);
    return stack[0].toTensor();
  }
  if (data.scalar_type() != at::kFloat)
    return npusim_segment_reduce(data.to(at::kFloat), reduce, lengths, indices, offsets, axis, unsafe, initial)
        .to(data.scalar_type());
  const at::Tensor segment_lengths = (lengths ? *lengths : at::diff(*offsets, 1, -1)).to(at::kLong);
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
  // Element j of each row is in the segment of the first end past j.
  std::vector<int64_t> row_shape = segment_lengths.sizes().vec();
  row_shape.back() = elements;
  const at::Tensor positions = at::arange(elements, ends.options()).expand(row_shape).contiguous();
  const at::Tensor segment = at::searchsorted(ends.contiguous(), positions, /*out_int32=*/false, /*right=*/true);
  std::vector<int64_t> index_shape = segment.sizes().vec();
  index_shape.resize(data.dim(), 1);  // broadcast over the dimensions after the axis
  // With unsafe=True the lengths may cover less than the dimension: elements past the last segment are left out (they
  // join the last segment as the fold's identity, which changes nothing).
  const at::Tensor inside = at::lt(segment, segments);
  const at::Tensor folded =
      at::where(inside.reshape(index_shape), data, at::scalar_tensor(kind->identity, data.options()));
  const at::Tensor index = at::where(inside, segment, segments - 1).reshape(index_shape).expand(data.sizes());

  const at::Tensor result = at::scatter_reduce(start, axis, index, folded, kind->scatter, /*include_self=*/true);
  if (reduce != "mean") return result.contiguous();
  std::vector<int64_t> count_shape = segment_lengths.sizes().vec();
  count_shape.resize(data.dim(), 1);
  const at::Tensor counts = segment_lengths.reshape(count_shape).to(at::kFloat);
  const at::Tensor empty = at::scalar_tensor(empty_value, data.options());
  return at::where(at::gt(counts, 0), at::div(result, counts), empty).contiguous();  // as PyTorch lays it out
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("segment_reduce", npusim_segment_reduce); }

}  // namespace npusim::bridge
