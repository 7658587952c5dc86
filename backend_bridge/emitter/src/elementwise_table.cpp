// The elementwise operations' definitions (elementwise_table.h). Each body computes PyTorch's CPU formula in the
// CPU's order of operations, so that results round as the CPU's do; where a formula is rewritten (1 - s as -(s - 1)),
// the comment says why it rounds the same.
#include "elementwise_table.h"

#include <bit>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace npusim::emitter::elementwise_table {

int Graph::node(FusedOpcode op, int a, int b, int c) {
  const bool compare = op >= FusedOpcode::Eq && op <= FusedOpcode::Ge;
  const isa::ElementType type = compare ? isa::ElementType::Bool : spec_.nodes[op == FusedOpcode::Where ? b : a].type;
  spec_.nodes.push_back({.op = op, .type = type, .a = a, .b = b, .c = c});
  return static_cast<int>(spec_.nodes.size()) - 1;
}

int Graph::constant(float value) {
  spec_.nodes.push_back({.op = FusedOpcode::Constant, .type = isa::ElementType::F32, .constant = value});
  return static_cast<int>(spec_.nodes.size()) - 1;
}

int Graph::convert(int a, isa::ElementType type) {
  spec_.nodes.push_back({.op = FusedOpcode::Convert, .type = type, .a = a});
  return static_cast<int>(spec_.nodes.size()) - 1;
}

namespace {

using In = std::span<const int>;
using Op = FusedOpcode;

// The f32 constants the formulas name, by their bits (as the CPU kernels round them).
constexpr float kInvSqrt2 = std::bit_cast<float>(0x3f3504f3u);     // 1 / sqrt(2)
constexpr float kSqrt2OverPi = std::bit_cast<float>(0x3f4c422au);  // sqrt(2 / pi)
constexpr float kGeluCubic = std::bit_cast<float>(0x3d372713u);    // 0.044715
constexpr float kInvSqrt2pi = std::bit_cast<float>(0x3ecc422au);   // 1 / sqrt(2 pi)
constexpr float kThreeGeluCubic =
    std::bit_cast<float>(0x3e095d4eu);  // 3 * 0.044715 rounded, as the CPU's 3.0f * kKappa

// Where C's remainder r of a / b (fmod: the dividend's sign) is not zero and its sign is not the divisor's: there
// Python's a % b is r + b and a // b is trunc(a / b) - 1, as the CPU's kernels correct them. Nothing overflows (a
// first version computed a - a % b, which wraps for the most negative a).
int crosses_zero(Graph& g, int r, int b) {
  const int zero = g.sub(b, b);  // the integer type's 0 (the graph's constants are f32)
  const int opposite_signs = g.node(Op::Xor, g.node(Op::Lt, r, zero), g.node(Op::Lt, b, zero));
  return g.node(Op::And, g.node(Op::Ne, r, zero), opposite_signs);
}

// Python's integer a % b: the divisor's sign.
int integer_remainder(Graph& g, int a, int b) {
  const int r = g.node(Op::Fmod, a, b);
  return g.where(crosses_zero(g, r, b), g.add(r, b), r);
}

int python_remainder(Graph& g, In x) { return integer_remainder(g, x[0], x[1]); }
// a // b: the truncated quotient, one less where the remainder crosses zero.
int floor_divide(Graph& g, In x) {
  const int quotient = g.div(x[0], x[1]);
  const int one = g.div(x[1], x[1]);  // 1 wherever the quotient exists (a zero divisor traps in both)
  return g.where(crosses_zero(g, g.node(Op::Fmod, x[0], x[1]), x[1]), g.sub(quotient, one), quotient);
}
// Inputs other, condition, self: self where the condition holds.
int select(Graph& g, In x) { return g.where(x[1], x[2], x[0]); }

// A unary op of one vector instruction.
template <Op op>
int unary(Graph& g, In x) {
  return g.node(op, x[0]);
}
// A binary op of one vector instruction.
template <Op op>
int binary(Graph& g, In x) {
  return g.node(op, x[0], x[1]);
}

// (e / 2) e with e = exp(|x| / 2): exp(|x|) / 2 without overflowing first, for sinh and cosh of a large |x|.
int large_exp_half(Graph& g, int x) {
  const int e = g.node(FusedOpcode::Exp, g.mul(g.node(FusedOpcode::Abs, x), g.constant(0.5f)));
  return g.mul(g.mul(e, g.constant(0.5f)), e);
}

}  // namespace

const std::vector<OpDefinition>& definitions() {
  using enum ElementwiseOp;
  using enum isa::ElementType;
  static const std::vector<OpDefinition> table = {
      {Copy, "copy", {}, F32, [](Graph&, In x) { return x[0]; }},
      {Convert, "convert", {}, F32, [](Graph& g, In x) { return g.convert(x[0], g.convert_to()); }},
      // Any type of the width: the bits are moved.
      {WhereB8, "where_b8", {U8, Bool, U8}, U8, select},
      {WhereB32, "where_b32", {I32, Bool, I32}, I32, select},
      {WhereB64, "where_b64", {I64, Bool, I64}, I64, select},
      {EqF32, "eq_f32", {F32, F32}, Bool, binary<Op::Eq>},
      {NeF32, "ne_f32", {F32, F32}, Bool, binary<Op::Ne>},
      {LtF32, "lt_f32", {F32, F32}, Bool, binary<Op::Lt>},
      {LeF32, "le_f32", {F32, F32}, Bool, binary<Op::Le>},
      {GtF32, "gt_f32", {F32, F32}, Bool, binary<Op::Gt>},
      {GeF32, "ge_f32", {F32, F32}, Bool, binary<Op::Ge>},
      {EqI32, "eq_i32", {I32, I32}, Bool, binary<Op::Eq>},
      {NeI32, "ne_i32", {I32, I32}, Bool, binary<Op::Ne>},
      {LtI32, "lt_i32", {I32, I32}, Bool, binary<Op::Lt>},
      {LeI32, "le_i32", {I32, I32}, Bool, binary<Op::Le>},
      {GtI32, "gt_i32", {I32, I32}, Bool, binary<Op::Gt>},
      {GeI32, "ge_i32", {I32, I32}, Bool, binary<Op::Ge>},
      {EqI64, "eq_i64", {I64, I64}, Bool, binary<Op::Eq>},
      {NeI64, "ne_i64", {I64, I64}, Bool, binary<Op::Ne>},
      {LtI64, "lt_i64", {I64, I64}, Bool, binary<Op::Lt>},
      {LeI64, "le_i64", {I64, I64}, Bool, binary<Op::Le>},
      {GtI64, "gt_i64", {I64, I64}, Bool, binary<Op::Gt>},
      {GeI64, "ge_i64", {I64, I64}, Bool, binary<Op::Ge>},
      {AndB8, "and_b8", {U8, U8}, U8, binary<Op::And>},
      {OrB8, "or_b8", {U8, U8}, U8, binary<Op::Or>},
      {XorB8, "xor_b8", {U8, U8}, U8, binary<Op::Xor>},
      {NotBool, "not_bool", {Bool}, Bool, unary<Op::Not>},
      {AddI32, "add_i32", {I32, I32}, I32, binary<Op::Add>},
      {SubI32, "sub_i32", {I32, I32}, I32, binary<Op::Sub>},
      {AddI64, "add_i64", {I64, I64}, I64, binary<Op::Add>},
      {SubI64, "sub_i64", {I64, I64}, I64, binary<Op::Sub>},
      {MulI32, "mul_i32", {I32, I32}, I32, binary<Op::Mul>},
      {MulI64, "mul_i64", {I64, I64}, I64, binary<Op::Mul>},
      {RemainderI32, "remainder_i32", {I32, I32}, I32, python_remainder},
      {RemainderI64, "remainder_i64", {I64, I64}, I64, python_remainder},
      {FloorDivideI32, "floor_divide_i32", {I32, I32}, I32, floor_divide},
      {FloorDivideI64, "floor_divide_i64", {I64, I64}, I64, floor_divide},
      {FmodI32, "fmod_i32", {I32, I32}, I32, binary<Op::Fmod>},
      {FmodI64, "fmod_i64", {I64, I64}, I64, binary<Op::Fmod>},
      {FmodF32, "fmod_f32", {F32, F32}, F32, binary<Op::Fmod>},
      // The CPU's: 0 where a == 0 unless b is NaN (b == b), else a log(b).
      {XlogyF32,
       "xlogy_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int zero = g.constant(0);
         const int zero_factor = g.node(Op::And, g.node(Op::Eq, x[0], zero), g.node(Op::Eq, x[1], x[1]));
         return g.where(zero_factor, zero, g.mul(x[0], g.node(Op::Log, x[1])));
       },
       "xlogy"},
      // Scaled by the larger magnitude m, so that nothing overflows before the result does (within about two ulps);
      // 0 where m is 0 (n / m would be NaN) and inf where either is infinite, even beside a NaN, as C's hypot.
      {HypotF32,
       "hypot_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int a = g.node(Op::Abs, x[0]), b = g.node(Op::Abs, x[1]);
         const int larger = g.node(Op::Maximum, a, b), ratio = g.div(g.node(Op::Minimum, a, b), larger);
         const int scaled = g.mul(larger, g.node(Op::Sqrt, g.add(g.mul(ratio, ratio), g.constant(1))));
         const int inf = g.constant(std::numeric_limits<float>::infinity());
         const int infinite = g.node(Op::Or, g.node(Op::Eq, a, inf), g.node(Op::Eq, b, inf));
         const int zero = g.constant(0);
         return g.where(infinite, inf, g.where(g.node(Op::Eq, larger, zero), zero, scaled));
       },
       "hypot"},
      // PyTorch's formula: r = fmod(a, b), + b where r != 0 and its sign differs from b's.
      {RemainderF32,
       "remainder_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int r = g.node(Op::Fmod, x[0], x[1]), zero = g.constant(0);
         const int signs_differ = g.node(Op::Xor, g.lt(r, zero), g.lt(x[1], zero));
         return g.where(g.node(Op::And, signs_differ, g.node(Op::Ne, r, zero)), g.add(r, x[1]), r);
       }},
      {AddF32, "add_f32", {F32, F32}, F32, binary<Op::Add>},
      {SubF32, "sub_f32", {F32, F32}, F32, binary<Op::Sub>},
      {MulF32, "mul_f32", {F32, F32}, F32, binary<Op::Mul>, "mul"},
      {DivF32, "div_f32", {F32, F32}, F32, binary<Op::Div>, "div"},
      {MaxF32, "max_f32", {F32, F32}, F32, binary<Op::Maximum>, "maximum"},
      {MinF32, "min_f32", {F32, F32}, F32, binary<Op::Minimum>, "minimum"},
      // Inputs grad, x: grad where x > 0 (x <= 0 is false for NaN, which keeps grad, as the CPU does).
      {ReluBackwardF32,
       "relu_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int zero = g.constant(0);
         return g.where(g.le(x[1], zero), zero, x[0]);
       }},
      // grad (cdf + x pdf), cdf = (1 + erf(x / sqrt 2)) / 2, pdf = exp(-x^2 / 2) / sqrt(2 pi).
      {GeluBackwardF32,
       "gelu_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int half = g.constant(0.5f), v = x[1];
         const int pdf_x = g.mul(g.mul(g.node(Op::Exp, g.neg(g.mul(g.mul(v, v), half))), g.constant(kInvSqrt2pi)), v);
         const int cdf = g.mul(g.add(g.node(Op::Erf, g.mul(v, g.constant(kInvSqrt2))), g.constant(1)), half);
         return g.mul(x[0], g.add(cdf, pdf_x));
       }},
      // grad s (1 + x (1 - s)), as (grad s)(-(x (s - 1)) + 1): 1 - s as -(s - 1) and 1 + y as -y + 1 round the same.
      {SiluBackwardF32,
       "silu_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int one = g.constant(1), s = g.node(Op::Sigmoid, x[1]);
         return g.mul(g.mul(x[0], s), g.add(g.neg(g.mul(x[1], g.sub(s, one))), one));
       }},
      // Inputs grad, y = sigmoid(x): grad (1 - y) y, in that order; 1 - y as -(y - 1), which rounds the same.
      {SigmoidBackwardF32,
       "sigmoid_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) { return g.mul(g.mul(x[0], g.neg(g.sub(x[1], g.constant(1)))), x[1]); }},
      // The tanh-approximated gelu's derivative times grad, in the CPU's order: t = tanh(beta (x + kappa x^2 x));
      // grad ((t + 1) / 2 + ((x / 2)(1 - t^2))(beta (3 kappa x^2 + 1))), 1 - t^2 as -(t t) + 1.
      {GeluTanhBackwardF32,
       "gelu_tanh_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int v = x[1], one = g.constant(1), half = g.constant(0.5f), beta = g.constant(kSqrt2OverPi);
         const int square = g.mul(v, v);
         const int t = g.node(Op::Tanh, g.mul(g.add(v, g.mul(g.mul(square, v), g.constant(kGeluCubic))), beta));
         const int inner_derivative = g.mul(g.add(g.mul(square, g.constant(kThreeGeluCubic)), one), beta);
         const int tanh_derivative = g.add(g.neg(g.mul(t, t)), one);
         const int right = g.mul(g.mul(g.mul(v, half), tanh_derivative), inner_derivative);
         return g.mul(x[0], g.add(g.mul(g.add(t, one), half), right));
       }},
      // Batch norm's two steps in one pass, each rounded: a b + c, and (a - b) c.
      {MulAddF32, "mul_add_f32", {F32, F32, F32}, F32, [](Graph& g, In x) { return g.add(g.mul(x[0], x[1]), x[2]); }},
      {SubMulF32, "sub_mul_f32", {F32, F32, F32}, F32, [](Graph& g, In x) { return g.mul(g.sub(x[0], x[1]), x[2]); }},
      {NegF32, "neg_f32", {F32}, F32, unary<Op::Neg>, "neg"},
      {AbsF32, "abs_f32", {F32}, F32, unary<Op::Abs>, "abs"},
      {ExpF32, "exp_f32", {F32}, F32, unary<Op::Exp>, "exp"},
      {LogF32, "log_f32", {F32}, F32, unary<Op::Log>, "log"},
      {TanhF32, "tanh_f32", {F32}, F32, unary<Op::Tanh>, "tanh"},
      {SigmoidF32, "sigmoid_f32", {F32}, F32, unary<Op::Sigmoid>, "sigmoid"},
      {SqrtF32, "sqrt_f32", {F32}, F32, unary<Op::Sqrt>, "sqrt"},
      {RsqrtF32, "rsqrt_f32", {F32}, F32, unary<Op::Rsqrt>, "rsqrt"},
      {ReciprocalF32, "reciprocal_f32", {F32}, F32, unary<Op::Reciprocal>, "reciprocal"},
      {ErfF32, "erf_f32", {F32}, F32, unary<Op::Erf>, "erf"},
      {SinF32, "sin_f32", {F32}, F32, unary<Op::Sin>, "sin"},
      {CosF32, "cos_f32", {F32}, F32, unary<Op::Cos>, "cos"},
      {Log1pF32, "log1p_f32", {F32}, F32, unary<Op::Log1p>, "log1p"},
      {Expm1F32, "expm1_f32", {F32}, F32, unary<Op::Expm1>, "expm1"},
      // The hyperbolic functions: no cancellation near 0 (sinh from expm1), and beyond |x| = 20 (where exp(-|x|) no
      // longer shows) the square of exp(|x| / 2), which stays finite as far as the result does (exp(|x|) overflows
      // about 0.7 earlier). Each result is within about two ulps.
      {SinhF32,
       "sinh_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int half = g.constant(0.5f);
         const int small = g.mul(g.sub(g.node(Op::Expm1, x[0]), g.node(Op::Expm1, g.neg(x[0]))), half);
         const int large = large_exp_half(g, x[0]);
         const int magnitude = g.where(g.lt(g.constant(20), g.node(Op::Abs, x[0])), large, small);
         return g.where(g.lt(g.constant(20), g.neg(x[0])), g.neg(large), magnitude);
       },
       "sinh"},
      {CoshF32,
       "cosh_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int magnitude = g.node(Op::Abs, x[0]);
         const int small =
             g.mul(g.add(g.node(Op::Exp, magnitude), g.node(Op::Exp, g.neg(magnitude))), g.constant(0.5f));
         return g.where(g.lt(g.constant(20), magnitude), large_exp_half(g, x[0]), small);
       },
       "cosh"},
      // Both correctly rounded from the same x: the quotient is within about two ulps, near the poles too.
      {TanF32,
       "tan_f32",
       {F32},
       F32,
       [](Graph& g, In x) { return g.div(g.node(Op::Sin, x[0]), g.node(Op::Cos, x[0])); },
       "tan"},
      {FloorF32, "floor_f32", {F32}, F32, unary<Op::Floor>, "floor"},
      {CeilF32, "ceil_f32", {F32}, F32, unary<Op::Ceil>, "ceil"},
      {RoundF32, "round_f32", {F32}, F32, unary<Op::Round>, "round"},
      {TruncF32, "trunc_f32", {F32}, F32, unary<Op::Trunc>, "trunc"},
      {FracF32, "frac_f32", {F32}, F32, [](Graph& g, In x) { return g.sub(x[0], g.node(Op::Trunc, x[0])); }, "frac"},
      // x > 0 as -x < 0 and x < 0 (both false for NaN), each made 1.0 or 0.0, subtracted.
      {SignF32,
       "sign_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int zero = g.constant(0);
         return g.sub(g.convert(g.lt(g.neg(x[0]), zero), F32), g.convert(g.lt(x[0], zero), F32));
       },
       "sign"},
      {GeluF32,
       "gelu_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int cdf2 = g.add(g.node(Op::Erf, g.mul(x[0], g.constant(kInvSqrt2))), g.constant(1));
         return g.mul(g.mul(x[0], g.constant(0.5f)), cdf2);
       }},
      {GeluTanhF32,
       "gelu_tanh_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int cube = g.mul(g.mul(x[0], x[0]), x[0]);
         const int inner = g.mul(g.add(g.mul(cube, g.constant(kGeluCubic)), x[0]), g.constant(kSqrt2OverPi));
         return g.mul(g.mul(x[0], g.constant(0.5f)), g.add(g.node(Op::Tanh, inner), g.constant(1)));
       }},
      {SiluF32, "silu_f32", {F32}, F32, [](Graph& g, In x) { return g.mul(x[0], g.node(Op::Sigmoid, x[0])); }, "silu"},
      {MishF32,
       "mish_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int softplus = g.node(Op::Log, g.add(g.node(Op::Exp, x[0]), g.constant(1)));
         return g.mul(x[0], g.node(Op::Tanh, softplus));
       }},
      {HardswishF32,
       "hardswish_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int six = g.constant(6);
         const int clamped = g.node(Op::Minimum, g.node(Op::Maximum, g.add(x[0], g.constant(3)), g.constant(0)), six);
         return g.div(g.mul(x[0], clamped), six);
       }},
      // x <= 0 ? x p0 : x (a NaN keeps x).
      {LeakyReluF32,
       "leaky_relu_f32",
       {F32},
       F32,
       [](Graph& g, In x) { return g.where(g.le(x[0], g.constant(0)), g.mul(x[0], g.parameter(0)), x[0]); }},
      {EluF32,
       "elu_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int negative = g.mul(g.sub(g.node(Op::Exp, g.mul(x[0], g.parameter(2))), g.constant(1)), g.parameter(0));
         return g.where(g.le(x[0], g.constant(0)), negative, g.mul(x[0], g.parameter(1)));
       }},
      // The mask is the computed branch's (x p0 <= p1), so that a NaN keeps x, as the CPU's x p0 > p1 does.
      {SoftplusF32,
       "softplus_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int scaled = g.mul(x[0], g.parameter(0));
         const int soft = g.div(g.node(Op::Log, g.add(g.node(Op::Exp, scaled), g.constant(1))), g.parameter(0));
         return g.where(g.le(scaled, g.parameter(1)), soft, x[0]);
       }},
      {NanToNumF32,
       "nan_to_num_f32",
       {F32},
       F32,
       [](Graph& g, In x) {
         const int infinity = g.constant(std::numeric_limits<float>::infinity());
         const int negative_infinity = g.constant(-std::numeric_limits<float>::infinity());
         const int finite = g.where(g.node(Op::Eq, x[0], negative_infinity), g.parameter(2), x[0]);
         const int not_nan = g.where(g.node(Op::Eq, x[0], infinity), g.parameter(1), finite);
         return g.where(g.node(Op::Ne, x[0], x[0]), g.parameter(0), not_nan);
       }},
      // x > 0 as -x < 0, which is false for NaN as on the CPU: then the gradient, else the gradient times the slope.
      {LeakyReluBackwardF32,
       "leaky_relu_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) { return g.where(g.lt(g.neg(x[1]), g.constant(0)), x[0], g.mul(x[0], g.parameter(0))); }},
      {HardswishBackwardF32,
       "hardswish_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int three = g.constant(3);
         const int middle = g.mul(x[0], g.add(g.div(x[1], three), g.constant(0.5f)));
         const int below_three = g.where(g.lt(x[1], three), middle, x[0]);
         return g.where(g.le(x[1], g.constant(-3)), g.constant(0), below_three);
       }},
      // x <= min or x >= max (as -x <= -max, p1 = -max; both false for NaN, as on the CPU): 0, else the gradient.
      {HardtanhBackwardF32,
       "hardtanh_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int zero = g.constant(0);
         const int above_min = g.where(g.le(x[1], g.parameter(0)), zero, x[0]);
         return g.where(g.le(g.neg(x[1]), g.parameter(1)), zero, above_min);
       }},
      {EluBackwardFromInputF32,
       "elu_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int slope = g.mul(g.node(Op::Exp, g.mul(x[1], g.parameter(2))), g.parameter(0));
         return g.where(g.le(x[1], g.constant(0)), g.mul(x[0], slope), g.mul(x[0], g.parameter(1)));
       }},
      {EluBackwardFromResultF32,
       "elu_backward_from_result_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int slope = g.mul(g.add(x[1], g.parameter(0)), g.parameter(2));
         return g.where(g.le(x[1], g.constant(0)), g.mul(x[0], slope), g.mul(x[0], g.parameter(1)));
       }},
      // The pass-through mask x p0 > p1 as -x p0 < -p1 (p2), false for NaN, which takes the computed branch.
      {SoftplusBackwardF32,
       "softplus_backward_f32",
       {F32, F32},
       F32,
       [](Graph& g, In x) {
         const int scaled = g.mul(x[1], g.parameter(0)), z = g.node(Op::Exp, scaled);
         const int computed = g.div(g.mul(x[0], z), g.add(z, g.constant(1)));
         return g.where(g.lt(g.neg(scaled), g.parameter(2)), x[0], computed);
       }},
  };
  return table;
}

const OpDefinition& definition(ElementwiseOp op) {
  for (const OpDefinition& entry : definitions())
    if (entry.op == op) return entry;
  throw std::logic_error("an elementwise operation without a definition");
}

}  // namespace npusim::emitter::elementwise_table
