// Pointwise ops composed from native kernels: lerp (Adam's first moment), addcmul (its second moment), addcdiv (its
// update), pow with a scalar exponent, rounding to decimal places, and tanh's backward; lerp, addcmul, addcdiv and
// tanh's backward of complex64 tensors too (complex_arithmetic.h). Each step is an emitted kernel
// on the device, so an optimizer step runs without the CPU fallback; other dtypes, devices and mixes take the fallback,
// counted and reported.
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/round.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <torch/library.h>

#include <cmath>
#include <initializer_list>

#include "bridge.h"
#include "complex_functions.h"

namespace npusim::bridge {
namespace {

// float32 tensors on the output's device: the elementwise kernels take these.
bool all_float_on_device(const at::Tensor& out, std::initializer_list<at::Tensor> operands) {
  if (out.scalar_type() != at::kFloat) return false;
  for (const at::Tensor& operand : operands)
    if (operand.scalar_type() != at::kFloat || operand.device() != out.device()) return false;
  return true;
}

// Tensors of one type, float32 or complex64 (complex_arithmetic.h), on the output's device.
bool same_type_on_device(const at::Tensor& out, std::initializer_list<at::Tensor> operands) {
  if (out.scalar_type() != at::kFloat && out.scalar_type() != at::kComplexFloat) return false;
  for (const at::Tensor& operand : operands)
    if (operand.scalar_type() != out.scalar_type() || operand.device() != out.device()) return false;
  return true;
}

// out = self + weight (end - self), by PyTorch's formula: from self for |weight| < 0.5, else from end as
// end - (1 - weight)(end - self), which is exact at weight 1.
at::Tensor& npusim_lerp_out(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  if (same_type_on_device(out, {self, end})) {
    const c10::complex<double> w = weight.toComplexDouble();
    const at::Tensor difference = at::sub(end, self);
    const at::Scalar rest = weight.isComplex() ? at::Scalar(1.0 - w) : at::Scalar(1.0 - w.real());
    return std::abs(w) < 0.5 ? at::add_out(out, self, difference, weight) : at::sub_out(out, end, difference, rest);
  }
  torch::jit::Stack stack{self, end, weight, out};
  call_cpu_fallback("aten::lerp", "Scalar_out", stack);
  return out;
}
at::Tensor npusim_lerp(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_lerp_out(self, end, weight, out);
}
at::Tensor& npusim_lerp_(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  return npusim_lerp_out(self, end, weight, self);
}

// out = self + value * combine(tensor1, tensor2), for addcmul (a product) and addcdiv (a quotient).
template <bool Divide>
at::Tensor& add_combined_out(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                             const at::Scalar& value, at::Tensor& out) {
  if (same_type_on_device(out, {self, tensor1, tensor2})) {
    const at::Tensor combined = Divide ? at::div(tensor1, tensor2) : at::mul(tensor1, tensor2);
    return at::add_out(out, self, combined, value);
  }
  torch::jit::Stack stack{self, tensor1, tensor2, value, out};
  call_cpu_fallback(Divide ? "aten::addcdiv" : "aten::addcmul", "out", stack);
  return out;
}
template <bool Divide>
at::Tensor add_combined(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                        const at::Scalar& value) {
  at::Tensor out = at::empty({0}, self.options());
  return add_combined_out<Divide>(self, tensor1, tensor2, value, out);
}
template <bool Divide>
at::Tensor& add_combined_(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                          const at::Scalar& value) {
  return add_combined_out<Divide>(self, tensor1, tensor2, value, self);
}

// x^n for a whole n, by repeated squaring: exact for n = 2 and 3 (x * x, x * x * x), as on the CPU.
at::Tensor whole_power(const at::Tensor& x, int64_t n) {
  at::Tensor result, square = x;
  for (; n > 0; n >>= 1) {
    if (n & 1) result = result.defined() ? result * square : square;
    if (n > 1) square = square * square;
  }
  return result;
}

// pow(self, exponent) for float32: 0 gives ones, whole exponents up to 64 multiply (negative ones then take the
// reciprocal), ±0.5 are sqrt and rsqrt, and any other exponent is exp(exponent * log(self)), NaN for a negative
// base like pow itself.
at::Tensor& npusim_pow_out(const at::Tensor& self, const at::Scalar& exponent, at::Tensor& out) {
  if (all_float_on_device(out, {self}) && !exponent.isComplex()) {
    const double e = exponent.toDouble();
    at::Tensor result;
    if (e == 0.0)
      result = at::empty(self.sizes(), self.options()).fill_(1);
    else if (e == 0.5)
      result = at::sqrt(self);
    else if (e == -0.5)
      result = at::rsqrt(self);
    else if (e == std::round(e) && std::abs(e) <= 64)
      result = e > 0 ? whole_power(self, static_cast<int64_t>(e))
                     : at::reciprocal(whole_power(self, static_cast<int64_t>(-e)));
    else
      result = at::exp(at::log(self) * e);
    at::native::resize_output(out, self.sizes());
    return out.copy_(result);
  }
  if (complex_power_scalar(self, exponent, out)) return out;
  torch::jit::Stack stack{self, exponent, out};
  call_cpu_fallback("aten::pow", "Tensor_Scalar_out", stack);
  return out;
}
at::Tensor npusim_pow(const at::Tensor& self, const at::Scalar& exponent) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_pow_out(self, exponent, out);
}
at::Tensor& npusim_pow_(at::Tensor& self, const at::Scalar& exponent) { return npusim_pow_out(self, exponent, self); }

// round to `decimals` places as the CPU computes it in float32: x * 10^d rounded half to even, then divided by 10^d
// (for d <= 0: x / 10^-d rounded, then times 10^-d), 10^|d| itself rounded to float32.
at::Tensor& npusim_round_decimals_out(const at::Tensor& self, int64_t decimals, at::Tensor& out) {
  if (all_float_on_device(out, {self})) {
    const at::Tensor ten_power = at::scalar_tensor(static_cast<float>(std::pow(10.0, std::abs(decimals))),
                                                   at::TensorOptions().dtype(at::kFloat));
    const at::Tensor result = decimals > 0 ? at::div(at::round(at::mul(self, ten_power)), ten_power)
                                           : at::mul(at::round(at::div(self, ten_power)), ten_power);
    at::native::resize_output(out, self.sizes());
    return out.copy_(result);
  }
  torch::jit::Stack stack{self, decimals, out};
  call_cpu_fallback("aten::round", "decimals_out", stack);
  return out;
}
at::Tensor npusim_round_decimals(const at::Tensor& self, int64_t decimals) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_round_decimals_out(self, decimals, out);
}
at::Tensor& npusim_round_decimals_(at::Tensor& self, int64_t decimals) {
  return npusim_round_decimals_out(self, decimals, self);
}

// tanh's backward from its output y: grad (1 - y^2), conjugated for complex y (PyTorch's convention for complex
// gradients).
at::Tensor& npusim_tanh_backward_out(const at::Tensor& grad_output, const at::Tensor& output, at::Tensor& grad_input) {
  if (same_type_on_device(grad_input, {grad_output, output})) {
    const at::Tensor slope = (output * output).neg_().add_(1);
    return at::mul_out(grad_input, grad_output, grad_input.is_complex() ? slope.conj() : slope);
  }
  torch::jit::Stack stack{grad_output, output, grad_input};
  call_cpu_fallback("aten::tanh_backward", "grad_input", stack);
  return grad_input;
}
at::Tensor npusim_tanh_backward(const at::Tensor& grad_output, const at::Tensor& output) {
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  return npusim_tanh_backward_out(grad_output, output, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("round.decimals", npusim_round_decimals);
  m.impl("round_.decimals", npusim_round_decimals_);
  m.impl("round.decimals_out", npusim_round_decimals_out);
  m.impl("tanh_backward", npusim_tanh_backward);
  m.impl("tanh_backward.grad_input", npusim_tanh_backward_out);
  m.impl("pow.Tensor_Scalar", npusim_pow);
  m.impl("pow_.Scalar", npusim_pow_);
  m.impl("pow.Tensor_Scalar_out", npusim_pow_out);
  m.impl("lerp.Scalar", npusim_lerp);
  m.impl("lerp_.Scalar", npusim_lerp_);
  m.impl("lerp.Scalar_out", npusim_lerp_out);
  m.impl("addcmul", add_combined<false>);
  m.impl("addcmul_", add_combined_<false>);
  m.impl("addcmul.out", add_combined_out<false>);
  m.impl("addcdiv", add_combined<true>);
  m.impl("addcdiv_", add_combined_<true>);
  m.impl("addcdiv.out", add_combined_out<true>);
}

}  // namespace npusim::bridge
