// The elementwise operations' definitions (elementwise_table.h).
#include "elementwise_table.h"

#include <stdexcept>

namespace npusim::emitter::elementwise_table {
namespace {

const Constant kConstants[] = {
    {"one", 0x3f800000},             // 1.0
    {"half", 0x3f000000},            // 0.5
    {"inv_sqrt2", 0x3f3504f3},       // 1 / sqrt(2)
    {"sqrt_2_over_pi", 0x3f4c422a},  // sqrt(2 / pi)
    {"gelu_cubic", 0x3d372713},      // 0.044715
    {"zero", 0x00000000},            // 0.0
    {"inv_sqrt_2pi", 0x3ecc422a},    // 1 / sqrt(2 pi)
    {"three", 0x40400000},           // 3.0
    {"neg_three", 0xc0400000},       // -3.0
    {"six", 0x40c00000},             // 6.0
    {"byte_one", 0x00000001},        // read as a byte (u8 ops): 1
};

const std::vector<OpDefinition>& definitions() {
  using enum ElementwiseOp;
  static const std::vector<OpDefinition> table = {
      {Copy, "copy", 1, {}, 0},
      // Converted into {b}, then moved back to {a}, the tile that is stored: {to} and {from} are the spec's types.
      {Convert, "convert", 1, {"vcvt.{to}.{from} {b}, {a}, {n}", "vmov.{to} {a}, {b}, {n}"}, 0},
      // Inputs other, condition (bool), self, loaded into {a}, {b} and {c}: self where the condition holds.
      {WhereB8, "where_b8", 3, {"vsel.u8 {a}, {b}, {c}, {n}"}, 1, {1, 1, 1}},
      {WhereB32, "where_b32", 3, {"vsel.i32 {a}, {b}, {c}, {n}"}, 4, {4, 1, 4}},
      {WhereB64, "where_b64", 3, {"vsel.i64 {a}, {b}, {c}, {n}"}, 8, {8, 1, 8}},
      // Comparisons write bools into {c} (a bool tile in place over {a} would overtake its unread floats), then move
      // them to {a}; greater-than swaps the operands of less-than.
      {EqF32, "eq_f32", 2, {"vceq.f32 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {NeF32, "ne_f32", 2, {"vcne.f32 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {LtF32, "lt_f32", 2, {"vclt.f32 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {LeF32, "le_f32", 2, {"vcle.f32 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {GtF32, "gt_f32", 2, {"vclt.f32 {c}, {b}, {a}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {GeF32, "ge_f32", 2, {"vcle.f32 {c}, {b}, {a}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {EqI32, "eq_i32", 2, {"vceq.i32 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {NeI32, "ne_i32", 2, {"vcne.i32 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {LtI32, "lt_i32", 2, {"vclt.i32 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {LeI32, "le_i32", 2, {"vcle.i32 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {GtI32, "gt_i32", 2, {"vclt.i32 {c}, {b}, {a}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {GeI32, "ge_i32", 2, {"vcle.i32 {c}, {b}, {a}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {4, 4}},
      {EqI64, "eq_i64", 2, {"vceq.i64 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {8, 8}},
      {NeI64, "ne_i64", 2, {"vcne.i64 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {8, 8}},
      {LtI64, "lt_i64", 2, {"vclt.i64 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {8, 8}},
      {LeI64, "le_i64", 2, {"vcle.i64 {c}, {a}, {b}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {8, 8}},
      {GtI64, "gt_i64", 2, {"vclt.i64 {c}, {b}, {a}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {8, 8}},
      {GeI64, "ge_i64", 2, {"vcle.i64 {c}, {b}, {a}, {n}", "vmov.u8 {a}, {c}, {n}"}, 1, {8, 8}},
      {AndB8, "and_b8", 2, {"vand.u8 {a}, {a}, {b}, {n}"}, 1},
      {OrB8, "or_b8", 2, {"vor.u8 {a}, {a}, {b}, {n}"}, 1},
      {XorB8, "xor_b8", 2, {"vxor.u8 {a}, {a}, {b}, {n}"}, 1},
      {NotBool, "not_bool", 1, {"vxor.u8 {a}, {a}, {byte_one}, {n}, 1"}, 1},
      {AddI32, "add_i32", 2, {"vadd.i32 {a}, {a}, {b}, {n}"}},
      {SubI32, "sub_i32", 2, {"vsub.i32 {a}, {a}, {b}, {n}"}},
      {AddI64, "add_i64", 2, {"vadd.i64 {a}, {a}, {b}, {n}"}, 8},
      {SubI64, "sub_i64", 2, {"vsub.i64 {a}, {a}, {b}, {n}"}, 8},
      {MulI32, "mul_i32", 2, {"vmul.i32 {a}, {a}, {b}, {n}"}},
      {MulI64, "mul_i64", 2, {"vmul.i64 {a}, {a}, {b}, {n}"}, 8},
      {RemainderI32,
       "remainder_i32",
       2,
       {"vdiv.i32 {c}, {a}, {b}, {n}", "vmul.i32 {c}, {c}, {b}, {n}", "vsub.i32 {a}, {a}, {c}, {n}",
        "vadd.i32 {a}, {a}, {b}, {n}", "vdiv.i32 {c}, {a}, {b}, {n}", "vmul.i32 {c}, {c}, {b}, {n}",
        "vsub.i32 {a}, {a}, {c}, {n}"}},
      {RemainderI64,
       "remainder_i64",
       2,
       {"vdiv.i64 {c}, {a}, {b}, {n}", "vmul.i64 {c}, {c}, {b}, {n}", "vsub.i64 {a}, {a}, {c}, {n}",
        "vadd.i64 {a}, {a}, {b}, {n}", "vdiv.i64 {c}, {a}, {b}, {n}", "vmul.i64 {c}, {c}, {b}, {n}",
        "vsub.i64 {a}, {a}, {c}, {n}"},
       8},
      {FloorDivideI32,
       "floor_divide_i32",
       2,
       {"vmov.i32 {d}, {a}, {n}", "vdiv.i32 {c}, {d}, {b}, {n}", "vmul.i32 {c}, {c}, {b}, {n}",
        "vsub.i32 {d}, {d}, {c}, {n}", "vadd.i32 {d}, {d}, {b}, {n}", "vdiv.i32 {c}, {d}, {b}, {n}",
        "vmul.i32 {c}, {c}, {b}, {n}", "vsub.i32 {d}, {d}, {c}, {n}", "vsub.i32 {a}, {a}, {d}, {n}",
        "vdiv.i32 {a}, {a}, {b}, {n}"}},
      {FloorDivideI64,
       "floor_divide_i64",
       2,
       {"vmov.i64 {d}, {a}, {n}", "vdiv.i64 {c}, {d}, {b}, {n}", "vmul.i64 {c}, {c}, {b}, {n}",
        "vsub.i64 {d}, {d}, {c}, {n}", "vadd.i64 {d}, {d}, {b}, {n}", "vdiv.i64 {c}, {d}, {b}, {n}",
        "vmul.i64 {c}, {c}, {b}, {n}", "vsub.i64 {d}, {d}, {c}, {n}", "vsub.i64 {a}, {a}, {d}, {n}",
        "vdiv.i64 {a}, {a}, {b}, {n}"},
       8},
      {FmodI32, "fmod_i32", 2, {"vrem.i32 {a}, {a}, {b}, {n}"}},
      {FmodI64, "fmod_i64", 2, {"vrem.i64 {a}, {a}, {b}, {n}"}, 8},
      {FmodF32, "fmod_f32", 2, {"vrem.f32 {a}, {a}, {b}, {n}"}},
      {RemainderF32,
       "remainder_f32",
       2,
       {"vrem.f32 {a}, {a}, {b}, {n}", "vclt.f32 {c}, {a}, {zero}, {n}, 1", "vclt.f32 {d}, {b}, {zero}, {n}, 1",
        "vxor.u8 {c}, {c}, {d}, {n}", "vcne.f32 {d}, {a}, {zero}, {n}, 1", "vand.u8 {c}, {c}, {d}, {n}",
        "vadd.f32 {d}, {a}, {b}, {n}", "vsel.f32 {a}, {c}, {d}, {n}"}},
      {AddF32, "add_f32", 2, {"vadd.f32 {a}, {a}, {b}, {n}"}},
      {SubF32, "sub_f32", 2, {"vsub.f32 {a}, {a}, {b}, {n}"}},
      {MulF32, "mul_f32", 2, {"vmul.f32 {a}, {a}, {b}, {n}"}},
      {DivF32, "div_f32", 2, {"vdiv.f32 {a}, {a}, {b}, {n}"}},
      {MaxF32, "max_f32", 2, {"vmax.f32 {a}, {a}, {b}, {n}"}},
      {MinF32, "min_f32", 2, {"vmin.f32 {a}, {a}, {b}, {n}"}},
      // The mask (input <= 0, false for NaN) is written over the input's own tile, one byte per element.
      {ReluBackwardF32,
       "relu_backward_f32",
       2,
       {"vcle.f32 {b}, {b}, {zero}, {n}, 1", "vsel.f32 {a}, {b}, {zero}, {n}, 1"}},
      // PyTorch's formula: grad * (cdf + x * pdf), cdf = (1 + erf(x / sqrt 2)) / 2, pdf = exp(-x^2 / 2) / sqrt(2 pi).
      {GeluBackwardF32,
       "gelu_backward_f32",
       2,
       {"vmul.f32 {c}, {b}, {b}, {n}", "vmul.f32 {c}, {c}, {half}, {n}, 1", "vneg.f32 {c}, {c}, {n}",
        "vexp.f32 {c}, {c}, {n}", "vmul.f32 {c}, {c}, {inv_sqrt_2pi}, {n}, 1", "vmul.f32 {c}, {c}, {b}, {n}",
        "vmul.f32 {b}, {b}, {inv_sqrt2}, {n}, 1", "verf.f32 {b}, {b}, {n}", "vadd.f32 {b}, {b}, {one}, {n}, 1",
        "vmul.f32 {b}, {b}, {half}, {n}, 1", "vadd.f32 {b}, {b}, {c}, {n}", "vmul.f32 {a}, {a}, {b}, {n}"}},
      // PyTorch's grad s (1 + x (1 - s)), with 1 - s as -(s - 1) and 1 + y as 1 - -y, which round the same.
      {SiluBackwardF32,
       "silu_backward_f32",
       2,
       {"vsigmoid.f32 {c}, {b}, {n}", "vmul.f32 {a}, {a}, {c}, {n}", "vsub.f32 {c}, {c}, {one}, {n}, 1",
        "vmul.f32 {c}, {b}, {c}, {n}", "vneg.f32 {c}, {c}, {n}", "vadd.f32 {c}, {c}, {one}, {n}, 1",
        "vmul.f32 {a}, {a}, {c}, {n}"}},
      // PyTorch's grad (1 - y) y, in that order; 1 - y as -(y - 1), which rounds the same.
      {SigmoidBackwardF32,
       "sigmoid_backward_f32",
       2,
       {"vsub.f32 {c}, {b}, {one}, {n}, 1", "vneg.f32 {c}, {c}, {n}", "vmul.f32 {a}, {a}, {c}, {n}",
        "vmul.f32 {a}, {a}, {b}, {n}"}},
      {NegF32, "neg_f32", 1, {"vneg.f32 {a}, {a}, {n}"}},
      {AbsF32, "abs_f32", 1, {"vabs.f32 {a}, {a}, {n}"}},
      {ExpF32, "exp_f32", 1, {"vexp.f32 {a}, {a}, {n}"}},
      {LogF32, "log_f32", 1, {"vlog.f32 {a}, {a}, {n}"}},
      {TanhF32, "tanh_f32", 1, {"vtanh.f32 {a}, {a}, {n}"}},
      {SigmoidF32, "sigmoid_f32", 1, {"vsigmoid.f32 {a}, {a}, {n}"}},
      {SqrtF32, "sqrt_f32", 1, {"vsqrt.f32 {a}, {a}, {n}"}},
      {RsqrtF32, "rsqrt_f32", 1, {"vrsqrt.f32 {a}, {a}, {n}"}},
      {ReciprocalF32, "reciprocal_f32", 1, {"vrecip.f32 {a}, {a}, {n}"}},
      {ErfF32, "erf_f32", 1, {"verf.f32 {a}, {a}, {n}"}},
      {SinF32, "sin_f32", 1, {"vsin.f32 {a}, {a}, {n}"}},
      {CosF32, "cos_f32", 1, {"vcos.f32 {a}, {a}, {n}"}},
      {Log1pF32, "log1p_f32", 1, {"vlog1p.f32 {a}, {a}, {n}"}},
      {Expm1F32, "expm1_f32", 1, {"vexpm1.f32 {a}, {a}, {n}"}},
      {FloorF32, "floor_f32", 1, {"vfloor.f32 {a}, {a}, {n}"}},
      {CeilF32, "ceil_f32", 1, {"vceil.f32 {a}, {a}, {n}"}},
      {RoundF32, "round_f32", 1, {"vround.f32 {a}, {a}, {n}"}},
      {TruncF32, "trunc_f32", 1, {"vtrunc.f32 {a}, {a}, {n}"}},
      {FracF32, "frac_f32", 1, {"vtrunc.f32 {b}, {a}, {n}", "vsub.f32 {a}, {a}, {b}, {n}"}},
      // x > 0 as -x < 0 and x < 0 (both false for NaN), each made 1.0 or 0.0, subtracted.
      {SignF32,
       "sign_f32",
       1,
       {"vneg.f32 {b}, {a}, {n}", "vclt.f32 {c}, {b}, {zero}, {n}, 1", "vclt.f32 {d}, {a}, {zero}, {n}, 1",
        "vcvt.f32.bool {a}, {c}, {n}", "vcvt.f32.bool {b}, {d}, {n}", "vsub.f32 {a}, {a}, {b}, {n}"}},
      {GeluF32,
       "gelu_f32",
       1,
       {"vmul.f32 {b}, {a}, {inv_sqrt2}, {n}, 1", "verf.f32 {b}, {b}, {n}", "vadd.f32 {b}, {b}, {one}, {n}, 1",
        "vmul.f32 {a}, {a}, {half}, {n}, 1", "vmul.f32 {a}, {a}, {b}, {n}"}},
      {GeluTanhF32,
       "gelu_tanh_f32",
       1,
       {"vmul.f32 {b}, {a}, {a}, {n}", "vmul.f32 {b}, {b}, {a}, {n}", "vmul.f32 {b}, {b}, {gelu_cubic}, {n}, 1",
        "vadd.f32 {b}, {b}, {a}, {n}", "vmul.f32 {b}, {b}, {sqrt_2_over_pi}, {n}, 1", "vtanh.f32 {b}, {b}, {n}",
        "vadd.f32 {b}, {b}, {one}, {n}, 1", "vmul.f32 {a}, {a}, {half}, {n}, 1", "vmul.f32 {a}, {a}, {b}, {n}"}},
      {SiluF32, "silu_f32", 1, {"vsigmoid.f32 {b}, {a}, {n}", "vmul.f32 {a}, {a}, {b}, {n}"}},
      {MishF32,
       "mish_f32",
       1,
       {"vexp.f32 {b}, {a}, {n}", "vadd.f32 {b}, {b}, {one}, {n}, 1", "vlog.f32 {b}, {b}, {n}",
        "vtanh.f32 {b}, {b}, {n}", "vmul.f32 {a}, {a}, {b}, {n}"}},
      {HardswishF32,
       "hardswish_f32",
       1,
       {"vadd.f32 {b}, {a}, {three}, {n}, 1", "vmax.f32 {b}, {b}, {zero}, {n}, 1", "vmin.f32 {b}, {b}, {six}, {n}, 1",
        "vmul.f32 {a}, {a}, {b}, {n}", "vdiv.f32 {a}, {a}, {six}, {n}, 1"}},
      // Masked merges: a bool mask in {c} (or in place over an input tile it was computed from) picks the branch.
      {LeakyReluF32,
       "leaky_relu_f32",
       1,
       {"vmul.f32 {b}, {a}, {p0}, {n}, 1", "vcle.f32 {c}, {a}, {zero}, {n}, 1", "vsel.f32 {a}, {c}, {b}, {n}"}},
      {EluF32,
       "elu_f32",
       1,
       {"vmul.f32 {b}, {a}, {p2}, {n}, 1", "vexp.f32 {b}, {b}, {n}", "vsub.f32 {b}, {b}, {one}, {n}, 1",
        "vmul.f32 {b}, {b}, {p0}, {n}, 1", "vcle.f32 {c}, {a}, {zero}, {n}, 1", "vmul.f32 {a}, {a}, {p1}, {n}, 1",
        "vsel.f32 {a}, {c}, {b}, {n}"}},
      // The mask is the computed branch's (x p0 <= p1), so that a NaN keeps x, as the CPU's x p0 > p1 does.
      {SoftplusF32,
       "softplus_f32",
       1,
       {"vmul.f32 {b}, {a}, {p0}, {n}, 1", "vcle.f32 {c}, {b}, {p1}, {n}, 1", "vexp.f32 {b}, {b}, {n}",
        "vadd.f32 {b}, {b}, {one}, {n}, 1", "vlog.f32 {b}, {b}, {n}", "vdiv.f32 {b}, {b}, {p0}, {n}, 1",
        "vsel.f32 {a}, {c}, {b}, {n}"}},
      // x > 0 as -x < 0, which is false for NaN as on the CPU: then the gradient times the slope.
      {LeakyReluBackwardF32,
       "leaky_relu_backward_f32",
       2,
       {"vmul.f32 {c}, {a}, {p0}, {n}, 1", "vneg.f32 {b}, {b}, {n}", "vclt.f32 {b}, {b}, {zero}, {n}, 1",
        "vsel.f32 {c}, {b}, {a}, {n}", "vmov.f32 {a}, {c}, {n}"}},
      {HardswishBackwardF32,
       "hardswish_backward_f32",
       2,
       {"vdiv.f32 {c}, {b}, {three}, {n}, 1", "vadd.f32 {c}, {c}, {half}, {n}, 1", "vmul.f32 {c}, {a}, {c}, {n}",
        "vclt.f32 {d}, {b}, {three}, {n}, 1", "vsel.f32 {a}, {d}, {c}, {n}", "vcle.f32 {d}, {b}, {neg_three}, {n}, 1",
        "vsel.f32 {a}, {d}, {zero}, {n}, 1"}},
      // x >= max as -x <= -max, which is false for NaN as on the CPU.
      {HardtanhBackwardF32,
       "hardtanh_backward_f32",
       2,
       {"vcle.f32 {c}, {b}, {p0}, {n}, 1", "vsel.f32 {a}, {c}, {zero}, {n}, 1", "vneg.f32 {b}, {b}, {n}",
        "vcle.f32 {c}, {b}, {p1}, {n}, 1", "vsel.f32 {a}, {c}, {zero}, {n}, 1"}},
      {EluBackwardFromInputF32,
       "elu_backward_f32",
       2,
       {"vmul.f32 {c}, {b}, {p2}, {n}, 1", "vexp.f32 {c}, {c}, {n}", "vmul.f32 {c}, {c}, {p0}, {n}, 1",
        "vcle.f32 {b}, {b}, {zero}, {n}, 1", "vmul.f32 {d}, {a}, {p1}, {n}, 1", "vmul.f32 {a}, {a}, {c}, {n}",
        "vsel.f32 {d}, {b}, {a}, {n}", "vmov.f32 {a}, {d}, {n}"}},
      {EluBackwardFromResultF32,
       "elu_backward_from_result_f32",
       2,
       {"vadd.f32 {c}, {b}, {p0}, {n}, 1", "vmul.f32 {c}, {c}, {p2}, {n}, 1", "vcle.f32 {b}, {b}, {zero}, {n}, 1",
        "vmul.f32 {d}, {a}, {p1}, {n}, 1", "vmul.f32 {a}, {a}, {c}, {n}", "vsel.f32 {d}, {b}, {a}, {n}",
        "vmov.f32 {a}, {d}, {n}"}},
      // The pass-through mask x p0 > p1 as -x p0 < -p1 ({p2}), false for NaN, which takes the computed branch.
      {SoftplusBackwardF32,
       "softplus_backward_f32",
       2,
       {"vmul.f32 {c}, {b}, {p0}, {n}, 1", "vneg.f32 {d}, {c}, {n}", "vclt.f32 {d}, {d}, {p2}, {n}, 1",
        "vexp.f32 {c}, {c}, {n}", "vadd.f32 {b}, {c}, {one}, {n}, 1", "vmul.f32 {c}, {a}, {c}, {n}",
        "vdiv.f32 {c}, {c}, {b}, {n}", "vsel.f32 {c}, {d}, {a}, {n}", "vmov.f32 {a}, {c}, {n}"}},
  };
  return table;
}
}  // namespace

const OpDefinition& definition(ElementwiseOp op) {
  for (const OpDefinition& entry : definitions())
    if (entry.op == op) return entry;
  throw std::logic_error("an elementwise operation without a definition");
}

std::span<const Constant> constants() { return kConstants; }

}  // namespace npusim::emitter::elementwise_table
