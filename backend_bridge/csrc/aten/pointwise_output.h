// Results laid out as PyTorch lays them out: an elementwise op's output as its TensorIterator prepares it, and any
// op's result in the layout its meta function predicts (what torch.compile's fake tensors assume).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace npusim::bridge {

// The operands' broadcast shape, with `out` resized to it as PyTorch's TensorIterator resizes a result: laid out in
// the operands' dimension order, an operand written in place not allowed to grow (PyTorch's "doesn't match the
// broadcast shape" error), no overlap of `out` with itself or part of an operand. Undefined operands are skipped.
// Returns the shape.
std::vector<int64_t> resize_to_broadcast(at::Tensor& out, const std::vector<at::Tensor>& operands);

// at::native::resize_output, and a tensor it resized laid out in `format` (channels-last, ...), as PyTorch's
// structured kernels resize a result whose meta function names a memory format.
void resize_output_in_format(at::Tensor& out, at::IntArrayRef shape, c10::MemoryFormat format);

// `tensor`'s sizes, strides and dtype on the meta device (no data): an argument for a PyTorch meta function.
at::Tensor meta_like(const at::Tensor& tensor);

// `result` itself when its strides agree with `expected`'s (a meta tensor from PyTorch's meta function for the same
// call) where they matter, else a copy laid out as `expected`.
at::Tensor laid_out_as(const at::Tensor& result, const at::Tensor& expected);

}  // namespace npusim::bridge
