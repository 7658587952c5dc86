// Linear, bilinear and trilinear resizing (F.interpolate(mode="linear" | "bilinear" | "trilinear"), nn.Upsample) of
// 1, 2 or 3 spatial dimensions, align_corners or not, in float32, float16 and bfloat16, each way one fused kernel.
// Along each spatial dimension every output index reads two input indices with weights (1 - lambda, lambda), computed
// on the host as PyTorch's kernels compute them (in float32, from the source index scale (o + 0.5) - 0.5 or, aligning
// corners, scale o). The forward gathers the 2^k neighbours of each output point by index (the terms of the indices in
// a small table, as padding_ops.cpp does) and interpolates along the innermost dimension first, as the CPU's kernel
// nests it, in float32; the backward adds each output gradient, weighted, to its neighbours (dma.stxadd, in the order
// of the points, float32 gradients: the CPU adds in another order, so sums differ in their last bits).
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "bridge.h"
#include "runtime/kernel_launcher.h"
#include "tensor_kernel.h"
#include "window_matrices.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;
using Scales = std::vector<std::optional<double>>;
constexpr auto kF32 = isa::ElementType::F32;
constexpr auto kI64 = isa::ElementType::I64;

struct Resize {
  const char* name;  // "upsample_bilinear2d"
  int dims;
};

// Per output index along one dimension: its two input indices and their weights.
struct LinearMap {
  std::vector<int64_t> first, second;
  std::vector<float> first_weight, second_weight;
};

LinearMap linear_map(int64_t input, int64_t output, bool align_corners, std::optional<double> scale) {
  LinearMap map;
  const float ratio = resize_ratio(input, output, align_corners, scale);
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

// A kernel over [N, C, O1, ..., Ok]: the index of each of the 2^k neighbours in `grid` (the input, or its gradient),
// neighbour q taking the second index along dimension d when bit (k - 1 - d) of q is set, and per dimension the nodes
// of the two weights. The tables stay alive with this object until the launch.
struct Neighbours {
  at::Tensor offsets, weights;
  std::vector<int> index;                  // 2^k
  std::vector<std::array<int, 2>> weight;  // per dimension
};

Neighbours neighbours(TensorKernel& k, const at::Tensor& grid, at::IntArrayRef out_size, bool align_corners,
                      const Scales& scales) {
  const auto dims = static_cast<int>(out_size.size());
  std::vector<int64_t> offsets;
  for (int64_t n = 0; n < grid.size(0); ++n)
    for (int64_t c = 0; c < grid.size(1); ++c) offsets.push_back(n * grid.stride(0) + c * grid.stride(1));
  std::vector<float> weights;
  std::vector<std::array<int64_t, 2>> index_at, weight_at;  // per dimension: where its two tables start
  for (int d = 0; d < dims; ++d) {
    const LinearMap map = linear_map(grid.size(2 + d), out_size[d], align_corners, scales[d]);
    const int64_t stride = grid.stride(2 + d);
    index_at.push_back({static_cast<int64_t>(offsets.size()), static_cast<int64_t>(offsets.size()) + out_size[d]});
    for (const auto* part : {&map.first, &map.second})
      for (int64_t i : *part) offsets.push_back(i * stride);
    weight_at.push_back({static_cast<int64_t>(weights.size()), static_cast<int64_t>(weights.size()) + out_size[d]});
    weights.insert(weights.end(), map.first_weight.begin(), map.first_weight.end());
    weights.insert(weights.end(), map.second_weight.begin(), map.second_weight.end());
  }
  Neighbours result{TensorKernel::table(offsets, at::kLong, grid.device()),
                    TensorKernel::table(weights, at::kFloat, grid.device())};
  std::vector<int64_t> batch(2 + dims, 0);
  batch[0] = grid.size(1);
  batch[1] = 1;
  const int base = k.load(result.offsets, batch);
  std::vector<std::array<int, 2>> terms;
  for (int d = 0; d < dims; ++d) {
    std::vector<int64_t> along(2 + dims, 0);
    along[2 + d] = 1;
    terms.push_back({k.load(result.offsets, along, index_at[d][0]), k.load(result.offsets, along, index_at[d][1])});
    result.weight.push_back(
        {k.load(result.weights, along, weight_at[d][0]), k.load(result.weights, along, weight_at[d][1])});
  }
  for (int q = 0; q < (1 << dims); ++q) {
    int index = base;
    for (int d = 0; d < dims; ++d) index = k.op(FusedOpcode::Add, index, terms[d][(q >> (dims - 1 - d)) & 1], -1, kI64);
    result.index.push_back(index);
  }
  return result;
}

bool floats(const at::Tensor& tensor) {
  const auto type = tensor.scalar_type();
  return tensor.is_privateuseone() && (type == at::kFloat || type == at::kHalf || type == at::kBFloat16);
}

// The interpolation of values[first, first + count) (neighbours in the order of `neighbours`) along dimensions
// d.. k - 1, the innermost first.
int interpolate(TensorKernel& k, const Neighbours& near, const std::vector<int>& values, int first, int count, int d) {
  if (count == 1) return values[first];
  const int half = count / 2;
  const int lower = interpolate(k, near, values, first, half, d + 1);
  const int upper = interpolate(k, near, values, first + half, half, d + 1);
  return k.op(FusedOpcode::Add, k.op(FusedOpcode::Mul, lower, near.weight[d][0]),
              k.op(FusedOpcode::Mul, upper, near.weight[d][1]));
}

at::Tensor& resize_out(const Resize& op, const at::Tensor& input, at::IntArrayRef output_size, bool align_corners,
                       const Scales& scales, at::Tensor& out) {
  bool sized = input.dim() == op.dims + 2 && static_cast<int>(output_size.size()) == op.dims;
  for (int d = 0; sized && d < op.dims; ++d) sized = input.size(2 + d) > 0;
  if (floats(input) && sized && out.device() == input.device() && out.scalar_type() == input.scalar_type()) {
    std::vector<int64_t> shape = {input.size(0), input.size(1)};
    shape.insert(shape.end(), output_size.begin(), output_size.end());
    at::native::resize_output(out, shape);
    if (out.numel() == 0) return out;
    TensorKernel k(TensorKernel::name_for(op.name, input), out.sizes().vec(), 0);
    const Neighbours near = neighbours(k, input, output_size, align_corners, scales);
    std::vector<int> values;
    for (int index : near.index) {
      const int value = k.gather(input, index);
      values.push_back(input.scalar_type() == at::kFloat ? value : k.op(FusedOpcode::Convert, value, -1, -1, kF32));
    }
    k.store(interpolate(k, near, values, 0, static_cast<int>(values.size()), 0), out, out.strides());
    if (k.launch(input)) return out;
  }
  torch::jit::Stack stack{input, output_size.vec(), align_corners};
  for (const auto& scale : scales) stack.emplace_back(scale);
  stack.emplace_back(out);
  call_cpu_fallback(c10::str("aten::", op.name).c_str(), "out", stack);
  return out;
}

at::Tensor& resize_backward_out(const Resize& op, const at::Tensor& grad_output, at::IntArrayRef output_size,
                                at::IntArrayRef input_size, bool align_corners, const Scales& scales,
                                at::Tensor& grad_input) {
  bool sized = grad_output.dim() == op.dims + 2 && static_cast<int>(input_size.size()) == op.dims + 2 &&
               static_cast<int>(output_size.size()) == op.dims;
  for (int d = 0; sized && d < op.dims; ++d) sized = input_size[2 + d] > 0;
  if (grad_output.is_privateuseone() && grad_output.scalar_type() == at::kFloat && sized &&
      grad_input.device() == grad_output.device() && grad_input.scalar_type() == at::kFloat) {
    at::native::resize_output(grad_input, input_size);
    grad_input.zero_();
    if (grad_output.numel() == 0) return grad_input;
    TensorKernel k(TensorKernel::name_for(c10::str(op.name, "_backward").c_str(), grad_output),
                   grad_output.sizes().vec(), 0);
    const Neighbours near = neighbours(k, grad_input, output_size, align_corners, scales);
    const int gradient = k.load(grad_output, grad_output.strides());
    for (int q = 0; q < static_cast<int>(near.index.size()); ++q) {
      int weighted = gradient;
      for (int d = 0; d < op.dims; ++d)
        weighted = k.op(FusedOpcode::Mul, weighted, near.weight[d][(q >> (op.dims - 1 - d)) & 1]);
      k.scatter_add(weighted, grad_input, near.index[q]);
    }
    if (k.launch(grad_output)) return grad_input;
  }
  torch::jit::Stack stack{grad_output, output_size.vec(), input_size.vec(), align_corners};
  for (const auto& scale : scales) stack.emplace_back(scale);
  stack.emplace_back(grad_input);
  call_cpu_fallback(c10::str("aten::", op.name, "_backward").c_str(), "grad_input", stack);
  return grad_input;
}

at::Tensor resize(const Resize& op, const at::Tensor& input, at::IntArrayRef output_size, bool align_corners,
                  const Scales& scales) {
  std::vector<int64_t> shape = input.sizes().vec();
  if (static_cast<int>(shape.size()) == op.dims + 2 && static_cast<int>(output_size.size()) == op.dims)
    std::copy(output_size.begin(), output_size.end(), shape.begin() + 2);
  at::Tensor out = at::empty(shape, input.options().memory_format(input.suggest_memory_format()));
  return resize_out(op, input, output_size, align_corners, scales, out);
}
at::Tensor resize_backward(const Resize& op, const at::Tensor& grad_output, at::IntArrayRef output_size,
                           at::IntArrayRef input_size, bool align_corners, const Scales& scales) {
  at::Tensor grad_input =
      at::empty(input_size, grad_output.options().memory_format(grad_output.suggest_memory_format()));
  return resize_backward_out(op, grad_output, output_size, input_size, align_corners, scales, grad_input);
}

constexpr Resize kLinear1d{"upsample_linear1d", 1};
constexpr Resize kBilinear2d{"upsample_bilinear2d", 2};
constexpr Resize kTrilinear3d{"upsample_trilinear3d", 3};

using S = std::optional<double>;
using Sizes = at::IntArrayRef;
at::Tensor linear1d(const at::Tensor& x, Sizes size, bool corners, S w) {
  return resize(kLinear1d, x, size, corners, {w});
}
at::Tensor& linear1d_out(const at::Tensor& x, Sizes size, bool corners, S w, at::Tensor& out) {
  return resize_out(kLinear1d, x, size, corners, {w}, out);
}
at::Tensor linear1d_backward(const at::Tensor& g, Sizes size, Sizes input, bool corners, S w) {
  return resize_backward(kLinear1d, g, size, input, corners, {w});
}
at::Tensor& linear1d_backward_out(const at::Tensor& g, Sizes size, Sizes input, bool corners, S w, at::Tensor& out) {
  return resize_backward_out(kLinear1d, g, size, input, corners, {w}, out);
}
at::Tensor bilinear2d(const at::Tensor& x, Sizes size, bool corners, S h, S w) {
  return resize(kBilinear2d, x, size, corners, {h, w});
}
at::Tensor& bilinear2d_out(const at::Tensor& x, Sizes size, bool corners, S h, S w, at::Tensor& out) {
  return resize_out(kBilinear2d, x, size, corners, {h, w}, out);
}
at::Tensor bilinear2d_backward(const at::Tensor& g, Sizes size, Sizes input, bool corners, S h, S w) {
  return resize_backward(kBilinear2d, g, size, input, corners, {h, w});
}
at::Tensor& bilinear2d_backward_out(const at::Tensor& g, Sizes size, Sizes input, bool corners, S h, S w,
                                    at::Tensor& out) {
  return resize_backward_out(kBilinear2d, g, size, input, corners, {h, w}, out);
}
at::Tensor trilinear3d(const at::Tensor& x, Sizes size, bool corners, S d, S h, S w) {
  return resize(kTrilinear3d, x, size, corners, {d, h, w});
}
at::Tensor& trilinear3d_out(const at::Tensor& x, Sizes size, bool corners, S d, S h, S w, at::Tensor& out) {
  return resize_out(kTrilinear3d, x, size, corners, {d, h, w}, out);
}
at::Tensor trilinear3d_backward(const at::Tensor& g, Sizes size, Sizes input, bool corners, S d, S h, S w) {
  return resize_backward(kTrilinear3d, g, size, input, corners, {d, h, w});
}
at::Tensor& trilinear3d_backward_out(const at::Tensor& g, Sizes size, Sizes input, bool corners, S d, S h, S w,
                                     at::Tensor& out) {
  return resize_backward_out(kTrilinear3d, g, size, input, corners, {d, h, w}, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_linear1d", linear1d);
  m.impl("upsample_linear1d.out", linear1d_out);
  m.impl("upsample_linear1d_backward", linear1d_backward);
  m.impl("upsample_linear1d_backward.grad_input", linear1d_backward_out);
  m.impl("upsample_bilinear2d", bilinear2d);
  m.impl("upsample_bilinear2d.out", bilinear2d_out);
  m.impl("upsample_bilinear2d_backward", bilinear2d_backward);
  m.impl("upsample_bilinear2d_backward.grad_input", bilinear2d_backward_out);
  m.impl("upsample_trilinear3d", trilinear3d);
  m.impl("upsample_trilinear3d.out", trilinear3d_out);
  m.impl("upsample_trilinear3d_backward", trilinear3d_backward);
  m.impl("upsample_trilinear3d_backward.grad_input", trilinear3d_backward_out);
}

}  // namespace npusim::bridge
