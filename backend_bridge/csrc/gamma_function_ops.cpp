// lgamma and digamma (and polygamma of order 0, which is digamma) as formulas (pointwise_formula.h), each one fused
// kernel. Both shift a positive argument below 8 up by 8 with the recurrences
//   lgamma(x) = lgamma(x + 8) - log(x (x + 1) ... (x + 7)),   psi(x) = psi(x + 8) - sum 1 / (x + k), k < 8,
// then take the asymptotic (Stirling) series, whose first omitted term is below 1e-9 from 8 on. Negative arguments
// use the reflection formulas
//   lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x),          psi(x) = psi(1 - x) - pi / tan(pi x),
// with sin and tan taken of x's distance to the nearest integer, exact in float32, so that arguments large or
// near a pole keep their precision. Poles,
// infinities and NaN as the CPU's kernels give them: lgamma is +inf at 0, the negative integers and both
// infinities; digamma is -inf at +0, +inf at -0 and NaN at the negative integers. Higher orders of polygamma would
// need a shift that depends on the argument; they take the CPU fallback.
#include <ATen/ops/digamma.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <numbers>

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

at::Tensor& npusim_polygamma_out(int64_t n, const at::Tensor& self, at::Tensor& out) {
  if (n == 0) return at::digamma_out(out, self);
  torch::jit::Stack stack{n, self, out};
  call_cpu_fallback("aten::polygamma", "out", stack);
  return out;
}
at::Tensor npusim_polygamma(int64_t n, const at::Tensor& self) {
  if (n == 0) return at::digamma(self);
  torch::jit::Stack stack{n, self};
  call_cpu_fallback("aten::polygamma", "", stack);
  return stack[0].toTensor();
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
