// Elementwise functions the CPU computes with a libm call or a branch per element, declared as formulas of the
// vector engine's operations (pointwise_formula.h), each one fused kernel: erfc, exp2, log2, log10, fmax, fmin,
// heaviside, hardshrink, softshrink, hardsigmoid, threshold, isposinf, isneginf, signbit, sinc, logit, copysign,
// logaddexp2, lerp with a tensor weight, prelu (and its gradients), angle, pow of a number base (ldexp) and of two
// tensors, special.xlog1py and special.entr; the gradients of hardshrink, softshrink, hardsigmoid and logit. Each
// follows the CPU kernel's own formula and branches (NaN and infinities included), so that results agree within float32
// rounding; exp2, log2, log10, sinc, angle and pow of complex operands take complex_functions.h's forms.
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "bridge.h"
#include "complex_functions.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// 2^x for logaddexp2, whose argument is at most 0 and whose result is added to 1: exp(x ln 2) is close enough.
Value approximate_exp2(Value x) { return exp(x * std::numbers::ln2); }

// 2^x to about an ulp, as exp2: x = n + r with n = round(x), exp takes only r ln 2 (|r| <= 1/2; exp(x ln 2) would
// round x ln 2 first, an error of |x| ulps), and 2^n is multiplied in as exact powers of two, largest first (the
// steps reach 191; beyond 160 the result is 0 or infinity anyway).
Value exp2(Value x) {
  Formula& f = *x.formula;
  const Value clamped = minimum(maximum(x, f.constant(-160)), f.constant(160));  // NaN stays NaN
  const Value n = round(clamped);
  Value result = exp((clamped - n) * std::numbers::ln2);
  Value left = n;
  for (int step : {64, 64, 32, 16, 8, 4, 2, 1}) {
    const Value up = left >= step, down = left <= -step;
    result = where(up, result * std::ldexp(1.0, step), where(down, result * std::ldexp(1.0, -step), result));
    left = left - where(up, f.constant(step), where(down, f.constant(-step), f.constant(0)));
  }
  return result;
}

// base^x for a number base (torch.ldexp's 2^x): 2^(x log2 |base|) by the exact exp2 above (so powers of 2 are exact),
// with C's cases: base 1 gives 1 even for NaN; base 0 gives 0, 1 or infinity by x's sign; a negative base gives NaN
// unless x is whole, and its sign for odd x.
Value scalar_power(Formula& f) {
  const Value x = f.x(0);
  const double base = f.parameter(0).value();
  if (base == 1) return where(isnan(x), 1.0, f.constant(1));
  if (base == 0) return where(x > 0.0, 0.0, where(x == 0.0, f.constant(1), where(x < 0.0, kInfinity, x)));
  const Value magnitude = exp2(x * std::log2(std::abs(base)));
  if (base > 0) return magnitude;
  const Value odd = abs(fmod(x, f.constant(2))) == 1.0;
  return where(x == trunc(x), where(odd, -magnitude, magnitude), f.constant(std::nan("")));
}

at::Tensor& pow_scalar_out(const at::Scalar& base, const at::Tensor& exponent, at::Tensor& out) {
  if (!base.isComplex() && out.scalar_type() == at::kFloat &&
      launch_formula("pow", {exponent}, {base.toDouble()}, out, scalar_power))
    return out;
  torch::jit::Stack stack{base, exponent, out};
  call_cpu_fallback("aten::pow", "Scalar_out", stack);
  return out;
}
// The result's type counts the base (pow(2.0, integers) is float), as PyTorch promotes it.
at::Tensor pow_scalar(const at::Scalar& base, const at::Tensor& exponent) {
  at::Tensor out = at::empty({0}, exponent.options().dtype(at::result_type(exponent, base)));
  return pow_scalar_out(base, exponent, out);
}

// log |a| as hi + lo, about 2^-30 relative, for a normal float a: a = m 2^e with m in [sqrt(1/2), sqrt(2)) from the
// float's bits (exact), log m by the vector engine (|log m| < 0.35, so its rounding is small), and e ln 2 with ln 2
// split into 0.693359375 (a few bits: e times it is exact) and the rest (Cephes' constants).
std::pair<Value, Value> extended_log(Formula& f, size_t k) {
  const Value magnitude_bits = f.bits(k) & f.integer(0x7fffffff);
  const Value biased = magnitude_bits / f.integer(1 << 23);
  const Value fraction = f.to_float(magnitude_bits - biased * f.integer(1 << 23)) * 0x1p-23 + 1.0;
  const Value large = fraction > std::numbers::sqrt2;
  const Value m = where(large, fraction * 0.5, fraction);
  const Value e = f.to_float(biased) - 127.0 + where(large, 1.0, f.constant(0));
  return {e * 0.693359375, e * -2.12194440e-4 + log(m)};
}

// a^b = exp(b log |a|) with log |a| = hi + lo (above) and b hi's rounding recovered by a fused multiply-add, so that
// the exponent is known to about 2^-24 |b| and the result to a few ulps; subnormal bases take exp(b log |a|) as it
// is. C's cases: b = 0, a = 1, and a = -1 to an infinite power give 1 (even for NaN); a finite negative a gives NaN
// unless b is whole, and its sign (or -0's) for odd b; zeros and infinities through log's 0 and infinity.
Value tensor_power(Formula& f) {
  const Value a = f.x(0), b = f.x(1);
  const auto [hi, lo] = extended_log(f, 0);
  const Value product = b * hi;
  const Value rest = mul_add(b, hi, -product) + b * lo;  // b hi's rounding error, exactly, plus b lo
  const Value exponent = product + rest;
  const Value tail = rest - (exponent - product);  // what exponent's rounding lost
  const Value power = exp(exponent);
  const Value normal = abs(a) >= 0x1p-126 & !isinf(a) & !isinf(b);
  const Value corrected = where(isinf(power), power, mul_add(power, tail, power));  // inf + inf tail would be NaN
  const Value magnitude = where(normal, corrected, exp(b * log(abs(a))));
  const Value odd = abs(fmod(b, f.constant(2))) == 1.0;
  const Value signed_power = where(f.sign_bit(0) & odd, -magnitude, magnitude);
  // A finite negative base to a fractional power has no real value; -inf's is +inf or +0.
  const Value fractional = (a < 0.0) & !isinf(a) & (b != trunc(b));
  const Value real = where(fractional, f.constant(std::nan("")), signed_power);
  const Value one = (b == 0.0) | (a == 1.0) | ((abs(a) == 1.0) & isinf(b));
  return where(one, f.constant(1), real);
}

// hardshrink's and softshrink's gradient: 0 where |x| <= lambda (the function is flat there), else g.
Value shrink_backward(Formula& f) {
  const Value gradient = f.x(0), x = f.x(1);
  const double lambda = f.parameter(0).value();
  return where((x >= -lambda) & (x <= lambda), 0.0, gradient);
}

// prelu's gradients, elementwise (prelu sums the weight's over the broadcast dimensions): the input's g where x > 0,
// else weight g; the weight's 0 where x > 0, else x g.
std::tuple<at::Tensor, at::Tensor> prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                  const at::Tensor& weight) {
  at::Tensor grad_input = at::empty({0}, self.options()), grad_weight = at::empty({0}, self.options());
  const bool done = launch_formula("prelu_backward", {grad_output, self, weight}, {}, grad_input,
                                   [](Formula& f) { return where(f.x(1) > 0.0, f.x(0), f.x(2) * f.x(0)); }) &&
                    launch_formula("prelu_backward", {grad_output, self, weight}, {}, grad_weight,
                                   [](Formula& f) { return where(f.x(1) > 0.0, 0.0, f.x(1) * f.x(0)); });
  if (done) return {grad_input, grad_weight};
  torch::jit::Stack stack{grad_output, self, weight};
  call_cpu_fallback("aten::_prelu_kernel_backward", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_formula(m, {"erfc", "erfc_", "erfc.out"}, "erfc", FormulaResult::Float,
                   [](Formula& f) { return 1.0 - erf(f.x(0)); });
  register_formula(
      m, {"exp2", "exp2_", "exp2.out"}, "exp2", FormulaResult::Float, [](Formula& f) { return exp2(f.x(0)); },
      complex_form(ComplexFunction::Exp2));
  register_formula(
      m, {"log2", "log2_", "log2.out"}, "log2", FormulaResult::Float,
      [](Formula& f) { return log(f.x(0)) * std::numbers::log2e; }, complex_form(ComplexFunction::Log2));
  register_formula(
      m, {"log10", "log10_", "log10.out"}, "log10", FormulaResult::Float,
      [](Formula& f) { return log(f.x(0)) * std::numbers::log10e; }, complex_form(ComplexFunction::Log10));
  // The other operand where one is NaN.
  register_formula(m, {"fmax", "fmax.out"}, "fmax", FormulaResult::Promoted, [](Formula& f) {
    const Value a = f.x(0), b = f.x(1);
    return where(isnan(a), b, where(isnan(b), a, maximum(a, b)));
  });
  register_formula(m, {"fmin", "fmin.out"}, "fmin", FormulaResult::Promoted, [](Formula& f) {
    const Value a = f.x(0), b = f.x(1);
    return where(isnan(a), b, where(isnan(b), a, minimum(a, b)));
  });
  // values at 0, else x > 0 (so 0 for NaN), as the CPU's kernel.
  register_formula(m, {"heaviside", "heaviside_", "heaviside.out"}, "heaviside", FormulaResult::Promoted,
                   [](Formula& f) {
                     const Value x = f.x(0);
                     return where(x == 0.0, f.x(1), where(x > 0.0, 1.0, f.constant(0)));
                   });
  register_formula(m, {"hardshrink", "hardshrink.out"}, "hardshrink", FormulaResult::Float, [](Formula& f) {
    const Value x = f.x(0);
    const double lambda = f.parameter(0).value();
    return where((x >= -lambda) & (x <= lambda), 0.0, x);
  });
  register_formula(m, {"softshrink", "softshrink.out"}, "softshrink", FormulaResult::Float, [](Formula& f) {
    const Value x = f.x(0);
    const double lambda = f.parameter(0).value();
    return where(x > lambda, x - lambda, where(x < -lambda, x + lambda, x * 0.0));
  });
  register_formula(m, {"hardsigmoid", "hardsigmoid_", "hardsigmoid.out"}, "hardsigmoid", FormulaResult::Float,
                   [](Formula& f) { return minimum(maximum(f.x(0) + 3.0, f.constant(0)), f.constant(6)) / 6.0; });
  register_formula(m, {"threshold", "threshold_", "threshold.out"}, "threshold", FormulaResult::Promoted,
                   [](Formula& f) {
                     const Value x = f.x(0);
                     return where(x <= f.parameter(0).value(), f.constant(f.parameter(1).value()), x);
                   });
  // Their gradients (and logit's, below), as the CPU's kernels give them: the incoming gradient where the function
  // passes its input on, a sixth of it on hardsigmoid's slope, 0 elsewhere.
  register_formula(m, {"hardshrink_backward", "hardshrink_backward.grad_input"}, "hardshrink_backward",
                   FormulaResult::Float, shrink_backward);
  register_formula(m, {"softshrink_backward", "softshrink_backward.grad_input"}, "softshrink_backward",
                   FormulaResult::Float, shrink_backward);
  register_formula(m, {"hardsigmoid_backward", "hardsigmoid_backward.grad_input"}, "hardsigmoid_backward",
                   FormulaResult::Float, [](Formula& f) {
                     const Value gradient = f.x(0), x = f.x(1);
                     return where((x > -3.0) & (x < 3.0), gradient * (1.0 / 6.0), f.constant(0));
                   });
  register_formula(m, {"isposinf", "isposinf.out"}, "isposinf", FormulaResult::Bool,
                   [](Formula& f) { return f.x(0) == kInfinity; });
  register_formula(m, {"isneginf", "isneginf.out"}, "isneginf", FormulaResult::Bool,
                   [](Formula& f) { return f.x(0) == -kInfinity; });
  register_formula(m, {"signbit", "signbit.out"}, "signbit", FormulaResult::Bool,
                   [](Formula& f) { return f.sign_bit(0); });
  register_formula(
      m, {"sinc", "sinc_", "sinc.out"}, "sinc", FormulaResult::Float,
      [](Formula& f) {
        const Value x = f.x(0), product = x * std::numbers::pi;
        return where(x == 0.0, 1.0, sin(product) / product);
      },
      complex_form(ComplexFunction::Sinc));
  // log(z / (1 - z)), z clamped to [eps, 1 - eps] when eps is given (and not negative).
  register_formula(m, {"logit", "logit_", "logit.out"}, "logit", FormulaResult::Float, [](Formula& f) {
    Value z = f.x(0);
    if (const std::optional<double> eps = f.parameter(0); eps && *eps >= 0)
      z = where(z < *eps, *eps, where(z > 1 - *eps, 1 - *eps, z));
    return log(z / (1.0 - z));
  });
  // g / (x (1 - x)); outside [0, 1] NaN, or with eps (not negative) 0 outside [eps, 1 - eps], 1 - eps in float32 as
  // the CPU's kernel forms it.
  register_formula(m, {"logit_backward", "logit_backward.grad_input"}, "logit_backward", FormulaResult::Float,
                   [](Formula& f) {
                     const Value gradient = f.x(0), x = f.x(1);
                     const Value inside = gradient / (x * (1.0 - x));
                     const std::optional<double> eps = f.parameter(0);
                     if (!eps || *eps < 0) return where((x < 0.0) | (x > 1.0), f.constant(kNaN), inside);
                     const float low = static_cast<float>(*eps), high = 1.0f - low;
                     return where((x < low) | (x > high), f.constant(0), inside);
                   });
  register_formula(m, {"copysign.Tensor", "copysign_.Tensor", "copysign.out"}, "copysign", FormulaResult::Float,
                   [](Formula& f) {
                     const Value magnitude = abs(f.x(0));
                     return where(f.sign_bit(1), -magnitude, magnitude);
                   });
  // a itself where both are the same infinity, else max + log1p(2^-|a - b|) / ln 2.
  register_formula(m, {"logaddexp2", "logaddexp2.out"}, "logaddexp2", FormulaResult::Float, [](Formula& f) {
    const Value a = f.x(0), b = f.x(1);
    const Value sum = maximum(a, b) + log1p(approximate_exp2(-abs(a - b))) * std::numbers::log2e;
    return where(isinf(a) & (a == b), a, sum);
  });
  // self + w (end - self) for |w| < 1/2, else end + (w - 1)(end - self) (exact at w = 1), each a fused multiply-add
  // as the CPU's vectorised kernel computes it.
  register_formula(m, {"lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out"}, "lerp", FormulaResult::Promoted,
                   [](Formula& f) {
                     const Value self = f.x(0), end = f.x(1), weight = f.x(2);
                     const Value near_self = abs(weight) < 0.5;
                     return mul_add(where(near_self, weight, weight - 1.0), end - self, where(near_self, self, end));
                   });
  // 0 for x >= 0, pi below, NaN for NaN: the angle of a real number; atan2(b, a) of a complex one.
  register_formula(
      m, {"angle", "angle.out"}, "angle", FormulaResult::Float,
      [](Formula& f) {
        const Value x = f.x(0);
        return where(isnan(x), x, where(x < 0.0, std::numbers::pi, f.constant(0)));
      },
      {[](const std::vector<at::Tensor>& operands, at::Tensor& out) { return complex_angle(operands[0], out); },
       /*real_result=*/true});
  register_formula(m, {"pow.Tensor_Tensor", "pow_.Tensor", "pow.Tensor_Tensor_out"}, "pow", FormulaResult::Promoted,
                   tensor_power, {[](const std::vector<at::Tensor>& operands, at::Tensor& out) {
                     return complex_power(operands[0], operands[1], out);
                   }});
  m.impl("pow.Scalar", pow_scalar);
  m.impl("pow.Scalar_out", pow_scalar_out);
  // x where it is above 0, else weight x (the weight broadcast by prelu before it gets here).
  register_formula(m, {"_prelu_kernel"}, "prelu", FormulaResult::Promoted, [](Formula& f) {
    const Value x = f.x(0);
    return where(x > 0.0, x, f.x(1) * x);
  });
  m.impl("_prelu_kernel_backward", prelu_backward);
  // NaN where y is, 0 where x is 0, else x log1p(y).
  register_formula(m, {"special_xlog1py", "special_xlog1py.out"}, "xlog1py", FormulaResult::Float, [](Formula& f) {
    const Value x = f.x(0), y = f.x(1);
    return where(isnan(y), y, where(x == 0.0, 0.0, x * log1p(y)));
  });
  // -x log x for x > 0, 0 at 0, -inf below, NaN for NaN.
  register_formula(m, {"special_entr", "special_entr.out"}, "entr", FormulaResult::Float, [](Formula& f) {
    const Value x = f.x(0);
    return where(isnan(x), x, where(x > 0.0, -x * log(x), where(x == 0.0, 0.0, f.constant(-kInfinity))));
  });
}

}  // namespace npusim::bridge
