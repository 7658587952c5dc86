// The foreach operators add, sub, mul, div, maximum and minimum (with a scalar, a list, a scalar list or one tensor),
// each one multi-tensor kernel per call (foreach_launch.h), as PyTorch's CPU kernels compute them in opmath f32: add
// and sub with an alpha as the CPU's vectorised fmadd(other, alpha, self), maximum and minimum keeping NaN (and, for
// lists, other's zero on a tie of 0 and -0). What a kernel cannot walk runs per tensor through PyTorch's slow path.
#include <ATen/native/ForeachUtils.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_sub_native.h>
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

// ---- programs over the segment's tensors: 0 the result, 1 self, 2.. the others

std::function<void(Program&)> with_scalar(Op op) {
  return [op](Program& p) { p.store(p.op(op, p.load(1), p.scalar(0)), 0); };
}
std::function<void(Program&)> with_list(Op op) {
  return [op](Program& p) { p.store(p.op(op, p.load(1), p.load(2)), 0); };
}
std::function<void(Program&)> with_element(Op op) {
  return [op](Program& p) { p.store(p.op(op, p.load(1), p.load_element(2)), 0); };
}
// self + alpha * other (alpha scalar 0) as the CPU's fmadd(other, alpha, self); `element`: other is one element.
std::function<void(Program&)> scaled_add(bool element) {
  return [element](Program& p) {
    const int other = element ? p.load_element(2) : p.load(2);
    p.store(p.op(Op::MulAdd, other, p.scalar(0), p.load(1)), 0);
  };
}

// ---- add, sub, mul, div

template <Op Binary>
const char* kernel_name() {
  switch (Binary) {
    case Op::Add: return "foreach_add";
    case Op::Sub: return "foreach_sub";
    case Op::Mul: return "foreach_mul";
    case Op::Div: return "foreach_div";
    case Op::Maximum: return "foreach_maximum";
    case Op::Minimum: return "foreach_minimum";
    default: return "foreach";
  }
}

// .Scalar: self op scalar.
template <Op Binary, auto Slow, auto SlowInPlace>
void binary_scalar_(at::TensorList self, const at::Scalar& scalar) {
  if (scalar.isComplex()) return SlowInPlace(self, scalar);
  const Operands operands{self, {}, {}, [&](size_t) { return std::vector<float>{operand_value(scalar)}; }};
  in_place(make(kernel_name<Binary>(), operands, with_scalar(Binary), 1), operands,
           [&](const Positions& rest) { SlowInPlace(pick(self, rest), scalar); });
}
template <Op Binary, auto Slow, auto SlowInPlace>
std::vector<at::Tensor> binary_scalar(at::TensorList self, const at::Scalar& scalar) {
  if (scalar.isComplex()) return Slow(self, scalar);
  const Operands operands{self, {}, {}, [&](size_t) { return std::vector<float>{operand_value(scalar)}; }};
  return out_of_place(make(kernel_name<Binary>(), operands, with_scalar(Binary), 1), operands,
                      [&](const Positions& rest) { return Slow(pick(self, rest), scalar); });
}

// .ScalarList: self[i] op scalars[i].
template <Op Binary, auto Slow, auto SlowInPlace>
void binary_scalars_(at::TensorList self, at::ArrayRef<at::Scalar> scalars) {
  at::native::check_foreach_api_restrictions(self, scalars);
  if (any_complex(scalars)) return SlowInPlace(self, scalars);
  const Operands operands{self, {}, {}, [&](size_t i) { return std::vector<float>{operand_value(scalars[i])}; }};
  in_place(make(kernel_name<Binary>(), operands, with_scalar(Binary), 1), operands,
           [&](const Positions& rest) { SlowInPlace(pick(self, rest), pick(scalars, rest)); });
}
template <Op Binary, auto Slow, auto SlowInPlace>
std::vector<at::Tensor> binary_scalars(at::TensorList self, at::ArrayRef<at::Scalar> scalars) {
  at::native::check_foreach_api_restrictions(self, scalars);
  if (any_complex(scalars)) return Slow(self, scalars);
  const Operands operands{self, {}, {}, [&](size_t i) { return std::vector<float>{operand_value(scalars[i])}; }};
  return out_of_place(make(kernel_name<Binary>(), operands, with_scalar(Binary), 1), operands,
                      [&](const Positions& rest) { return Slow(pick(self, rest), pick(scalars, rest)); });
}

// .List without alpha: self[i] op other[i]. Maximum and minimum take other first, so that a tie (0 and -0) gives
// other's, as the CPU's vectorised max and min do.
template <Op Binary>
std::function<void(Program&)> list_program() {
  if constexpr (Binary == Op::Maximum || Binary == Op::Minimum)
    return [](Program& p) { p.store(p.op(Binary, p.load(2), p.load(1)), 0); };
  else
    return with_list(Binary);
}
template <Op Binary, auto Slow, auto SlowInPlace>
void binary_list_(at::TensorList self, at::TensorList other) {
  at::native::check_foreach_api_restrictions(self, other);
  const Operands operands{self, {other}};
  in_place(make(kernel_name<Binary>(), operands, list_program<Binary>()), operands,
           [&](const Positions& rest) { SlowInPlace(pick(self, rest), pick(other, rest)); });
}
template <Op Binary, auto Slow, auto SlowInPlace>
std::vector<at::Tensor> binary_list(at::TensorList self, at::TensorList other) {
  at::native::check_foreach_api_restrictions(self, other);
  const Operands operands{self, {other}};
  return out_of_place(make(kernel_name<Binary>(), operands, list_program<Binary>()), operands,
                      [&](const Positions& rest) { return Slow(pick(self, rest), pick(other, rest)); });
}

// .List with alpha (add, sub): self + alpha * other, a fused multiply-add unless alpha is 1 (exact either way).
template <bool Subtract>
Operator add_list_operator(const Operands& operands, const at::Scalar& alpha, bool element) {
  const char* name = Subtract ? "foreach_sub" : "foreach_add";
  const bool one = !alpha.isComplex() && alpha.toDouble() == 1.0;
  if (one)
    return make(name, operands,
                element ? with_element(Subtract ? Op::Sub : Op::Add) : with_list(Subtract ? Op::Sub : Op::Add));
  return make(name, operands, scaled_add(element), 1);
}
// The scalars of add_list_operator's programs: none for alpha 1, else alpha (negated for sub).
template <bool Subtract>
std::vector<float> alpha_scalars(const at::Scalar& alpha) {
  if (alpha.toDouble() == 1.0) return {};
  return {Subtract ? -checked_value(alpha) : checked_value(alpha)};
}

template <bool Subtract, auto Slow, auto SlowInPlace>
void add_list_(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {
  at::native::check_foreach_api_restrictions(self, other);
  if (alpha.isComplex()) return SlowInPlace(self, other, alpha);
  const Operands operands{self, {other}, {}, [&](size_t) { return alpha_scalars<Subtract>(alpha); }};
  in_place(add_list_operator<Subtract>(operands, alpha, false), operands,
           [&](const Positions& rest) { SlowInPlace(pick(self, rest), pick(other, rest), alpha); });
}
template <bool Subtract, auto Slow, auto SlowInPlace>
std::vector<at::Tensor> add_list(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {
  at::native::check_foreach_api_restrictions(self, other);
  if (alpha.isComplex()) return Slow(self, other, alpha);
  const Operands operands{self, {other}, {}, [&](size_t) { return alpha_scalars<Subtract>(alpha); }};
  return out_of_place(add_list_operator<Subtract>(operands, alpha, false), operands,
                      [&](const Positions& rest) { return Slow(pick(self, rest), pick(other, rest), alpha); });
}

// .Tensor: one tensor for every self[i]. A one-element tensor on the device is loaded once per tile; a 0-dim CPU
// tensor is a scalar, read here (as the CPU's kernels read a CPU scalar operand: in opmath f32).
bool host_scalar(const at::Tensor& other) { return other.is_cpu() && other.dim() == 0 && !other.is_complex(); }

Operands tensor_operands(at::TensorList self, const at::Tensor& other, std::vector<float> scalars) {
  Operands operands{self};
  if (!host_scalar(other)) operands.shared = {other};
  operands.scalars = [scalars = std::move(scalars)](size_t) { return scalars; };
  return operands;
}

Operator add_tensor_operator(const Operands& operands, const at::Tensor& other, const at::Scalar& alpha) {
  const bool one = alpha.toDouble() == 1.0;
  if (!host_scalar(other)) return add_list_operator<false>(operands, alpha, /*element=*/true);
  if (one) return make("foreach_add", operands, with_scalar(Op::Add), 1);
  return make(
      "foreach_add", operands, [](Program& p) { p.store(p.op(Op::MulAdd, p.scalar(0), p.scalar(1), p.load(1)), 0); },
      2);
}
std::vector<float> add_tensor_scalars(const at::Tensor& other, const at::Scalar& alpha) {
  if (!host_scalar(other))
    return alpha.toDouble() == 1.0 ? std::vector<float>{} : std::vector<float>{checked_value(alpha)};
  const float value = static_cast<float>(other.item<double>());
  return alpha.toDouble() == 1.0 ? std::vector<float>{value} : std::vector<float>{value, checked_value(alpha)};
}

void add_tensor_(at::TensorList self, const at::Tensor& other, const at::Scalar& alpha) {
  at::native::check_foreach_api_restrictions(self);
  if (alpha.isComplex() || other.is_complex())
    return at::native::foreach_tensor_add_tensor_kernel_slow_(self, other, alpha);
  const Operands operands = tensor_operands(self, other, add_tensor_scalars(other, alpha));
  in_place(add_tensor_operator(operands, other, alpha), operands, [&](const Positions& rest) {
    at::native::foreach_tensor_add_tensor_kernel_slow_(pick(self, rest), other, alpha);
  });
}
std::vector<at::Tensor> add_tensor(at::TensorList self, const at::Tensor& other, const at::Scalar& alpha) {
  at::native::check_foreach_api_restrictions(self);
  if (alpha.isComplex() || other.is_complex())
    return at::native::foreach_tensor_add_tensor_kernel_slow(self, other, alpha);
  const Operands operands = tensor_operands(self, other, add_tensor_scalars(other, alpha));
  return out_of_place(add_tensor_operator(operands, other, alpha), operands, [&](const Positions& rest) {
    return at::native::foreach_tensor_add_tensor_kernel_slow(pick(self, rest), other, alpha);
  });
}

template <Op Binary>
Operator tensor_operator(const Operands& operands, const at::Tensor& other) {
  return host_scalar(other) ? make(kernel_name<Binary>(), operands, with_scalar(Binary), 1)
                            : make(kernel_name<Binary>(), operands, with_element(Binary));
}
std::vector<float> tensor_scalars(const at::Tensor& other) {
  return host_scalar(other) ? std::vector<float>{static_cast<float>(other.item<double>())} : std::vector<float>{};
}
template <Op Binary, auto Slow, auto SlowInPlace>
void binary_tensor_(at::TensorList self, const at::Tensor& other) {
  at::native::check_foreach_api_restrictions(self);
  if (other.is_complex()) return SlowInPlace(self, other);
  const Operands operands = tensor_operands(self, other, tensor_scalars(other));
  in_place(tensor_operator<Binary>(operands, other), operands,
           [&](const Positions& rest) { SlowInPlace(pick(self, rest), other); });
}
template <Op Binary, auto Slow, auto SlowInPlace>
std::vector<at::Tensor> binary_tensor(at::TensorList self, const at::Tensor& other) {
  at::native::check_foreach_api_restrictions(self);
  if (other.is_complex()) return Slow(self, other);
  const Operands operands = tensor_operands(self, other, tensor_scalars(other));
  return out_of_place(tensor_operator<Binary>(operands, other), operands,
                      [&](const Positions& rest) { return Slow(pick(self, rest), other); });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace at::native;  // NOLINT(google-build-using-namespace): PyTorch's slow kernels, for the rest
  // add, sub, mul, div
  m.impl("_foreach_add.Scalar",
         binary_scalar<Op::Add, foreach_tensor_add_scalar_kernel_slow, foreach_tensor_add_scalar_kernel_slow_>);
  m.impl("_foreach_add_.Scalar",
         binary_scalar_<Op::Add, foreach_tensor_add_scalar_kernel_slow, foreach_tensor_add_scalar_kernel_slow_>);
  m.impl(
      "_foreach_add.ScalarList",
      binary_scalars<Op::Add, foreach_tensor_add_scalarlist_kernel_slow, foreach_tensor_add_scalarlist_kernel_slow_>);
  m.impl(
      "_foreach_add_.ScalarList",
      binary_scalars_<Op::Add, foreach_tensor_add_scalarlist_kernel_slow, foreach_tensor_add_scalarlist_kernel_slow_>);
  m.impl("_foreach_add.List",
         add_list<false, foreach_tensor_add_list_kernel_slow, foreach_tensor_add_list_kernel_slow_>);
  m.impl("_foreach_add_.List",
         add_list_<false, foreach_tensor_add_list_kernel_slow, foreach_tensor_add_list_kernel_slow_>);
  m.impl("_foreach_add.Tensor", add_tensor);
  m.impl("_foreach_add_.Tensor", add_tensor_);
  m.impl("_foreach_sub.Scalar",
         binary_scalar<Op::Sub, foreach_tensor_sub_scalar_kernel_slow, foreach_tensor_sub_scalar_kernel_slow_>);
  m.impl("_foreach_sub_.Scalar",
         binary_scalar_<Op::Sub, foreach_tensor_sub_scalar_kernel_slow, foreach_tensor_sub_scalar_kernel_slow_>);
  m.impl(
      "_foreach_sub.ScalarList",
      binary_scalars<Op::Sub, foreach_tensor_sub_scalarlist_kernel_slow, foreach_tensor_sub_scalarlist_kernel_slow_>);
  m.impl(
      "_foreach_sub_.ScalarList",
      binary_scalars_<Op::Sub, foreach_tensor_sub_scalarlist_kernel_slow, foreach_tensor_sub_scalarlist_kernel_slow_>);
  m.impl("_foreach_sub.List",
         add_list<true, foreach_tensor_sub_list_kernel_slow, foreach_tensor_sub_list_kernel_slow_>);
  m.impl("_foreach_sub_.List",
         add_list_<true, foreach_tensor_sub_list_kernel_slow, foreach_tensor_sub_list_kernel_slow_>);
  m.impl("_foreach_mul.Scalar",
         binary_scalar<Op::Mul, foreach_tensor_mul_scalar_kernel_slow, foreach_tensor_mul_scalar_kernel_slow_>);
  m.impl("_foreach_mul_.Scalar",
         binary_scalar_<Op::Mul, foreach_tensor_mul_scalar_kernel_slow, foreach_tensor_mul_scalar_kernel_slow_>);
  m.impl(
      "_foreach_mul.ScalarList",
      binary_scalars<Op::Mul, foreach_tensor_mul_scalarlist_kernel_slow, foreach_tensor_mul_scalarlist_kernel_slow_>);
  m.impl(
      "_foreach_mul_.ScalarList",
      binary_scalars_<Op::Mul, foreach_tensor_mul_scalarlist_kernel_slow, foreach_tensor_mul_scalarlist_kernel_slow_>);
  m.impl("_foreach_mul.List",
         binary_list<Op::Mul, foreach_tensor_mul_list_kernel_slow, foreach_tensor_mul_list_kernel_slow_>);
  m.impl("_foreach_mul_.List",
         binary_list_<Op::Mul, foreach_tensor_mul_list_kernel_slow, foreach_tensor_mul_list_kernel_slow_>);
  m.impl("_foreach_mul.Tensor",
         binary_tensor<Op::Mul, foreach_tensor_mul_tensor_kernel_slow, foreach_tensor_mul_tensor_kernel_slow_>);
  m.impl("_foreach_mul_.Tensor",
         binary_tensor_<Op::Mul, foreach_tensor_mul_tensor_kernel_slow, foreach_tensor_mul_tensor_kernel_slow_>);
  m.impl("_foreach_div.Scalar",
         binary_scalar<Op::Div, foreach_tensor_div_scalar_kernel_slow, foreach_tensor_div_scalar_kernel_slow_>);
  m.impl("_foreach_div_.Scalar",
         binary_scalar_<Op::Div, foreach_tensor_div_scalar_kernel_slow, foreach_tensor_div_scalar_kernel_slow_>);
  m.impl(
      "_foreach_div.ScalarList",
      binary_scalars<Op::Div, foreach_tensor_div_scalarlist_kernel_slow, foreach_tensor_div_scalarlist_kernel_slow_>);
  m.impl(
      "_foreach_div_.ScalarList",
      binary_scalars_<Op::Div, foreach_tensor_div_scalarlist_kernel_slow, foreach_tensor_div_scalarlist_kernel_slow_>);
  m.impl("_foreach_div.List",
         binary_list<Op::Div, foreach_tensor_div_list_kernel_slow, foreach_tensor_div_list_kernel_slow_>);
  m.impl("_foreach_div_.List",
         binary_list_<Op::Div, foreach_tensor_div_list_kernel_slow, foreach_tensor_div_list_kernel_slow_>);
  m.impl("_foreach_div.Tensor",
         binary_tensor<Op::Div, foreach_tensor_div_tensor_kernel_slow, foreach_tensor_div_tensor_kernel_slow_>);
  m.impl("_foreach_div_.Tensor",
         binary_tensor_<Op::Div, foreach_tensor_div_tensor_kernel_slow, foreach_tensor_div_tensor_kernel_slow_>);
  // maximum, minimum (and clamp_min, clamp_max with scalars, which PyTorch implements by the same kernels)
  m.impl("_foreach_maximum.Scalar", binary_scalar<Op::Maximum, foreach_tensor_clamp_min_scalar_kernel_slow,
                                                  foreach_tensor_clamp_min_scalar_kernel_slow_>);
  m.impl("_foreach_maximum_.Scalar", binary_scalar_<Op::Maximum, foreach_tensor_clamp_min_scalar_kernel_slow,
                                                    foreach_tensor_clamp_min_scalar_kernel_slow_>);
  m.impl("_foreach_maximum.ScalarList", binary_scalars<Op::Maximum, foreach_tensor_clamp_min_scalarlist_kernel_slow,
                                                       foreach_tensor_clamp_min_scalarlist_kernel_slow_>);
  m.impl("_foreach_maximum_.ScalarList", binary_scalars_<Op::Maximum, foreach_tensor_clamp_min_scalarlist_kernel_slow,
                                                         foreach_tensor_clamp_min_scalarlist_kernel_slow_>);
  m.impl(
      "_foreach_maximum.List",
      binary_list<Op::Maximum, foreach_tensor_clamp_min_list_kernel_slow, foreach_tensor_clamp_min_list_kernel_slow_>);
  m.impl(
      "_foreach_maximum_.List",
      binary_list_<Op::Maximum, foreach_tensor_clamp_min_list_kernel_slow, foreach_tensor_clamp_min_list_kernel_slow_>);
  m.impl("_foreach_minimum.Scalar", binary_scalar<Op::Minimum, foreach_tensor_clamp_max_scalar_kernel_slow,
                                                  foreach_tensor_clamp_max_scalar_kernel_slow_>);
  m.impl("_foreach_minimum_.Scalar", binary_scalar_<Op::Minimum, foreach_tensor_clamp_max_scalar_kernel_slow,
                                                    foreach_tensor_clamp_max_scalar_kernel_slow_>);
  m.impl("_foreach_minimum.ScalarList", binary_scalars<Op::Minimum, foreach_tensor_clamp_max_scalarlist_kernel_slow,
                                                       foreach_tensor_clamp_max_scalarlist_kernel_slow_>);
  m.impl("_foreach_minimum_.ScalarList", binary_scalars_<Op::Minimum, foreach_tensor_clamp_max_scalarlist_kernel_slow,
                                                         foreach_tensor_clamp_max_scalarlist_kernel_slow_>);
  m.impl(
      "_foreach_minimum.List",
      binary_list<Op::Minimum, foreach_tensor_clamp_max_list_kernel_slow, foreach_tensor_clamp_max_list_kernel_slow_>);
  m.impl(
      "_foreach_minimum_.List",
      binary_list_<Op::Minimum, foreach_tensor_clamp_max_list_kernel_slow, foreach_tensor_clamp_max_list_kernel_slow_>);
}

}  // namespace npusim::bridge
