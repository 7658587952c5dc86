// The foreach operators of torch.optim's foreach=True steps (Adam, AdamW, SGD, RMSprop, Adagrad): each is one
// multi-tensor kernel for the whole list per device and dtype (foreach_launch.h), computing as PyTorch's CPU kernels
// do in opmath f32, rounded once to the tensor's type: add with an alpha, addcmul and lerp as the CPU's vectorised
// fused multiply-adds, addcdiv as self + (value * t1) / t2, maximum and minimum keeping NaN. Tensors a kernel cannot
// walk (other devices, dtypes, strides or overlaps) run per tensor through PyTorch's own slow path.
#include <ATen/native/ForeachUtils.h>
#include <ATen/ops/_foreach_abs_native.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_exp_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_zero_native.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <cmath>
#include <functional>
#include <optional>
#include <utility>

#include "foreach_launch.h"

namespace npusim::bridge {
namespace {

using foreach::Operator;
using foreach::Program;
using foreach::Segment;
using Op = emitter::FusedOpcode;
using Positions = std::vector<size_t>;

// ---- lists and segments

template <typename T>
std::vector<T> pick(at::ArrayRef<T> list, const Positions& positions) {
  std::vector<T> picked;
  for (const size_t i : positions) picked.push_back(list[i]);
  return picked;
}

// A foreach call's operands: per segment i, tensors self[i] and others[k][i], then `shared` (the same tensor in every
// segment: a .Tensor overload's one-element operand), and its scalars.
struct Operands {
  at::TensorList self;
  std::vector<at::TensorList> others = {};
  std::vector<at::Tensor> shared = {};
  std::function<std::vector<float>(size_t)> scalars = [](size_t) { return std::vector<float>{}; };
};

// Segments of the written tensor (self in place, else a new result) then self, the others and the shared ones.
std::vector<Segment> segments_of(const Operands& operands, const std::vector<at::Tensor>& written) {
  std::vector<Segment> segments;
  for (size_t i = 0; i < operands.self.size(); ++i) {
    Segment segment{{written[i], operands.self[i]}, operands.scalars(i)};
    for (const at::TensorList& list : operands.others) segment.tensors.push_back(list[i]);
    for (const at::Tensor& tensor : operands.shared) segment.tensors.push_back(tensor);
    segments.push_back(std::move(segment));
  }
  return segments;
}

// The operator's tensors: the written one, self, the others, then the shared ones (listed as one element each).
Operator make(std::string name, const Operands& operands, std::function<void(Program&)> program, int scalars = 0) {
  Operator op{std::move(name), 2 + static_cast<int>(operands.others.size() + operands.shared.size()), scalars,
              std::move(program)};
  for (size_t k = 0; k < operands.shared.size(); ++k)
    op.elements.push_back(2 + static_cast<int>(operands.others.size() + k));
  return op;
}

// In place: the kernel over what it can walk, `slow(positions)` (PyTorch's per-tensor kernel) over the rest.
void in_place(const Operator& op, const Operands& operands, const std::function<void(const Positions&)>& slow) {
  const std::vector<at::Tensor> self(operands.self.begin(), operands.self.end());
  const Positions rest = foreach::run(op, segments_of(operands, self));
  if (!rest.empty()) slow(rest);
}

// Out of place, into results shaped and strided like self.
std::vector<at::Tensor> out_of_place(const Operator& op, const Operands& operands,
                                     const std::function<std::vector<at::Tensor>(const Positions&)>& slow) {
  std::vector<at::Tensor> results;
  for (const at::Tensor& tensor : operands.self)
    results.push_back(tensor.defined() && tensor.is_privateuseone() ? at::empty_like(tensor) : at::Tensor());
  const Positions rest = foreach::run(op, segments_of(operands, results));
  if (!rest.empty()) {
    const std::vector<at::Tensor> computed = slow(rest);
    for (size_t k = 0; k < rest.size(); ++k) results[rest[k]] = computed[k];
  }
  return results;
}

// ---- scalars as the CPU kernels take them (opmath f32)

// A wrapped scalar operand (self + 2, self * lr): cast, as the kernels read a CPU scalar.
float operand_value(const at::Scalar& scalar) { return static_cast<float>(scalar.toDouble()); }
// A value, alpha or weight: converted with PyTorch's overflow check, as value.to<float>() does.
float checked_value(const at::Scalar& scalar) { return scalar.to<float>(); }

bool any_complex(at::ArrayRef<at::Scalar> scalars) {
  for (const at::Scalar& scalar : scalars)
    if (scalar.isComplex()) return true;
  return false;
}

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
std::function<void(Program&)> unary(Op op) {
  return [op](Program& p) { p.store(p.op(op, p.load(1)), 0); };
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
