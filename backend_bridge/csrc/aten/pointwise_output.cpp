#include "pointwise_output.h"

#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/MemoryFormat.h>

namespace npusim::bridge {

std::vector<int64_t> resize_to_broadcast(at::Tensor& out, const std::vector<at::Tensor>& operands) {
  // PyTorch's own TensorIterator decides: the broadcast shape, its errors (an operand written in place cannot grow,
  // overlapping memory), and the layout of a result it resizes, which follows the operands' dimension order (a
  // transposed or channels-last input gives a transposed or channels-last result). Only its setup runs; the kernel
  // walks the operands' strides itself.
  at::TensorIteratorConfig config;
  config.check_all_same_dtype(false).check_all_same_device(false).add_output(out);
  for (const at::Tensor& operand : operands)
    if (operand.defined()) config.add_const_input(operand);
  config.build();
  return out.sizes().vec();
}

void resize_output_in_format(at::Tensor& out, at::IntArrayRef shape, c10::MemoryFormat format) {
  if (at::native::resize_output(out, shape)) out.unsafeGetTensorImpl()->empty_tensor_restride(format);
}

at::Tensor meta_like(const at::Tensor& tensor) {
  return at::empty_strided(tensor.sizes(), tensor.strides(), tensor.options().device(at::kMeta));
}

at::Tensor laid_out_as(const at::Tensor& result, const at::Tensor& expected) {
  TORCH_INTERNAL_ASSERT(result.sizes() == expected.sizes());
  for (int64_t dim = 0; dim < result.dim(); ++dim)  // a dimension of one element or none has no stride that matters
    if (result.size(dim) > 1 && result.stride(dim) != expected.stride(dim)) {
      at::Tensor copy = at::empty_strided(expected.sizes(), expected.strides(), result.options());
      return copy.copy_(result);
    }
  return result;
}

}  // namespace npusim::bridge
