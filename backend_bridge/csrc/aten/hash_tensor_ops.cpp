// torch.hash_tensor (mode 0): each element widened to its 64-bit float or integer equivalent, its bits read as an
// unsigned 64-bit integer, and the reduced dimensions folded by xor, composed from native kernels: the widening
// conversion, then a tree of bitwise_xor over the reduced elements laid out last (halves xored together, log2(n)
// launches). Complex tensors and other modes take the CPU fallback, which raises PyTorch's errors.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/bitwise_xor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

at::Tensor& npusim_hash_tensor_out(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, int64_t mode,
                                   at::Tensor& out) {
  const bool native = mode == 0 && !self.is_complex() && self.device() == out.device() &&
                      out.scalar_type() == at::kUInt64 && (self.numel() > 0 || !dim.empty());
  if (!native) {
    torch::jit::Stack stack{self, dim, keepdim, mode, out};
    call_cpu_fallback("aten::hash_tensor", "out", stack);
    return out;
  }
  for (int64_t d : dim) at::maybe_wrap_dim(d, self.dim());               // PyTorch's error for a dimension out of range
  const at::Tensor source = self.dim() == 0 ? self.reshape({1}) : self;  // a 0-dim tensor's dimension 0 is itself
  std::vector<bool> reduced(source.dim(), dim.empty());
  for (int64_t d : dim) reduced[at::maybe_wrap_dim(d, source.dim())] = true;
  std::vector<int64_t> order, kept_sizes, result_sizes;
  int64_t folded = 1;
  for (int64_t d = 0; d < source.dim(); ++d) {
    if (!reduced[d]) {
      order.push_back(d);
      kept_sizes.push_back(source.size(d));
    }
    if ((!reduced[d] || keepdim) && self.dim() > 0) result_sizes.push_back(reduced[d] ? 1 : source.size(d));
  }
  for (int64_t d = 0; d < source.dim(); ++d)
    if (reduced[d]) {
      order.push_back(d);
      folded *= source.size(d);
    }
  const at::Tensor wide = source.to(at::isFloatingType(source.scalar_type()) ? at::kDouble : at::kLong);
  std::vector<int64_t> rows_shape = kept_sizes;
  rows_shape.push_back(folded);
  at::Tensor bits = wide.view(at::kLong).permute(order).reshape(rows_shape);
  if (folded == 0) bits = at::zeros(kept_sizes, bits.options()).unsqueeze(-1);
  while (bits.size(-1) > 1) {
    const int64_t n = bits.size(-1), half = n / 2;
    at::Tensor halves = at::bitwise_xor(bits.narrow(-1, 0, half), bits.narrow(-1, half, half));
    bits = n % 2 == 0 ? halves : at::cat({halves, bits.narrow(-1, n - 1, 1)}, -1);
  }
  at::native::resize_output(out, result_sizes);
  out.view(at::kLong).copy_(bits.reshape(result_sizes));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("hash_tensor.out", npusim_hash_tensor_out); }

}  // namespace npusim::bridge
