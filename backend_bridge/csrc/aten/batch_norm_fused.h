// Batch normalisation in training, forward and backward, each as one fused kernel (emitter::FusedSpec): the
// iteration space is [C, N, S] (channels, batch, the spatial elements), the batch and spatial dimensions reduced, so
// that each channel's statistics are row reductions and every per-channel value broadcasts back over its row. x is
// read once (once per pass over a channel too long for the scratchpad), and the statistics never make a trip through
// DRAM.
#pragma once

#include <ATen/core/Tensor.h>

namespace npusim::bridge {

// y = (x - mean) invstd weight + bias over the batch's statistics; writes y, the batch mean and 1/std (for the
// backward), and moves the running statistics (when defined) toward the batch's, the variance unbiased, as
// PyTorch does. Weight, bias and the running statistics may be undefined. False (nothing written) when the kernel
// cannot be built: a tensor is not contiguous. (A channel's elements that do not fit the scratchpad are walked in
// chunks, a pass over them per statistic.)
bool batch_norm_forward_in_one_kernel(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                      const at::Tensor& running_mean, const at::Tensor& running_var, double momentum,
                                      double eps, const at::Tensor& output, const at::Tensor& mean,
                                      const at::Tensor& invstd);

// The training backward from the saved mean and 1/std: with x̂ = (x - mean) invstd and M elements per channel,
// grad_bias = Σ dy, grad_weight = Σ dy x̂, grad_input = (M dy - grad_bias - x̂ grad_weight) invstd weight / M. False
// (nothing written) when the kernel cannot be built, as above.
bool batch_norm_backward_in_one_kernel(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
                                       const at::Tensor& mean, const at::Tensor& invstd, const at::Tensor& grad_input,
                                       const at::Tensor& grad_weight, const at::Tensor& grad_bias);

}  // namespace npusim::bridge
