// Bicubic resizing (F.interpolate(mode="bicubic"), as vision transformers resize their position embeddings) forward
// and backward, float32 (half precision widened to it and rounded once, as the CPU computes it). Bicubic interpolation
// is separable: along each dimension, output o is four taps of the input around its source index, weighted by the
// cubic convolution kernel (A = -0.75), the taps clamped to the input's edge. So each dimension is a product with an
// [out, in] weight matrix built on the host as PyTorch's kernels compute the weights (in float32), and the resize is
// the window matrices' product on both sides of every plane (window_matrices.h), columns first as the CPU nests it;
// the backward multiplies by the transposed matrices. The out= forms are out_variants.cpp's.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/upsample_bicubic2d_backward.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "bridge.h"
#include "pointwise_output.h"
#include "window_matrices.h"

namespace npusim::bridge {
namespace {

// PyTorch's cubic convolution weights of the four taps at fraction t past the source index's floor.
std::array<float, 4> cubic_coefficients(float t) {
  constexpr float A = -0.75f;
  const auto near = [&](float x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };       // |x| <= 1
  const auto far = [&](float x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  const float mirrored = 1 - t;
  return {far(t + 1), near(t), near(mirrored), far(mirrored + 1)};
}

// [out, in]: row o holds output o's four tap weights at their (clamped) input indices, as PyTorch computes them:
// the source index scale * o (aligning corners) or scale * (o + 0.5) - 0.5, its floor and fraction bounded to the
// input.
at::Tensor cubic_weights(int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                         const at::Tensor& like) {
  float ratio;
  if (align_corners)
    ratio = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  else
    ratio = scale && *scale > 0 ? static_cast<float>(1.0 / *scale) : static_cast<float>(in) / static_cast<float>(out);
  at::Tensor weights = at::zeros({out, in}, at::TensorOptions().dtype(at::kFloat));
  auto entries = weights.accessor<float, 2>();
  for (int64_t o = 0; o < out; ++o) {
    const float source = align_corners ? ratio * static_cast<float>(o) : ratio * (static_cast<float>(o) + 0.5f) - 0.5f;
    const int64_t floor = std::min(static_cast<int64_t>(std::floor(source)), in - 1);
    const float fraction = std::min(std::max(source - static_cast<float>(floor), 0.0f), 1.0f);
    const std::array<float, 4> coefficients = cubic_coefficients(fraction);
    for (int64_t k = 0; k < 4; ++k) entries[o][std::clamp<int64_t>(floor - 1 + k, 0, in - 1)] += coefficients[k];
  }
  return weights.to(like.device());
}

bool resizes_natively(const at::Tensor& t) { return t.scalar_type() == at::kFloat && t.dim() == 4; }

at::Tensor npusim_upsample_bicubic2d(const at::Tensor& input, at::IntArrayRef output_size, bool align_corners,
                                     std::optional<double> scales_h, std::optional<double> scales_w) {
  // PyTorch's checks and layout, not its meta function: torch 2.13's takes half a second a call (a Python
  // decomposition run on meta tensors).
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
  TORCH_CHECK(input.dim() == 4, "It is expected input_size equals to 4, but got size ", input.dim());
  TORCH_CHECK(input.size(2) > 0 && input.size(3) > 0 && output_size[0] > 0 && output_size[1] > 0,
              "Input and output sizes should be greater than 0, but got input (H: ", input.size(2),
              ", W: ", input.size(3), ") output (H: ", output_size[0], ", W: ", output_size[1], ")");
  const at::Tensor expected = at::empty({input.size(0), input.size(1), output_size[0], output_size[1]},
                                        input.options().device(at::kMeta).memory_format(input.suggest_memory_format()));
  if (!resizes_natively(input)) {
    torch::jit::Stack stack{input, output_size.vec(), align_corners, scales_h, scales_w};
    call_cpu_fallback("aten::upsample_bicubic2d", "", stack);
    return stack[0].toTensor();
  }
  if (input.numel() == 0) return at::empty_like(expected, input.options());
  const int64_t height = input.size(2), width = input.size(3);
  const at::Tensor planes = input.reshape({-1, height, width});
  const at::Tensor result =
      apply_on_both_sides(planes, cubic_weights(height, output_size[0], align_corners, scales_h, input),
                          cubic_weights(width, output_size[1], align_corners, scales_w, input));
  return laid_out_as(result.view(expected.sizes()), expected);
}

at::Tensor npusim_upsample_bicubic2d_backward(const at::Tensor& grad_output, at::IntArrayRef output_size,
                                              at::IntArrayRef input_size, bool align_corners,
                                              std::optional<double> scales_h, std::optional<double> scales_w) {
  const at::Tensor expected = at::upsample_bicubic2d_backward(meta_like(grad_output), output_size, input_size,
                                                              align_corners, scales_h, scales_w);
  if (!resizes_natively(grad_output)) {
    torch::jit::Stack stack{grad_output, output_size.vec(), input_size.vec(), align_corners, scales_h, scales_w};
    call_cpu_fallback("aten::upsample_bicubic2d_backward", "", stack);
    return stack[0].toTensor();
  }
  if (grad_output.numel() == 0) return at::zeros_like(expected, grad_output.options());
  const int64_t height = input_size[2], width = input_size[3];
  const at::Tensor planes = grad_output.reshape({-1, output_size[0], output_size[1]});
  const at::Tensor result =
      apply_on_both_sides(planes, cubic_weights(height, output_size[0], align_corners, scales_h, grad_output).t(),
                          cubic_weights(width, output_size[1], align_corners, scales_w, grad_output).t());
  return laid_out_as(result.view(expected.sizes()), expected);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_bicubic2d", npusim_upsample_bicubic2d);
  m.impl("upsample_bicubic2d_backward", npusim_upsample_bicubic2d_backward);
}

}  // namespace npusim::bridge
