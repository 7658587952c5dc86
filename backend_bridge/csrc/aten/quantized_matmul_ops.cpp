// Matrix products for quantised inference: torch._int_mm (int8 x int8 summed exactly in int32 on the matrix
// engine, whose processing elements take i8), so per-tensor quantisation (`_int_mm(xq, wq) * scale`); and
// torch._weight_int8pack_mm (float activations times int8 weights with one scale per output channel), the weight
// converted on the device, the product accumulated in float32 and scaled per channel as the CPU kernel does.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

at::Tensor& npusim_int_mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  TORCH_CHECK(self.dim() == 2 && mat2.dim() == 2, "_int_mm: expected 2-D tensors, got ", self.dim(), "-D and ",
              mat2.dim(), "-D");
  TORCH_CHECK(self.size(1) == mat2.size(0), "_int_mm: self.size(1) (", self.size(1), ") must equal mat2.size(0) (",
              mat2.size(0), ")");
  TORCH_CHECK(self.scalar_type() == at::kChar && mat2.scalar_type() == at::kChar,
              "_int_mm: expected int8 operands, got ", self.scalar_type(), " and ", mat2.scalar_type());
  TORCH_CHECK(out.scalar_type() == at::kInt, "_int_mm: expected an int32 result, got ", out.scalar_type());
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  if (out.numel() == 0) return out;
  if (self.size(1) == 0) return out.zero_();
  const bool separate = !may_share_memory(out, self) && !may_share_memory(out, mat2);
  if (separate && self.device() == out.device() && mat2.device() == out.device() && launch_mm(self, mat2, out))
    return out;
  torch::jit::Stack stack{self, mat2, out};
  call_cpu_fallback("aten::_int_mm", "out", stack);
  return out;
}

at::Tensor npusim_int_mm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kInt));
  return npusim_int_mm_out(self, mat2, out);
}

// out[m][n] = (sum over k of x[m][k] * w[n][k]) * scales[n], the sum in float32.
at::Tensor npusim_weight_int8pack_mm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& scales) {
  const bool native = x.dim() == 2 && w.dim() == 2 && scales.dim() == 1 && is_float_kind(x.scalar_type()) &&
                      w.scalar_type() == at::kChar && scales.scalar_type() == x.scalar_type() &&
                      x.size(1) == w.size(1) && scales.size(0) == w.size(0) && w.device() == x.device() &&
                      scales.device() == x.device() && x.size(1) > 0;
  if (native) {
    const at::Tensor weight = w.to(x.scalar_type());  // int8 to x's type, exactly, on the device
    at::Tensor sums = at::empty({x.size(0), w.size(0)}, x.options().dtype(at::kFloat));
    if (sums.numel() == 0 || launch_mm(x, weight.t(), sums)) {
      at::Tensor out = at::empty(sums.sizes(), x.options());
      return at::mul_out(out, sums, scales);
    }
  }
  torch::jit::Stack stack{x, w, scales};
  call_cpu_fallback("aten::_weight_int8pack_mm", "", stack);
  return stack[0].toTensor();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_int_mm", npusim_int_mm);
  m.impl("_int_mm.out", npusim_int_mm_out);
  m.impl("_weight_int8pack_mm", npusim_weight_int8pack_mm);
}

}  // namespace npusim::bridge
