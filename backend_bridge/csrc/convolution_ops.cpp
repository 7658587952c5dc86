// Native convolution for PyTorch's custom-device hook (convolution_overrideable and its backward), so nn.Conv1d
// and nn.Conv2d with any stride, padding, dilation and groups, float32, composed from native kernels:
//   im2col   patches are a strided view of the zero-padded input, made contiguous by a copy kernel;
//   products on the matrix engine: ungrouped convolutions of kernels larger than 1 x 1 channels-last, one GEMM
//            for the whole batch, patches [N*OH*OW x KH*KW*C] @ weights [KH*KW*C x O]; ungrouped 1 x 1 kernels one
//            batched launch, weights [O x C] @ input [C x OH*OW] per sample; grouped ones per sample and group,
//            weights [O/g x C/g*KH*KW] @ patches [C/g*KH*KW x OH*OW];
//   input gradient  of a stride-1 convolution is itself a convolution (of the output gradient, by the kernel turned
//            half a circle with inputs and outputs swapped), run channels-last like a forward; an ungrouped 1 x 1
//            kernel's is one batched product; otherwise col2im adds each kernel offset's patch gradients into a strided
//            view.
// bfloat16 and float16 convolutions compute in float32 (widened on the device, rounded once at the end, as the CPU
// computes them). Transposed convolutions and other dtypes run on the CPU, counted as a fallback.
#include <ATen/ops/arange.h>
#include <ATen/ops/bmm.h>
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

// Half-precision operands, all of one dtype: the convolution runs in float32 and rounds its results back.
bool widens_to_float32(const at::Tensor& input, std::initializer_list<at::Tensor> others) {
  if (input.scalar_type() != at::kBFloat16 && input.scalar_type() != at::kHalf) return false;
  for (const at::Tensor& other : others)
    if (other.defined() && (other.scalar_type() != input.scalar_type() || other.device() != input.device()))
      return false;
  return true;
}
at::Tensor widened(const at::Tensor& t) { return t.defined() ? t.to(at::kFloat) : t; }
at::Tensor narrowed(const at::Tensor& t, at::ScalarType type) { return t.defined() ? t.to(type) : t; }

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

// Ungrouped convolutions run channels-last, as one GEMM for the whole batch whose rows are the output positions
// (N*OH*OW rows: tall products keep the systolic array's fill and drain small against the rows streaming through):
// the padded input as NHWC, its patches [N*OH*OW, KH*KW*C] gathered by one copy kernel moving rows of C channels,
// and the weights as [KH*KW*C, O].
// A 1 x 1 kernel's patches are the input itself: ungrouped, it runs pointwise, NCHW, one batched launch of
// weights [O, C] @ patches [C, OH*OW] per sample, where the channels-last route would add two transposes.
bool runs_channels_last(const Geometry& g) { return g.groups == 1 && g.kernel_h * g.kernel_w > 1; }
bool runs_pointwise(const Geometry& g) { return g.groups == 1 && g.kernel_h * g.kernel_w == 1; }
int64_t output_positions(const Geometry& g) { return g.batch * g.out_h * g.out_w; }
bool patches_are_the_input(const Geometry& g) {
  return g.kernel_h * g.kernel_w == 1 && g.stride == std::array<int64_t, 2>{1, 1} &&
         g.padding == std::array<int64_t, 2>{0, 0};
}

// The patches of the padded NHWC input (or of its gradient) as a view [N, OH, OW, KH, KW, C]: element
// (n, y, x, i, j, c) is nhwc[n][y * sh + i * dh][x * sw + j * dw][c].
at::Tensor channels_last_patch_view(const at::Tensor& nhwc, const Geometry& g) {
  const int64_t pixel = g.channels, row = g.padded_w() * pixel, image = g.padded_h() * row;
  return nhwc.as_strided({g.batch, g.out_h, g.out_w, g.kernel_h, g.kernel_w, g.channels},
                         {image, row * g.stride[0], pixel * g.stride[1], row * g.dilation[0], pixel * g.dilation[1], 1},
                         nhwc.storage_offset());
}
at::Tensor channels_last_patches(const at::Tensor& padded_input, const Geometry& g) {
  const at::Tensor nhwc = padded_input.permute({0, 2, 3, 1}).contiguous();
  const at::Tensor view = channels_last_patch_view(nhwc, g);
  // Undilated kernel columns merge with the channels into rows: one copy kernel.
  if (g.dilation[1] == 1) return view.reshape({output_positions(g), g.patch()});
  // Dilated kernel columns leave six dimensions, one more than a copy kernel walks: one copy per sample.
  at::Tensor patches = at::empty(view.sizes(), nhwc.options());
  for (int64_t n = 0; n < g.batch; ++n) patches.select(0, n).copy_(view.select(0, n));
  return patches.view({output_positions(g), g.patch()});
}
at::Tensor channels_last_weights(const at::Tensor& weight, const Geometry& g) {
  return weight.permute({2, 3, 1, 0}).reshape({g.patch(), g.outputs});
}

// The convolution of the padded NCHW `source` by channels-last weights [KH*KW*C, O], as NCHW.
at::Tensor convolution_channels_last(const at::Tensor& source, const at::Tensor& weights, const Geometry& g) {
  const at::Tensor rows = at::mm(channels_last_patches(source, g), weights);
  return rows.view({g.batch, g.out_h, g.out_w, g.outputs}).permute({0, 3, 1, 2}).contiguous();
}

// A stride-1 convolution's input gradient is the convolution of its output gradient, padded by d (k - 1) - p, by the
// kernel turned half a circle with its inputs and outputs swapped (the transposed convolution): when that padding is
// not negative.
bool input_gradient_is_convolution(const Geometry& g) {
  for (int d = 0; d < 2; ++d)
    if (g.stride[d] != 1 || g.padding[d] > g.dilation[d] * ((d == 0 ? g.kernel_h : g.kernel_w) - 1)) return false;
  return g.groups == 1;
}
Geometry input_gradient_geometry(const Geometry& g) {
  Geometry gradient = g;
  gradient.channels = g.outputs;
  gradient.outputs = g.channels;
  gradient.height = g.out_h;
  gradient.width = g.out_w;
  gradient.out_h = g.height;
  gradient.out_w = g.width;
  gradient.padding = {g.dilation[0] * (g.kernel_h - 1) - g.padding[0], g.dilation[1] * (g.kernel_w - 1) - g.padding[1]};
  return gradient;
}
// Its channels-last weights [KH*KW*O, C]: kernel offset (i, j) takes the weights of (KH-1-i, KW-1-j), which is the
// flattened offsets in reverse.
at::Tensor half_turned_channels_last_weights(const at::Tensor& weight, const Geometry& g) {
  const int64_t offsets = g.kernel_h * g.kernel_w;
  const at::Tensor by_offset = weight.permute({2, 3, 0, 1}).reshape({offsets, g.outputs * g.channels});
  const at::Tensor reversed = at::arange(offsets - 1, -1, -1, weight.options().dtype(at::kLong));
  return by_offset.index_select(0, reversed).view({offsets * g.outputs, g.channels});
}

// The gradients of an ungrouped convolution, channels-last like its forward: the weights' from one GEMM over all
// output positions, the input's from the patches' gradients (one GEMM) added into the NHWC gradient one kernel offset
// at a time (col2im; within one offset, distinct outputs touch distinct inputs).
void convolution_backward_channels_last(const at::Tensor& input, const at::Tensor& weight,
                                        const at::Tensor& grad_output, const Geometry& g, std::array<bool, 3> mask,
                                        at::Tensor& grad_input, at::Tensor& grad_weight) {
  if (mask[1]) {
    const at::Tensor by_output = grad_output.permute({1, 0, 2, 3}).reshape({g.outputs, output_positions(g)});
    grad_weight = at::mm(by_output, channels_last_patches(padded(input, g), g))
                      .view({g.outputs, g.kernel_h, g.kernel_w, g.channels})
                      .permute({0, 3, 1, 2})
                      .contiguous();
  }
  if (mask[0] && input_gradient_is_convolution(g)) {
    const Geometry gradient = input_gradient_geometry(g);
    grad_input = convolution_channels_last(padded(grad_output, gradient), half_turned_channels_last_weights(weight, g),
                                           gradient);
  } else if (mask[0]) {
    const at::Tensor grad_rows = grad_output.permute({0, 2, 3, 1}).reshape({output_positions(g), g.outputs});
    const at::Tensor patch_grads = at::mm(grad_rows, channels_last_weights(weight, g).t())
                                       .view({g.batch, g.out_h, g.out_w, g.kernel_h, g.kernel_w, g.channels});
    const at::Tensor grad_nhwc = at::zeros({g.batch, g.padded_h(), g.padded_w(), g.channels}, input.options());
    const at::Tensor targets = channels_last_patch_view(grad_nhwc, g);
    for (int64_t i = 0; i < g.kernel_h; ++i)
      for (int64_t j = 0; j < g.kernel_w; ++j)
        targets.select(3, i).select(3, j).add_(patch_grads.select(3, i).select(3, j));
    grad_input = grad_nhwc.permute({0, 3, 1, 2}).narrow(2, g.padding[0], g.height).narrow(3, g.padding[1], g.width);
    grad_input = grad_input.contiguous();
  }
}

// The input positions a 1 x 1 kernel visits, as a view [N, C, OH, OW] of the padded input (or of its gradient).
at::Tensor pointwise_view(const at::Tensor& padded_input, const Geometry& g) {
  const int64_t row = g.padded_w(), plane = g.padded_h() * row;
  return padded_input.as_strided({g.batch, g.channels, g.out_h, g.out_w},
                                 {g.channels * plane, plane, row * g.stride[0], g.stride[1]},
                                 padded_input.storage_offset());
}
// The patches of an ungrouped 1 x 1 convolution, [N, C, OH*OW]: that view, copied once unless the stride is 1.
at::Tensor pointwise_patches(const at::Tensor& padded_input, const Geometry& g) {
  return pointwise_view(padded_input, g).reshape({g.batch, g.channels, g.out_h * g.out_w});
}
at::Tensor batch_of(const at::Tensor& matrix, const Geometry& g) {  // one matrix for every sample (batch stride 0)
  return matrix.expand({g.batch, matrix.size(0), matrix.size(1)});
}

at::Tensor convolution_pointwise(const at::Tensor& padded_input, const at::Tensor& weight, const Geometry& g) {
  const at::Tensor products =
      at::bmm(batch_of(weight.view({g.outputs, g.channels}), g), pointwise_patches(padded_input, g));
  return products.view({g.batch, g.outputs, g.out_h, g.out_w});
}

// Its gradients: the weights' as one batched product per sample summed over the batch; the input's as the weights
// transposed times the output gradient, written into the input positions the stride visits.
void convolution_backward_pointwise(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& grad_output,
                                    const Geometry& g, std::array<bool, 3> mask, at::Tensor& grad_input,
                                    at::Tensor& grad_weight) {
  const at::Tensor grad_rows = grad_output.view({g.batch, g.outputs, g.out_h * g.out_w});
  if (mask[1])
    grad_weight =
        at::bmm(grad_rows, pointwise_patches(padded(input, g), g).transpose(1, 2)).sum(0).view(weight.sizes());
  if (mask[0]) {
    const at::Tensor transposed = weight.view({g.outputs, g.channels}).t().contiguous();
    const at::Tensor patch_grads = at::bmm(batch_of(transposed, g), grad_rows);
    if (patches_are_the_input(g)) {
      grad_input = patch_grads.view(input.sizes());
    } else {
      at::Tensor grad_padded = at::zeros({g.batch, g.channels, g.padded_h(), g.padded_w()}, input.options());
      pointwise_view(grad_padded, g).copy_(patch_grads.view({g.batch, g.channels, g.out_h, g.out_w}));
      grad_input = grad_padded.narrow(2, g.padding[0], g.height).narrow(3, g.padding[1], g.width).contiguous();
    }
  }
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
  if (!transposed && widens_to_float32(input_, {weight_, bias}))
    return npusim_convolution(widened(input_), widened(weight_), widened(bias), stride, padding, dilation, transposed,
                              output_padding, groups)
        .to(input_.scalar_type());
  if (!runs_natively(input_, weight_, bias, transposed, output_padding))
    return convolution_on_cpu(input_, weight_, bias, stride, padding, dilation, transposed, output_padding, groups);
  const at::Tensor input = as_4d(input_), weight = as_4d(weight_).contiguous();
  const Geometry g = geometry(input, weight, stride, padding, dilation, groups);
  const at::Tensor source = padded(input, g);
  const bool grouped = !runs_channels_last(g) && !runs_pointwise(g);
  at::Tensor output = runs_channels_last(g) ? convolution_channels_last(source, channels_last_weights(weight, g), g)
                      : runs_pointwise(g)   ? convolution_pointwise(source, weight, g)
                                            : at::empty({g.batch, g.outputs, g.out_h, g.out_w}, input.options());
  for (int64_t n = 0; n < g.batch && grouped; ++n) {
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
  if (!transposed && widens_to_float32(input_, {grad_output_, weight_})) {
    const auto [grad_input, grad_weight, grad_bias] =
        npusim_convolution_backward(widened(grad_output_), widened(input_), widened(weight_), stride, padding, dilation,
                                    transposed, output_padding, groups, output_mask);
    const at::ScalarType type = input_.scalar_type();
    return {narrowed(grad_input, type), narrowed(grad_weight, type), narrowed(grad_bias, type)};
  }
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
  if (runs_channels_last(g))
    convolution_backward_channels_last(input, weight, grad_output, g, output_mask, grad_input, grad_weight);
  if (runs_pointwise(g))
    convolution_backward_pointwise(input, weight, grad_output, g, output_mask, grad_input, grad_weight);
  const bool grouped = !runs_channels_last(g) && !runs_pointwise(g);
  if (output_mask[1] && grouped) {  // grad_output @ patches^T per sample and group, summed over the batch
    const at::Tensor source = padded(input, g);
    const at::Tensor per_sample = at::empty({g.batch, g.outputs, g.patch()}, weight.options());
    for (int64_t n = 0; n < g.batch; ++n) {
      const at::Tensor patches = patch_view(source.select(0, n), g).contiguous();
      for (int64_t group = 0; group < g.groups; ++group) {
        at::Tensor product = per_sample.select(0, n).narrow(0, group * g.group_outputs(), g.group_outputs());
        at::mm_out(product, output_matrix(grad_output, g, n, group), patch_matrix(patches, g, group).t());
      }
    }
    grad_weight = per_sample.sum(0).view(weight.sizes());
  }
  if (output_mask[0] && grouped && patches_are_the_input(g)) {  // weights^T @ grad_output
    grad_input = at::empty(input.sizes(), input.options());
    for (int64_t group = 0; group < g.groups; ++group) {
      const at::Tensor transposed = weight_matrix(weight, g, group).t().contiguous();
      for (int64_t n = 0; n < g.batch; ++n) {
        at::Tensor out = grad_input.select(0, n)
                             .narrow(0, group * g.group_channels(), g.group_channels())
                             .view({g.group_channels(), g.height * g.width});
        at::mm_out(out, transposed, output_matrix(grad_output, g, n, group));
      }
    }
  } else if (output_mask[0] && grouped) {
    // weights^T @ grad_output gives the patches' gradients; col2im adds them up
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
  }
  if (input_.dim() == 3 && grad_weight.defined()) grad_weight = grad_weight.squeeze(2);
  if (input_.dim() == 3 && grad_input.defined()) grad_input = grad_input.squeeze(2);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", npusim_convolution);
  m.impl("convolution_backward_overrideable", npusim_convolution_backward);
}

}  // namespace npusim::bridge
