// The inverse trigonometric and hyperbolic functions as formulas (pointwise_formula.h), each one fused kernel: the
// vector engine has no arctangent, so atan is Cephes' single-precision one (range reduction by tan(pi/8) and
// tan(3pi/8), then a degree-9 odd polynomial; relative error below 2e-7), and the others are built on it or on
// log1p and sqrt in forms that keep their precision near the ends of the domain:
//   atan2(y, x)  atan(y / x), moved by pi into the left half plane; zeros and infinities as C's atan2
//   asin(x)      atan(x / sqrt((1 - x)(1 + x)))
//   acos(x)      2 atan(sqrt((1 - x) / (1 + x)))           (no cancellation near 1)
//   asinh(x)     sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), log|x| + ln 2 beyond 2^60
//   acosh(x)     log1p(t + sqrt(2t + t^2)), t = x - 1,      log x + ln 2 beyond 2^60
//   atanh(x)     sign(x) log1p(2|x| / (1 - |x|)) / 2     (log1p near -1 would lose it)
// Outside the domain each gives NaN, as the CPU does. Complex operands take complex_functions.h's forms.
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "complex_functions.h"
#include "inverse_trigonometric.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kLarge = 0x1p60;  // beyond this, x^2 + 1 is x^2 and squaring it again would overflow

// c with the sign of y.
Value with_sign_of(Value y, double c) { return where(sign_bit(y), -c, y.formula->constant(c)); }

}  // namespace

Value atan(Value x) {
  Formula& f = *x.formula;
  const Value a = abs(x);
  const Value big = a > 2.414213562373095, middle = a > 0.4142135623730950;
  const Value offset = where(big, kPi / 2, where(middle, kPi / 4, f.constant(0)));
  const Value t = where(big, -1.0 / a, where(middle, (a - 1.0) / (a + 1.0), a));
  const Value z = t * t;
  const Value polynomial =
      (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * t + t;
  const Value magnitude = offset + polynomial;
  return where(x < 0.0, -magnitude, magnitude);
}

Value acos(Value x) { return 2.0 * atan(sqrt((1.0 - x) / (1.0 + x))); }

Value sign_bit(Value x) { return (x < 0.0) | ((x == 0.0) & (1.0 / x < 0.0)); }  // 1 / -0 is -inf

Value atan2(Value y, Value x) {
  const Value x_negative = sign_bit(x);  // -0 counts: atan2(+0, -0) is pi
  Value angle = atan(y / x);
  angle = where(x_negative, angle + with_sign_of(y, kPi), angle);
  // Both zero: the quotient is NaN; C gives y (x positive) or pi with y's sign.
  angle = where((x == 0.0) & (y == 0.0), where(x_negative, with_sign_of(y, kPi), y), angle);
  // x zero, y not: y / -0 points the wrong way; C gives pi/2 with y's sign.
  angle = where((x == 0.0) & ((y < 0.0) | (y > 0.0)), with_sign_of(y, kPi / 2), angle);
  // Both infinite: pi/4 or 3pi/4, with y's sign.
  const Value corner = where(x_negative, with_sign_of(y, 3 * kPi / 4), with_sign_of(y, kPi / 4));
  return where(isinf(x) & isinf(y), corner, angle);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_formula(
      m, {"atan", "atan_", "atan.out"}, "atan", FormulaResult::Float, [](Formula& f) { return atan(f.x(0)); },
      complex_form(ComplexFunction::Atan));
  register_formula(m, {"atan2", "atan2_", "atan2.out"}, "atan2", FormulaResult::Float,
                   [](Formula& f) { return atan2(f.x(0), f.x(1)); });
  register_formula(
      m, {"asin", "asin_", "asin.out"}, "asin", FormulaResult::Float,
      [](Formula& f) {
        const Value x = f.x(0);
        return atan(x / sqrt((1.0 - x) * (1.0 + x)));
      },
      complex_form(ComplexFunction::Asin));
  register_formula(
      m, {"acos", "acos_", "acos.out"}, "acos", FormulaResult::Float, [](Formula& f) { return acos(f.x(0)); },
      complex_form(ComplexFunction::Acos));
  register_formula(
      m, {"asinh", "asinh_", "asinh.out"}, "asinh", FormulaResult::Float,
      [](Formula& f) {
        const Value x = f.x(0), a = abs(x);
        const Value square = a * a;
        const Value near = log1p(a + square / (1.0 + sqrt(1.0 + square)));
        const Value magnitude = where(a > kLarge, log(a) + std::numbers::ln2, near);
        return where(f.sign_bit(0), -magnitude, magnitude);
      },
      complex_form(ComplexFunction::Asinh));
  register_formula(
      m, {"acosh", "acosh_", "acosh.out"}, "acosh", FormulaResult::Float,
      [](Formula& f) {
        const Value x = f.x(0), t = x - 1.0;
        return where(x > kLarge, log(x) + std::numbers::ln2, log1p(t + sqrt(2.0 * t + t * t)));
      },
      complex_form(ComplexFunction::Acosh));
  register_formula(
      m, {"atanh", "atanh_", "atanh.out"}, "atanh", FormulaResult::Float,
      [](Formula& f) {
        const Value x = f.x(0), a = abs(x);
        const Value magnitude = 0.5 * log1p(2.0 * a / (1.0 - a));
        return where(f.sign_bit(0), -magnitude, magnitude);
      },
      complex_form(ComplexFunction::Atanh));
}

}  // namespace npusim::bridge
