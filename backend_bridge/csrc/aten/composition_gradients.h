// The gradients of a forward operator that npusim composes from native operators, by autograd over that composition:
// the backward operator of a forward whose composition autograd can differentiate (grid_sampler_3d's gathers,
// products and sums) needs no formula of its own, and runs on the device like the forward. (npusim/
// eager_decompositions.py does the same in Python for the backwards of forwards run as PyTorch's decompositions.)
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace npusim::bridge {

// d(forward(inputs)) / d(inputs[i]) weighted by `grad_output`, for each i with needed[i]: zeros where the output does
// not depend on inputs[i], undefined where it is not needed. Backward kernels run below the autograd dispatch keys;
// this re-enables autograd for the composition.
std::vector<at::Tensor> composition_gradients(const std::function<at::Tensor(const std::vector<at::Tensor>&)>& forward,
                                              const std::vector<at::Tensor>& inputs, const std::vector<bool>& needed,
                                              const at::Tensor& grad_output);

}  // namespace npusim::bridge
