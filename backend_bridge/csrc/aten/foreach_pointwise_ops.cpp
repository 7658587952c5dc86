// The foreach operators addcmul, addcdiv, lerp, sqrt, neg, abs, exp, reciprocal, zero_, copy_ and pow, each one
// multi-tensor kernel per call (foreach_launch.h), as PyTorch's CPU kernels compute them in opmath f32: addcmul as
// fma(value * t1, t2, self), addcdiv as self + (value * t1) / t2, lerp as the CPU's vectorised fmadd on either side of
// weight 0.5, reciprocal as a division. What a kernel cannot walk runs per tensor through PyTorch's slow path.
#include <ATen/native/ForeachUtils.h>
#include <ATen/ops/_foreach_abs_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_exp_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_zero_native.h>
#include <torch/library.h>

#include <cmath>
#include <functional>
#include <optional>
#include <utility>

#include "foreach_launch.h"

namespace npusim::bridge {
namespace {

using foreach::any_complex;
using foreach::checked_value;
using foreach::in_place;
using foreach::make;
using foreach::operand_value;
using foreach::Operands;
using foreach::Operator;
using foreach::out_of_place;
using foreach::pick;
using foreach::Positions;
using foreach::Program;
using Op = emitter::FusedOpcode;

std::function<void(Program&)> unary(Op op) {
  return [op](Program& p) { p.store(p.op(op, p.load(1)), 0); };
}

// ---- addcmul, addcdiv: self + value * t1 * t2 as fma(value * t1, t2, self); self + (value * t1) / t2

template <bool Divide>
Operator pointwise_operator(const Operands& operands) {
  return make(
      Divide ? "foreach_addcdiv" : "foreach_addcmul", operands,
      [](Program& p) {
        const int scaled = p.op(Op::Mul, p.scalar(0), p.load(2));
        p.store(Divide ? p.op(Op::Add, p.load(1), p.op(Op::Div, scaled, p.load(3)))
                       : p.op(Op::MulAdd, scaled, p.load(3), p.load(1)),
                0);
      },
      1);
}

template <bool Divide, auto SlowInPlace>
void pointwise_scalars_(at::TensorList self, at::TensorList tensor1, at::TensorList tensor2,
                        at::ArrayRef<at::Scalar> scalars) {
  at::native::check_foreach_api_restrictions(self, tensor1, tensor2, scalars);
  if (any_complex(scalars)) return SlowInPlace(self, tensor1, tensor2, scalars);
  const Operands operands{
      self, {tensor1, tensor2}, {}, [&](size_t i) { return std::vector<float>{checked_value(scalars[i])}; }};
  in_place(pointwise_operator<Divide>(operands), operands, [&](const Positions& rest) {
    SlowInPlace(pick(self, rest), pick(tensor1, rest), pick(tensor2, rest), pick(scalars, rest));
  });
}
template <bool Divide, auto Slow>
std::vector<at::Tensor> pointwise_scalars(at::TensorList self, at::TensorList tensor1, at::TensorList tensor2,
                                          at::ArrayRef<at::Scalar> scalars) {
  at::native::check_foreach_api_restrictions(self, tensor1, tensor2, scalars);
  if (any_complex(scalars)) return Slow(self, tensor1, tensor2, scalars);
  const Operands operands{
      self, {tensor1, tensor2}, {}, [&](size_t i) { return std::vector<float>{checked_value(scalars[i])}; }};
  return out_of_place(pointwise_operator<Divide>(operands), operands, [&](const Positions& rest) {
    return Slow(pick(self, rest), pick(tensor1, rest), pick(tensor2, rest), pick(scalars, rest));
  });
}
// .Scalar: one value for every segment; .Tensor: the values in a CPU tensor, as PyTorch converts them.
template <bool Divide, auto SlowInPlace>
void pointwise_scalar_(at::TensorList self, at::TensorList tensor1, at::TensorList tensor2, const at::Scalar& value) {
  const std::vector<at::Scalar> scalars(self.size(), value);
  pointwise_scalars_<Divide, SlowInPlace>(self, tensor1, tensor2, scalars);
}
template <bool Divide, auto Slow>
std::vector<at::Tensor> pointwise_scalar(at::TensorList self, at::TensorList tensor1, at::TensorList tensor2,
                                         const at::Scalar& value) {
  const std::vector<at::Scalar> scalars(self.size(), value);
  return pointwise_scalars<Divide, Slow>(self, tensor1, tensor2, scalars);
}
template <bool Divide, auto SlowInPlace>
void pointwise_tensor_(at::TensorList self, at::TensorList tensor1, at::TensorList tensor2, const at::Tensor& values) {
  const std::vector<at::Scalar> scalars =
      at::native::convert_tensor_to_scalar_list(values, static_cast<int64_t>(self.size()));
  pointwise_scalars_<Divide, SlowInPlace>(self, tensor1, tensor2, scalars);
}
template <bool Divide, auto Slow>
std::vector<at::Tensor> pointwise_tensor(at::TensorList self, at::TensorList tensor1, at::TensorList tensor2,
                                         const at::Tensor& values) {
  const std::vector<at::Scalar> scalars =
      at::native::convert_tensor_to_scalar_list(values, static_cast<int64_t>(self.size()));
  return pointwise_scalars<Divide, Slow>(self, tensor1, tensor2, scalars);
}

// ---- lerp, as the CPU's vectorised lerp: |w| < 0.5 ? fma(w, end - self, self) : fma(w - 1, end - self, end)

// One weight for every segment: the branch is taken here, the coefficient (w or w - 1 in f32) passed at launch.
Operator lerp_operator(const Operands& operands, bool small) {
  return make(
      "foreach_lerp", operands,
      [small](Program& p) {
        const int self = p.load(1), end = p.load(2);
        p.store(p.op(Op::MulAdd, p.scalar(0), p.op(Op::Sub, end, self), small ? self : end), 0);
      },
      1);
}
float lerp_coefficient(float weight) { return std::abs(weight) < 0.5f ? weight : weight - 1.0f; }

// A weight per segment (scalar 0) or per element (tensor 3): the branch per element.
Operator lerp_selecting_operator(const Operands& operands, bool weight_tensors) {
  return make(
      "foreach_lerp", operands,
      [weight_tensors](Program& p) {
        const int self = p.load(1), end = p.load(2), weight = weight_tensors ? p.load(3) : p.scalar(0);
        const int small = p.op(Op::Lt, p.op(Op::Abs, weight), p.constant(0.5));
        const int coefficient = p.op(Op::Where, small, weight, p.op(Op::Sub, weight, p.constant(1)));
        const int base = p.op(Op::Where, small, self, end);
        p.store(p.op(Op::MulAdd, coefficient, p.op(Op::Sub, end, self), base), 0);
      },
      weight_tensors ? 0 : 1);
}

void lerp_scalar_(at::TensorList self, at::TensorList end, const at::Scalar& weight) {
  at::native::check_foreach_api_restrictions(self, end);
  if (weight.isComplex()) return at::native::foreach_tensor_lerp_list_kernel_slow_(self, end, weight);
  const float w = checked_value(weight);
  const Operands operands{self, {end}, {}, [&](size_t) { return std::vector<float>{lerp_coefficient(w)}; }};
  in_place(lerp_operator(operands, std::abs(w) < 0.5f), operands, [&](const Positions& rest) {
    at::native::foreach_tensor_lerp_list_kernel_slow_(pick(self, rest), pick(end, rest), weight);
  });
}
std::vector<at::Tensor> lerp_scalar(at::TensorList self, at::TensorList end, const at::Scalar& weight) {
  at::native::check_foreach_api_restrictions(self, end);
  if (weight.isComplex()) return at::native::foreach_tensor_lerp_list_kernel_slow(self, end, weight);
  const float w = checked_value(weight);
  const Operands operands{self, {end}, {}, [&](size_t) { return std::vector<float>{lerp_coefficient(w)}; }};
  return out_of_place(lerp_operator(operands, std::abs(w) < 0.5f), operands, [&](const Positions& rest) {
    return at::native::foreach_tensor_lerp_list_kernel_slow(pick(self, rest), pick(end, rest), weight);
  });
}
void lerp_scalars_(at::TensorList self, at::TensorList end, at::ArrayRef<at::Scalar> weights) {
  at::native::check_foreach_api_restrictions(self, end, weights);
  if (any_complex(weights)) return at::native::foreach_tensor_lerp_scalarlist_kernel_slow_(self, end, weights);
  const Operands operands{self, {end}, {}, [&](size_t i) { return std::vector<float>{checked_value(weights[i])}; }};
  in_place(lerp_selecting_operator(operands, false), operands, [&](const Positions& rest) {
    at::native::foreach_tensor_lerp_scalarlist_kernel_slow_(pick(self, rest), pick(end, rest), pick(weights, rest));
  });
}
std::vector<at::Tensor> lerp_scalars(at::TensorList self, at::TensorList end, at::ArrayRef<at::Scalar> weights) {
  at::native::check_foreach_api_restrictions(self, end, weights);
  if (any_complex(weights)) return at::native::foreach_tensor_lerp_scalarlist_kernel_slow(self, end, weights);
  const Operands operands{self, {end}, {}, [&](size_t i) { return std::vector<float>{checked_value(weights[i])}; }};
  return out_of_place(lerp_selecting_operator(operands, false), operands, [&](const Positions& rest) {
    return at::native::foreach_tensor_lerp_scalarlist_kernel_slow(pick(self, rest), pick(end, rest),
                                                                  pick(weights, rest));
  });
}
void lerp_list_(at::TensorList self, at::TensorList end, at::TensorList weights) {
  at::native::check_foreach_api_restrictions(self, end, weights);
  const Operands operands{self, {end, weights}};
  in_place(lerp_selecting_operator(operands, true), operands, [&](const Positions& rest) {
    at::native::foreach_tensor_ternary_lerp_slow_(pick(self, rest), pick(end, rest), pick(weights, rest));
  });
}
std::vector<at::Tensor> lerp_list(at::TensorList self, at::TensorList end, at::TensorList weights) {
  at::native::check_foreach_api_restrictions(self, end, weights);
  const Operands operands{self, {end, weights}};
  return out_of_place(lerp_selecting_operator(operands, true), operands, [&](const Positions& rest) {
    return at::native::foreach_tensor_ternary_lerp_slow(pick(self, rest), pick(end, rest), pick(weights, rest));
  });
}

// ---- unary: sqrt, neg, exp, abs, reciprocal (1 / x, a division as the CPU's)

template <Op Unary>
std::function<void(Program&)> unary_program() {
  if constexpr (Unary == Op::Reciprocal)
    return [](Program& p) { p.store(p.op(Op::Div, p.constant(1), p.load(1)), 0); };
  else
    return unary(Unary);
}
template <Op Unary>
const char* unary_name() {
  switch (Unary) {
    case Op::Sqrt: return "foreach_sqrt";
    case Op::Neg: return "foreach_neg";
    case Op::Exp: return "foreach_exp";
    case Op::Abs: return "foreach_abs";
    default: return "foreach_reciprocal";
  }
}
template <Op Unary, auto SlowInPlace>
void unary_(at::TensorList self) {
  at::native::check_foreach_api_restrictions(self);
  const Operands operands{self};
  in_place(make(unary_name<Unary>(), operands, unary_program<Unary>()), operands,
           [&](const Positions& rest) { SlowInPlace(pick(self, rest)); });
}
template <Op Unary, auto Slow>
std::vector<at::Tensor> unary_out(at::TensorList self) {
  at::native::check_foreach_api_restrictions(self);
  const Operands operands{self};
  return out_of_place(make(unary_name<Unary>(), operands, unary_program<Unary>()), operands,
                      [&](const Positions& rest) { return Slow(pick(self, rest)); });
}

// ---- zero_ and copy_: any dtype the device has, bits unchanged

const std::vector<at::ScalarType> kEveryType = {at::kFloat, at::kHalf, at::kBFloat16, at::kChar,
                                                at::kByte,  at::kInt,  at::kLong,     at::kBool};

void zero_(at::TensorList self) {
  at::native::check_foreach_api_restrictions(self);
  const Operands operands{self};
  Operator op = make("foreach_zero", operands, [](Program& p) { p.store_zero(0); });
  op.dtypes = kEveryType;
  in_place(op, operands, [&](const Positions& rest) { at::native::foreach_tensor_zero_slow_(pick(self, rest)); });
}

void copy_(at::TensorList self, at::TensorList src, bool non_blocking) {
  at::native::check_foreach_api_restrictions(self, src);
  const Operands operands{self, {src}};
  Operator op = make("foreach_copy", operands, [](Program& p) { p.store(p.load_stored(2), 0); });
  op.dtypes = kEveryType;
  in_place(op, operands, [&](const Positions& rest) {
    at::native::foreach_tensor_copy_list_kernel_slow_(pick(self, rest), pick(src, rest), non_blocking);
  });
}

// ---- pow: a positive base to tensor exponents as exp(e ln base), ln base in double from the f32 base (Adam's
// capturable bias corrections; within a few ulps of the CPU's powf); float32 powers by 2, 3, ±0.5, -1, -2, 1 and 0
// computed as the CPU's optimised kernel does (x * x, x * x * x, sqrt, 1 / sqrt, 1 / x, 1 / (x * x)).

std::vector<at::Tensor> scalar_pow(const at::Scalar& base, at::TensorList exponent) {
  at::native::check_foreach_api_restrictions(exponent);
  const double b = base.isComplex() ? -1.0 : static_cast<double>(static_cast<float>(base.toDouble()));
  if (!(b > 0.0) || !std::isfinite(b)) return at::native::foreach_scalar_pow_list_kernel_slow(base, exponent);
  const auto log_base = static_cast<float>(std::log(b));
  const Operands operands{exponent, {}, {}, [log_base](size_t) { return std::vector<float>{log_base}; }};
  return out_of_place(make(
                          "foreach_pow", operands,
                          [](Program& p) { p.store(p.op(Op::Exp, p.op(Op::Mul, p.scalar(0), p.load(1))), 0); }, 1),
                      operands, [&](const Positions& rest) {
                        return at::native::foreach_scalar_pow_list_kernel_slow(base, pick(exponent, rest));
                      });
}

// The program of x ** exponent for the exponents the CPU computes without pow, or none.
std::optional<std::function<void(Program&)>> power_program(const at::Scalar& exponent) {
  if (exponent.isComplex()) return std::nullopt;
  const double e = exponent.toDouble();
  const auto with = [](std::function<int(Program&, int)> f) {
    return std::function<void(Program&)>([f](Program& p) { p.store(f(p, p.load(1)), 0); });
  };
  if (e == 1.0) return with([](Program&, int x) { return x; });
  if (e == 0.0) return with([](Program& p, int) { return p.constant(1); });
  if (e == 2.0) return with([](Program& p, int x) { return p.op(Op::Mul, x, x); });
  if (e == 3.0) return with([](Program& p, int x) { return p.op(Op::Mul, p.op(Op::Mul, x, x), x); });
  if (e == 0.5) return with([](Program& p, int x) { return p.op(Op::Sqrt, x); });
  if (e == -0.5) return with([](Program& p, int x) { return p.op(Op::Div, p.constant(1), p.op(Op::Sqrt, x)); });
  if (e == -1.0) return with([](Program& p, int x) { return p.op(Op::Div, p.constant(1), x); });
  if (e == -2.0) return with([](Program& p, int x) { return p.op(Op::Div, p.constant(1), p.op(Op::Mul, x, x)); });
  return std::nullopt;
}
std::vector<at::Tensor> pow_scalar(at::TensorList self, const at::Scalar& exponent) {
  at::native::check_foreach_api_restrictions(self);
  const auto program = power_program(exponent);
  if (!program) return at::native::foreach_tensor_pow_scalar_kernel_slow(self, exponent);
  const Operands operands{self};
  Operator op = make("foreach_pow", operands, *program);
  op.dtypes = {at::kFloat};
  return out_of_place(op, operands, [&](const Positions& rest) {
    return at::native::foreach_tensor_pow_scalar_kernel_slow(pick(self, rest), exponent);
  });
}
void pow_scalar_(at::TensorList self, const at::Scalar& exponent) {
  at::native::check_foreach_api_restrictions(self);
  const auto program = power_program(exponent);
  if (!program) return at::native::foreach_tensor_pow_scalar_kernel_slow_(self, exponent);
  const Operands operands{self};
  Operator op = make("foreach_pow", operands, *program);
  op.dtypes = {at::kFloat};
  in_place(op, operands, [&](const Positions& rest) {
    at::native::foreach_tensor_pow_scalar_kernel_slow_(pick(self, rest), exponent);
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace at::native;  // NOLINT(google-build-using-namespace): PyTorch's slow kernels, for the rest
  // addcmul, addcdiv
  m.impl("_foreach_addcmul.Scalar", pointwise_scalar<false, foreach_tensor_addcmul_scalarlist_slow>);
  m.impl("_foreach_addcmul_.Scalar", pointwise_scalar_<false, foreach_tensor_addcmul_scalarlist_slow_>);
  m.impl("_foreach_addcmul.ScalarList", pointwise_scalars<false, foreach_tensor_addcmul_scalarlist_slow>);
  m.impl("_foreach_addcmul_.ScalarList", pointwise_scalars_<false, foreach_tensor_addcmul_scalarlist_slow_>);
  m.impl("_foreach_addcmul.Tensor", pointwise_tensor<false, foreach_tensor_addcmul_scalarlist_slow>);
  m.impl("_foreach_addcmul_.Tensor", pointwise_tensor_<false, foreach_tensor_addcmul_scalarlist_slow_>);
  m.impl("_foreach_addcdiv.Scalar", pointwise_scalar<true, foreach_tensor_addcdiv_scalarlist_slow>);
  m.impl("_foreach_addcdiv_.Scalar", pointwise_scalar_<true, foreach_tensor_addcdiv_scalarlist_slow_>);
  m.impl("_foreach_addcdiv.ScalarList", pointwise_scalars<true, foreach_tensor_addcdiv_scalarlist_slow>);
  m.impl("_foreach_addcdiv_.ScalarList", pointwise_scalars_<true, foreach_tensor_addcdiv_scalarlist_slow_>);
  m.impl("_foreach_addcdiv.Tensor", pointwise_tensor<true, foreach_tensor_addcdiv_scalarlist_slow>);
  m.impl("_foreach_addcdiv_.Tensor", pointwise_tensor_<true, foreach_tensor_addcdiv_scalarlist_slow_>);
  // lerp
  m.impl("_foreach_lerp.Scalar", lerp_scalar);
  m.impl("_foreach_lerp_.Scalar", lerp_scalar_);
  m.impl("_foreach_lerp.ScalarList", lerp_scalars);
  m.impl("_foreach_lerp_.ScalarList", lerp_scalars_);
  m.impl("_foreach_lerp.List", lerp_list);
  m.impl("_foreach_lerp_.List", lerp_list_);
  // unary
  m.impl("_foreach_sqrt", unary_out<Op::Sqrt, foreach_tensor_sqrt_slow>);
  m.impl("_foreach_sqrt_", unary_<Op::Sqrt, foreach_tensor_sqrt_slow_>);
  m.impl("_foreach_neg", unary_out<Op::Neg, foreach_tensor_neg_slow>);
  m.impl("_foreach_neg_", unary_<Op::Neg, foreach_tensor_neg_slow_>);
  m.impl("_foreach_exp", unary_out<Op::Exp, foreach_tensor_exp_slow>);
  m.impl("_foreach_exp_", unary_<Op::Exp, foreach_tensor_exp_slow_>);
  m.impl("_foreach_abs", unary_out<Op::Abs, foreach_tensor_abs_slow>);
  m.impl("_foreach_abs_", unary_<Op::Abs, foreach_tensor_abs_slow_>);
  m.impl("_foreach_reciprocal", unary_out<Op::Reciprocal, foreach_tensor_reciprocal_slow>);
  m.impl("_foreach_reciprocal_", unary_<Op::Reciprocal, foreach_tensor_reciprocal_slow_>);
  // zero_, copy_, pow
  m.impl("_foreach_zero_", zero_);
  m.impl("_foreach_copy_", copy_);
  m.impl("_foreach_pow.ScalarAndTensor", scalar_pow);
  m.impl("_foreach_pow.Scalar", pow_scalar);
  m.impl("_foreach_pow_.Scalar", pow_scalar_);
}

}  // namespace npusim::bridge
