// 3-D convolutions (nn.Conv3d, nn.ConvTranspose3d and their gradients), float32, as 2-D ones over depth.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>

namespace npusim::bridge {

at::Tensor convolution_3d(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                          c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                          c10::IntArrayRef output_padding, int64_t groups);

// The input's and the weight's gradients (where output_mask asks for them; the bias's is the caller's).
std::tuple<at::Tensor, at::Tensor> convolution_3d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                           const at::Tensor& weight, c10::IntArrayRef stride,
                                                           c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                           bool transposed, c10::IntArrayRef output_padding,
                                                           int64_t groups, std::array<bool, 2> output_mask);

}  // namespace npusim::bridge
