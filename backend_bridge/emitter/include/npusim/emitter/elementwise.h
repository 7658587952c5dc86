// Emits ISA programs for elementwise kernels over strided tensors: a copy, a conversion, or an operation of one to
// three inputs (arithmetic, comparisons, activations and their gradients, special functions), computing in f32 over
// f32, f16 or bf16 tensors, or on integers and bools. Each op is a small graph of fused-kernel nodes
// (elementwise_table.h), emitted by the same pointwise loop as torch.compile's fused kernels (fused.h): the program is
// specialised to the shape, the strides and the chip. Copies that transpose go to transpose_copy.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/kernel_builder.h"
#include "npusim/isa/isa.h"

namespace npusim::emitter {

enum class ElementwiseOp {
  Copy,
  Convert,  // out = the input converted to another element type (vcvt), the types named by the spec
  // three inputs: other, a bool condition, self; out = condition ? self : other, for any 1-, 4- or 8-byte type
  WhereB8,
  WhereB32,
  WhereB64,
  // two inputs
  AddF32,
  SubF32,
  MulF32,
  DivF32,
  MaxF32,
  MinF32,
  ReluBackwardF32,      // grad where input > 0, else 0 (threshold_backward with threshold 0)
  GeluBackwardF32,      // grad (cdf(x) + x pdf(x)), the exact gelu's derivative, from grad and x
  SiluBackwardF32,      // grad s (1 + x (1 - s)), s = sigmoid(x)
  SigmoidBackwardF32,   // grad (1 - y) y, from grad and sigmoid's output y
  GeluTanhBackwardF32,  // grad times the tanh-approximated gelu's derivative, from grad and x, in one kernel
  // three float inputs, two steps in one pass (batch norm's): a b + c, and (a - b) c, each step rounded
  MulAddF32,
  SubMulF32,
  // two float32 inputs, a bool output (NaN compares false except for ne, as in IEEE and PyTorch)
  EqF32,
  NeF32,
  LtF32,
  LeF32,
  GtF32,
  GeF32,
  EqI32,  // the same comparisons of int32 and int64 operands, exact
  NeI32,
  LtI32,
  LeI32,
  GtI32,
  GeI32,
  EqI64,
  NeI64,
  LtI64,
  LeI64,
  GtI64,
  GeI64,
  // bitwise logic of 1-byte elements (bool, uint8, int8): two inputs, or one for not (of bools: 0 and 1 swap)
  AndB8,
  OrB8,
  XorB8,
  NotBool,
  AddI32,  // wrapping, like PyTorch's integer arithmetic
  SubI32,
  AddI64,
  SubI64,
  MulI32,
  MulI64,
  // Python's integer % and //, from truncating division: r = a - trunc(a / b) b, then ((r + b) - trunc((r + b) /
  // b) b) takes the divisor's sign; a // b = (a - a % b) / b, exact. A zero divisor traps.
  RemainderI32,
  RemainderI64,
  FloorDivideI32,
  FloorDivideI64,
  FmodI32,  // C's %: the dividend's sign; a zero divisor traps
  FmodI64,
  FmodF32,       // fmod(a, b), exact: the dividend's sign
  RemainderF32,  // PyTorch's formula: r = fmod(a, b), + b where r != 0 and its sign differs from b's
  XlogyF32,      // a log(b), but 0 where a == 0 and b is not NaN
  HypotF32,      // sqrt(a^2 + b^2) as m sqrt(1 + (n / m)^2), m = max(|a|, |b|), n = min: no overflow; inf if either is
  // one input
  NegF32,
  AbsF32,
  ExpF32,
  LogF32,
  TanhF32,
  SigmoidF32,
  SqrtF32,
  RsqrtF32,
  ReciprocalF32,
  ErfF32,
  SinF32,
  CosF32,
  Log1pF32,
  Expm1F32,
  SinhF32,  // (expm1(x) - expm1(-x)) / 2; beyond |x| = 20, e = exp(|x| / 2), sign(x) (e / 2) e
  CoshF32,  // (exp(|x|) + exp(-|x|)) / 2; beyond |x| = 20, e = exp(|x| / 2), (e / 2) e
  TanF32,   // sin(x) / cos(x)
  FloorF32,
  CeilF32,
  RoundF32,  // halves to even, as torch.round
  TruncF32,
  FracF32,       // x - trunc(x)
  SignF32,       // (x > 0) - (x < 0): 0 for zeros of either sign and for NaN, as PyTorch's sign
  GeluF32,       // x/2 (1 + erf(x / sqrt 2))
  GeluTanhF32,   // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  SiluF32,       // x sigmoid(x)
  MishF32,       // x tanh(log(1 + exp(x)))
  HardswishF32,  // x min(max(x + 3, 0), 6) / 6
  // one input and parameters p0.. (ElementwiseSpec::parameters), with PyTorch's CPU formulas
  LeakyReluF32,  // x > 0 ? x : x p0
  EluF32,        // x <= 0 ? (exp(x p2) - 1) p0 : x p1  (p0 = alpha scale, p1 = scale, p2 = input_scale)
  SoftplusF32,   // x p0 > p1 ? x : log(1 + exp(x p0)) / p0  (p0 = beta, p1 = threshold)
  NanToNumF32,   // NaN -> p0, +inf -> p1, -inf -> p2, others unchanged
  // two inputs, the gradient and the forward input (or result), and parameters
  LeakyReluBackwardF32,      // x > 0 ? g : g p0
  HardswishBackwardF32,      // x <= -3 ? 0 : x < 3 ? g (x / 3 + 1/2) : g
  HardtanhBackwardF32,       // x <= p0 || x >= -p1 ? 0 : g  (p0 = min, p1 = -max)
  EluBackwardFromInputF32,   // g (x <= 0 ? p0 exp(x p2) : p1)  (p0 = input_scale alpha scale, p1 = scale, p2 =
                             // input_scale)
  EluBackwardFromResultF32,  // g (y <= 0 ? p2 (y + p0) : p1)  (p0 = alpha scale, p1 = scale, p2 = input_scale)
  SoftplusBackwardF32,       // x p0 > p1 ? g : g z / (z + 1), z = exp(x p0)  (p2 = -p1)
};

struct ElementwiseSpec {
  ElementwiseOp op = ElementwiseOp::Copy;
  int element_bytes = 4;                      // of the output as it is held in memory (a copy's: 1, 2, 4 or 8)
  std::vector<int64_t> sizes;                 // the output's shape
  std::vector<std::vector<int64_t>> strides;  // in elements, one list per operand; operand 0 is the output
  // Convert only: the input's and the output's element types (element_bytes is the output's).
  isa::ElementType convert_from = isa::ElementType::F32, convert_to = isa::ElementType::F32;
  // The op's scalar parameters (p0, p1, p2 in its formula), baked into the program as constants.
  std::array<float, 3> parameters{};
  // Ops that compute in f32: the type each float operand holds in memory, output first (empty: all f32; entries
  // for non-float operands, like a comparison's bool output, are ignored). f16 and bf16 operands are widened to f32
  // after loading and a result rounded once before storing, as PyTorch computes half-precision ops in float.
  std::vector<isa::ElementType> float_types;
  // Inputs whose argument-block entry is their value rather than an address (empty: none), a scalar broadcast to
  // every element (all its strides 0): the kernel reads it where the argument block lies, so a host scalar needs no
  // copy to the device of its own.
  std::vector<bool> values_in_arguments;
};

// Inputs the operation reads (a copy's or a conversion's one source counts as 1).
int input_count(ElementwiseOp op);
// Bytes per element of the operation's result as it computes it: 4 for f32 and i32, 8 for i64, 1 for bools; 0 for a
// copy or a conversion, whose types the spec names.
int element_bytes(ElementwiseOp op);

// The kernel's argument block is the operands' base addresses (or values, see values_in_arguments), in operand order.
// Throws std::invalid_argument for a malformed spec, Unsupported for a layout the pointwise loop cannot walk (more
// dimensions than it loops over once collapsed, a stride beyond the DMA's immediates).
Kernel emit_elementwise(const ElementwiseSpec& spec, const config::ChipConfig& config);

std::string op_name(ElementwiseOp op);

// The PyTorch function an op is ("sinh" for aten::sinh), if the op table names one.
std::optional<std::string> pytorch_function(ElementwiseOp op);
// The ops of one input that the op table names a PyTorch function for, in table order: the glue registers each
// function, its in-place and its out= variant from this list.
std::vector<ElementwiseOp> unary_pytorch_functions();

}  // namespace npusim::emitter
