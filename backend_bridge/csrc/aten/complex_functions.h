// Complex64 elementwise functions on the device, each one fused kernel over the operand's parts (complex_parts.h):
// the exponential and logarithmic, trigonometric and hyperbolic functions and their inverses, square roots, sigmoid,
// silu, sinc, sgn, powers, the angle, NaN tests and equality. The operators' kernels call these for complex
// operands; each returns false for arguments it does not take (the caller's CPU fallback then).
#pragma once

#include <ATen/core/Tensor.h>

#include "pointwise_formula.h"

namespace npusim::bridge {

enum class ComplexFunction {
  Neg,
  Reciprocal,
  Exp,
  Exp2,
  Expm1,
  Log,
  Log2,
  Log10,
  Log1p,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Tanh,
  Asinh,
  Acosh,
  Atanh,
  Sigmoid,
  Silu,
  Sinc,
  Sgn,  // the last (complex_functions.cpp names each)
};

// out = function(self), self and out complex64 on the device.
bool complex_function(ComplexFunction function, const at::Tensor& self, at::Tensor& out);

// A formula operator's complex form (register_formula) computing `function` of its one operand.
ComplexForm complex_form(ComplexFunction function);

// out = self ** exponent (either complex or real; a tensor on the device or a 0-dim host scalar): exp(exponent log
// self), 0 for a zero base.
bool complex_power(const at::Tensor& self, const at::Tensor& exponent, at::Tensor& out);
// out = self ** exponent for a number, as the CPU's pow of a tensor and a scalar computes it: 1 for 0, a copy for 1,
// sqrt, rsqrt and reciprocal for 1/2, -1/2, -1, products for 2, 3, -2, complex_power's formula otherwise.
bool complex_power_scalar(const at::Tensor& self, const at::Scalar& exponent, at::Tensor& out);

// out (float32) = the angle of self, atan2(imaginary, real).
bool complex_angle(const at::Tensor& self, at::Tensor& out);

// out (bool) = whether either part of self is NaN.
bool complex_isnan(const at::Tensor& self, at::Tensor& out);

// out (bool) = self == other (both parts equal), or != when `equal` is false; either operand may be real.
bool complex_equality(bool equal, const at::Tensor& self, const at::Tensor& other, at::Tensor& out);

}  // namespace npusim::bridge
