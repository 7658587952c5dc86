// Native convolution for PyTorch's custom-device hook (convolution_overrideable and its backward), so nn.Conv1d
// and nn.Conv2d with any stride, padding, dilation and groups, float32, composed from native kernels:
//   im2col   each sample's patches are a strided view of the zero-padded input, made contiguous by a copy kernel;
//   products weights [O/g x C/g*KH*KW] @ patches [C/g*KH*KW x OH*OW] on the matrix engine, one per sample and group;
//   col2im   the input gradient adds each kernel offset's patch gradients into a strided view (KH*KW adds).
// Transposed convolutions and other dtypes run on the CPU, counted as a fallback.
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <array>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// A 2-D convolution's shapes. 1-D convolutions are 2-D ones of height 1.
struct Geometry {
  int64_t batch, channels, height, width, outputs, kernel_h, kernel_w, out_h, out_w, groups;
  std::array<int64_t, 2> stride, padding, dilation;

  int64_t group_channels() const { return channels / groups; }
  int64_t group_outputs() const { return outputs / groups; }
  int64_t patch() const { return group_channels() * kernel_h * kernel_w; }  // one output's inputs in a group
  int64_t padded_h() const { return height + 2 * padding[0]; }
  int64_t padded_w() const { return width + 2 * padding[1]; }
};

// Arguments of a 1-D convolution become their 2-D equivalents: height 1, and unit stride, no padding and no dilation
// along it.
std::array<int64_t, 2> as_2d(c10::IntArrayRef values, int64_t height_value) {
  return values.size() == 1 ? std::array<int64_t, 2>{height_value, values[0]}
                            : std::array<int64_t, 2>{values[0], values[1]};
}

Geometry geometry(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride, c10::IntArrayRef padding,
                  c10::IntArrayRef dilation, int64_t groups) {
  Geometry g{};
  g.batch = input.size(0);
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.outputs = weight.size(0);
  g.kernel_h = weight.size(2);
  g.kernel_w = weight.size(3);
  g.groups = groups;
  g.stride = as_2d(stride, 1);
  g.padding = as_2d(padding, 0);
  g.dilation = as_2d(dilation, 1);
  g.out_h = (g.padded_h() - g.dilation[0] * (g.kernel_h - 1) - 1) / g.stride[0] + 1;
  g.out_w = (g.padded_w() - g.dilation[1] * (g.kernel_w - 1) - 1) / g.stride[1] + 1;
  return g;
}

bool runs_natively(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, bool transposed,
                   c10::IntArrayRef output_padding) {
  const auto on_device_f32 = [&](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.device() == input.device();
  };
  for (int64_t extra : output_padding)
    if (extra != 0) return false;
  return !transposed && (input.dim() == 3 || input.dim() == 4) && weight.dim() == input.dim() && on_device_f32(input) &&
         on_device_f32(weight) && (!bias.defined() || on_device_f32(bias)) && input.numel() > 0;
}

// The input with its zero border, contiguous: [N, C, H + 2 ph, W + 2 pw].
at::Tensor padded(const at::Tensor& input, const Geometry& g) {
  if (g.padding[0] == 0 && g.padding[1] == 0) return input.contiguous();
  at::Tensor result = at::zeros({g.batch, g.channels, g.padded_h(), g.padded_w()}, input.options());
  result.narrow(2, g.padding[0], g.height).narrow(3, g.padding[1], g.width).copy_(input);
  return result;
}

// The patches of one sample of the padded input as a strided view, [C, KH, KW, OH, OW]: element (c, i, j, y, x) is
// padded[c][y * sh + i * dh][x * sw + j * dw]. A view of the gradient's padded input, it is also where col2im adds.
at::Tensor patch_view(const at::Tensor& sample, const Geometry& g) {
  const int64_t row = g.padded_w(), plane = g.padded_h() * row;
  return sample.as_strided({g.channels, g.kernel_h, g.kernel_w, g.out_h, g.out_w},
                           {plane, row * g.dilation[0], g.dilation[1], row * g.stride[0], g.stride[1]},
                           sample.storage_offset());
}

// Rows of the patch matrix of one sample and group: [C/g * KH * KW, OH * OW].
at::Tensor patch_matrix(const at::Tensor& patches, const Geometry& g, int64_t group) {
  return patches.narrow(0, group * g.group_channels(), g.group_channels()).reshape({g.patch(), g.out_h * g.out_w});
}
at::Tensor weight_matrix(const at::Tensor& weight, const Geometry& g, int64_t group) {
  return weight.narrow(0, group * g.group_outputs(), g.group_outputs()).reshape({g.group_outputs(), g.patch()});
}
// One sample's outputs of one group as a matrix view, [O/g, OH * OW].
at::Tensor output_matrix(const at::Tensor& output, const Geometry& g, int64_t sample, int64_t group) {
  return output.select(0, sample)
      .narrow(0, group * g.group_outputs(), g.group_outputs())
      .view({g.group_outputs(), g.out_h * g.out_w});
}

// 1-D tensors (N, C, L) as 2-D ones of height 1.
at::Tensor as_4d(const at::Tensor& t) { return t.dim() == 3 ? t.unsqueeze(2) : t; }

at::Tensor convolution_on_cpu(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                              c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                              bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  note_cpu_fallback("aten::convolution_overrideable");
  const at::Tensor result = at::convolution(input.cpu(), weight.cpu(), bias.defined() ? bias.cpu() : at::Tensor(),
                                            stride, padding, dilation, transposed, output_padding, groups);
  return result.to(input.device());
}

at::Tensor npusim_convolution(const at::Tensor& input_, const at::Tensor& weight_,
                              const std::optional<at::Tensor>& bias_opt, c10::IntArrayRef stride,
                              c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                              c10::IntArrayRef output_padding, int64_t groups) {
  const at::Tensor bias = bias_opt.has_value() ? *bias_opt : at::Tensor();
  if (!runs_natively(input_, weight_, bias, transposed, output_padding))
    return convolution_on_cpu(input_, weight_, bias, stride, padding, dilation, transposed, output_padding, groups);
  const at::Tensor input = as_4d(input_), weight = as_4d(weight_).contiguous();
  const Geometry g = geometry(input, weight, stride, padding, dilation, groups);
  const at::Tensor source = padded(input, g);
  at::Tensor output = at::empty({g.batch, g.outputs, g.out_h, g.out_w}, input.options());
  for (int64_t n = 0; n < g.batch; ++n) {
    const at::Tensor patches = patch_view(source.select(0, n), g).contiguous();
    for (int64_t group = 0; group < g.groups; ++group) {
      at::Tensor out = output_matrix(output, g, n, group);
      at::mm_out(out, weight_matrix(weight, g, group), patch_matrix(patches, g, group));
    }
  }
  if (bias.defined()) output.add_(bias.view({1, g.outputs, 1, 1}));
  return input_.dim() == 3 ? output.squeeze(2) : output;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_convolution_backward(
    const at::Tensor& grad_output_, const at::Tensor& input_, const at::Tensor& weight_, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  if (!runs_natively(input_, weight_, at::Tensor(), transposed, output_padding) ||
      grad_output_.scalar_type() != at::kFloat) {
    note_cpu_fallback("aten::convolution_backward_overrideable");
    const std::vector<int64_t> bias_sizes{transposed ? weight_.size(1) * groups : weight_.size(0)};
    auto [grad_input, grad_weight, grad_bias] =
        at::convolution_backward(grad_output_.cpu(), input_.cpu(), weight_.cpu(), at::OptionalIntArrayRef(bias_sizes),
                                 stride, padding, dilation, transposed, output_padding, groups, output_mask);
    const auto back = [&](const at::Tensor& t) { return t.defined() ? t.to(input_.device()) : t; };
    return {back(grad_input), back(grad_weight), back(grad_bias)};
  }
  const at::Tensor input = as_4d(input_), weight = as_4d(weight_).contiguous();
  const at::Tensor grad_output = as_4d(grad_output_).contiguous();
  const Geometry g = geometry(input, weight, stride, padding, dilation, groups);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[2]) grad_bias = grad_output.sum(3).sum(2).sum(0);
  if (output_mask[1]) {  // sum over samples of grad_output @ patches^T
    const at::Tensor source = padded(input, g);
    grad_weight = at::zeros(weight.sizes(), weight.options());
    for (int64_t n = 0; n < g.batch; ++n) {
      const at::Tensor patches = patch_view(source.select(0, n), g).contiguous();
      for (int64_t group = 0; group < g.groups; ++group)
        weight_matrix(grad_weight, g, group)
            .add_(at::mm(output_matrix(grad_output, g, n, group), patch_matrix(patches, g, group).t()));
    }
    if (input_.dim() == 3) grad_weight = grad_weight.squeeze(2);
  }
  if (output_mask[0]) {  // weights^T @ grad_output gives the patches' gradients; col2im adds them up
    at::Tensor grad_padded = at::zeros({g.batch, g.channels, g.padded_h(), g.padded_w()}, input.options());
    for (int64_t n = 0; n < g.batch; ++n) {
      const at::Tensor sample = grad_padded.select(0, n);
      for (int64_t group = 0; group < g.groups; ++group) {
        const at::Tensor patch_grads =
            at::mm(weight_matrix(weight, g, group).t(), output_matrix(grad_output, g, n, group))
                .view({g.group_channels(), g.kernel_h, g.kernel_w, g.out_h, g.out_w});
        const at::Tensor targets = patch_view(sample, g).narrow(0, group * g.group_channels(), g.group_channels());
        // One kernel offset at a time: within one, distinct outputs touch distinct inputs.
        for (int64_t i = 0; i < g.kernel_h; ++i)
          for (int64_t j = 0; j < g.kernel_w; ++j)
            targets.select(1, i).select(1, j).add_(patch_grads.select(1, i).select(1, j));
      }
    }
    grad_input = grad_padded.narrow(2, g.padding[0], g.height).narrow(3, g.padding[1], g.width).contiguous();
    if (input_.dim() == 3) grad_input = grad_input.squeeze(2);
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", npusim_convolution);
  m.impl("convolution_backward_overrideable", npusim_convolution_backward);
}

}  // namespace npusim::bridge
