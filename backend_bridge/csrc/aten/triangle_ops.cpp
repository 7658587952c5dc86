// Native tril and triu (attention's causal masks) for any dtype: a copy, then a kernel that zeroes the other triangle
// of each matrix with DMA stores of a zero row.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "bridge.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

template <bool KeepLower>
at::Tensor& triangle_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if (self.dim() >= 2 && self.device() == out.device() && self.scalar_type() == out.scalar_type()) {
    at::native::resize_output(out, self.sizes());
    if (out.numel() == 0) return out;
    // In place, or straight into a contiguous output apart from self; else through a temporary.
    const bool direct = out.is_contiguous() && (out.is_same(self) || !may_share_memory(out, self));
    at::Tensor result = direct ? out : at::empty(self.sizes(), self.options());
    if (!result.is_same(self)) result.copy_(self);
    const int64_t rows = self.size(-2), cols = self.size(-1);
    const emitter::TriangleSpec spec{self.numel() / (rows * cols),          rows,     cols,
                                     static_cast<int>(self.element_size()), diagonal, KeepLower};
    const uint64_t addresses[] = {device_address(result)};
    if (launched_natively([&] { launch_zero_triangle(out.device().index(), runtime_device(out), spec, addresses); })) {
      if (!result.is_same(out)) out.copy_(result);
      return out;
    }
  }
  torch::jit::Stack stack{self, diagonal, out};
  call_cpu_fallback(KeepLower ? "aten::tril" : "aten::triu", "out", stack);
  return out;
}
template <bool KeepLower>
at::Tensor triangle(const at::Tensor& self, int64_t diagonal) {
  at::Tensor out = at::empty({0}, self.options());
  return triangle_out<KeepLower>(self, diagonal, out);
}
template <bool KeepLower>
at::Tensor& triangle_(at::Tensor& self, int64_t diagonal) {
  return triangle_out<KeepLower>(self, diagonal, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("tril", triangle<true>);
  m.impl("tril_", triangle_<true>);
  m.impl("tril.out", triangle_out<true>);
  m.impl("triu", triangle<false>);
  m.impl("triu_", triangle_<false>);
  m.impl("triu.out", triangle_out<false>);
}

}  // namespace npusim::bridge
