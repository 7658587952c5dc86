// Native 3-D average pooling (nn.AvgPool3d, nn.AdaptiveAvgPool3d) forward and backward, float32. A box window's sum or
// mean is separable, so each volume is multiplied by a window matrix along each dimension (window_matrices.h): depth
// first, one batched product over every volume's [D, H*W] slab, then rows and columns as 2-D pooling does; the backward
// multiplies by the transposed matrices. Divisors (ceil_mode's partial windows, padding counted or not, the override)
// are a product of one count per dimension, as the CPU has them. PyTorch's meta functions check the arguments and give
// the result's shape and layout.
#include <ATen/TensorOperators.h>
#include <ATen/ops/_adaptive_avg_pool3d.h>
#include <ATen/ops/avg_pool3d.h>
#include <ATen/ops/avg_pool3d_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/outer.h>
#include <torch/library.h>

#include <array>
#include <optional>

#include "bridge.h"
#include "pointwise_output.h"
#include "window_matrices.h"

namespace npusim::bridge {
namespace {

// Volumes [B, D, H, W] times a matrix along each dimension: [B, OD, OH, OW] for depth [OD, D], rows [OH, H] and
// columns [OW, W].
at::Tensor apply_on_three_sides(const at::Tensor& volumes, const at::Tensor& depth, const at::Tensor& rows,
                                const at::Tensor& columns) {
  const int64_t count = volumes.size(0), height = volumes.size(2), width = volumes.size(3);
  const at::Tensor slabs = at::matmul(depth, volumes.reshape({count, volumes.size(1), height * width}));
  return apply_on_both_sides(slabs.view({count * depth.size(0), height, width}), rows, columns)
      .view({count, depth.size(0), rows.size(0), columns.size(0)});
}

// The input's volumes as [B, D, H, W] (B = N * C, or C for an unbatched input).
at::Tensor volumes_of(const at::Tensor& t) { return t.reshape({-1, t.size(-3), t.size(-2), t.size(-1)}); }

bool pools_natively(const at::Tensor& input, std::initializer_list<at::Tensor> others) {
  if (input.scalar_type() != at::kFloat || (input.dim() != 4 && input.dim() != 5)) return false;
  for (const at::Tensor& other : others)
    if (other.scalar_type() != at::kFloat || other.device() != input.device()) return false;
  return true;
}

// One dimension of a window: its kernel, stride and padding (PyTorch's one-value or three-value arguments; an empty
// stride is the kernel).
struct Axis {
  int64_t kernel, stride, pad;
};
std::array<Axis, 3> axes_of(at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding) {
  const auto pick = [](at::IntArrayRef values, size_t k) { return values[values.size() == 1 ? 0 : k]; };
  std::array<Axis, 3> axes{};
  for (size_t k = 0; k < 3; ++k)
    axes[k] = {pick(kernel, k), stride.empty() ? pick(kernel, k) : pick(stride, k), pick(padding, k)};
  return axes;
}

struct Pooling {
  std::array<Axis, 3> axes;
  bool count_include_pad;
  std::optional<int64_t> divisor_override;

  // The window sums' matrices along depth, rows and columns, from input sizes `in` to pooled sizes `out`.
  std::array<at::Tensor, 3> sums(at::IntArrayRef in, at::IntArrayRef out, const at::Tensor& like) const {
    std::array<at::Tensor, 3> matrices;
    for (size_t k = 0; k < 3; ++k)
      matrices[k] = window_sums(in[k], out[k], axes[k].kernel, axes[k].stride, axes[k].pad, like);
    return matrices;
  }
  // [OD, OH, OW]: each output's divisor.
  at::Tensor divisors(at::IntArrayRef in, at::IntArrayRef out, const at::Tensor& like) const {
    if (divisor_override) return at::full(out, static_cast<double>(*divisor_override), like.options());
    std::array<at::Tensor, 3> counts;
    for (size_t k = 0; k < 3; ++k)
      counts[k] = window_counts(in[k], out[k], axes[k].kernel, axes[k].stride, axes[k].pad, count_include_pad);
    return at::outer(counts[0], counts[1]).unsqueeze(2).mul(counts[2]).to(like.device());
  }
};

at::IntArrayRef last_three(const at::Tensor& t) { return t.sizes().slice(t.dim() - 3); }

at::Tensor npusim_avg_pool3d(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef stride,
                             at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                             std::optional<int64_t> divisor_override) {
  const at::Tensor expected = at::avg_pool3d(meta_like(input), kernel, stride, padding, ceil_mode, count_include_pad,
                                             divisor_override);  // PyTorch's checks, shape and layout
  if (!pools_natively(input, {})) {
    torch::jit::Stack stack{input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override};
    call_cpu_fallback("aten::avg_pool3d", "", stack);
    return stack[0].toTensor();
  }
  // An empty batch gives an empty result (PyTorch's meta function refuses other empty inputs).
  if (input.numel() == 0) return at::empty_like(expected, input.options());
  const Pooling pooling{axes_of(kernel, stride, padding), count_include_pad, divisor_override};
  const at::IntArrayRef in = last_three(input), pooled = last_three(expected);
  const std::array<at::Tensor, 3> sums = pooling.sums(in, pooled, input);
  const at::Tensor result = apply_on_three_sides(volumes_of(input), sums[0], sums[1], sums[2])
                                .div_(pooling.divisors(in, pooled, input))
                                .view(expected.sizes());
  return laid_out_as(result, expected);
}

at::Tensor npusim_avg_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& input, at::IntArrayRef kernel,
                                      at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                                      bool count_include_pad, std::optional<int64_t> divisor_override) {
  const at::Tensor expected = at::avg_pool3d_backward(meta_like(grad_output), meta_like(input), kernel, stride, padding,
                                                      ceil_mode, count_include_pad, divisor_override);
  if (!pools_natively(input, {grad_output})) {
    torch::jit::Stack stack{grad_output,       input,           kernel, stride, padding, ceil_mode,
                            count_include_pad, divisor_override};
    call_cpu_fallback("aten::avg_pool3d_backward", "", stack);
    return stack[0].toTensor();
  }
  if (input.numel() == 0) return at::empty_like(expected, input.options());
  const Pooling pooling{axes_of(kernel, stride, padding), count_include_pad, divisor_override};
  const at::IntArrayRef in = last_three(input), pooled = last_three(grad_output);
  const std::array<at::Tensor, 3> sums = pooling.sums(in, pooled, input);
  const at::Tensor shares = volumes_of(grad_output) / pooling.divisors(in, pooled, input);
  const at::Tensor spread = apply_on_three_sides(shares, sums[0].t(), sums[1].t(), sums[2].t());
  return laid_out_as(spread.view(input.sizes()), expected);
}

// Adaptive: the matrices average each window (window_means), so no divisor.
at::Tensor npusim_adaptive_avg_pool3d(const at::Tensor& input, at::IntArrayRef output_size) {
  const at::Tensor expected = at::_adaptive_avg_pool3d(meta_like(input), output_size);
  if (!pools_natively(input, {})) {
    torch::jit::Stack stack{input, output_size};
    call_cpu_fallback("aten::_adaptive_avg_pool3d", "", stack);
    return stack[0].toTensor();
  }
  if (input.numel() == 0) return at::empty_like(expected, input.options());
  const at::IntArrayRef in = last_three(input), pooled = last_three(expected);
  const at::Tensor result =
      apply_on_three_sides(volumes_of(input), window_means(in[0], pooled[0], input),
                           window_means(in[1], pooled[1], input), window_means(in[2], pooled[2], input));
  return laid_out_as(result.view(expected.sizes()), expected);
}

at::Tensor npusim_adaptive_avg_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& input) {
  if (!pools_natively(input, {grad_output}) || grad_output.dim() != input.dim()) {
    torch::jit::Stack stack{grad_output, input};
    call_cpu_fallback("aten::_adaptive_avg_pool3d_backward", "", stack);
    return stack[0].toTensor();
  }
  if (input.numel() == 0) return at::empty_like(input);
  const at::IntArrayRef in = last_three(input), pooled = last_three(grad_output);
  const at::Tensor spread =
      apply_on_three_sides(volumes_of(grad_output), window_means(in[0], pooled[0], input).t(),
                           window_means(in[1], pooled[1], input).t(), window_means(in[2], pooled[2], input).t());
  return laid_out_as(spread.view(input.sizes()), at::empty_like(meta_like(input)));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("avg_pool3d", npusim_avg_pool3d);  // the out= forms: out_variants.cpp
  m.impl("avg_pool3d_backward", npusim_avg_pool3d_backward);
  m.impl("_adaptive_avg_pool3d", npusim_adaptive_avg_pool3d);
  m.impl("_adaptive_avg_pool3d_backward", npusim_adaptive_avg_pool3d_backward);
}

}  // namespace npusim::bridge
