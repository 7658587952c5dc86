// histc of integer tensors, which CUDA computes and the CPU does not (code written for accelerators calls it: the
// load-balancing loss of mixture-of-experts models in transformers counts tokens per expert this way). Each element's
// bin is (x - min) * bins / (max - min), the top edge in the last bin, elements outside [min, max] ignored, as CUDA
// computes it; the counts come from comparing the bins with 0..bins-1 (a bool sum per bin), in the input's dtype.
// float32 histc as the CPU computes it; other float dtypes take the CPU fallback (the CPU counts in the input's
// dtype, so half and bfloat16 counts stop growing where that dtype runs out of integers: not worth mimicking).
// bincount of integers without weights as one accumulating index_add.
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>
#include <algorithm>
#include <cmath>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// The CPU's float histc, which for consistency with CUDA bins by arithmetic, not by searching the edges: with lo and
// hi min and max in float32 (the data's range when equal, then widened by one each side), an element x in [lo, hi] is
// in bin trunc((x - lo) * bins / (hi - lo)) (each step rounded to float32, the top edge in the last bin), so an
// element a rounding below an edge can land in the bin above it; NaN and elements outside are ignored. The bins are
// counted by comparing them with 0..bins-1, in blocks of elements so that the comparisons' mask stays small.
at::Tensor float_histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  double low = min.toDouble(), high = max.toDouble();
  if (low == high && self.numel() > 0) {
    const auto [data_min, data_max] = at::aminmax(self);
    low = data_min.item<double>();
    high = data_max.item<double>();
  }
  if (low == high) {
    low -= 1;
    high += 1;
  }
  TORCH_CHECK(std::isfinite(low) && std::isfinite(high), "torch.histc: range of [", low, ", ", high, "] is not finite");
  TORCH_CHECK(low < high, "torch.histc: max must be larger than min");
  const auto lowest = static_cast<float>(low), highest = static_cast<float>(high);
  // A tensor, not a scalar, so that the device divides rather than multiplies by a rounded reciprocal.
  const at::Tensor width = at::full({1}, highest - lowest, self.options());
  const at::Tensor values = self.reshape({-1});
  const at::Tensor bin_numbers = at::arange(bins, self.options().dtype(at::kLong)).unsqueeze(0);
  constexpr int64_t kComparisonsPerBlock = int64_t{1} << 22;
  const int64_t block = std::max<int64_t>(1, kComparisonsPerBlock / bins);
  at::Tensor counts = at::zeros({bins}, self.options().dtype(at::kLong));
  for (int64_t start = 0; start < values.numel(); start += block) {
    const at::Tensor part = values.narrow(0, start, std::min(block, values.numel() - start));
    const at::Tensor in_range = (part >= lowest).logical_and_(part <= highest);
    const at::Tensor bin = at::clamp(((part - lowest) * bins / width).trunc().to(at::kLong), std::nullopt, bins - 1);
    counts += (at::where(in_range, bin, -1).unsqueeze(1) == bin_numbers).sum(0);
  }
  return counts.to(self.scalar_type());
}

at::Tensor npusim_histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  if (self.scalar_type() == at::kFloat) return float_histc(self, bins, min, max);
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    torch::jit::Stack stack{self, bins, min, max};
    call_cpu_fallback("aten::histc", "", stack);
    return stack[0].toTensor();
  }
  TORCH_CHECK(bins > 0, "bins must be > 0");
  const at::Tensor values = self.reshape({-1}).to(at::kLong);  // int64: (x - min) * bins must not overflow
  int64_t low = min.toLong(), high = max.toLong();             // the bounds in an integer type, as CUDA casts them
  if (low == high && values.numel() > 0) {
    low = values.min().item<int64_t>();
    high = values.max().item<int64_t>();
  }
  if (low == high) {
    low -= 1;
    high += 1;
  }
  TORCH_CHECK(low < high, "max must be larger than min");
  const at::Tensor in_range = (values >= low).logical_and_(values <= high);
  const at::Tensor bin = at::clamp(at::floor_divide((values - low) * bins, high - low), std::nullopt, bins - 1);
  const at::Tensor counted = at::where(in_range, bin, -1);
  const at::Tensor edges = at::arange(bins, values.options());
  return (counted.unsqueeze(1) == edges.unsqueeze(0)).sum(0).to(self.scalar_type());
}

at::Tensor& npusim_histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                             at::Tensor& out) {
  const at::Tensor counts = npusim_histc(self, bins, min, max);
  at::native::resize_output(out, counts.sizes());
  return out.copy_(counts);
}

// bincount without weights: each value's count, one accumulating index_add of ones into max + 1 (or minlength) zeros.
// The CPU reads the extremes first too (one wait here). Weighted counts, which PyTorch sums in float64, take the
// fallback.
at::Tensor npusim_bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength) {
  const bool weighted = weights.has_value() && weights->defined();
  if (!weighted && self.device().is_privateuseone() && at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
    TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
    const at::TensorOptions longs = self.options().dtype(at::kLong);
    if (self.numel() == 0) return at::zeros({minlength}, longs);
    const at::Tensor values = self.to(at::kLong);
    const auto [smallest, largest] = at::aminmax(values);
    TORCH_CHECK(smallest.item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
    at::Tensor counts = at::zeros({std::max(largest.item<int64_t>() + 1, minlength)}, longs);
    return counts.index_add_(0, values, at::ones_like(values));
  }
  torch::jit::Stack stack{self, weights, minlength};
  call_cpu_fallback("aten::bincount", "", stack);
  return stack[0].toTensor();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("bincount", npusim_bincount);
  m.impl("histc", npusim_histc);
  m.impl("histc.out", npusim_histc_out);
}

}  // namespace npusim::bridge
