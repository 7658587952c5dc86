// 3-D convolutions as 2-D ones over depth, so that they take the native 2-D routes (im2col or implicit GEMM on the
// matrix engine) and their transposes and gradients with them:
//   windows  every depth window of the (depth-padded) input becomes the channels of one 2-D image: output depth o
//            sees input depths o * stride + k * dilation for k < KD, so image (n, o) has channels (group, k, c)
//            [N * OD, KD * C, H, W], gathered by one copy kernel;
//   weights  [O, C/g, KD, KH, KW] as [O, KD * C/g, KH, KW] (the same (k, c) order within each group);
//   product  one 2-D convolution of those images, its [N * OD, O, OH, OW] output turned back to [N, O, OD, OH, OW].
// A depth window's gradient is added back where it was gathered from (one strided add per kernel depth), so the input's
// gradient, and a transposed convolution (the input gradient of the convolution it transposes), take that way back.
#include "convolution_3d.h"

#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/zeros.h>

#include <optional>
#include <vector>

namespace npusim::bridge {
namespace {

// A 3-D convolution's arguments along depth, and its groups; the other two dimensions are the 2-D convolution's.
struct Depth {
  int64_t kernel, stride, padding, dilation, output_padding, groups;

  // How many windows fit along a padded depth.
  int64_t windows(int64_t padded) const { return (padded - dilation * (kernel - 1) - 1) / stride + 1; }
};

int64_t element(c10::IntArrayRef values, size_t i) { return values.size() == 1 ? values[0] : values[i]; }
std::vector<int64_t> height_and_width(c10::IntArrayRef values) { return {element(values, 1), element(values, 2)}; }

Depth depth_of(const at::Tensor& weight, c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
               c10::IntArrayRef output_padding, int64_t groups) {
  return {weight.size(2),
          element(stride, 0),
          element(padding, 0),
          element(dilation, 0),
          output_padding.empty() ? 0 : element(output_padding, 0),
          groups};
}

// [N, C, D, H, W] <-> [N * D, C, H, W]: the depths as samples of a 2-D convolution.
at::Tensor depths_as_batch(const at::Tensor& t) {
  return t.permute({0, 2, 1, 3, 4}).reshape({t.size(0) * t.size(2), t.size(1), t.size(3), t.size(4)});
}
at::Tensor batch_as_depths(const at::Tensor& t, int64_t batch) {
  return t.view({batch, t.size(0) / batch, t.size(1), t.size(2), t.size(3)}).permute({0, 2, 1, 3, 4}).contiguous();
}

// Where depth window o's kernel depth k lies in the padded [N, C, D + 2p, H, W] tensor, for every (n, o, group, c):
// [N, OD, groups, C/g, H * W]; `k` is fixed for a view, so windows of one view never overlap (stride >= 1).
at::Tensor kernel_depth_view(const at::Tensor& padded, const Depth& d, int64_t windows, int64_t k) {
  const int64_t group_channels = padded.size(1) / d.groups, plane = padded.size(3) * padded.size(4);
  const c10::IntArrayRef s = padded.strides();
  return padded.as_strided({padded.size(0), windows, d.groups, group_channels, plane},
                           {s[0], d.stride * s[2], group_channels * s[1], s[1], 1},
                           padded.storage_offset() + k * d.dilation * s[2]);
}

// The first `windows` depth windows of `t` (all that fit, by default) as 2-D images [N * OD, groups * KD * C/g, H, W]
// (the module comment).
at::Tensor depth_windows(const at::Tensor& t, const Depth& d, std::optional<int64_t> count = std::nullopt) {
  at::Tensor padded = t.contiguous();
  if (d.padding > 0) {
    padded = at::zeros({t.size(0), t.size(1), t.size(2) + 2 * d.padding, t.size(3), t.size(4)}, t.options());
    padded.narrow(2, d.padding, t.size(2)).copy_(t);
  }
  const int64_t windows = count.value_or(d.windows(padded.size(2))), group_channels = t.size(1) / d.groups;
  const c10::IntArrayRef s = padded.strides();
  const at::Tensor view = padded.as_strided(
      {t.size(0), windows, d.groups, d.kernel, group_channels, t.size(3) * t.size(4)},
      {s[0], d.stride * s[2], group_channels * s[1], d.dilation * s[2], s[1], 1}, padded.storage_offset());
  return view.contiguous().view({t.size(0) * windows, t.size(1) * d.kernel, t.size(3), t.size(4)});
}

// The inverse of depth_windows' gather: each window's values added where they were read from, into a zero tensor of
// `depth` (unpadded) depths. [N * OD, groups * KD * C/g, H, W] -> [N, C, depth, H, W].
at::Tensor added_back_from_windows(const at::Tensor& images, int64_t batch, int64_t depth, const Depth& d) {
  const int64_t windows = images.size(0) / batch, channels = images.size(1) / d.kernel;
  const at::Tensor padded =
      at::zeros({batch, channels, depth + 2 * d.padding, images.size(2), images.size(3)}, images.options());
  const at::Tensor by_kernel_depth =
      images.view({batch, windows, d.groups, d.kernel, channels / d.groups, images.size(2) * images.size(3)});
  for (int64_t k = 0; k < d.kernel; ++k) kernel_depth_view(padded, d, windows, k).add_(by_kernel_depth.select(3, k));
  // A tensor of its own, as PyTorch's (a contiguous narrow of one sample and channel would keep an offset).
  return d.padding == 0 ? padded : padded.narrow(2, d.padding, depth).clone(at::MemoryFormat::Contiguous);
}

// [O, C/g, KD, KH, KW] <-> [O, KD * C/g, KH, KW] (for a transposed convolution, [C, O/g, ...] alike).
at::Tensor weight_as_2d(const at::Tensor& weight) {
  return weight.permute({0, 2, 1, 3, 4})
      .reshape({weight.size(0), weight.size(2) * weight.size(1), weight.size(3), weight.size(4)});
}
at::Tensor weight_as_3d(const at::Tensor& weight_2d, const at::Tensor& weight) {
  return weight_2d.view({weight.size(0), weight.size(2), weight.size(1), weight.size(3), weight.size(4)})
      .permute({0, 2, 1, 3, 4})
      .contiguous();
}

}  // namespace

at::Tensor convolution_3d(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                          c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                          c10::IntArrayRef output_padding, int64_t groups) {
  const Depth d = depth_of(weight, stride, padding, dilation, output_padding, groups);
  const std::vector<int64_t> stride_2d = height_and_width(stride), padding_2d = height_and_width(padding),
                             dilation_2d = height_and_width(dilation);
  if (transposed) {
    // The input gradient of the convolution this transposes: its 2-D transpose gives every depth window's gradient,
    // added back into an output of (D - 1) * stride - 2 * padding + dilation * (KD - 1) + output_padding + 1 depths.
    const int64_t depth =
        (input.size(2) - 1) * d.stride - 2 * d.padding + d.dilation * (d.kernel - 1) + d.output_padding + 1;
    const at::Tensor windows = at::convolution(depths_as_batch(input), weight_as_2d(weight), {}, stride_2d, padding_2d,
                                               dilation_2d, true, height_and_width(output_padding), groups);
    return added_back_from_windows(windows, input.size(0), depth, d);
  }
  const at::Tensor images = at::convolution(depth_windows(input, d), weight_as_2d(weight), {}, stride_2d, padding_2d,
                                            dilation_2d, false, {0, 0}, groups);
  return batch_as_depths(images, input.size(0));
}

std::tuple<at::Tensor, at::Tensor> convolution_3d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                           const at::Tensor& weight, c10::IntArrayRef stride,
                                                           c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                           bool transposed, c10::IntArrayRef output_padding,
                                                           int64_t groups, std::array<bool, 2> output_mask) {
  const Depth d = depth_of(weight, stride, padding, dilation, output_padding, groups);
  const std::vector<int64_t> stride_2d = height_and_width(stride), padding_2d = height_and_width(padding),
                             dilation_2d = height_and_width(dilation);
  const std::array<bool, 3> mask{output_mask[0], output_mask[1], false};
  at::Tensor grad_input, grad_weight;
  if (transposed) {
    // Forward: input as a batch of depths -> 2-D transpose -> windows added back. Backward: the output's gradient
    // gathered into windows is the 2-D transpose's output gradient (one window per input depth: an output padding
    // of a stride or more leaves room for more).
    const auto [grad_images, grad_weight_2d, unused] = at::convolution_backward(
        depth_windows(grad_output, d, input.size(2)), depths_as_batch(input), weight_as_2d(weight), std::nullopt,
        stride_2d, padding_2d, dilation_2d, true, height_and_width(output_padding), groups, mask);
    if (output_mask[0]) grad_input = batch_as_depths(grad_images, input.size(0));
    if (output_mask[1]) grad_weight = weight_as_3d(grad_weight_2d, weight);
  } else {
    // Forward: input gathered into windows -> 2-D convolution -> images back to depths.
    const auto [grad_windows, grad_weight_2d, unused] =
        at::convolution_backward(depths_as_batch(grad_output), depth_windows(input, d), weight_as_2d(weight),
                                 std::nullopt, stride_2d, padding_2d, dilation_2d, false, {0, 0}, groups, mask);
    if (output_mask[0]) grad_input = added_back_from_windows(grad_windows, input.size(0), input.size(2), d);
    if (output_mask[1]) grad_weight = weight_as_3d(grad_weight_2d, weight);
  }
  return {grad_input, grad_weight};
}

}  // namespace npusim::bridge
