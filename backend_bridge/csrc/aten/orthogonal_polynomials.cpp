// The classical orthogonal polynomials of torch.special (Chebyshev T, U, V, W and their shifted forms on [0, 1],
// Hermite H and He, Laguerre L, Legendre P) of x at degree n, each one fused kernel: a formula
// (pointwise_formula.h) that runs the polynomial's three-term recurrence up to the largest degree asked for, each
// element keeping the value at its own degree. That degree is read back from the device once per call (the kernel's
// length depends on it); degrees beyond kLargestDegree take the CPU fallback. Each follows the CPU kernel: the degree
// is n truncated to an integer, a negative one gives 0, the special points (x = +-1 or 0) their exact values, and
// the Chebyshev polynomials of high degree inside their interval the trigonometric form (cos(n acos x), ...) instead
// of the recurrence; Hermite polynomials beyond degree 128 are NaN, as the CPU's float32 kernels make them. Each
// step a q - b p is a fused multiply-add of a q less the rounded b p, as the CPU's compiler contracts it (the
// recurrences cancel: rounding the product first would differ from the CPU's results in their last digits).
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "bridge.h"
#include "inverse_trigonometric.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

constexpr int64_t kLargestDegree = 128;  // the recurrence's length in the kernel, at most
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// What a polynomial's formula gets: x, its degree (n truncated), and the largest degree of the call.
struct Arguments {
  Value x, n;
  int64_t largest;
};
using PolynomialFormula = std::function<Value(const Arguments&)>;

Value even(Value n) { return fmod(n, n.formula->constant(2)) == 0.0; }

// The recurrence r = step(k, p, q) (q the value at degree k - 1, p at k - 2) from the values at degrees 0 and 1, up
// to the largest degree; each element keeps its own degree's value. Degrees 0 and 1 are the given ones.
Value recurrence(const Arguments& a, Value degree_0, Value degree_1,
                 const std::function<Value(int64_t k, Value p, Value q)>& step) {
  Value p = degree_0, q = degree_1;
  Value result = where(a.n == 0.0, degree_0, degree_1);
  for (int64_t k = 2; k <= a.largest; ++k) {
    const Value r = step(k, p, q);
    result = where(a.n == static_cast<double>(k), r, result);
    p = q;
    q = r;
  }
  return result;
}

// Chebyshev polynomials of y (x itself, or 2x - 1 for the shifted ones): all four share r = 2y q - p and differ in
// their degree-1 value. `twice_y` is 2y as the CPU forms it.
Value chebyshev_recurrence(const Arguments& a, Value twice_y, Value degree_1) {
  Formula& f = *a.x.formula;
  return recurrence(a, f.constant(1), degree_1, [&](int64_t, Value p, Value q) { return mul_add(twice_y, q, -p); });
}

// T_n(x): cos(n acos x) inside (-1, 1) beyond degree 6; +-1 at x = +-1.
Value chebyshev_t(const Arguments& a) {
  const Value x = a.x, n = a.n;
  const Value at_one = where((x > 0.0) | even(n), 1.0, x.formula->constant(-1));
  Value value = where((n > 6.0) & (abs(x) < 1.0), cos(n * acos(x)), chebyshev_recurrence(a, x + x, x));
  value = where(abs(x) == 1.0, at_one, value);
  return where(n < 0.0, 0.0, value);
}

// U_n(x): sin((n + 1) acos x) / sin(acos x) inside (-1, 1) beyond degree 8; +-(n + 1) at x = +-1.
Value chebyshev_u(const Arguments& a) {
  const Value x = a.x, n = a.n, angle = acos(x);
  const Value at_one = where((x > 0.0) | even(n), n + 1.0, -(n + 1.0));
  const Value trigonometric =
      where(sin(angle) != 0.0, sin((n + 1.0) * angle) / sin(angle), (n + 1.0) * cos((n + 1.0) * angle) / x);
  Value value = where((n > 8.0) & (abs(x) < 1.0), trigonometric, chebyshev_recurrence(a, x + x, x + x));
  value = where(abs(x) == 1.0, at_one, value);
  return where(n < 0.0, 0.0, value);
}

// The values at the ends of V's and W's intervals: 1 at one end, +-(2n + 1) at the other.
Value odd_count_with_parity(Value n) { return where(even(n), n + n + 1.0, -(n + n + 1.0)); }
Value one_with_parity(Value n) { return where(even(n), 1.0, n.formula->constant(-1)); }

// V_n(x): cos((n + 1/2) acos x) / cos(acos(x) / 2) inside (-1, 1) beyond degree 8.
Value chebyshev_v(const Arguments& a) {
  const Value x = a.x, n = a.n, angle = acos(x);
  const Value trigonometric =
      where(sin(angle / 2.0) != 1.0, cos((n + 0.5) * angle) / cos(angle / 2.0), odd_count_with_parity(n));
  Value value = where((n > 8.0) & (abs(x) < 1.0), trigonometric, chebyshev_recurrence(a, x + x, x + x - 1.0));
  value = where(abs(x) == 1.0, where(x > 0.0, x.formula->constant(1), odd_count_with_parity(n)), value);
  return where(n < 0.0, 0.0, value);
}

// W_n(x): sin((n + 1/2) acos x) / sin(acos(x) / 2) inside (-1, 1) beyond degree 8.
Value chebyshev_w(const Arguments& a) {
  const Value x = a.x, n = a.n, angle = acos(x);
  const Value at_end = where(x > 0.0, n + n + 1.0, one_with_parity(n));
  const Value trigonometric = where(cos(angle / 2.0) != 1.0, sin((n + 0.5) * angle) / sin(angle / 2.0), at_end);
  Value value = where((n > 8.0) & (abs(x) < 1.0), trigonometric, chebyshev_recurrence(a, x + x, x + x + 1.0));
  value = where(abs(x) == 1.0, at_end, value);
  return where(n < 0.0, 0.0, value);
}

// The shifted polynomials: of y = 2x - 1 (formed as x + x - 1, its double as y + y), with their special points at
// x = 1 and x = 0, and their own degrees for switching to the trigonometric form.
Value shifted_chebyshev_t(const Arguments& a) {
  const Value x = a.x, n = a.n, y = x + x - 1.0;
  Value value = where((n > 6.0) & (abs(y) < 1.0), cos(n * acos(y)), chebyshev_recurrence(a, y + y, y));
  value = where(x == 0.0, one_with_parity(n), value);
  value = where(x == 1.0, 1.0, value);
  return where(n < 0.0, 0.0, value);
}

Value shifted_chebyshev_u(const Arguments& a) {
  const Value x = a.x, n = a.n, y = x + x - 1.0, angle = acos(y);
  const Value trigonometric =
      where(sin(angle) != 0.0, sin((n + 1.0) * angle) / sin(angle), (n + 1.0) * cos((n + 1.0) * angle) / y);
  Value value = where((n > 6.0) & (abs(y) < 1.0), trigonometric, chebyshev_recurrence(a, y + y, y + y));
  value = where(x == 0.0, where(even(n), n + 1.0, -(n + 1.0)), value);
  value = where(x == 1.0, n + 1.0, value);
  return where(n < 0.0, 0.0, value);
}

Value shifted_chebyshev_v(const Arguments& a) {
  const Value x = a.x, n = a.n, y = x + x - 1.0, angle = acos(y);
  const Value trigonometric =
      where(sin(angle / 2.0) != 1.0, cos((n + 0.5) * angle) / cos(angle / 2.0), odd_count_with_parity(n));
  Value value = where((n > 6.0) & (abs(y) < 1.0), trigonometric, chebyshev_recurrence(a, y + y, y + y - 1.0));
  value = where(x == 0.0, odd_count_with_parity(n), value);
  value = where(x == 1.0, 1.0, value);
  return where(n < 0.0, 0.0, value);
}

Value shifted_chebyshev_w(const Arguments& a) {
  const Value x = a.x, n = a.n, y = x + x - 1.0, angle = acos(y);
  const Value trigonometric =
      where(cos(angle / 2.0) != 1.0, sin((n + 0.5) * angle) / sin(angle / 2.0), one_with_parity(n));
  Value value = where((n > 4.0) & (abs(y) < 1.0), trigonometric, chebyshev_recurrence(a, y + y, y + y + 1.0));
  value = where(x == 0.0, one_with_parity(n), value);
  value = where(x == 1.0, n + n + 1.0, value);
  return where(n < 0.0, 0.0, value);
}

// H_n(x) (physicists'): r = 2x q - 2(k - 1) p; He_n(x) (probabilists'): r = x q - (k - 1) p. NaN beyond degree 128.
Value hermite_h(const Arguments& a) {
  const Value x = a.x, n = a.n;
  const Value value = recurrence(a, x.formula->constant(1), x + x, [&](int64_t k, Value p, Value q) {
    return mul_add(x + x, q, -(static_cast<double>(2 * (k - 1)) * p));
  });
  return where(n < 0.0, 0.0, where(n > 128.0, kNaN, value));
}

Value hermite_he(const Arguments& a) {
  const Value x = a.x, n = a.n;
  const Value value = recurrence(a, x.formula->constant(1), x, [&](int64_t k, Value p, Value q) {
    return mul_add(x, q, -(static_cast<double>(k - 1) * p));
  });
  return where(n < 0.0, 0.0, where(n > 128.0, kNaN, value));
}

// L_n(x): r = ((2(k - 1) + (1 - x)) q - (k - 1) p) / k; 1 at x = 0.
Value laguerre_l(const Arguments& a) {
  const Value x = a.x, n = a.n;
  const Value value = recurrence(a, x.formula->constant(1), 1.0 - x, [&](int64_t k, Value p, Value q) {
    const double previous = static_cast<double>(k - 1);
    return mul_add(previous + previous + (1.0 - x), q, -(previous * p)) / static_cast<double>(k);
  });
  return where(n < 0.0, 0.0, where(abs(x) == 0.0, 1.0, value));
}

// P_n(x): r = ((2k - 1) x q - (k - 1) p) / k; +-1 at x = +-1.
Value legendre_p(const Arguments& a) {
  const Value x = a.x, n = a.n;
  const Value value = recurrence(a, x.formula->constant(1), x, [&](int64_t k, Value p, Value q) {
    const double previous = static_cast<double>(k - 1);
    return mul_add((previous + previous + 1.0) * x, q, -(previous * p)) / static_cast<double>(k);
  });
  const Value at_one = where((x > 0.0) | even(n), 1.0, x.formula->constant(-1));
  return where(n < 0.0, 0.0, where(abs(x) == 1.0, at_one, value));
}

// The largest degree among `n`'s elements (n truncated), or nothing when it is NaN or the kernel would be too long.
std::optional<int64_t> largest_degree(const at::Tensor& n) {
  if (n.numel() == 0) return 0;
  const double largest = std::trunc(at::amax(n.to(at::kFloat)).item<double>());
  if (std::isnan(largest) || largest > kLargestDegree) return std::nullopt;
  return std::max<int64_t>(static_cast<int64_t>(largest), 1);
}

at::Tensor& polynomial_out(const char* name, const PolynomialFormula& formula, const at::Tensor& x, const at::Tensor& n,
                           at::Tensor& out) {
  const bool takes = out.device().is_privateuseone() && out.scalar_type() == at::kFloat &&
                     (x.device() == out.device() || x.dim() == 0) && (n.device() == out.device() || n.dim() == 0);
  if (takes)
    if (const auto largest = largest_degree(n))
      if (launch_formula(name, {x, n}, {}, out, [&](Formula& f) { return formula({f.x(0), trunc(f.x(1)), *largest}); }))
        return out;
  torch::jit::Stack stack{x, n, out};
  call_cpu_fallback((std::string("aten::special_") + name).c_str(), "out", stack);
  return out;
}

// A functional form's result: float32 (or the promoted float type) on the device of whichever operand is there.
at::Tensor empty_result(const at::Tensor& x, const at::Tensor& n) {
  at::ScalarType type = at::result_type(x, n);
  if (at::isIntegralType(type, /*includeBool=*/true)) type = c10::typeMetaToScalarType(c10::get_default_dtype());
  return at::empty({0}, (x.device().is_privateuseone() ? x : n).options().dtype(type));
}

#define NPUSIM_POLYNOMIAL(name, formula)                                              \
  at::Tensor& name##_out(const at::Tensor& x, const at::Tensor& n, at::Tensor& out) { \
    return polynomial_out(#name, formula, x, n, out);                                 \
  }                                                                                   \
  at::Tensor name(const at::Tensor& x, const at::Tensor& n) {                         \
    at::Tensor out = empty_result(x, n);                                              \
    return name##_out(x, n, out);                                                     \
  }
NPUSIM_POLYNOMIAL(chebyshev_polynomial_t, chebyshev_t)
NPUSIM_POLYNOMIAL(chebyshev_polynomial_u, chebyshev_u)
NPUSIM_POLYNOMIAL(chebyshev_polynomial_v, chebyshev_v)
NPUSIM_POLYNOMIAL(chebyshev_polynomial_w, chebyshev_w)
NPUSIM_POLYNOMIAL(shifted_chebyshev_polynomial_t, shifted_chebyshev_t)
NPUSIM_POLYNOMIAL(shifted_chebyshev_polynomial_u, shifted_chebyshev_u)
NPUSIM_POLYNOMIAL(shifted_chebyshev_polynomial_v, shifted_chebyshev_v)
NPUSIM_POLYNOMIAL(shifted_chebyshev_polynomial_w, shifted_chebyshev_w)
NPUSIM_POLYNOMIAL(hermite_polynomial_h, hermite_h)
NPUSIM_POLYNOMIAL(hermite_polynomial_he, hermite_he)
NPUSIM_POLYNOMIAL(laguerre_polynomial_l, laguerre_l)
NPUSIM_POLYNOMIAL(legendre_polynomial_p, legendre_p)
#undef NPUSIM_POLYNOMIAL

}  // namespace

// The Scalar overloads (x_scalar, n_scalar) are PyTorch's composites over these.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define NPUSIM_REGISTER(name)     \
  m.impl("special_" #name, name); \
  m.impl("special_" #name ".out", name##_out);
  NPUSIM_REGISTER(chebyshev_polynomial_t)
  NPUSIM_REGISTER(chebyshev_polynomial_u)
  NPUSIM_REGISTER(chebyshev_polynomial_v)
  NPUSIM_REGISTER(chebyshev_polynomial_w)
  NPUSIM_REGISTER(shifted_chebyshev_polynomial_t)
  NPUSIM_REGISTER(shifted_chebyshev_polynomial_u)
  NPUSIM_REGISTER(shifted_chebyshev_polynomial_v)
  NPUSIM_REGISTER(shifted_chebyshev_polynomial_w)
  NPUSIM_REGISTER(hermite_polynomial_h)
  NPUSIM_REGISTER(hermite_polynomial_he)
  NPUSIM_REGISTER(laguerre_polynomial_l)
  NPUSIM_REGISTER(legendre_polynomial_p)
#undef NPUSIM_REGISTER
}

}  // namespace npusim::bridge
