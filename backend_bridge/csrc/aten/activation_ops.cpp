// Native activations beyond the elementwise basics, float32, float16 and bfloat16, forward and backward, each one
// emitted kernel with its scalar arguments baked in as constants: leaky_relu, hardswish, hardtanh (relu6), elu (selu
// and celu are elu with other coefficients), softplus, silu's backward and mish's forward. PyTorch's CPU formulas,
// branch for branch, so NaNs and the boundaries go the same way. Other dtypes take the CPU fallback.
#include <ATen/ops/clamp.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

using emitter::ElementwiseOp;
using Parameters = std::array<float, 3>;

at::Tensor like(const at::Tensor& self) { return at::empty({0}, self.options()); }

bool float_operands(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  return is_float_kind(a.scalar_type()) && is_float_kind(b.scalar_type()) && is_float_kind(out.scalar_type()) &&
         a.device() == out.device() && b.device() == out.device();
}

// A forward activation: the kernel, or the CPU fallback of `name`.`overload` with `arguments` then out.
at::Tensor& forward_out(ElementwiseOp op, const Parameters& parameters, const at::Tensor& self, at::Tensor& out,
                        const char* name, const char* overload, torch::jit::Stack arguments) {
  if (launch_unary(op, self, out, parameters)) return out;
  arguments.insert(arguments.begin(), self);
  arguments.push_back(out);
  call_cpu_fallback(name, overload, arguments);
  return out;
}

// A backward: grad_input = f(grad_output, forward input or result), or the CPU fallback.
at::Tensor& backward_out(ElementwiseOp op, const Parameters& parameters, const at::Tensor& grad_output,
                         const at::Tensor& forward, at::Tensor& grad_input, const char* name, torch::jit::Stack stack) {
  if (float_operands(grad_output, forward, grad_input) && grad_output.sizes() == forward.sizes() &&
      launch_binary(op, grad_output, forward, grad_input, parameters))
    return grad_input;
  call_cpu_fallback(name, "grad_input", stack);
  return grad_input;
}

float as_float(const at::Scalar& value) { return static_cast<float>(value.toDouble()); }

// ---- leaky_relu: x > 0 ? x : x slope
at::Tensor& leaky_relu_out(const at::Tensor& self, const at::Scalar& slope, at::Tensor& out) {
  return forward_out(ElementwiseOp::LeakyReluF32, {as_float(slope)}, self, out, "aten::leaky_relu", "out", {slope});
}
at::Tensor leaky_relu(const at::Tensor& self, const at::Scalar& slope) {
  at::Tensor out = like(self);
  return leaky_relu_out(self, slope, out);
}
at::Tensor& leaky_relu_(at::Tensor& self, const at::Scalar& slope) { return leaky_relu_out(self, slope, self); }
// From the input or, in place, from the result: their signs agree for the slopes PyTorch allows there (>= 0).
at::Tensor& leaky_relu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& slope,
                                    bool self_is_result, at::Tensor& grad_input) {
  TORCH_CHECK(!self_is_result || slope.toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
              "version instead.");
  return backward_out(ElementwiseOp::LeakyReluBackwardF32, {as_float(slope)}, grad_output, self, grad_input,
                      "aten::leaky_relu_backward", {grad_output, self, slope, self_is_result, grad_input});
}
at::Tensor leaky_relu_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& slope,
                               bool self_is_result) {
  at::Tensor grad_input = like(grad_output);
  return leaky_relu_backward_out(grad_output, self, slope, self_is_result, grad_input);
}

// ---- hardswish: x min(max(x + 3, 0), 6) / 6
at::Tensor& hardswish_out(const at::Tensor& self, at::Tensor& out) {
  return forward_out(ElementwiseOp::HardswishF32, {}, self, out, "aten::hardswish", "out", {});
}
at::Tensor hardswish(const at::Tensor& self) {
  at::Tensor out = like(self);
  return hardswish_out(self, out);
}
at::Tensor& hardswish_(at::Tensor& self) { return bridge::hardswish_out(self, self); }  // not at::hardswish_out
at::Tensor hardswish_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor grad_input = like(grad_output);
  if (float_operands(grad_output, self, grad_input) && grad_output.sizes() == self.sizes() &&
      launch_binary(ElementwiseOp::HardswishBackwardF32, grad_output, self, grad_input))
    return grad_input;
  torch::jit::Stack stack{grad_output, self};
  call_cpu_fallback("aten::hardswish_backward", "", stack);
  return stack[0].toTensor();
}

// ---- hardtanh: clamp(x, min, max), the native clamp kernel; its backward zeroes the gradient outside (min, max)
at::Tensor& hardtanh_out(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max, at::Tensor& out) {
  return at::clamp_out(out, self, min, max);
}
at::Tensor hardtanh(const at::Tensor& self, const at::Scalar& min, const at::Scalar& max) {
  return at::clamp(self, min, max);
}
at::Tensor& hardtanh_(at::Tensor& self, const at::Scalar& min, const at::Scalar& max) {
  return at::clamp_(self, min, max);
}
at::Tensor& hardtanh_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& min,
                                  const at::Scalar& max, at::Tensor& grad_input) {
  return backward_out(ElementwiseOp::HardtanhBackwardF32, {as_float(min), -as_float(max)}, grad_output, self,
                      grad_input, "aten::hardtanh_backward", {grad_output, self, min, max, grad_input});
}
at::Tensor hardtanh_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& min,
                             const at::Scalar& max) {
  at::Tensor grad_input = like(grad_output);
  return hardtanh_backward_out(grad_output, self, min, max, grad_input);
}

// ---- elu (and selu, celu): x <= 0 ? (exp(x input_scale) - 1) alpha scale : x scale, the coefficients in float32
// as the CPU kernel forms them
at::Tensor& elu_out(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
                    const at::Scalar& input_scale, at::Tensor& out) {
  const Parameters parameters{as_float(alpha) * as_float(scale), as_float(scale), as_float(input_scale)};
  return forward_out(ElementwiseOp::EluF32, parameters, self, out, "aten::elu", "out", {alpha, scale, input_scale});
}
at::Tensor elu(const at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale,
               const at::Scalar& input_scale) {
  at::Tensor out = like(self);
  return elu_out(self, alpha, scale, input_scale, out);
}
at::Tensor& elu_(at::Tensor& self, const at::Scalar& alpha, const at::Scalar& scale, const at::Scalar& input_scale) {
  return elu_out(self, alpha, scale, input_scale, self);
}
at::Tensor& elu_backward_out(const at::Tensor& grad_output, const at::Scalar& alpha, const at::Scalar& scale,
                             const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result,
                             at::Tensor& grad_input) {
  const float negative = as_float(alpha) * as_float(scale), positive = as_float(scale), input = as_float(input_scale);
  const torch::jit::Stack stack{grad_output, alpha, scale, input_scale, is_result, self_or_result, grad_input};
  if (is_result)
    return backward_out(ElementwiseOp::EluBackwardFromResultF32, {negative, positive, input}, grad_output,
                        self_or_result, grad_input, "aten::elu_backward", stack);
  return backward_out(ElementwiseOp::EluBackwardFromInputF32, {input * negative, positive, input}, grad_output,
                      self_or_result, grad_input, "aten::elu_backward", stack);
}
at::Tensor elu_backward(const at::Tensor& grad_output, const at::Scalar& alpha, const at::Scalar& scale,
                        const at::Scalar& input_scale, bool is_result, const at::Tensor& self_or_result) {
  at::Tensor grad_input = like(grad_output);
  return elu_backward_out(grad_output, alpha, scale, input_scale, is_result, self_or_result, grad_input);
}

// ---- softplus: x beta > threshold ? x : log(1 + exp(x beta)) / beta
at::Tensor& softplus_out(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold, at::Tensor& out) {
  return forward_out(ElementwiseOp::SoftplusF32, {as_float(beta), as_float(threshold)}, self, out, "aten::softplus",
                     "out", {beta, threshold});
}
at::Tensor softplus(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold) {
  at::Tensor out = like(self);
  return softplus_out(self, beta, threshold, out);
}
at::Tensor& softplus_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& beta,
                                  const at::Scalar& threshold, at::Tensor& grad_input) {
  return backward_out(ElementwiseOp::SoftplusBackwardF32, {as_float(beta), as_float(threshold), -as_float(threshold)},
                      grad_output, self, grad_input, "aten::softplus_backward",
                      {grad_output, self, beta, threshold, grad_input});
}
at::Tensor softplus_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& beta,
                             const at::Scalar& threshold) {
  at::Tensor grad_input = like(grad_output);
  return softplus_backward_out(grad_output, self, beta, threshold, grad_input);
}

// ---- silu's backward: grad s (1 + x (1 - s)), s = sigmoid(x) (the forward is an elementwise op)
at::Tensor& silu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::Tensor& grad_input) {
  return backward_out(ElementwiseOp::SiluBackwardF32, {}, grad_output, self, grad_input, "aten::silu_backward",
                      {grad_output, self, grad_input});
}
at::Tensor silu_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor grad_input = like(grad_output);
  return silu_backward_out(grad_output, self, grad_input);
}

// ---- mish: x tanh(log(1 + exp(x))); its backward takes the CPU fallback
at::Tensor& mish_out(const at::Tensor& self, at::Tensor& out) {
  return forward_out(ElementwiseOp::MishF32, {}, self, out, "aten::mish", "out", {});
}
at::Tensor mish(const at::Tensor& self) {
  at::Tensor out = like(self);
  return mish_out(self, out);
}
at::Tensor& mish_(at::Tensor& self) { return bridge::mish_out(self, self); }  // not at::mish_out

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("leaky_relu", leaky_relu);
  m.impl("leaky_relu_", leaky_relu_);
  m.impl("leaky_relu.out", leaky_relu_out);
  m.impl("leaky_relu_backward", leaky_relu_backward);
  m.impl("leaky_relu_backward.grad_input", leaky_relu_backward_out);
  m.impl("hardswish", hardswish);
  m.impl("hardswish_", hardswish_);
  m.impl("hardswish.out", hardswish_out);
  m.impl("hardswish_backward", hardswish_backward);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh_", hardtanh_);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("elu", elu);
  m.impl("elu_", elu_);
  m.impl("elu.out", elu_out);
  m.impl("elu_backward", elu_backward);
  m.impl("elu_backward.grad_input", elu_backward_out);
  m.impl("softplus", softplus);
  m.impl("softplus.out", softplus_out);
  m.impl("softplus_backward", softplus_backward);
  m.impl("softplus_backward.grad_input", softplus_backward_out);
  m.impl("silu_backward", silu_backward);
  m.impl("silu_backward.grad_input", silu_backward_out);
  m.impl("mish", mish);
  m.impl("mish_", mish_);
  m.impl("mish.out", mish_out);
}

}  // namespace npusim::bridge
