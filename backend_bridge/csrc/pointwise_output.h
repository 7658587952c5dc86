// The output of an elementwise op over broadcast operands, as PyTorch's TensorIterator prepares it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace npusim::bridge {

// The operands' broadcast shape, with `out` resized to it (an operand written in place must have it already, else
// PyTorch's "doesn't match the broadcast shape" error) and checked not to overlap itself or partially overlap an
// operand. Returns the shape.
std::vector<int64_t> resize_to_broadcast(at::Tensor& out, const std::vector<at::Tensor>& operands);

}  // namespace npusim::bridge
