// The Bessel functions as formulas (pointwise_formula.h), each one fused kernel: i0, special.i0e, special.i1,
// special.i1e, the modified Bessel functions of the first and second kind of orders 0 and 1 (and the latter scaled by
// exp(x)), the Bessel functions of the first and second kind of orders 0 and 1, and the spherical Bessel function j0.
// Each is the Cephes approximation PyTorch's CPU kernels evaluate in float32 (bessel_coefficients.h), in the same
// order of operations and with the same branches, so that results agree within float32 rounding; a formula computes
// both sides of a branch and keeps one (`where`), the discarded side's NaN or infinity included.
#include <torch/library.h>

#include <limits>
#include <numbers>
#include <span>

#include "bessel_coefficients.h"
#include "bridge.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTwoOverPi = 2 / std::numbers::pi;
constexpr double kSqrtTwoOverPi = 0.797884560802865355879892119868763737;  // sqrt(2 / pi)

Value negated_where_negative(Value x, Value magnitude) { return where(x < 0.0, -magnitude, magnitude); }

// The float32 kernels of special.i1 and special.i1e take only the last 17 and 7 terms of I1's series (the modified
// Bessel function of order 1 takes them all).
std::span<const double> short_i1_small_series() { return std::span<const double>(cephes::kI1eSmall).last(17); }
std::span<const double> short_i1_large_series() { return std::span<const double>(cephes::kI1eLarge).last(7); }

Value i0(Value x) {
  const Value ax = abs(x);
  return where(ax <= 8.0, exp(ax) * chebyshev_series(ax / 2.0 - 2.0, cephes::kI0eSmall),
               exp(ax) * chebyshev_series(32.0 / ax - 2.0, cephes::kI0eLarge) / sqrt(ax));
}
Value i0e(Value x) {
  const Value ax = abs(x);
  return where(ax <= 8.0, chebyshev_series(ax / 2.0 - 2.0, cephes::kI0eSmall),
               chebyshev_series(32.0 / ax - 2.0, cephes::kI0eLarge) / sqrt(ax));
}

Value i1(Value x) {
  const Value ax = abs(x);
  const Value small = exp(ax) * ax * chebyshev_series(ax / 2.0 - 2.0, short_i1_small_series());
  const Value large = exp(ax) * chebyshev_series(32.0 / ax - 2.0, short_i1_large_series()) / sqrt(ax);
  return negated_where_negative(x, where(ax <= 8.0, small, large));
}
Value i1e(Value x) {
  const Value ax = abs(x);
  const Value small = chebyshev_series(ax / 2.0 - 2.0, short_i1_small_series()) * ax;
  const Value large = chebyshev_series(32.0 / ax - 2.0, short_i1_large_series()) / sqrt(ax);
  return negated_where_negative(x, where(ax <= 8.0, small, large));
}
Value modified_bessel_i1(Value x) {
  const Value ax = abs(x);
  const Value small = chebyshev_series(ax / 2.0 - 2.0, cephes::kI1eSmall) * ax * exp(ax);
  const Value large = exp(ax) * chebyshev_series(32.0 / ax - 2.0, cephes::kI1eLarge) / sqrt(ax);
  return negated_where_negative(x, where(ax <= 8.0, small, large));
}

// K0 and K1 of x > 0, times exp(x) when `scaled`; infinite at 0, NaN below.
Value modified_bessel_k(Value x, int order, bool scaled) {
  const Value small_series =
      chebyshev_series(x * x - 2.0, order == 0 ? std::span<const double>(cephes::kK0Small) : cephes::kK1Small);
  const Value large_series =
      chebyshev_series(8.0 / x - 2.0, order == 0 ? std::span<const double>(cephes::kK0Large) : cephes::kK1Large);
  const Value small =
      order == 0 ? small_series - log(0.5 * x) * i0(x) : log(0.5 * x) * modified_bessel_i1(x) + small_series / x;
  const Value value = scaled ? where(x <= 2.0, small * exp(x), large_series / sqrt(x))
                             : where(x <= 2.0, small, exp(-x) * large_series / sqrt(x));
  return where(x == 0.0, kInfinity, where(x < 0.0, kNaN, value));
}

// The asymptotic form beyond 5 shared by J and Y: sqrt(2 / (pi x)) (P/Q cos(x - phase) - 5/x P2/Q2 sin(x - phase))
// for J; Y takes sin and cos the other way round, adding. J0 and Y0 take z = 25 / x^2, J1 and Y1 (5 / x)^2.
struct Asymptotic {
  Value ratio, correction;  // P/Q and 5/x P2/Q2
};
Asymptotic asymptotic(Value x, int order) {
  const Value z = order == 0 ? 25.0 / (x * x) : 5.0 / x * (5.0 / x);
  const auto& pp = order == 0 ? cephes::kJ0PP : cephes::kJ1PP;
  const auto& pq = order == 0 ? cephes::kJ0PQ : cephes::kJ1PQ;
  const auto& qp = order == 0 ? cephes::kJ0QP : cephes::kJ1QP;
  const auto& qq = order == 0 ? cephes::kJ0QQ : cephes::kJ1QQ;
  return {polynomial(z, pp) / polynomial(z, pq), 5.0 / x * (polynomial(z, qp) / polynomial(z, qq))};
}
double phase(int order) { return order == 0 ? std::numbers::pi / 4 : 3 * std::numbers::pi / 4; }

// J0 and J1 of x >= 0 (J0 is even, J1 odd: callers pass |x|).
Value bessel_j_of_magnitude(Value x, int order) {
  const Value x2 = x * x;
  Value near;
  if (order == 0) {
    const Value rational = polynomial(x2, cephes::kJ0RP) / polynomial(x2, cephes::kJ0RQ);
    near = where(x < 1e-5, 1.0 - x2 / 4.0,
                 (x2 - 5.78318596294678452118e+00) * (x2 - 3.04712623436620863991e+01) * rational);
  } else {
    // rp / rq x (x^2 - r1^2) (x^2 - r2^2), multiplied left to right as the CPU does
    const Value rational = polynomial(x2, cephes::kJ1RP) / polynomial(x2, cephes::kJ1RQ);
    near = rational * x * (x2 - 1.46819706421238932572e+01) * (x2 - 4.92184563216946036703e+01);
  }
  const Asymptotic far = asymptotic(x, order);
  const Value shifted = x - phase(order);
  const Value beyond = (far.ratio * cos(shifted) - far.correction * sin(shifted)) * kSqrtTwoOverPi / sqrt(x);
  return where(x <= 5.0, near, beyond);
}

Value bessel_y(Value x, int order) {
  const Value x2 = x * x;
  Value near;
  if (order == 0) {
    near = polynomial(x2, cephes::kY0YP) / polynomial(x2, cephes::kY0YQ) +
           kTwoOverPi * log(x) * bessel_j_of_magnitude(x, 0);
  } else {
    near = x * (polynomial(x2, cephes::kY1YP) / polynomial(x2, cephes::kY1YQ)) +
           kTwoOverPi * (bessel_j_of_magnitude(x, 1) * log(x) - 1.0 / x);
  }
  const Asymptotic far = asymptotic(x, order);
  const Value shifted = x - phase(order);
  const Value beyond = (far.ratio * sin(shifted) + far.correction * cos(shifted)) * kSqrtTwoOverPi / sqrt(x);
  near = where(x == 0.0, -kInfinity, where(x < 0.0, kNaN, near));
  return where(x <= 5.0, near, beyond);
}

// sin(x) / x, by its Taylor series below 1/2; 0 at the infinities.
Value spherical_bessel_j0(Value x) {
  const Value x2 = x * x;
  const Value series =
      1.0 +
      x2 * (-1.0 / 6.0 +
            x2 * (1.0 / 120.0 +
                  x2 * (-1.0 / 5040.0 + x2 * (1.0 / 362880.0 + x2 * (-1.0 / 39916800.0 + x2 * (1.0 / 6227020800.0))))));
  return where(isinf(x), 0.0, where(abs(x) < 0.5, series, sin(x) / x));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_formula(m, {"i0", "i0_", "i0.out"}, "i0", FormulaResult::Float, [](Formula& f) { return i0(f.x(0)); });
  register_formula(m, {"special_i0e", "special_i0e.out"}, "i0e", FormulaResult::Float,
                   [](Formula& f) { return i0e(f.x(0)); });
  register_formula(m, {"special_i1", "special_i1.out"}, "i1", FormulaResult::Float,
                   [](Formula& f) { return i1(f.x(0)); });
  register_formula(m, {"special_i1e", "special_i1e.out"}, "i1e", FormulaResult::Float,
                   [](Formula& f) { return i1e(f.x(0)); });
  register_formula(m, {"special_modified_bessel_i0", "special_modified_bessel_i0.out"}, "modified_bessel_i0",
                   FormulaResult::Float, [](Formula& f) { return i0(f.x(0)); });
  register_formula(m, {"special_modified_bessel_i1", "special_modified_bessel_i1.out"}, "modified_bessel_i1",
                   FormulaResult::Float, [](Formula& f) { return modified_bessel_i1(f.x(0)); });
  register_formula(m, {"special_modified_bessel_k0", "special_modified_bessel_k0.out"}, "modified_bessel_k0",
                   FormulaResult::Float, [](Formula& f) { return modified_bessel_k(f.x(0), 0, false); });
  register_formula(m, {"special_modified_bessel_k1", "special_modified_bessel_k1.out"}, "modified_bessel_k1",
                   FormulaResult::Float, [](Formula& f) { return modified_bessel_k(f.x(0), 1, false); });
  register_formula(m, {"special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k0.out"},
                   "scaled_modified_bessel_k0", FormulaResult::Float,
                   [](Formula& f) { return modified_bessel_k(f.x(0), 0, true); });
  register_formula(m, {"special_scaled_modified_bessel_k1", "special_scaled_modified_bessel_k1.out"},
                   "scaled_modified_bessel_k1", FormulaResult::Float,
                   [](Formula& f) { return modified_bessel_k(f.x(0), 1, true); });
  register_formula(m, {"special_bessel_j0", "special_bessel_j0.out"}, "bessel_j0", FormulaResult::Float,
                   [](Formula& f) { return bessel_j_of_magnitude(abs(f.x(0)), 0); });
  register_formula(m, {"special_bessel_j1", "special_bessel_j1.out"}, "bessel_j1", FormulaResult::Float,
                   [](Formula& f) {
                     const Value x = f.x(0);
                     return negated_where_negative(x, bessel_j_of_magnitude(abs(x), 1));
                   });
  register_formula(m, {"special_bessel_y0", "special_bessel_y0.out"}, "bessel_y0", FormulaResult::Float,
                   [](Formula& f) { return bessel_y(f.x(0), 0); });
  register_formula(m, {"special_bessel_y1", "special_bessel_y1.out"}, "bessel_y1", FormulaResult::Float,
                   [](Formula& f) { return bessel_y(f.x(0), 1); });
  register_formula(m, {"special_spherical_bessel_j0", "special_spherical_bessel_j0.out"}, "spherical_bessel_j0",
                   FormulaResult::Float, [](Formula& f) { return spherical_bessel_j0(f.x(0)); });
}

}  // namespace npusim::bridge
