// The inverse error function and the inverse of the standard normal distribution function as formulas
// (pointwise_formula.h), each one fused kernel, by the CPU kernels' own algorithms so that results agree within
// float32 rounding:
//   erfinv        a rational first guess (central range |y| <= 0.7, and a tail in sqrt(-log((1 - |y|) / 2))), then
//                 two Newton steps on erf(x) = y; +-inf at +-1, NaN beyond.
//   special.ndtri the Cephes Math Library's ndtri: a rational function of (y - 1/2) in the middle, and in the tails
//                 rational corrections in 1 / sqrt(-2 log y) (y taken from the nearer end); +-inf at 1 and 0, NaN
//                 outside [0, 1].
#include <torch/library.h>

#include <limits>
#include <numbers>

#include "bridge.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// erfinv's first guess: Gary L. Pavlis' rational approximations (as in PyTorch's CPU kernel), coefficients highest
// power first.
constexpr double kCentralNumerator[] = {-0.140543331, 0.914624893, -1.645349621, 0.886226899};
constexpr double kCentralDenominator[] = {0.012229801, -0.329097515, 1.442710462, -2.118377725, 1.0};
constexpr double kTailNumerator[] = {1.641345311, 3.429567803, -1.624906493, -1.970840454};
constexpr double kTailDenominator[] = {1.637067800, 3.543889200, 1.0};

Value erfinv(Value y) {
  const Value magnitude = abs(y);
  const Value z = y * y;
  const Value central = y * polynomial(z, kCentralNumerator) / polynomial(z, kCentralDenominator);
  const Value t = sqrt(-log((1.0 - magnitude) / 2.0));
  const Value tail_numerator = polynomial(t, kTailNumerator);
  const Value tail = where(y < 0.0, -tail_numerator, tail_numerator) / polynomial(t, kTailDenominator);
  Value x = where(magnitude <= 0.7, central, tail);
  const double slope = static_cast<float>(2.0 * std::numbers::inv_sqrtpi);  // d erf / dx at 0, as float32
  for (int step = 0; step < 2; ++step) x = x - (erf(x) - y) / (slope * exp(-x * x));
  const Value infinite = where(y < 0.0, -kInfinity, y.formula->constant(kInfinity));
  return where(magnitude > 1.0, kNaN, where(magnitude == 1.0, infinite, x));
}

// ndtri's coefficients (Cephes ndtri.c), highest power first: P0 / Q0 in the middle, P1 / Q1 and P2 / Q2 in the tails
// (sqrt(-2 log y) below 8 and from 8).
constexpr double kP0[] = {
    -5.99633501014107895267E1, 9.80010754185999661536E1,  -5.66762857469070293439E1,
    1.39312609387279679503E1,  -1.23916583867381258016E0,
};
constexpr double kQ0[] = {
    1.00000000000000000000E0,  1.95448858338141759834E0,  4.67627912898881538453E0,
    8.63602421390890590575E1,  -2.25462687854119370527E2, 2.00260212380060660359E2,
    -8.20372256168333339912E1, 1.59056225126211695515E1,  -1.18331621121330003142E0,
};
constexpr double kP1[] = {
    4.05544892305962419923E0,   3.15251094599893866154E1,   5.71628192246421288162E1,
    4.40805073893200834700E1,   1.46849561928858024014E1,   2.18663306850790267539E0,
    -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4,
};
constexpr double kQ1[] = {
    1.00000000000000000000E0,   1.57799883256466749731E1,   4.53907635128879210584E1,
    4.13172038254672030440E1,   1.50425385692907503408E1,   2.50464946208309415979E0,
    -1.42182922854787788574E-1, -3.80806407691578277194E-2, -9.33259480895457427372E-4,
};
constexpr double kP2[] = {
    3.23774891776946035970E0,  6.91522889068984211695E0,  3.93881025292474443415E0,
    1.33303460815807542389E0,  2.01485389549179081538E-1, 1.23716634817820021358E-2,
    3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9,
};
constexpr double kQ2[] = {
    1.00000000000000000000E0,  6.02427039364742014255E0,  3.67983563856160859403E0,
    1.37702099489081330271E0,  2.16236993594496635890E-1, 1.34204006088543189037E-2,
    3.28014464682127739104E-4, 2.89247864745380683936E-6, 6.79019408009981274425E-9,
};
Value ndtri(Value probability) {
  constexpr double kSqrtTwoPi = 2.50662827463100050242;
  const double tail_edge = 0.13533528323661269189;  // exp(-2)
  const Value upper = probability > static_cast<float>(1.0 - static_cast<float>(tail_edge));
  const Value y = where(upper, 1.0 - probability, probability);
  const Value centred = y - 0.5, c2 = centred * centred;
  const Value middle = (centred + centred * (c2 * polynomial(c2, kP0) / polynomial(c2, kQ0))) * kSqrtTwoPi;
  const Value x = sqrt(-2.0 * log(y));
  const Value z = 1.0 / x;
  const Value correction =
      where(x < 8.0, z * polynomial(z, kP1) / polynomial(z, kQ1), z * polynomial(z, kP2) / polynomial(z, kQ2));
  const Value tail_magnitude = x - log(x) / x - correction;
  const Value tails = where(upper, tail_magnitude, -tail_magnitude);
  const Value value = where(y > tail_edge, middle, tails);
  return where(
      probability == 0.0, -kInfinity,
      where(probability == 1.0, kInfinity, where(probability < 0.0, kNaN, where(probability > 1.0, kNaN, value))));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_formula(m, {"erfinv", "erfinv_", "erfinv.out"}, "erfinv", FormulaResult::Float,
                   [](Formula& f) { return erfinv(f.x(0)); });
  register_formula(m, {"special_ndtri", "special_ndtri.out"}, "ndtri", FormulaResult::Float,
                   [](Formula& f) { return ndtri(f.x(0)); });
}

}  // namespace npusim::bridge
