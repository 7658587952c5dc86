// Native roll: along each rolled dimension the result is two slices of the input in swapped order, each moved by the
// strided copy kernel, for any dtype (a roll over several dimensions rolls one after another; without dimensions the
// flattened tensor rolls and takes the input's shape back). Shapes PyTorch rejects take the CPU fallback, which gives
// PyTorch's own errors.
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// `source` rolled by `shift` along `dim`, into a new contiguous tensor.
at::Tensor roll_one(const at::Tensor& source, int64_t shift, int64_t dim) {
  at::Tensor result = at::empty(source.sizes(), source.options());
  const int64_t length = source.size(dim);
  const int64_t start = length == 0 ? 0 : ((shift % length) + length) % length;  // where element 0 goes
  if (start == 0 || length == 0) {
    if (result.numel() > 0) copy_on_device(source, result);
    return result;
  }
  copy_on_device(source.narrow(dim, 0, length - start), result.narrow(dim, start, length - start));
  copy_on_device(source.narrow(dim, length - start, start), result.narrow(dim, 0, start));
  return result;
}

at::Tensor npusim_roll(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  const bool flat = dims.empty() && shifts.size() == 1;
  if (!flat && (shifts.size() != dims.size() || shifts.empty())) {
    torch::jit::Stack stack{self, shifts, dims};
    call_cpu_fallback("aten::roll", "", stack);
    return stack.back().toTensor();
  }
  if (flat) return roll_one(self.reshape({-1}), shifts[0], 0).view(self.sizes());
  at::Tensor result = self;
  for (size_t k = 0; k < shifts.size(); ++k)
    result = roll_one(result, shifts[k], at::maybe_wrap_dim(dims[k], self.dim()));
  return result;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("roll", npusim_roll); }

}  // namespace npusim::bridge
