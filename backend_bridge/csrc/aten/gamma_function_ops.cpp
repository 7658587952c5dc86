// lgamma and digamma (and polygamma of order 0, which is digamma) as formulas (pointwise_formula.h), each one fused
// kernel. Both shift a positive argument below 8 up by 8 with the recurrences
//   lgamma(x) = lgamma(x + 8) - log(x (x + 1) ... (x + 7)),   psi(x) = psi(x + 8) - sum 1 / (x + k), k < 8,
// then take the asymptotic (Stirling) series, whose first omitted term is below 1e-9 from 8 on. Negative arguments
// use the reflection formulas
//   lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x),          psi(x) = psi(1 - x) - pi / tan(pi x),
// with sin and tan taken of x's distance to the nearest integer, exact in float32, so that arguments large or
// near a pole keep their precision. Poles,
// infinities and NaN as the CPU's kernels give them: lgamma is +inf at 0, the negative integers and both
// infinities; digamma is -inf at +0, +inf at -0 and NaN at the negative integers. polygamma of orders 1 to 10 shifts
// the Hurwitz zeta function the same way (reflecting negative arguments through the derivatives of the cotangent).
#include <ATen/ops/digamma.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "bridge.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int kShift = 8;

// x - round(x), exact, in [-1/2, 1/2]: |sin(pi x)| and cot(pi x) repeat with period 1, and near a whole number this
// keeps the small angle's precision (pi times a fraction near -1 would lose it to pi's rounding).
Value nearest_integer_distance(Value x) { return x - round(x); }

// lgamma of w > 0.
Value positive_lgamma(Value w) {
  const Value small = w < kShift;
  const Value z = where(small, w + kShift, w);
  Value product = w;
  for (int k = 1; k < kShift; ++k) product = product * (w + k);
  const Value r = 1.0 / z, r2 = r * r;
  const Value series = r * (1.0 / 12 - r2 * (1.0 / 360 - r2 / 1260));
  const Value stirling = (z - 0.5) * log(z) - z + 0.5 * std::log(2 * kPi) + series;
  return stirling - where(small, log(product), 0.0);
}

// psi of w > 0.
Value positive_digamma(Value w) {
  const Value small = w < kShift;
  const Value z = where(small, w + kShift, w);
  Value shift = 1.0 / w;
  for (int k = 1; k < kShift; ++k) shift = shift + 1.0 / (w + k);
  const Value r = 1.0 / z, r2 = r * r;
  const Value series = r2 * (1.0 / 12 - r2 * (1.0 / 120 - r2 * (1.0 / 252 - r2 * (1.0 / 240 - r2 / 132))));
  return log(z) - 0.5 * r - series - where(small, shift, 0.0);
}

Value lgamma(Formula& f) {
  const Value x = f.x(0);
  const Value negative = x < 0.0;
  const Value magnitude = positive_lgamma(where(negative, 1.0 - x, x));
  const Value reflected = log(kPi / abs(sin(kPi * nearest_integer_distance(x)))) - magnitude;
  return where(isinf(x), kInfinity, where(negative, reflected, magnitude));
}

Value digamma(Formula& f) {
  const Value x = f.x(0);
  const Value negative = x < 0.0;
  const Value value = positive_digamma(where(negative, 1.0 - x, x));
  const Value turned = kPi * nearest_integer_distance(x);
  const Value reflected = value - kPi * cos(turned) / sin(turned);
  const Value result = where(negative, where(x == trunc(x), f.constant(std::nan("")), reflected), value);
  return where(x == 0.0, where(f.sign_bit(0), kInfinity, f.constant(-kInfinity)), result);
}

// 1 / v^s for a whole s >= 1, by repeated products (exact powers where they are representable; 0 and infinity where
// they overflow or vanish, as the value does).
Value inverse_power(Value v, int s) {
  Value power = v;
  for (int k = 1; k < s; ++k) power = power * v;
  return 1.0 / power;
}

// psi^(n)(w) = (-1)^(n+1) n! zeta(n + 1, w) for w > 0 and n >= 1: the Hurwitz zeta function shifted up by 8 and its
// Euler-Maclaurin tail, zeta(s, z) ~ z^(1-s) / (s - 1) + z^-s / 2 + sum_j B_2j / (2j)! s (s + 1) ... (s + 2j - 2)
// z^(-s-2j+1), five terms (the first omitted below 1e-7 of the value from z = 8 on, for n up to 10).
Value positive_polygamma(Value w, int n) {
  constexpr double kBernoulli[] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66};
  const int s = n + 1;
  const Value small = w < kShift;
  const Value z = where(small, w + kShift, w);
  Value shifted = inverse_power(w, s);
  for (int k = 1; k < kShift; ++k) shifted = shifted + inverse_power(w + k, s);
  const Value r = 1.0 / z;
  Value series = z.formula->constant(0.5);
  double rising = s, factorial = 2;  // s (s + 1) ... (s + 2j - 2) and (2j)!
  Value r_power = r;                 // r^(2j - 1)
  for (int j = 1; j <= 5; ++j) {
    series = series + (kBernoulli[j - 1] / factorial * rising) * r_power;
    rising *= (s + 2 * j - 1) * (s + 2 * j);
    factorial *= (2 * j + 1) * (2 * j + 2);
    r_power = r_power * r * r;
  }
  // z^(1-s) apart from the rest, so that an infinite z gives 0, not infinity times 0.
  const Value zeta = inverse_power(z, s - 1) / (s - 1) + inverse_power(z, s) * series + where(small, shifted, 0.0);
  return std::tgamma(n + 1.0) * (n % 2 == 1 ? 1.0 : -1.0) * zeta;
}

// The polynomial Q_n with d^n/dx^n cot(pi x) = pi^n Q_n(cot(pi x)): Q_0(c) = c, Q_(k+1)(c) = -(1 + c^2) Q_k'(c).
// Coefficients by ascending power, made on the host.
std::vector<double> cotangent_derivative(int n) {
  std::vector<double> q = {0, 1};
  for (int k = 0; k < n; ++k) {
    std::vector<double> derivative(q.size() > 1 ? q.size() - 1 : 1, 0.0);
    for (size_t i = 1; i < q.size(); ++i) derivative[i - 1] = static_cast<double>(i) * q[i];
    std::vector<double> next(derivative.size() + 2, 0.0);
    for (size_t i = 0; i < derivative.size(); ++i) {
      next[i] -= derivative[i];
      next[i + 2] -= derivative[i];
    }
    q = next;
  }
  return q;
}

// polygamma(n, x) for n >= 1: psi^(n)(x) directly for x >= 0; for -16 <= x < 0 through
//   psi^(n)(x) = psi^(n)(x + m) + (-1)^(n+1) n! sum 1 / (x + k)^(n+1), k < m,
// with m = 8 or 16, the smallest that makes x + m >= 0: a sum of terms of one sign, as the CPU's zeta sums them; below
// -16 through the reflection
//   psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) Q_n(cot(pi x)),
// with cot taken of x's distance to the nearest integer (where the two terms nearly cancel, near the half-integers,
// it keeps only an absolute precision of about pi^(n+1) ulps). The poles (0 and the negative integers) give
// (-1)^(n+1) infinity, as the CPU's zeta does.
Value polygamma(Formula& f, int n) {
  const Value x = f.x(0);
  const Value one_shift = (x < 0.0) & (x >= -kShift), two_shifts = (x < -kShift) & (x >= -2 * kShift);
  const Value far = x < -2 * kShift;
  const Value shifted = where(one_shift, x + kShift, where(two_shifts, x + 2 * kShift, x));
  const Value value = positive_polygamma(where(far, 1.0 - x, shifted), n);
  const double sign = n % 2 == 1 ? 1.0 : -1.0, factorial = std::tgamma(n + 1.0);
  Value first = inverse_power(x, n + 1), second = inverse_power(x + kShift, n + 1);
  for (int k = 1; k < kShift; ++k) {
    first = first + inverse_power(x + k, n + 1);
    second = second + inverse_power(x + (kShift + k), n + 1);
  }
  const Value terms = where(one_shift, first, where(two_shifts, first + second, 0.0));
  const Value direct = value + sign * factorial * terms;
  const Value turned = kPi * nearest_integer_distance(x);
  const Value c = cos(turned) / sin(turned);
  const std::vector<double> q = cotangent_derivative(n);
  Value polynomial = f.constant(q.back());
  for (size_t i = q.size() - 1; i-- > 0;) polynomial = polynomial * c + q[i];
  const Value reflected = -sign * value - std::pow(kPi, n + 1) * polynomial;
  return where((x <= 0.0) & (x == round(x)), f.constant(sign * kInfinity), where(far, reflected, direct));
}

// Orders above this leave the asymptotic tail's error above float32's precision: the CPU fallback takes them.
constexpr int64_t kHighestNativeOrder = 10;

at::Tensor& npusim_polygamma_out(int64_t n, const at::Tensor& self, at::Tensor& out) {
  if (n == 0) return at::digamma_out(out, self);
  if (n > 0 && n <= kHighestNativeOrder && out.scalar_type() == at::kFloat &&
      launch_formula("polygamma", {self}, {}, out, [n](Formula& f) { return polygamma(f, static_cast<int>(n)); }))
    return out;
  torch::jit::Stack stack{n, self, out};
  call_cpu_fallback("aten::polygamma", "out", stack);
  return out;
}
at::Tensor npusim_polygamma(int64_t n, const at::Tensor& self) {
  const at::ScalarType type = at::isFloatingType(self.scalar_type()) ? self.scalar_type() : at::kFloat;
  at::Tensor out = at::empty({0}, self.options().dtype(type));
  return npusim_polygamma_out(n, self, out);
}
at::Tensor& npusim_polygamma_(at::Tensor& self, int64_t n) { return npusim_polygamma_out(n, self, self); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_formula(m, {"lgamma", "lgamma_", "lgamma.out"}, "lgamma", FormulaResult::Float, lgamma);
  register_formula(m, {"digamma", "digamma_", "digamma.out"}, "digamma", FormulaResult::Float, digamma);
  m.impl("polygamma", npusim_polygamma);
  m.impl("polygamma.out", npusim_polygamma_out);
  m.impl("polygamma_", npusim_polygamma_);
}

}  // namespace npusim::bridge
