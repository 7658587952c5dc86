// Complex64 elementwise functions (complex_functions.h), from the parts z = a + bi with real functions of the vector
// engine, in forms that keep float32's precision where the textbook form would cancel or overflow:
//   |z|        m sqrt(1 + (n / m)^2), m = max(|a|, |b|), n = min: no overflow (C's hypot)
//   log z      log |z| + i atan2(b, a), log |z| = log m + log1p((n / m)^2) / 2
//   log1p z    log |1 + z| + i atan2(b, 1 + a); near 0, log |1 + z| = log1p(a (2 + a) + b^2) / 2
//   expm1 z    expm1(a) cos b - 2 sin^2(b / 2) + i e^a sin b
//   sqrt z     t = sqrt((|a| + |z|) / 2): t + i b / 2t for a >= 0, |b| / 2t + i copysign(t, b) else (no cancellation)
//   sin, cos, sinh, cosh   by the addition theorems, with sinh a = (expm1(a) - expm1(-a)) / 2 (exact near 0) and,
//              beyond |a| = 20, cosh a = |sinh a| = (e / 2) e, e = e^(|a|/2) (finite up to 89.4)
//   tanh z     Kahan's form: t = tan b, s = sinh a, (sqrt(1 + s^2) s (1 + t^2) + i t) / (1 + (1 + t^2) s^2), and
//              sign(a) + 4i sin b cos b e^(-2|a|) beyond |a| = 20; tan z = -i tanh(iz)
//   asinh z    log1p(w + w^2 / (1 + sqrt(w^2 + 1))) for w = +-z with Re w >= 0 (odd: no cancellation, and log1p
//              keeps small arguments' digits); asin z = -i asinh(iz)
//   acosh z    log(z + sqrt(z + 1) sqrt(z - 1)) (Kahan's form: the principal branch); acos z = pi/2 - asin z
//   atanh z    (log1p(z) - log1p(-z)) / 2; atan z = -i atanh(iz)
//              (and beyond |z| = 4096 their asymptotic forms)
//   sigmoid z  1 / (1 + e^-z);  silu z  z / (1 + e^-z);  sinc z  sin(pi z) / (pi z);  sgn z  z / |z| (0 at 0);  z^w
//   e^(w log z);  2^z  e^(z ln 2)
// Each agrees with the CPU's (glibc's complex functions) within float32 rounding relative to |f(z)|.
#include "complex_functions.h"

#include <ATen/ops/scalar_tensor.h>

#include <iterator>
#include <limits>
#include <numbers>
#include <vector>

#include "bridge.h"
#include "complex_parts.h"
#include "inverse_trigonometric.h"

namespace npusim::bridge {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kLarge = 20;  // beyond |a| = 20, e^-|a| is below float32's precision next to e^|a|

Value magnitude(Value a, Value b) {
  const Value m = maximum(abs(a), abs(b)), n = minimum(abs(a), abs(b));
  const Value ratio = n / m;
  const Value finite = where(m == 0.0, 0.0, m * sqrt(1.0 + ratio * ratio));
  return where(isinf(a) | isinf(b), kInfinity, finite);
}

Value log_magnitude(Value a, Value b) {
  const Value m = maximum(abs(a), abs(b)), n = minimum(abs(a), abs(b));
  const Value ratio = n / m;
  const Value finite = where(m == 0.0, -kInfinity, log(m) + log1p(ratio * ratio) * 0.5);
  return where(isinf(a) | isinf(b), kInfinity, finite);
}

ComplexValue exponential(ComplexValue z) {
  const Value scale = exp(z.first);
  return {scale * cos(z.second), scale * sin(z.second)};
}

ComplexValue logarithm(ComplexValue z) { return {log_magnitude(z.first, z.second), atan2(z.second, z.first)}; }

Value sinh(Value x) {
  const Value half = exp(abs(x) * 0.5);
  const Value large = half * 0.5 * half;
  return where(abs(x) > kLarge, where(x < 0.0, -large, large), (expm1(x) - expm1(-x)) * 0.5);
}

Value cosh(Value x) {
  const Value half = exp(abs(x) * 0.5);
  return where(abs(x) > kLarge, half * 0.5 * half, (exp(abs(x)) + exp(-abs(x))) * 0.5);
}

ComplexValue square_root(ComplexValue z) {
  const auto [a, b] = z;
  const Value t = sqrt(abs(a) * 0.5 + magnitude(a, b) * 0.5);
  const Value across = b / (t * 2.0);
  const Value signed_t = where(sign_bit(b), -t, t);
  const Value real = where(sign_bit(a), abs(b) / (t * 2.0), t);
  const Value imag = where(sign_bit(a), signed_t, across);
  // At 0, b / 2t is 0 / 0; an infinite b gives inf + bi whatever a is, as C's csqrt.
  const Value zero = t == 0.0;
  return {where(isinf(b), kInfinity, where(zero, 0.0, real)), where(isinf(b) | zero, b, imag)};
}

ComplexValue hyperbolic_tangent(ComplexValue z) {
  const auto [a, b] = z;
  const Value sine = sin(b), cosine = cos(b);
  const Value t = sine / cosine, s = sinh(a);
  const Value beta = 1.0 + t * t;
  const Value denominator = 1.0 + beta * s * s;
  const Value rho = sqrt(1.0 + s * s);
  const Value far_imag = sine * cosine * 4.0 * exp(abs(a) * -2.0);
  const Value far = abs(a) > kLarge;
  return {where(far, where(a < 0.0, -1.0, a.formula->constant(1.0)), beta * rho * s / denominator),
          where(far, far_imag, t / denominator)};
}

ComplexValue add(ComplexValue x, ComplexValue y) { return {x.first + y.first, x.second + y.second}; }
ComplexValue plus(ComplexValue x, double c) { return {x.first + c, x.second}; }
ComplexValue negated(ComplexValue x) { return {-x.first, -x.second}; }
ComplexValue times_i(ComplexValue x) { return {-x.second, x.first}; }
ComplexValue times_minus_i(ComplexValue x) { return {x.second, -x.first}; }

ComplexValue log1p_of(ComplexValue z) {
  const auto [a, b] = z;
  const Value shifted = a + 1.0;
  const Value near_zero = log1p(a * (a + 2.0) + b * b) * 0.5;
  const Value real = where(magnitude(a, b) < 0.5, near_zero, log_magnitude(shifted, b));
  return {real, atan2(b, shifted)};
}

// Beyond |z| = 4096 the inverse hyperbolic functions take their asymptotic forms (log(2z) for asinh and acosh, whose
// next terms are below 2^-25 of them; 1/z + i pi/2 sign(b) for atanh, next term 1/(3z^3)): z^2 would overflow first.
constexpr double kAsymptotic = 4096;

ComplexValue log_of_twice(ComplexValue z) {
  const auto [real, imag] = logarithm(z);
  return {real + std::numbers::ln2, imag};
}

ComplexValue inverse_hyperbolic_sine(ComplexValue z) {
  const Value flip = z.first < 0.0;
  const ComplexValue w{where(flip, -z.first, z.first), where(flip, -z.second, z.second)};
  const ComplexValue square = complex_product(w, w);
  const ComplexValue near = log1p_of(add(w, complex_quotient(square, plus(square_root(plus(square, 1.0)), 1.0))));
  const ComplexValue far = log_of_twice(w);
  const Value large = magnitude(w.first, w.second) > kAsymptotic;
  const Value real = where(large, far.first, near.first), imag = where(large, far.second, near.second);
  return {where(flip, -real, real), where(flip, -imag, imag)};
}

ComplexValue inverse_hyperbolic_cosine(ComplexValue z) {
  const ComplexValue near = logarithm(add(z, complex_product(square_root(plus(z, 1.0)), square_root(plus(z, -1.0)))));
  const ComplexValue far = log_of_twice(z);
  const Value large = magnitude(z.first, z.second) > kAsymptotic;
  return {where(large, far.first, near.first), where(large, far.second, near.second)};
}

ComplexValue inverse_hyperbolic_tangent(ComplexValue z) {
  Formula& f = *z.first.formula;
  const auto [real, imag] = add(log1p_of(z), negated(log1p_of(negated(z))));
  const auto [inverse_real, inverse_imag] = complex_quotient({f.constant(1.0), f.constant(0.0)}, z);
  const Value quarter_turn = where(sign_bit(z.second), -std::numbers::pi / 2, f.constant(std::numbers::pi / 2));
  const Value large = magnitude(z.first, z.second) > kAsymptotic;
  return {where(large, inverse_real, real * 0.5), where(large, inverse_imag + quarter_turn, imag * 0.5)};
}

ComplexValue evaluate(ComplexFunction function, ComplexValue z) {
  const auto [a, b] = z;
  Formula& f = *a.formula;
  const ComplexValue one{f.constant(1.0), f.constant(0.0)};
  switch (function) {
    case ComplexFunction::Neg: return {-a, -b};
    case ComplexFunction::Reciprocal: return complex_quotient(one, z);
    case ComplexFunction::Exp: return exponential(z);
    case ComplexFunction::Exp2: return exponential({a * std::numbers::ln2, b * std::numbers::ln2});
    case ComplexFunction::Expm1: {
      const Value half_sine = sin(b * 0.5);
      return {expm1(a) * cos(b) - half_sine * half_sine * 2.0, exp(a) * sin(b)};
    }
    case ComplexFunction::Log: return logarithm(z);
    case ComplexFunction::Log2:
    case ComplexFunction::Log10: {
      const double scale = function == ComplexFunction::Log2 ? std::numbers::log2e : std::numbers::log10e;
      const auto [real, imag] = logarithm(z);
      return {real * scale, imag * scale};
    }
    case ComplexFunction::Log1p: return log1p_of(z);
    case ComplexFunction::Sqrt: return square_root(z);
    case ComplexFunction::Rsqrt: return complex_quotient(one, square_root(z));
    case ComplexFunction::Sin: return {sin(a) * cosh(b), cos(a) * sinh(b)};
    case ComplexFunction::Cos: return {cos(a) * cosh(b), -(sin(a) * sinh(b))};
    case ComplexFunction::Tan: {
      const auto [x, y] = hyperbolic_tangent({-b, a});
      return {y, -x};
    }
    case ComplexFunction::Asin: return times_minus_i(inverse_hyperbolic_sine(times_i(z)));
    case ComplexFunction::Acos: {
      const auto [real, imag] = times_minus_i(inverse_hyperbolic_sine(times_i(z)));
      return {std::numbers::pi / 2 - real, -imag};
    }
    case ComplexFunction::Atan: return times_minus_i(inverse_hyperbolic_tangent(times_i(z)));
    case ComplexFunction::Asinh: return inverse_hyperbolic_sine(z);
    case ComplexFunction::Acosh: return inverse_hyperbolic_cosine(z);
    case ComplexFunction::Atanh: return inverse_hyperbolic_tangent(z);
    case ComplexFunction::Sinh: return {sinh(a) * cos(b), cosh(a) * sin(b)};
    case ComplexFunction::Cosh: return {cosh(a) * cos(b), sinh(a) * sin(b)};
    case ComplexFunction::Tanh: return hyperbolic_tangent(z);
    case ComplexFunction::Sigmoid: {
      const auto [c, d] = exponential({-a, -b});
      return complex_quotient(one, {c + 1.0, d});
    }
    case ComplexFunction::Silu: {  // z / (1 + e^-z), as the CPU's
      const auto [c, d] = exponential({-a, -b});
      return complex_quotient(z, {c + 1.0, d});
    }
    case ComplexFunction::Sinc: {  // sin(pi z) / (pi z), 1 at 0
      const ComplexValue scaled{a * std::numbers::pi, b * std::numbers::pi};
      const auto [c, d] = complex_quotient(evaluate(ComplexFunction::Sin, scaled), scaled);
      const Value zero = (a == 0.0) & (b == 0.0);
      return {where(zero, 1.0, c), where(zero, 0.0, d)};
    }
    case ComplexFunction::Sgn: {
      const Value m = magnitude(a, b);
      return {where(m == 0.0, 0.0, a / m), where(m == 0.0, 0.0, b / m)};
    }
  }
  return z;
}

const char* kernel_name(ComplexFunction function) {
  static const char* const names[] = {
      "complex_neg",  "complex_reciprocal", "complex_exp",   "complex_exp2",  "complex_expm1", "complex_log",
      "complex_log2", "complex_log10",      "complex_log1p", "complex_sqrt",  "complex_rsqrt", "complex_sin",
      "complex_cos",  "complex_tan",        "complex_asin",  "complex_acos",  "complex_atan",  "complex_sinh",
      "complex_cosh", "complex_tanh",       "complex_asinh", "complex_acosh", "complex_atanh", "complex_sigmoid",
      "complex_silu", "complex_sinc",       "complex_sgn"};
  static_assert(std::size(names) == static_cast<size_t>(ComplexFunction::Sgn) + 1, "a name for each function");
  return names[static_cast<int>(function)];
}

// z^w = e^(w log z); for z = 0, 0 if w's real part is positive, inf + NaN i if negative, NaN otherwise (the CPU's).
ComplexValue power(ComplexValue z, ComplexValue w) {
  Formula& f = *z.first.formula;
  const auto [real, imag] = exponential(complex_product(w, logarithm(z)));
  const Value zero = (z.first == 0.0) & (z.second == 0.0);
  const Value nan = f.constant(std::numeric_limits<double>::quiet_NaN());
  const Value zero_real = where(w.first > 0.0, 0.0, where(w.first < 0.0, kInfinity, nan));
  return {where(zero, zero_real, real), where(zero, where(w.first > 0.0, 0.0, nan), imag)};
}

}  // namespace

bool complex_function(ComplexFunction function, const at::Tensor& self, at::Tensor& out) {
  if (!is_complex64_on_device(out) || out.is_conj() || !self.is_complex()) return false;
  resize_for(out, {self});
  if (out.numel() == 0) return true;
  return launch_parts(kernel_name(function), {self}, out,
                      [&](const std::vector<ComplexValue>& v) { return evaluate(function, v[0]); });
}

ComplexForm complex_form(ComplexFunction function) {
  return {[function](const std::vector<at::Tensor>& operands, at::Tensor& out) {
    return complex_function(function, operands[0], out);
  }};
}

bool complex_power(const at::Tensor& self, const at::Tensor& exponent, at::Tensor& out) {
  if (!is_complex64_on_device(out) || out.is_conj()) return false;
  resize_for(out, {self, exponent});
  if (out.numel() == 0) return true;
  return launch_parts("complex_pow", {self, exponent}, out,
                      [](const std::vector<ComplexValue>& v) { return power(v[0], v[1]); });
}

bool complex_power_scalar(const at::Tensor& self, const at::Scalar& exponent, at::Tensor& out) {
  if (!is_complex64_on_device(out) || out.is_conj() || !self.is_complex()) return false;
  const c10::complex<double> w = exponent.toComplexDouble();
  const double e = w.real();
  if (w.imag() == 0 && (e == 0.5 || e == -0.5 || e == -1))
    return complex_function(e == 0.5    ? ComplexFunction::Sqrt
                            : e == -0.5 ? ComplexFunction::Rsqrt
                                        : ComplexFunction::Reciprocal,
                            self, out);
  if (w.imag() == 0 && (e == 0 || e == 1)) {
    resize_for(out, {self});
    return e == 0 ? (out.fill_(1), true) : (out.copy_(self), true);
  }
  if (w.imag() == 0 && (e == 2 || e == 3 || e == -2)) {
    resize_for(out, {self});
    if (out.numel() == 0) return true;
    return launch_parts("complex_pow", {self}, out, [e](const std::vector<ComplexValue>& v) {
      const ComplexValue square = complex_product(v[0], v[0]);
      if (e == 2) return square;
      if (e == 3) return complex_product(square, v[0]);
      Formula& f = *v[0].first.formula;
      return complex_quotient({f.constant(1.0), f.constant(0.0)}, square);
    });
  }
  return complex_power(self, at::scalar_tensor(exponent, at::kComplexDouble), out);
}

bool complex_angle(const at::Tensor& self, at::Tensor& out) {
  if (!self.is_complex() || out.scalar_type() != at::kFloat) return false;
  return launch_parts_to_real("complex_angle", {self}, out,
                              [](const std::vector<ComplexValue>& v) { return atan2(v[0].second, v[0].first); });
}

bool complex_isnan(const at::Tensor& self, at::Tensor& out) {
  if (!self.is_complex() || out.scalar_type() != at::kBool) return false;
  return launch_parts_to_real("complex_isnan", {self}, out, [](const std::vector<ComplexValue>& v) {
    return isnan(v[0].first) | isnan(v[0].second);
  });
}

bool complex_equality(bool equal, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (!(self.is_complex() || other.is_complex()) || out.scalar_type() != at::kBool) return false;
  return launch_parts_to_real(equal ? "complex_eq" : "complex_ne", {self, other}, out,
                              [&](const std::vector<ComplexValue>& v) {
                                const Value same = (v[0].first == v[1].first) & (v[0].second == v[1].second);
                                return equal ? same : !same;
                              });
}

}  // namespace npusim::bridge
