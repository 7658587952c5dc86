// Bilinear upsampling and downsampling of 4-D tensors (F.interpolate(mode="bilinear"), nn.Upsample), align_corners
// or not, in float32, float16 and bfloat16, each way one fused kernel. Along each spatial dimension every output index
// reads two input indices with weights (1 - lambda, lambda), computed on the host as PyTorch's kernels compute them (in
// float32, from the source index scale (o + 0.5) - 0.5 or, aligning corners, scale o). The forward gathers the four
// neighbours of each output point by index (the terms of the indices in a small table, as padding_ops.cpp does) and
// interpolates along the width, then the height, in float32; the backward adds each output gradient, weighted, to its
// four neighbours (dma.stxadd, in the order of the points, float32 gradients: the CPU adds in another order, so sums
// differ in their last bits).
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "bridge.h"
#include "kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;
constexpr auto kF32 = isa::ElementType::F32;
constexpr auto kI64 = isa::ElementType::I64;

// Per output index along one dimension: its two input indices and their weights.
struct LinearMap {
  std::vector<int64_t> first, second;
  std::vector<float> first_weight, second_weight;
};

LinearMap linear_map(int64_t input, int64_t output, bool align_corners, std::optional<double> scale) {
  LinearMap map;
  float ratio = 0;
  if (align_corners) {
    ratio = output > 1 ? static_cast<float>(input - 1) / static_cast<float>(output - 1) : 0.0f;
  } else {
    ratio = scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                            : static_cast<float>(input) / static_cast<float>(output);
  }
  for (int64_t o = 0; o < output; ++o) {
    int64_t first = o;
    float lambda = 0;
    if (input != output) {
      const float source =
          align_corners ? ratio * static_cast<float>(o) : std::max(ratio * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
      first = std::min(static_cast<int64_t>(std::floor(source)), input - 1);
      lambda = std::min(std::max(source - static_cast<float>(first), 0.0f), 1.0f);
    }
    map.first.push_back(first);
    map.second.push_back(first + (first < input - 1 && input != output ? 1 : 0));
    map.first_weight.push_back(1.0f - lambda);
    map.second_weight.push_back(lambda);
  }
  return map;
}

// The device tables of a kernel over [N, C, Ho, Wo]: int64 element offsets into `grid` (the input, or its gradient)
// for the batch-channel term and each neighbour's row and column terms, and float32 weights; the nodes reading them.
struct Neighbours {
  at::Tensor offsets, weights;
  std::array<int, 4> index{};          // (top, left), (top, right), (bottom, left), (bottom, right)
  std::array<int, 2> row{}, column{};  // the weights of the first and second row, column
};

Neighbours neighbours(TensorKernel& k, const at::Tensor& grid, at::IntArrayRef out_size, bool align_corners,
                      std::optional<double> scale_h, std::optional<double> scale_w) {
  const LinearMap rows = linear_map(grid.size(2), out_size[0], align_corners, scale_h);
  const LinearMap cols = linear_map(grid.size(3), out_size[1], align_corners, scale_w);
  std::vector<int64_t> offsets;
  for (int64_t n = 0; n < grid.size(0); ++n)
    for (int64_t c = 0; c < grid.size(1); ++c) offsets.push_back(n * grid.stride(0) + c * grid.stride(1));
  const auto append = [&](const std::vector<int64_t>& indices, int64_t stride) {
    const auto at = static_cast<int64_t>(offsets.size());
    for (int64_t i : indices) offsets.push_back(i * stride);
    return at;
  };
  const int64_t top = append(rows.first, grid.stride(2)), bottom = append(rows.second, grid.stride(2));
  const int64_t left = append(cols.first, grid.stride(3)), right = append(cols.second, grid.stride(3));
  std::vector<float> weights;
  for (const auto* part : {&rows.first_weight, &rows.second_weight, &cols.first_weight, &cols.second_weight})
    weights.insert(weights.end(), part->begin(), part->end());

  Neighbours result;
  const auto to_device = [&](const auto& values, at::ScalarType type) {
    at::Tensor host = at::empty({static_cast<int64_t>(values.size())}, at::TensorOptions().dtype(type));
    std::copy(values.begin(), values.end(), static_cast<std::decay_t<decltype(values[0])>*>(host.data_ptr()));
    return host.to(grid.device());
  };
  result.offsets = to_device(offsets, at::kLong);
  result.weights = to_device(weights, at::kFloat);
  const std::vector<int64_t> batch = {grid.size(1), 1, 0, 0}, along_h = {0, 0, 1, 0}, along_w = {0, 0, 0, 1};
  const int base = k.load(result.offsets, batch);
  const std::array<int, 2> h = {k.load(result.offsets, along_h, top), k.load(result.offsets, along_h, bottom)};
  const std::array<int, 2> w = {k.load(result.offsets, along_w, left), k.load(result.offsets, along_w, right)};
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      result.index[2 * a + b] = k.op(FusedOpcode::Add, k.op(FusedOpcode::Add, base, h[a], -1, kI64), w[b], -1, kI64);
  const int64_t out_h = out_size[0];
  result.row = {k.load(result.weights, along_h, 0), k.load(result.weights, along_h, out_h)};
  result.column = {k.load(result.weights, along_w, 2 * out_h),
                   k.load(result.weights, along_w, 2 * out_h + out_size[1])};
  return result;
}

bool floats(const at::Tensor& tensor) {
  const auto type = tensor.scalar_type();
  return tensor.is_privateuseone() && (type == at::kFloat || type == at::kHalf || type == at::kBFloat16);
}

at::Tensor& npusim_upsample_bilinear2d_out(const at::Tensor& input, at::IntArrayRef output_size, bool align_corners,
                                           std::optional<double> scales_h, std::optional<double> scales_w,
                                           at::Tensor& out) {
  if (floats(input) && input.dim() == 4 && output_size.size() == 2 && out.device() == input.device() &&
      out.scalar_type() == input.scalar_type() && input.size(2) > 0 && input.size(3) > 0) {
    at::native::resize_output(out, {input.size(0), input.size(1), output_size[0], output_size[1]});
    if (out.numel() == 0) return out;
    TensorKernel k(TensorKernel::name_for("upsample_bilinear2d", input), out.sizes().vec(), 0);
    const Neighbours near = neighbours(k, input, output_size, align_corners, scales_h, scales_w);
    std::array<int, 4> value{};
    for (int q = 0; q < 4; ++q) {
      value[q] = k.gather(input, near.index[q]);
      if (input.scalar_type() != at::kFloat) value[q] = k.op(FusedOpcode::Convert, value[q], -1, -1, kF32);
    }
    const auto along_width = [&](int first, int second) {
      return k.op(FusedOpcode::Add, k.op(FusedOpcode::Mul, first, near.column[0]),
                  k.op(FusedOpcode::Mul, second, near.column[1]));
    };
    const int top = along_width(value[0], value[1]), bottom = along_width(value[2], value[3]);
    k.store(
        k.op(FusedOpcode::Add, k.op(FusedOpcode::Mul, top, near.row[0]), k.op(FusedOpcode::Mul, bottom, near.row[1])),
        out, out.strides());
    if (k.launch(input)) return out;
  }
  torch::jit::Stack stack{input, output_size.vec(), align_corners, scales_h, scales_w, out};
  call_cpu_fallback("aten::upsample_bilinear2d", "out", stack);
  return out;
}

at::Tensor npusim_upsample_bilinear2d(const at::Tensor& input, at::IntArrayRef output_size, bool align_corners,
                                      std::optional<double> scales_h, std::optional<double> scales_w) {
  std::vector<int64_t> shape = input.sizes().vec();
  if (shape.size() == 4 && output_size.size() == 2)
    std::copy(output_size.begin(), output_size.end(), shape.begin() + 2);
  at::Tensor out = at::empty(shape, input.options().memory_format(input.suggest_memory_format()));
  return npusim_upsample_bilinear2d_out(input, output_size, align_corners, scales_h, scales_w, out);
}

at::Tensor& npusim_upsample_bilinear2d_backward_out(const at::Tensor& grad_output, at::IntArrayRef output_size,
                                                    at::IntArrayRef input_size, bool align_corners,
                                                    std::optional<double> scales_h, std::optional<double> scales_w,
                                                    at::Tensor& grad_input) {
  if (floats(grad_output) && grad_output.scalar_type() == at::kFloat && grad_output.dim() == 4 &&
      input_size.size() == 4 && output_size.size() == 2 && grad_input.device() == grad_output.device() &&
      grad_input.scalar_type() == at::kFloat && input_size[2] > 0 && input_size[3] > 0) {
    at::native::resize_output(grad_input, input_size);
    grad_input.zero_();
    if (grad_output.numel() == 0) return grad_input;
    TensorKernel k(TensorKernel::name_for("upsample_bilinear2d_backward", grad_output), grad_output.sizes().vec(), 0);
    const Neighbours near = neighbours(k, grad_input, output_size, align_corners, scales_h, scales_w);
    const int gradient = k.load(grad_output, grad_output.strides());
    for (int a = 0; a < 2; ++a) {
      const int weighted = k.op(FusedOpcode::Mul, gradient, near.row[a]);
      for (int b = 0; b < 2; ++b)
        k.scatter_add(k.op(FusedOpcode::Mul, weighted, near.column[b]), grad_input, near.index[2 * a + b]);
    }
    if (k.launch(grad_output)) return grad_input;
  }
  torch::jit::Stack stack{grad_output, output_size.vec(), input_size.vec(), align_corners,
                          scales_h,    scales_w,          grad_input};
  call_cpu_fallback("aten::upsample_bilinear2d_backward", "grad_input", stack);
  return grad_input;
}

at::Tensor npusim_upsample_bilinear2d_backward(const at::Tensor& grad_output, at::IntArrayRef output_size,
                                               at::IntArrayRef input_size, bool align_corners,
                                               std::optional<double> scales_h, std::optional<double> scales_w) {
  at::Tensor grad_input =
      at::empty(input_size, grad_output.options().memory_format(grad_output.suggest_memory_format()));
  return npusim_upsample_bilinear2d_backward_out(grad_output, output_size, input_size, align_corners, scales_h,
                                                 scales_w, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_bilinear2d", npusim_upsample_bilinear2d);
  m.impl("upsample_bilinear2d.out", npusim_upsample_bilinear2d_out);
  m.impl("upsample_bilinear2d_backward", npusim_upsample_bilinear2d_backward);
  m.impl("upsample_bilinear2d_backward.grad_input", npusim_upsample_bilinear2d_backward_out);
}

}  // namespace npusim::bridge
