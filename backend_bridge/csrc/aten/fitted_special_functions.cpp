// special.erfcx, special.log_ndtr and special.airy_ai as formulas (pointwise_formula.h), each one fused kernel, from
// polynomials npusim fits itself (tools/fit_special_functions.py writes fitted_coefficients.h, and says how). Each is
// as accurate as its float32 argument allows: a few ulps, and Ai's oscillation to 2e-5 of its envelope (its phase
// carries the argument's rounding, as the CPU's does); log_ndtr's far tail keeps the digits the CPU's formula loses
// (erfc(x) there is erfcx(x) exp(-x^2), not 1 - erf(x)).
#include <torch/library.h>

#include <array>
#include <limits>
#include <numbers>
#include <optional>

#include "bridge.h"
#include "fitted_coefficients.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

constexpr double kInverseSqrtPi = std::numbers::inv_sqrtpi;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The fitted polynomial of v's piece (v must lie in the pieces' span, or be NaN: then the result is too).
template <size_t N, size_t Count>
Value piecewise_polynomial(Value v, const fitted::PolynomialPiece<N> (&pieces)[Count]) {
  std::optional<Value> result;
  for (const auto& piece : pieces) {
    const double middle = (piece.low + piece.high) / 2, half_width = (piece.high - piece.low) / 2;
    const Value here = polynomial((v - middle) / half_width, piece.coefficients);
    result = result ? where(v < piece.low, *result, here) : here;
  }
  return *result;
}

// erfcx(x) for x >= 0: exp(x^2) (1 - erf(x)) below 1/2, where erfc is at least 0.48 and so keeps erf's accuracy (and
// erfcx(0) is exactly 1); the fit below 50; above, the asymptotic series to its third term, 1/(x sqrt(pi))
// (1 - 1/(2x^2) + 3/(4x^4)), whose next term is below 2e-10 of it (and 1/x^2 cannot overflow: x = inf gives 0).
Value erfcx_nonnegative(Value x) {
  const Value direct = exp(x * x) * (1.0 - erf(x));
  const Value fitted = piecewise_polynomial(4.0 / (x + 4.0), fitted::kErfcx);
  const Value inverse_square = 1.0 / (x * x);
  const Value asymptotic = kInverseSqrtPi / x * polynomial(inverse_square, std::array{0.75, -0.5, 1.0});
  return where(x < 0.5, direct, where(x < 50.0, fitted, asymptotic));
}

// exp(x^2) erfc(x); for negative x, 2 exp(x^2) - erfcx(-x) (erfc(-a) = 2 - erfc(a)), infinite beyond x = -9.4 as in
// float32 on the CPU.
Value erfcx(Value x) {
  const Value positive = erfcx_nonnegative(abs(x));
  return where(x < 0.0, 2.0 * exp(x * x) - positive, positive);
}

// log(Phi(x)) = log(erfc(-x / sqrt 2) / 2). Below x = -1 as log(erfcx(t) / 2) - t^2 with t = -x / sqrt 2 (erfc
// itself would underflow below x = -14); above, log1p(-erfc(x / sqrt 2) / 2), erfc from erfcx for positive arguments
// so that the far tail keeps its digits (log_ndtr(10) is -7.6e-24, not 0). There erfc's factor exp(-x^2 / 2) takes
// x^2 / 2 exactly, as x x / 2 plus its rounding error (a fused multiply-add): rounded, it would cost x^2 / 2 ulps.
Value log_ndtr(Value x) {
  const Value t = x * (std::numbers::sqrt2 / 2.0);
  const Value left = log(erfcx_nonnegative(-t) / 2.0) - t * t;
  const Value square = x * x;
  const Value square_error = where(isinf(square), 0.0, mul_add(x, x, -square));  // not inf - inf
  const Value right_tail = erfcx_nonnegative(abs(t)) * exp(square * -0.5) * (1.0 - square_error * 0.5);
  const Value erfc_t = where(t > 0.0, right_tail, 1.0 - erf(t));
  return where(x < -1.0, left, log1p(-erfc_t / 2.0));
}

// Ai(x): its Maclaurin series for |x| <= 2.09; beyond, the fitted factors of its exponential decay (x > 0) and its
// oscillation (x < 0) in u = 1 / zeta, zeta = 2/3 |x|^(3/2) (see the fitting script). sin(zeta + pi/4) and
// cos(zeta + pi/4) are formed from sin(zeta) and cos(zeta), so that zeta is not rounded again by the sum. Infinities
// give NaN, as on the CPU.
Value airy_ai(Value x) {
  const Value cube = x * x * x;
  const Value series = fitted::kAiryAtZero * polynomial(cube, fitted::kAiryMaclaurinF) +
                       fitted::kAirySlopeAtZero * x * polynomial(cube, fitted::kAiryMaclaurinG);
  const Value magnitude = abs(x);
  const Value root = sqrt(magnitude), quarter_root = sqrt(root);
  const Value zeta = magnitude * root * (2.0 / 3.0);
  const Value u = 1.0 / zeta;
  const Value decaying =
      exp(-zeta) * piecewise_polynomial(u, fitted::kAiryPositive) / (quarter_root * (2.0 / kInverseSqrtPi));
  const Value sine = sin(zeta), cosine = cos(zeta);
  const Value shifted_sine = (sine + cosine) * (std::numbers::sqrt2 / 2.0);
  const Value shifted_cosine = (cosine - sine) * (std::numbers::sqrt2 / 2.0);
  const Value oscillating = (piecewise_polynomial(u, fitted::kAiryNegativeP) * shifted_sine -
                             piecewise_polynomial(u, fitted::kAiryNegativeQ) * shifted_cosine) *
                            kInverseSqrtPi / quarter_root;
  const Value outside = where(isinf(x), x.formula->constant(kNaN), where(x > 0.0, decaying, oscillating));
  return where(magnitude <= fitted::kAiryMaclaurinBound, series, outside);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_formula(m, {"special_erfcx", "special_erfcx.out"}, "erfcx", FormulaResult::Float,
                   [](Formula& f) { return erfcx(f.x(0)); });
  register_formula(m, {"special_log_ndtr", "special_log_ndtr.out"}, "log_ndtr", FormulaResult::Float,
                   [](Formula& f) { return log_ndtr(f.x(0)); });
  register_formula(m, {"special_airy_ai", "special_airy_ai.out"}, "airy_ai", FormulaResult::Float,
                   [](Formula& f) { return airy_ai(f.x(0)); });
}

}  // namespace npusim::bridge
