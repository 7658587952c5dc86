#include "pointwise_output.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>

namespace npusim::bridge {

std::vector<int64_t> resize_to_broadcast(at::Tensor& out, const std::vector<at::Tensor>& operands) {
  std::vector<int64_t> shape;
  bool in_place = false;
  for (const at::Tensor& operand : operands) {
    shape = at::infer_size(shape, operand.sizes());
    in_place |= out.is_same(operand);
  }
  if (in_place)
    TORCH_CHECK(out.sizes() == shape, "output with shape ", out.sizes(), " doesn't match the broadcast shape ", shape);
  at::native::resize_output(out, shape);
  if (out.numel() > 0) {
    at::assert_no_internal_overlap(out);
    for (const at::Tensor& operand : operands) at::assert_no_partial_overlap(out, operand);
  }
  return shape;
}

}  // namespace npusim::bridge
