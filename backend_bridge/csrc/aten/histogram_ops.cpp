// histc of integer tensors, which CUDA computes and the CPU does not (code written for accelerators calls it: the
// load-balancing loss of mixture-of-experts models in transformers counts tokens per expert this way). Each element's
// bin is (x - min) * bins / (max - min), the top edge in the last bin, elements outside [min, max] ignored, as CUDA
// computes it; the counts come from comparing the bins with 0..bins-1 (a bool sum per bin), in the input's dtype.
// Float inputs take the CPU fallback, whose kernel is PyTorch's own.
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

at::Tensor npusim_histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", npusim_histc);
  m.impl("histc.out", npusim_histc_out);
}

}  // namespace npusim::bridge
