// Complex tensors built on the device from real parts: torch.complex(real, imag) and torch.polar(abs, angle) write
// each element's two parts through view_as_real (the complex result seen as pairs of reals) with the native strided
// copy; polar's parts are abs cos(angle) and abs sin(angle), as the CPU's std::polar. Float32 and float16 parts
// (complex64 and complex32 results); other dtypes, and arguments PyTorch rejects, take the CPU fallback, which gives
// PyTorch's own errors.
#include <ATen/ops/cos.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include "bridge.h"
#include "pointwise_output.h"

namespace npusim::bridge {
namespace {

bool parts_on_device(const at::Tensor& first, const at::Tensor& second, const at::Tensor& out) {
  const at::ScalarType type = first.scalar_type();
  return first.device() == out.device() && second.device() == out.device() && second.scalar_type() == type &&
         (type == at::kFloat || type == at::kHalf) && out.scalar_type() == c10::toComplexType(type);
}

// out's real parts from `real`, its imaginary parts from `imag`, both broadcast to out's shape.
void write_parts(const at::Tensor& real, const at::Tensor& imag, at::Tensor& out) {
  resize_to_broadcast(out, {real, imag});
  if (out.numel() == 0) return;
  const at::Tensor parts = at::view_as_real(out);
  parts.select(-1, 0).copy_(real);
  parts.select(-1, 1).copy_(imag);
}

at::Tensor& npusim_complex_out(const at::Tensor& real, const at::Tensor& imag, at::Tensor& out) {
  if (parts_on_device(real, imag, out)) {
    write_parts(real, imag, out);
    return out;
  }
  torch::jit::Stack stack{real, imag, out};
  call_cpu_fallback("aten::complex", "out", stack);
  return out;
}

at::Tensor& npusim_polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out) {
  if (parts_on_device(abs, angle, out)) {
    write_parts(at::mul(abs, at::cos(angle)), at::mul(abs, at::sin(angle)), out);
    return out;
  }
  torch::jit::Stack stack{abs, angle, out};
  call_cpu_fallback("aten::polar", "out", stack);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // The functional forms are PyTorch's composites over these.
  m.impl("complex.out", npusim_complex_out);
  m.impl("polar.out", npusim_polar_out);
}

}  // namespace npusim::bridge
