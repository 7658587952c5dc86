// Nearest-neighbour upsampling of 4-D tensors (F.interpolate(mode="nearest"), nn.Upsample) by whole factors, each way
// one fused kernel: the forward repeats each input element over its rh x rw block (a copy over [N, C, H, rh, W, rw]
// reading the input with strides 0 over the repeats), the backward sums each block of the gradient (over the same
// space with the repeats reduced, in row order from the block's first element, as the CPU's kernel adds them; half
// precision in float32, rounded once). Which input index each output index reads is PyTorch's own map, taken from the
// CPU's kernel run on the indices; sizes whose map is not o / r (a fractional factor) take the CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/upsample_nearest2d.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bridge.h"
#include "kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;

// The whole factor r with which output index o reads input index o / r along one dimension, if PyTorch's map (for
// these sizes and scale) is exactly that.
std::optional<int64_t> whole_factor(int64_t input, int64_t output, std::optional<double> scale) {
  if (input <= 0 || output <= 0 || output % input != 0) return std::nullopt;
  const int64_t factor = output / input;
  const at::Tensor indices = at::arange(input, at::TensorOptions().dtype(at::kDouble)).view({1, 1, input, 1});
  const at::Tensor sources = at::upsample_nearest2d(indices, {output, 1}, scale, std::nullopt).reshape({-1});
  const auto* source = sources.const_data_ptr<double>();
  for (int64_t o = 0; o < output; ++o)
    if (static_cast<int64_t>(source[o]) != o / factor) return std::nullopt;
  return factor;
}

// The factors of both dimensions, for an input and output on one npusim device of a type the kernels hold.
std::optional<std::pair<int64_t, int64_t>> factors(const at::Tensor& small, const at::Tensor& large,
                                                   at::IntArrayRef small_size, at::IntArrayRef large_size,
                                                   std::optional<double> scales_h, std::optional<double> scales_w) {
  if (small_size.size() != 4 || large_size.size() != 2 || !small.is_privateuseone() ||
      large.device() != small.device() || !element_type(small.scalar_type()) ||
      large.scalar_type() != small.scalar_type())
    return std::nullopt;
  const auto rows = whole_factor(small_size[2], large_size[0], scales_h);
  const auto cols = whole_factor(small_size[3], large_size[1], scales_w);
  if (!rows || !cols) return std::nullopt;
  return std::pair{*rows, *cols};
}

// The kernel's space: [N, C, H, rh, W, rw] for the forward; [N, C, H, W, rh, rw] with the repeats reduced for the
// backward. The small tensor [N, C, H, W] has strides 0 over the repeats; the large one is [N, C, H rh, W rw].
struct Blocks {
  std::vector<int64_t> sizes, small_strides, large_strides;
};
Blocks blocks(const at::Tensor& small, const at::Tensor& large, std::pair<int64_t, int64_t> factor, bool reduce) {
  const auto [rh, rw] = factor;
  const auto n = small.sizes();
  const auto s = small.strides(), l = large.strides();
  if (reduce)
    return {{n[0], n[1], n[2], n[3], rh, rw},
            {s[0], s[1], s[2], s[3], 0, 0},
            {l[0], l[1], l[2] * rh, l[3] * rw, l[2], l[3]}};
  return {
      {n[0], n[1], n[2], rh, n[3], rw}, {s[0], s[1], s[2], 0, s[3], 0}, {l[0], l[1], l[2] * rh, l[2], l[3] * rw, l[3]}};
}

at::Tensor& npusim_upsample_nearest2d_out(const at::Tensor& input, at::IntArrayRef output_size,
                                          std::optional<double> scales_h, std::optional<double> scales_w,
                                          at::Tensor& out) {
  if (input.dim() == 4) {
    const auto factor = factors(input, out, input.sizes(), output_size, scales_h, scales_w);
    if (factor) {
      at::native::resize_output(out, {input.size(0), input.size(1), output_size[0], output_size[1]});
      if (out.numel() == 0) return out;
      const Blocks b = blocks(input, out, *factor, /*reduce=*/false);
      TensorKernel k(TensorKernel::name_for("upsample_nearest2d", input), b.sizes, 0);
      k.store(k.load(input, b.small_strides), out, b.large_strides);
      if (k.launch(input)) return out;
    }
  }
  torch::jit::Stack stack{input, output_size.vec(), scales_h, scales_w, out};
  call_cpu_fallback("aten::upsample_nearest2d", "out", stack);
  return out;
}
at::Tensor npusim_upsample_nearest2d(const at::Tensor& input, at::IntArrayRef output_size,
                                     std::optional<double> scales_h, std::optional<double> scales_w) {
  std::vector<int64_t> shape = input.sizes().vec();
  if (shape.size() == 4 && output_size.size() == 2) {
    shape[2] = output_size[0];
    shape[3] = output_size[1];
  }
  at::Tensor out = at::empty(shape, input.options().memory_format(input.suggest_memory_format()));
  return npusim_upsample_nearest2d_out(input, output_size, scales_h, scales_w, out);
}

// Each input element's gradient: the sum of its block, float16 and bfloat16 in float32 rounded once.
at::Tensor& npusim_upsample_nearest2d_backward_out(const at::Tensor& grad_output, at::IntArrayRef output_size,
                                                   at::IntArrayRef input_size, std::optional<double> scales_h,
                                                   std::optional<double> scales_w, at::Tensor& grad_input) {
  const bool floats = at::isFloatingType(grad_output.scalar_type()) && grad_output.scalar_type() != at::kDouble;
  if (floats && grad_output.dim() == 4) {
    const auto factor = factors(grad_input, grad_output, input_size, output_size, scales_h, scales_w);
    if (factor) {
      at::native::resize_output(grad_input, input_size);
      if (grad_input.numel() == 0) return grad_input;
      const Blocks b = blocks(grad_input, grad_output, *factor, /*reduce=*/true);
      TensorKernel k(TensorKernel::name_for("upsample_nearest2d_backward", grad_output), b.sizes, 2);
      int value = k.load(grad_output, b.large_strides);
      if (grad_output.scalar_type() != at::kFloat) value = k.op(FusedOpcode::Convert, value);
      k.store(k.op(FusedOpcode::ReduceSum, value), grad_input, b.small_strides);
      if (k.launch(grad_output)) return grad_input;
    }
  }
  torch::jit::Stack stack{grad_output, output_size.vec(), input_size.vec(), scales_h, scales_w, grad_input};
  call_cpu_fallback("aten::upsample_nearest2d_backward", "grad_input", stack);
  return grad_input;
}
at::Tensor npusim_upsample_nearest2d_backward(const at::Tensor& grad_output, at::IntArrayRef output_size,
                                              at::IntArrayRef input_size, std::optional<double> scales_h,
                                              std::optional<double> scales_w) {
  at::Tensor grad_input =
      at::empty(input_size, grad_output.options().memory_format(grad_output.suggest_memory_format()));
  return npusim_upsample_nearest2d_backward_out(grad_output, output_size, input_size, scales_h, scales_w, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_nearest2d", npusim_upsample_nearest2d);
  m.impl("upsample_nearest2d.out", npusim_upsample_nearest2d_out);
  m.impl("upsample_nearest2d_backward", npusim_upsample_nearest2d_backward);
  m.impl("upsample_nearest2d_backward.grad_input", npusim_upsample_nearest2d_backward_out);
}

}  // namespace npusim::bridge
