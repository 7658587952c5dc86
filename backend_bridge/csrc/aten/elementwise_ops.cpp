// Native elementwise kernels on float32, float16 and bfloat16 tensors (computing in float32) — add, sub, mul, div,
// maximum, minimum, relu and the unary functions and activations of the emitter's ElementwiseOp, and the backward of
// relu and gelu — and fill_/zero_ on any dtype, run as emitted ISA programs. Integer and bool inputs of the float
// functions run from a float32 copy, integer floor and truncating division and sign in their own type; other dtypes
// and variants take the CPU fallback (counted and reported).
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/fmod.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/hypot.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include <bit>
#include <numeric>

#include "bridge.h"
#include "complex_arithmetic.h"
#include "complex_functions.h"
#include "complex_parts.h"
#include "integer_pointwise.h"
#include "outermost_dimension.h"
#include "pointwise_formula.h"
#include "pointwise_output.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {

namespace {

using emitter::ElementwiseOp;

// An operand as the kernel sees it: on the output's device, broadcast to the output's shape. For a float result, a
// float tensor on the device keeps its precision (the kernel widens f16 and bf16 to f32) and anything else, a
// scalar like the 2 of `x * 2` above all, becomes float32, the precision PyTorch computes half-precision ops in;
// for other results, the result's type.
at::Tensor as_device_operand(const at::Tensor& operand, const at::Tensor& out, c10::IntArrayRef shape) {
  if (!is_float_kind(out.scalar_type())) return operand.to(out.device(), out.scalar_type()).expand(shape);
  if (operand.device() == out.device() && is_float_kind(operand.scalar_type())) return operand.expand(shape);
  return operand.to(out.device(), at::kFloat).expand(shape);
}

// Tensors on the output's device: float32, float16 and bfloat16 as they are, integers and bools (like _int_mm's sums
// scaled by a float) converted to float32 on the device first, as PyTorch promotes them. Either operand may be a
// scalar (which PyTorch wraps as a 0-dim tensor on the CPU or the device, often as float64).
bool is_native_operand(const at::Tensor& operand, const at::Tensor& out) {
  const bool scalar =
      operand.dim() == 0 && !operand.is_complex() && (operand.is_cpu() || operand.device() == out.device());
  const bool convertible = is_float_kind(operand.scalar_type()) || operand.scalar_type() == at::kInt ||
                           operand.scalar_type() == at::kLong || operand.scalar_type() == at::kChar ||
                           operand.scalar_type() == at::kByte || operand.scalar_type() == at::kBool;
  return scalar || (operand.device() == out.device() && convertible);
}

bool runs_natively(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  return is_float_kind(out.scalar_type()) && is_native_operand(self, out) && is_native_operand(other, out);
}

}  // namespace

bool launch_binary(ElementwiseOp op, const at::Tensor& self, const at::Tensor& other, at::Tensor& out,
                   const std::array<float, 3>& parameters) {
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  if (out.is_same(self) || out.is_same(other))  // in place: the operand cannot grow into the broadcast shape
    TORCH_CHECK(out.sizes() == shape, "output with shape ", out.sizes(), " doesn't match the broadcast shape ", shape);
  // A host scalar (the 2 of `x * 2`, an optimizer's learning rate) of a float op travels in the launch's argument
  // block as its float32 bits instead of being copied to the device first.
  const auto in_arguments = [&](const at::Tensor& operand) {
    return is_float_kind(out.scalar_type()) && operand.is_cpu() && operand.dim() == 0;
  };
  const bool value_a = in_arguments(self), value_b = in_arguments(other);
  const at::Tensor a = value_a ? at::Tensor() : as_device_operand(self, out, shape);
  const at::Tensor b = value_b ? at::Tensor() : as_device_operand(other, out, shape);
  resize_to_broadcast(out, {a, b});  // laid out as the operands are, so the kernel walks them all in one order
  if (out.numel() == 0) return true;
  const std::vector<int64_t> broadcast(shape.size(), 0);
  emitter::ElementwiseSpec spec{
      op,
      static_cast<int>(out.element_size()),
      out.sizes().vec(),
      {out.strides().vec(), value_a ? broadcast : a.strides().vec(), value_b ? broadcast : b.strides().vec()}};
  spec.parameters = parameters;
  spec.float_types = {float_element_type(out), value_a ? isa::ElementType::F32 : float_element_type(a),
                      value_b ? isa::ElementType::F32 : float_element_type(b)};
  spec.values_in_arguments = {false, value_a, value_b};
  const auto argument = [](bool value, const at::Tensor& scalar, const at::Tensor& operand) -> uint64_t {
    return value ? std::bit_cast<uint32_t>(scalar.to(at::kFloat).item<float>()) : device_address(operand);
  };
  const uint64_t addresses[] = {device_address(out), argument(value_a, self, a), argument(value_b, other, b)};
  if (launched_natively([&] { launch_elementwise(out.device().index(), runtime_device(out), spec, addresses); }))
    return true;
  return launch_by_slices(out, [&](int64_t dim, int64_t index) {
    at::Tensor slice = out.select(dim, index);
    return launch_binary(op, value_a ? self : a.select(dim, index), value_b ? other : b.select(dim, index), slice,
                         parameters);
  });
}

namespace {

// int64 or int32 results of integer operands (a scalar, like the 1 of `steps += 1` or a bool, included): exact in
// the result type, so the kernel can take them converted.
bool integer_operand(const at::Tensor& operand, const at::Tensor& out) {
  const bool scalar = operand.dim() == 0 && (operand.is_cpu() || operand.device() == out.device());
  return at::isIntegralType(operand.scalar_type(), /*includeBool=*/true) &&
         (scalar || (operand.device() == out.device() && operand.scalar_type() == out.scalar_type()));
}
std::optional<ElementwiseOp> integer_op(bool add, const at::Tensor& self, const at::Tensor& other,
                                        const at::Scalar& alpha, const at::Tensor& out) {
  if (!integer_operand(self, out) || !integer_operand(other, out) || !alpha.isIntegral(false) || alpha.toLong() != 1)
    return {};
  if (out.scalar_type() == at::kLong) return add ? ElementwiseOp::AddI64 : ElementwiseOp::SubI64;
  if (out.scalar_type() == at::kInt) return add ? ElementwiseOp::AddI32 : ElementwiseOp::SubI32;
  return {};
}

// Integer products (int64, int32), wrapping as PyTorch's do.
std::optional<ElementwiseOp> integer_mul(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  if (!integer_operand(self, out) || !integer_operand(other, out)) return {};
  if (out.scalar_type() == at::kLong) return ElementwiseOp::MulI64;
  if (out.scalar_type() == at::kInt) return ElementwiseOp::MulI32;
  return {};
}

// Integer (int64, int32) and float division ops; ElementwiseOp::Copy where the op has no float kernel (the CPU
// fallback then).
template <ElementwiseOp I64, ElementwiseOp I32, ElementwiseOp F32 = ElementwiseOp::Copy>
at::Tensor& integer_division_out(const char* name, const char* overload, const at::Tensor& self,
                                 const at::Tensor& other, at::Tensor& out) {
  const bool integers = integer_operand(self, out) && integer_operand(other, out);
  if (integers && out.scalar_type() == at::kLong && launch_binary(I64, self, other, out)) return out;
  if (integers && out.scalar_type() == at::kInt && launch_binary(I32, self, other, out)) return out;
  // Operands in the result's type, as the CPU's kernels take them (x % 3.7 of bfloat16 divides by bfloat16's 3.703125).
  const auto in_result_type = [&](const at::Tensor& t) { return t.to(out.scalar_type()); };
  if (F32 != ElementwiseOp::Copy && runs_natively(self, other, out) &&
      launch_binary(F32, in_result_type(self), in_result_type(other), out))
    return out;
  torch::jit::Stack stack{self, other, out};
  call_cpu_fallback(name, overload, stack);
  return out;
}

at::Tensor result_like(const at::Tensor& self, const at::Tensor& other) {
  const at::Tensor& device_operand = self.is_cpu() ? other : self;
  return at::empty({0}, device_operand.options().dtype(at::result_type(self, other)));
}

// add and sub: self + alpha * other or self - alpha * other, both steps on the device; alpha in the result's
// dtype, not other's (2 * 0.5 is not 0). Integers (int64, int32) natively with alpha 1.
template <ElementwiseOp Op>
at::Tensor& add_or_sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  if (const auto op = integer_op(Op == ElementwiseOp::AddF32, self, other, alpha, out);
      op && launch_binary(*op, self, other, out))
    return out;
  if (runs_natively(self, other, out)) {
    const at::Tensor scaled =
        alpha.toDouble() == 1.0 ? other : at::mul(other, at::scalar_tensor(alpha, out.options().device(c10::kCPU)));
    if (launch_binary(Op, self, scaled, out)) return out;
  }
  const ComplexOp complex_op = Op == ElementwiseOp::AddF32 ? ComplexOp::Add : ComplexOp::Sub;
  if (out.is_complex() && complex_binary(complex_op, self, other, alpha, out)) return out;
  torch::jit::Stack stack{self, other, alpha, out};
  call_cpu_fallback(Op == ElementwiseOp::AddF32 ? "aten::add" : "aten::sub", "out", stack);
  return out;
}
template <ElementwiseOp Op>
at::Tensor add_or_sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  at::Tensor out = result_like(self, other);
  return add_or_sub_out<Op>(self, other, alpha, out);
}
template <ElementwiseOp Op>
at::Tensor& add_or_sub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return add_or_sub_out<Op>(self, other, alpha, self);
}

// The op's PyTorch function as the CPU fallback names it ("aten::sinh"), from the op table.
std::string aten_name(ElementwiseOp op) {
  const std::optional<std::string> function = emitter::pytorch_function(op);
  TORCH_INTERNAL_ASSERT(function, "npusim: elementwise op ", emitter::op_name(op), " names no PyTorch function");
  return "aten::" + *function;
}

// mul, div, maximum, minimum, xlogy and hypot: a native kernel, or the CPU fallback of the op's out overload.
template <ElementwiseOp Op>
at::Tensor& binary_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if constexpr (Op == ElementwiseOp::MulF32) {
    if (const auto op = integer_mul(self, other, out); op && launch_binary(*op, self, other, out)) return out;
    if (self.scalar_type() == at::kBool && other.scalar_type() == at::kBool && out.scalar_type() == at::kBool)
      return at::logical_and_out(out, self, other);  // bools multiply as they conjoin
  }
  if (runs_natively(self, other, out) && launch_binary(Op, self, other, out)) return out;
  if constexpr (Op == ElementwiseOp::MaxF32 || Op == ElementwiseOp::MinF32) {
    const auto op = Op == ElementwiseOp::MaxF32 ? emitter::FusedOpcode::Maximum : emitter::FusedOpcode::Minimum;
    if (launch_integer_binary(op, self, other, out)) return out;
  }
  if constexpr (Op == ElementwiseOp::MulF32 || Op == ElementwiseOp::DivF32) {
    const ComplexOp complex_op = Op == ElementwiseOp::MulF32 ? ComplexOp::Mul : ComplexOp::Div;
    if (out.is_complex() && complex_binary(complex_op, self, other, 1, out)) return out;
  }
  torch::jit::Stack stack{self, other, out};
  call_cpu_fallback(aten_name(Op).c_str(), Op == ElementwiseOp::XlogyF32 ? "OutTensor" : "out", stack);
  return out;
}
template <ElementwiseOp Op>
at::Tensor binary(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = result_like(self, other);
  return binary_out<Op>(self, other, out);
}
template <ElementwiseOp Op>
at::Tensor& binary_(at::Tensor& self, const at::Tensor& other) {
  return binary_out<Op>(self, other, self);
}

at::Tensor& npusim_remainder_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return integer_division_out<ElementwiseOp::RemainderI64, ElementwiseOp::RemainderI32, ElementwiseOp::RemainderF32>(
      "aten::remainder", "Tensor_out", self, other, out);
}
at::Tensor npusim_remainder(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = result_like(self, other);
  return npusim_remainder_out(self, other, out);
}
at::Tensor& npusim_remainder_(at::Tensor& self, const at::Tensor& other) {
  return npusim_remainder_out(self, other, self);
}
at::Tensor& npusim_fmod_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return integer_division_out<ElementwiseOp::FmodI64, ElementwiseOp::FmodI32, ElementwiseOp::FmodF32>(
      "aten::fmod", "Tensor_out", self, other, out);
}
at::Tensor npusim_fmod(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = result_like(self, other);
  return npusim_fmod_out(self, other, out);
}
at::Tensor& npusim_fmod_(at::Tensor& self, const at::Tensor& other) { return npusim_fmod_out(self, other, self); }
// The CPU's floor division of floats: the quotient of a - fmod(a, b) (exact), one less where the remainder's sign is
// not b's, rounded to the nearer whole number when floor leaves more than a half; a zero quotient takes the sign of
// a / b, and division by zero gives a / b. One formula kernel (pointwise_formula.h).
Value floor_quotient(Formula& f) {
  const Value a = f.x(0), b = f.x(1);
  const Value remainder = fmod(a, b);
  Value quotient = (a - remainder) / b;
  quotient = where((remainder != 0.0) & ((b < 0.0) ^ (remainder < 0.0)), quotient - 1.0, quotient);
  const Value whole = floor(quotient);
  const Value rounded = where(quotient - whole > 0.5, whole + 1.0, whole);
  const Value negative = (a / b < 0.0) | (f.sign_bit(0) ^ f.sign_bit(1));
  const Value zero = where(negative, f.constant(-0.0), f.constant(0.0));
  return where(b == 0.0, a / b, where(quotient != 0.0, rounded, zero));
}

at::Tensor& npusim_floor_divide_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (out.scalar_type() == at::kFloat && launch_formula("floor_divide", {self, other}, {}, out, floor_quotient))
    return out;
  return integer_division_out<ElementwiseOp::FloorDivideI64, ElementwiseOp::FloorDivideI32>("aten::floor_divide", "out",
                                                                                            self, other, out);
}
at::Tensor npusim_floor_divide(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = result_like(self, other);
  return npusim_floor_divide_out(self, other, out);
}
at::Tensor& npusim_floor_divide_(at::Tensor& self, const at::Tensor& other) {
  return npusim_floor_divide_out(self, other, self);
}

// True division: integer operands give the default float type, as on the CPU.
at::Tensor npusim_div(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = result_like(self, other);
  if (at::isIntegralType(out.scalar_type(), /*includeBool=*/true)) out = out.to(c10::get_default_dtype());
  return binary_out<ElementwiseOp::DivF32>(self, other, out);
}

// xlogy: integer and bool operands give the default float type, as true division.
at::Tensor npusim_xlogy(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = result_like(self, other);
  if (at::isIntegralType(out.scalar_type(), /*includeBool=*/true)) out = out.to(c10::get_default_dtype());
  return binary_out<ElementwiseOp::XlogyF32>(self, other, out);
}

// div with a rounding mode. "floor" is floor_divide. "trunc" of floats is the quotient rounded to the result's type,
// then truncated: two kernels, as the CPU computes it in every float type (in half precision too it rounds first).
// "trunc" of int64 or int32 is the floor quotient of the dividend less its C remainder (fmod), which divides exactly.
at::Tensor& npusim_div_mode_out(const at::Tensor& self, const at::Tensor& other,
                                std::optional<c10::string_view> rounding_mode, at::Tensor& out) {
  if (!rounding_mode) return binary_out<ElementwiseOp::DivF32>(self, other, out);
  if (*rounding_mode == "floor") return npusim_floor_divide_out(self, other, out);
  TORCH_CHECK(*rounding_mode == "trunc",
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *rounding_mode, "'");
  if (is_float_kind(out.scalar_type()) && runs_natively(self, other, out) &&
      launch_binary(ElementwiseOp::DivF32, self, other, out) && launch_unary(ElementwiseOp::TruncF32, out, out, {}))
    return out;
  const at::ScalarType type = out.scalar_type();
  const bool number = other.dim() == 0 && other.is_cpu() && at::isIntegralType(other.scalar_type(), false);
  const at::Tensor divisor = number ? other.to(out.device(), type) : other;  // a Python number, in the result's type
  if ((type == at::kLong || type == at::kInt) && self.scalar_type() == type && divisor.scalar_type() == type &&
      self.device() == out.device() && divisor.device() == out.device() && out.device().is_privateuseone()) {
    const at::Tensor quotient = at::floor_divide(at::sub(self, at::fmod(self, divisor)), divisor);
    resize_to_broadcast(out, {self, divisor});
    return out.copy_(quotient);
  }
  torch::jit::Stack stack{self, other, std::string(*rounding_mode), out};
  call_cpu_fallback("aten::div", "out_mode", stack);
  return out;
}
at::Tensor npusim_div_mode(const at::Tensor& self, const at::Tensor& other,
                           std::optional<c10::string_view> rounding_mode) {
  if (!rounding_mode) return npusim_div(self, other);
  at::Tensor out = result_like(self, other);  // rounded quotients keep the operands' type, integers included
  return npusim_div_mode_out(self, other, rounding_mode, out);
}
at::Tensor& npusim_div_mode_(at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> rounding_mode) {
  return npusim_div_mode_out(self, other, rounding_mode, self);
}

}  // namespace

bool launch_unary(ElementwiseOp op, const at::Tensor& self, at::Tensor& out, const std::array<float, 3>& parameters) {
  if (!is_float_kind(self.scalar_type()) || !is_float_kind(out.scalar_type()) || self.device() != out.device())
    return false;
  resize_to_broadcast(out, {self});
  if (out.numel() == 0) return true;
  emitter::ElementwiseSpec spec{
      op, static_cast<int>(out.element_size()), out.sizes().vec(), {out.strides().vec(), self.strides().vec()}};
  spec.parameters = parameters;
  spec.float_types = {float_element_type(out), float_element_type(self)};
  const uint64_t addresses[] = {device_address(out), device_address(self)};
  if (launched_natively([&] { launch_elementwise(out.device().index(), runtime_device(out), spec, addresses); }))
    return true;
  return launch_by_slices(out, [&](int64_t dim, int64_t index) {
    at::Tensor slice = out.select(dim, index);
    return launch_unary(op, self.select(dim, index), slice, parameters);
  });
}

namespace {
// floor, ceil, round and trunc of integers are the integers themselves: a copy on the device.
bool rounds_to_integers(ElementwiseOp op) {
  return op == ElementwiseOp::FloorF32 || op == ElementwiseOp::CeilF32 || op == ElementwiseOp::RoundF32 ||
         op == ElementwiseOp::TruncF32;
}

// The unary ops complex_functions.h computes for complex64 tensors.
std::optional<ComplexFunction> complex_function_of(ElementwiseOp op) {
  switch (op) {
    case ElementwiseOp::NegF32: return ComplexFunction::Neg;
    case ElementwiseOp::ReciprocalF32: return ComplexFunction::Reciprocal;
    case ElementwiseOp::ExpF32: return ComplexFunction::Exp;
    case ElementwiseOp::Expm1F32: return ComplexFunction::Expm1;
    case ElementwiseOp::LogF32: return ComplexFunction::Log;
    case ElementwiseOp::Log1pF32: return ComplexFunction::Log1p;
    case ElementwiseOp::SqrtF32: return ComplexFunction::Sqrt;
    case ElementwiseOp::RsqrtF32: return ComplexFunction::Rsqrt;
    case ElementwiseOp::SinF32: return ComplexFunction::Sin;
    case ElementwiseOp::CosF32: return ComplexFunction::Cos;
    case ElementwiseOp::TanF32: return ComplexFunction::Tan;
    case ElementwiseOp::SinhF32: return ComplexFunction::Sinh;
    case ElementwiseOp::CoshF32: return ComplexFunction::Cosh;
    case ElementwiseOp::TanhF32: return ComplexFunction::Tanh;
    case ElementwiseOp::SigmoidF32: return ComplexFunction::Sigmoid;
    case ElementwiseOp::SiluF32: return ComplexFunction::Silu;
    default: return {};
  }
}

// Functions that give an integer or bool input's own dtype back; the others give floats.
bool keeps_dtype(ElementwiseOp op) {
  return op == ElementwiseOp::NegF32 || op == ElementwiseOp::AbsF32 || rounds_to_integers(op) ||
         op == ElementwiseOp::FracF32 || op == ElementwiseOp::SignF32;
}

// The sign of integers, in their type: (x > 0) - (x < 0); a bool is its own sign.
bool integer_sign(const at::Tensor& self, at::Tensor& out) {
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/true) || out.scalar_type() != self.scalar_type() ||
      out.device() != self.device() || !self.device().is_privateuseone())
    return false;
  at::native::resize_output(out, self.sizes());
  if (self.scalar_type() == at::kBool) {
    if (!out.is_same(self)) out.copy_(self);
    return true;
  }
  const at::Tensor values = self.scalar_type() == at::kLong ? self : self.to(at::kInt);  // compared as int32 or int64
  out.copy_(at::sub(at::gt(values, 0).to(at::kInt), at::lt(values, 0).to(at::kInt)));    // -1, 0 or 1: any type holds
  return true;
}

at::Tensor& unary_out(ElementwiseOp op, const at::Tensor& self, at::Tensor& out) {
  if (launch_unary(op, self, out)) return out;
  // An integer or bool input of a float function: converted to float32 first, as the CPU's kernel converts it to the
  // float result's type before computing (int64 rounded to the nearest float32, as there).
  if (!keeps_dtype(op) && at::isIntegralType(self.scalar_type(), /*includeBool=*/true) &&
      out.scalar_type() == at::kFloat && out.device() == self.device() && self.device().is_privateuseone())
    return unary_out(op, self.to(at::kFloat), out);
  // A complex64 value's magnitude, the hypotenuse of its parts (a spectrogram's).
  if (op == ElementwiseOp::AbsF32 && self.scalar_type() == at::kComplexFloat && out.scalar_type() == at::kFloat &&
      out.device() == self.device()) {
    const at::Tensor parts = at::view_as_real(self.resolve_conj());
    return at::hypot_out(out, parts.select(-1, 0), parts.select(-1, 1));
  }
  if (const auto function = complex_function_of(op);
      function && out.is_complex() && complex_function(*function, self, out))
    return out;
  if ((op == ElementwiseOp::NegF32 || op == ElementwiseOp::AbsF32) &&
      launch_integer_unary(op == ElementwiseOp::NegF32 ? emitter::FusedOpcode::Neg : emitter::FusedOpcode::Abs, self,
                           out))
    return out;
  if (op == ElementwiseOp::SignF32 && integer_sign(self, out)) return out;
  if (rounds_to_integers(op) && at::isIntegralType(self.scalar_type(), /*includeBool=*/false) &&
      out.scalar_type() == self.scalar_type() && out.device() == self.device()) {
    at::native::resize_output(out, self.sizes());
    return out.is_same(self) ? out : out.copy_(self);
  }
  torch::jit::Stack stack{self, out};
  call_cpu_fallback(aten_name(op).c_str(), "out", stack);
  return out;
}

// A PyTorch function of one tensor that a row of the op table names (aten::sinh), as one boxed kernel for its
// functional, in-place and out= variants. Like PyTorch, functions other than neg, abs, frac and rounding give floats
// for integer and bool inputs.
class UnaryFunction final : public c10::OperatorKernel {
 public:
  explicit UnaryFunction(ElementwiseOp op) : op_(op) {}

  void operator()(const c10::OperatorHandle& handle, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack) {
    const c10::FunctionSchema& schema = handle.schema();
    const size_t count = schema.arguments().size();
    const at::Tensor self = torch::jit::peek(*stack, 0, count).toTensor();
    at::Tensor out;
    if (schema.arguments().back().is_out()) {
      out = torch::jit::peek(*stack, count - 1, count).toTensor();
    } else if (schema.is_mutable()) {
      out = self;
    } else {
      const bool promotes = !keeps_dtype(op_) && at::isIntegralType(self.scalar_type(), /*includeBool=*/true);
      at::ScalarType type = promotes ? c10::typeMetaToScalarType(c10::get_default_dtype()) : self.scalar_type();
      if (op_ == ElementwiseOp::AbsF32 && self.is_complex()) type = c10::toRealValueType(type);  // a magnitude
      out = at::empty({0}, self.options().dtype(type));
    }
    unary_out(op_, self, out);
    torch::jit::drop(*stack, count);
    torch::jit::push(*stack, out);
  }

 private:
  ElementwiseOp op_;
};

// sgn of real floats is their sign (abs's gradient uses it), of complex ones z / |z|.
at::Tensor& npusim_sgn_out(const at::Tensor& self, at::Tensor& out) {
  if (launch_unary(ElementwiseOp::SignF32, self, out) || integer_sign(self, out)) return out;
  if (self.is_complex() && complex_function(ComplexFunction::Sgn, self, out)) return out;
  torch::jit::Stack stack{self, out};
  call_cpu_fallback("aten::sgn", "out", stack);
  return out;
}
at::Tensor npusim_sgn(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_sgn_out(self, out);
}
at::Tensor& npusim_sgn_(at::Tensor& self) { return npusim_sgn_out(self, self); }

// gelu, exact (erf) or with the tanh approximation.
at::Tensor& npusim_gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  const ElementwiseOp op = approximate == "tanh" ? ElementwiseOp::GeluTanhF32 : ElementwiseOp::GeluF32;
  if (launch_unary(op, self, out)) return out;
  torch::jit::Stack stack{self, std::string(approximate), out};
  call_cpu_fallback("aten::gelu", "out", stack);
  return out;
}
at::Tensor npusim_gelu(const at::Tensor& self, c10::string_view approximate) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_gelu_out(self, approximate, out);
}
at::Tensor& npusim_gelu_(at::Tensor& self, c10::string_view approximate) {
  return npusim_gelu_out(self, approximate, self);
}

// gelu's backward, exact or for the tanh approximation: one kernel each.
at::Tensor& npusim_gelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                     c10::string_view approximate, at::Tensor& grad_input) {
  const ElementwiseOp op = approximate == "tanh" ? ElementwiseOp::GeluTanhBackwardF32 : ElementwiseOp::GeluBackwardF32;
  if ((approximate == "none" || approximate == "tanh") && runs_natively(grad_output, self, grad_input) &&
      launch_binary(op, grad_output, self, grad_input))
    return grad_input;
  torch::jit::Stack stack{grad_output, self, std::string(approximate), grad_input};
  call_cpu_fallback("aten::gelu_backward", "grad_input", stack);
  return grad_input;
}
at::Tensor npusim_gelu_backward(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  at::Tensor grad_input = result_like(grad_output, self);
  return npusim_gelu_backward_out(grad_output, self, approximate, grad_input);
}

// sigmoid's backward from its output y: grad (1 - y) y.
at::Tensor& npusim_sigmoid_backward_out(const at::Tensor& grad_output, const at::Tensor& output,
                                        at::Tensor& grad_input) {
  if (runs_natively(grad_output, output, grad_input) &&
      launch_binary(ElementwiseOp::SigmoidBackwardF32, grad_output, output, grad_input))
    return grad_input;
  if (is_complex64_on_device(grad_input) && is_complex64_on_device(grad_output) && is_complex64_on_device(output)) {
    // grad conj((1 - y) y), PyTorch's convention for complex gradients, from native complex products
    const at::Tensor slope = at::mul(at::rsub(output, 1), output).conj();
    return at::mul_out(grad_input, grad_output, slope);
  }
  torch::jit::Stack stack{grad_output, output, grad_input};
  call_cpu_fallback("aten::sigmoid_backward", "grad_input", stack);
  return grad_input;
}
at::Tensor npusim_sigmoid_backward(const at::Tensor& grad_output, const at::Tensor& output) {
  at::Tensor grad_input = result_like(grad_output, output);
  return npusim_sigmoid_backward_out(grad_output, output, grad_input);
}

// relu's backward: grad where self > threshold, else 0. Native for threshold 0, which is what relu uses.
at::Tensor& npusim_threshold_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                          const at::Scalar& threshold, at::Tensor& grad_input) {
  if (threshold.toDouble() == 0.0 && runs_natively(grad_output, self, grad_input) &&
      launch_binary(ElementwiseOp::ReluBackwardF32, grad_output, self, grad_input))
    return grad_input;
  // Another threshold: 0 where x <= threshold, else g (the CPU's formula), as a formula kernel.
  if (!threshold.isComplex() && grad_input.scalar_type() == at::kFloat &&
      launch_formula("threshold_backward", {grad_output, self}, {threshold.toDouble()}, grad_input,
                     [](Formula& f) { return where(f.x(1) <= f.parameter(0).value(), 0.0, f.x(0)); }))
    return grad_input;
  torch::jit::Stack stack{grad_output, self, threshold, grad_input};
  call_cpu_fallback("aten::threshold_backward", "grad_input", stack);
  return grad_input;
}
at::Tensor npusim_threshold_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                     const at::Scalar& threshold) {
  at::Tensor grad_input = result_like(grad_output, self);
  return npusim_threshold_backward_out(grad_output, self, threshold, grad_input);
}

// relu(x) = maximum(x, 0): NaN stays NaN, as on the CPU.
at::Tensor npusim_relu(const at::Tensor& self) {
  if (!is_float_kind(self.scalar_type())) {
    torch::jit::Stack stack{self};
    call_cpu_fallback("aten::relu", "", stack);
    return stack.back().toTensor();
  }
  return binary<ElementwiseOp::MaxF32>(self, at::scalar_tensor(0, self.options().device(c10::kCPU)));
}
at::Tensor& npusim_relu_(at::Tensor& self) {
  if (!is_float_kind(self.scalar_type())) {
    torch::jit::Stack stack{self};
    call_cpu_fallback("aten::relu_", "", stack);
    return self;
  }
  return binary_<ElementwiseOp::MaxF32>(self, at::scalar_tensor(0, self.options().device(c10::kCPU)));
}

// fill_ broadcasts one element over the tensor with a zero-stride DMA: a copy kernel, any dtype. A single element
// (a loss's gradient seed) is the host-to-device copy alone.
at::Tensor& npusim_fill_(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  const at::Tensor host = at::scalar_tensor(value, self.options().device(c10::kCPU));
  if (self.numel() == 1) return self.copy_(host.reshape(self.sizes()));
  copy_on_device(host.to(self.device()).expand_as(self), self);
  return self;
}
at::Tensor& npusim_fill_tensor_(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  return npusim_fill_(self, value.item());
}
at::Tensor& npusim_zero_(at::Tensor& self) { return npusim_fill_(self, 0); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", npusim_fill_);
  m.impl("fill_.Tensor", npusim_fill_tensor_);
  m.impl("zero_", npusim_zero_);
  m.impl("add.out", add_or_sub_out<ElementwiseOp::AddF32>);
  m.impl("add.Tensor", add_or_sub<ElementwiseOp::AddF32>);
  m.impl("add_.Tensor", add_or_sub_<ElementwiseOp::AddF32>);
  m.impl("sub.out", add_or_sub_out<ElementwiseOp::SubF32>);
  m.impl("sub.Tensor", add_or_sub<ElementwiseOp::SubF32>);
  m.impl("sub_.Tensor", add_or_sub_<ElementwiseOp::SubF32>);
  m.impl("remainder.Tensor_out", npusim_remainder_out);
  m.impl("remainder.Tensor", npusim_remainder);
  m.impl("remainder_.Tensor", npusim_remainder_);
  m.impl("fmod.Tensor_out", npusim_fmod_out);
  m.impl("fmod.Tensor", npusim_fmod);
  m.impl("fmod_.Tensor", npusim_fmod_);
  m.impl("floor_divide.out", npusim_floor_divide_out);
  m.impl("floor_divide", npusim_floor_divide);
  m.impl("floor_divide_.Tensor", npusim_floor_divide_);
  m.impl("div.out", binary_out<ElementwiseOp::DivF32>);
  m.impl("div.Tensor", npusim_div);
  m.impl("div_.Tensor", binary_<ElementwiseOp::DivF32>);
  m.impl("div.out_mode", npusim_div_mode_out);
  m.impl("div.Tensor_mode", npusim_div_mode);
  m.impl("div_.Tensor_mode", npusim_div_mode_);
  for (const ElementwiseOp op : emitter::unary_pytorch_functions()) {
    const std::string function = *emitter::pytorch_function(op);
    for (const std::string& variant : {function, function + "_", function + ".out"})
      m.impl(variant.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<UnaryFunction>(op)));
  }
  m.impl("sgn", npusim_sgn);
  m.impl("sgn_", npusim_sgn_);
  m.impl("sgn.out", npusim_sgn_out);
  m.impl("gelu", npusim_gelu);
  m.impl("gelu_", npusim_gelu_);
  m.impl("gelu.out", npusim_gelu_out);
  m.impl("mul.out", binary_out<ElementwiseOp::MulF32>);
  m.impl("mul.Tensor", binary<ElementwiseOp::MulF32>);
  m.impl("mul_.Tensor", binary_<ElementwiseOp::MulF32>);
  m.impl("xlogy.Tensor", npusim_xlogy);
  m.impl("xlogy.OutTensor", binary_out<ElementwiseOp::XlogyF32>);
  m.impl("xlogy_.Tensor", binary_<ElementwiseOp::XlogyF32>);
  m.impl("hypot", binary<ElementwiseOp::HypotF32>);
  m.impl("hypot.out", binary_out<ElementwiseOp::HypotF32>);
  m.impl("hypot_", binary_<ElementwiseOp::HypotF32>);
  m.impl("maximum", binary<ElementwiseOp::MaxF32>);
  m.impl("maximum.out", binary_out<ElementwiseOp::MaxF32>);
  m.impl("minimum", binary<ElementwiseOp::MinF32>);
  m.impl("minimum.out", binary_out<ElementwiseOp::MinF32>);
  m.impl("sigmoid_backward", npusim_sigmoid_backward);
  m.impl("sigmoid_backward.grad_input", npusim_sigmoid_backward_out);
  m.impl("gelu_backward", npusim_gelu_backward);
  m.impl("gelu_backward.grad_input", npusim_gelu_backward_out);
  m.impl("threshold_backward", npusim_threshold_backward);
  m.impl("threshold_backward.grad_input", npusim_threshold_backward_out);
  m.impl("relu", npusim_relu);
  m.impl("relu_", npusim_relu_);
}

}  // namespace npusim::bridge
