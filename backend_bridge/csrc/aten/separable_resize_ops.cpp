// Resizes that are separable, forward and backward, float32 (half precision widened to it and rounded once, as the
// CPU computes them): bicubic (F.interpolate(mode="bicubic"), as vision transformers resize their position
// embeddings) and the antialiased bilinear and bicubic ones (antialias=True, torchvision's default image resize).
// Along each dimension, output o is a weighted sum of a few inputs: bicubic's four taps around the source index,
// weighted by the cubic convolution kernel (A = -0.75) and clamped to the input's edge; an antialiased resize's
// window of the input under its filter (a triangle, or the cubic kernel with A = -0.5) stretched by the scale when
// shrinking, normalised to sum to one. So each dimension is a product with an [out, in] weight matrix built on the
// host as PyTorch's kernels compute the weights (in float32), and the resize is the product on both sides of every
// plane (window_matrices.h), columns first as the CPU nests it; the backward multiplies by the transposed matrices.
// PyTorch's argument checks are repeated here rather than run as its meta functions (torch 2.13's bicubic one takes
// half a second a call: a Python decomposition on meta tensors). The out= forms are out_variants.cpp's.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

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
  const float ratio = resize_ratio(in, out, align_corners, scale);
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

// PyTorch's antialiasing filters, at distance x (in input samples, scaled) from an output's centre.
float triangle_filter(float x) {
  x = std::abs(x);
  return x < 1 ? 1 - x : 0;
}
float cubic_filter(float x) {
  constexpr float A = -0.5f;
  x = std::abs(x);
  if (x < 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * A;
  return 0;
}

// [out, in] for an antialiased resize with a filter of `taps` samples' support: output o's window around its centre
// scale * (o + 0.5), widened by the scale when shrinking, its weights normalised to sum to one, as PyTorch computes
// them.
at::Tensor antialiased_weights(int64_t in, int64_t out, bool align_corners, std::optional<double> scale, int taps,
                               float (*filter)(float), const at::Tensor& like) {
  const float ratio = resize_ratio(in, out, align_corners, scale);
  const float support = ratio >= 1 ? taps * 0.5f * ratio : taps * 0.5f;
  const float stretch = ratio >= 1 ? 1.0f / ratio : 1.0f;
  const int64_t widest = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  at::Tensor weights = at::zeros({out, in}, at::TensorOptions().dtype(at::kFloat));
  auto entries = weights.accessor<float, 2>();
  for (int64_t o = 0; o < out; ++o) {
    const float centre = ratio * (static_cast<float>(o) + 0.5f);
    const int64_t first = std::max<int64_t>(static_cast<int64_t>(centre - support + 0.5f), 0);
    const int64_t count =
        std::clamp<int64_t>(std::min(static_cast<int64_t>(centre + support + 0.5f), in) - first, 0, widest);
    float total = 0;
    for (int64_t j = 0; j < count; ++j) total += entries[o][first + j] = filter((j + first - centre + 0.5f) * stretch);
    if (total != 0)
      for (int64_t j = 0; j < count; ++j) entries[o][first + j] /= total;
  }
  return weights.to(like.device());
}

// A resize: its operator's name and its weight matrix along one dimension.
struct SeparableResize {
  const char* name;  // "upsample_bicubic2d"
  at::Tensor (*weights)(int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                        const at::Tensor& like);
};

constexpr SeparableResize kBicubic{"upsample_bicubic2d", cubic_weights};
constexpr SeparableResize kBilinearAntialiased{
    "_upsample_bilinear2d_aa",
    [](int64_t in, int64_t out, bool align_corners, std::optional<double> scale, const at::Tensor& like) {
      return antialiased_weights(in, out, align_corners, scale, 2, triangle_filter, like);
    }};
constexpr SeparableResize kBicubicAntialiased{
    "_upsample_bicubic2d_aa",
    [](int64_t in, int64_t out, bool align_corners, std::optional<double> scale, const at::Tensor& like) {
      return antialiased_weights(in, out, align_corners, scale, 4, cubic_filter, like);
    }};

bool resizes_natively(const at::Tensor& t) { return t.scalar_type() == at::kFloat && t.dim() == 4; }

template <const SeparableResize& resize>
at::Tensor resized(const at::Tensor& input, at::IntArrayRef output_size, bool align_corners,
                   std::optional<double> scales_h, std::optional<double> scales_w) {
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
  TORCH_CHECK(input.dim() == 4, "It is expected input_size equals to 4, but got size ", input.dim());
  TORCH_CHECK(input.size(2) > 0 && input.size(3) > 0 && output_size[0] > 0 && output_size[1] > 0,
              "Input and output sizes should be greater than 0, but got input (H: ", input.size(2),
              ", W: ", input.size(3), ") output (H: ", output_size[0], ", W: ", output_size[1], ")");
  const at::Tensor expected = at::empty({input.size(0), input.size(1), output_size[0], output_size[1]},
                                        input.options().device(at::kMeta).memory_format(input.suggest_memory_format()));
  if (!resizes_natively(input)) {
    torch::jit::Stack stack{input, output_size.vec(), align_corners, scales_h, scales_w};
    call_cpu_fallback((std::string("aten::") + resize.name).c_str(), "", stack);
    return stack[0].toTensor();
  }
  if (input.numel() == 0) return at::empty_like(expected, input.options());
  const int64_t height = input.size(2), width = input.size(3);
  const at::Tensor result = apply_on_both_sides(input.reshape({-1, height, width}),
                                                resize.weights(height, output_size[0], align_corners, scales_h, input),
                                                resize.weights(width, output_size[1], align_corners, scales_w, input));
  return laid_out_as(result.view(expected.sizes()), expected);
}

template <const SeparableResize& resize>
at::Tensor resized_backward(const at::Tensor& grad_output, at::IntArrayRef output_size, at::IntArrayRef input_size,
                            bool align_corners, std::optional<double> scales_h, std::optional<double> scales_w) {
  TORCH_CHECK(output_size.size() == 2 && input_size.size() == 4, resize.name,
              "_backward: expected an output size of 2 and an input size of 4 elements, got ", output_size, " and ",
              input_size);
  const std::vector<int64_t> expected_grad{input_size[0], input_size[1], output_size[0], output_size[1]};
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(expected_grad), "Expected grad_output to have the same shape as ",
              "output; output sizes are ", at::IntArrayRef(expected_grad), " but got grad_output sizes ",
              grad_output.sizes());
  if (!resizes_natively(grad_output)) {
    torch::jit::Stack stack{grad_output, output_size.vec(), input_size.vec(), align_corners, scales_h, scales_w};
    call_cpu_fallback((std::string("aten::") + resize.name + "_backward").c_str(), "", stack);
    return stack[0].toTensor();
  }
  if (grad_output.numel() == 0) return at::zeros(input_size, grad_output.options());
  const at::Tensor planes = grad_output.reshape({-1, output_size[0], output_size[1]});
  const at::Tensor rows = resize.weights(input_size[2], output_size[0], align_corners, scales_h, grad_output);
  const at::Tensor columns = resize.weights(input_size[3], output_size[1], align_corners, scales_w, grad_output);
  return apply_on_both_sides(planes, rows.t(), columns.t()).view(input_size);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_bicubic2d", resized<kBicubic>);
  m.impl("upsample_bicubic2d_backward", resized_backward<kBicubic>);
  m.impl("_upsample_bilinear2d_aa", resized<kBilinearAntialiased>);
  m.impl("_upsample_bilinear2d_aa_backward", resized_backward<kBilinearAntialiased>);
  m.impl("_upsample_bicubic2d_aa", resized<kBicubicAntialiased>);
  m.impl("_upsample_bicubic2d_aa_backward", resized_backward<kBicubicAntialiased>);
}

}  // namespace npusim::bridge
