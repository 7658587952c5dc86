// sum of integer and bool tensors into int64 (PyTorch's result type for them): one fused kernel that reduces the
// summed dimensions of each output element's row, in wrapping int64 arithmetic as the CPU's.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace npusim::bridge {

// `reduced`: distinct dimensions of self. False, having changed nothing, when it cannot run natively (not integers
// into int64 on one device, or a row larger than the scratchpad holds): the caller runs it another way.
bool launch_integer_sum(const at::Tensor& self, const std::vector<int64_t>& reduced, bool keepdim, at::Tensor& out);

}  // namespace npusim::bridge
