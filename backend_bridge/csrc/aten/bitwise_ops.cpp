// Native bitwise logic of bool, uint8 and int8 tensors (attention masks: `a & b`, `a | b`, `a ^ b`, `~a`), with
// broadcasting and scalars, as 1-byte vector and/or/xor kernels, and of int64 and int32 results (generation's
// `unfinished_sequences & ~done`, a long and a bool) as integer kernels of the operands converted; bitwise_not natively
// for bool, int64 and int32; logical_and, _or, _xor and _not of any dtype as these on the operands' truth values; any
// and all of bool masks as the max and min of the mask in float32, of numbers (complex64 among them) as those of
// `x != 0`. Other types take the CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/bitwise_not.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/library.h>

#include "bridge.h"
#include "integer_pointwise.h"
#include "pointwise_output.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

using emitter::ElementwiseOp;
using emitter::FusedOpcode;

bool is_byte_type(at::ScalarType type) { return type == at::kBool || type == at::kByte || type == at::kChar; }

// An operand of the same 1-byte type on the output's device, or a 0-dim scalar (converted to that type).
bool byte_operand(const at::Tensor& operand, const at::Tensor& out) {
  if (operand.dim() == 0 && (operand.is_cpu() || operand.device() == out.device()))
    return operand.scalar_type() == out.scalar_type() || at::isIntegralType(operand.scalar_type(), true);
  return operand.device() == out.device() && operand.scalar_type() == out.scalar_type();
}

template <ElementwiseOp Op>
constexpr const char* kName = Op == ElementwiseOp::AndB8  ? "aten::bitwise_and"
                              : Op == ElementwiseOp::OrB8 ? "aten::bitwise_or"
                                                          : "aten::bitwise_xor";

// An integer or bool operand on out's device or a 0-dim scalar, in out's (int64 or int32) type.
std::optional<at::Tensor> wide_operand(const at::Tensor& operand, const at::Tensor& out) {
  const bool usable = operand.device() == out.device() || (operand.dim() == 0 && operand.is_cpu());
  if (!usable || !at::isIntegralType(operand.scalar_type(), /*includeBool=*/true)) return std::nullopt;
  return operand.to(out.device(), out.scalar_type());
}

template <ElementwiseOp Op>
at::Tensor& logic_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (is_byte_type(out.scalar_type()) && byte_operand(self, out) && byte_operand(other, out) &&
      launch_binary(Op, self, other, out))
    return out;
  if (out.scalar_type() == at::kLong || out.scalar_type() == at::kInt) {
    const auto a = wide_operand(self, out), b = wide_operand(other, out);
    constexpr FusedOpcode opcode = Op == ElementwiseOp::AndB8  ? FusedOpcode::And
                                   : Op == ElementwiseOp::OrB8 ? FusedOpcode::Or
                                                               : FusedOpcode::Xor;
    if (a && b && launch_integer_binary(opcode, *a, *b, out)) return out;
  }
  torch::jit::Stack stack{self, other, out};
  call_cpu_fallback(kName<Op>, "Tensor_out", stack);
  return out;
}
template <ElementwiseOp Op>
at::Tensor logic(const at::Tensor& self, const at::Tensor& other) {
  const at::Tensor& on_device = self.is_cpu() ? other : self;
  at::Tensor out = at::empty({0}, on_device.options().dtype(at::result_type(self, other)));
  return logic_out<Op>(self, other, out);
}
template <ElementwiseOp Op>
at::Tensor& logic_(at::Tensor& self, const at::Tensor& other) {
  return logic_out<Op>(self, other, self);
}

// logical_and, _or and _xor: the operands as bools (nonzero: a native comparison, unless they are bools), combined by
// the bitwise kernel, converted into out's dtype.
at::Tensor as_bool(const at::Tensor& t) { return t.scalar_type() == at::kBool ? t : at::ne(t, 0); }
template <ElementwiseOp Op>
at::Tensor& npusim_logical_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const auto usable = [&](const at::Tensor& t) { return t.device() == out.device() || (t.dim() == 0 && t.is_cpu()); };
  if (self.device() == out.device() && usable(other)) {
    const at::Tensor result = logic<Op>(as_bool(self), as_bool(other));
    resize_to_broadcast(out, {self, other});
    return out.copy_(result);
  }
  torch::jit::Stack stack{self, other, out};
  call_cpu_fallback(Op == ElementwiseOp::AndB8  ? "aten::logical_and"
                    : Op == ElementwiseOp::OrB8 ? "aten::logical_or"
                                                : "aten::logical_xor",
                    "out", stack);
  return out;
}
template <ElementwiseOp Op>
at::Tensor npusim_logical(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));
  return npusim_logical_out<Op>(self, other, out);
}
template <ElementwiseOp Op>
at::Tensor& npusim_logical_(at::Tensor& self, const at::Tensor& other) {
  return npusim_logical_out<Op>(self, other, self);
}

at::Tensor& not_out(const at::Tensor& self, at::Tensor& out) {
  if (self.scalar_type() == at::kBool && out.scalar_type() == at::kBool && self.device() == out.device()) {
    resize_to_broadcast(out, {self});
    if (out.numel() == 0) return out;
    const emitter::ElementwiseSpec spec{
        ElementwiseOp::NotBool, 1, out.sizes().vec(), {out.strides().vec(), self.strides().vec()}};
    const uint64_t addresses[] = {device_address(out), device_address(self)};
    if (!may_share_memory(out, self) || out.is_same(self))
      if (launched_natively([&] { launch_elementwise(out.device().index(), runtime_device(out), spec, addresses); }))
        return out;
  }
  if ((out.scalar_type() == at::kLong || out.scalar_type() == at::kInt) && self.scalar_type() == out.scalar_type() &&
      self.device() == out.device() &&
      launch_integer_binary(FusedOpcode::Xor, self, at::scalar_tensor(-1, out.options()), out))  // ~x is x ^ -1
    return out;
  torch::jit::Stack stack{self, out};
  call_cpu_fallback("aten::bitwise_not", "out", stack);
  return out;
}
at::Tensor bitwise_not(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options());
  return not_out(self, out);
}
at::Tensor& bitwise_not_(at::Tensor& self) { return not_out(self, self); }

// logical_not: a bool's bitwise not, any other's == 0, converted into out's dtype.
at::Tensor& npusim_logical_not_out(const at::Tensor& self, at::Tensor& out) {
  if (self.device() == out.device()) {
    const at::Tensor result = self.scalar_type() == at::kBool ? at::bitwise_not(self) : at::eq(self, 0);
    resize_to_broadcast(out, {self});
    return out.copy_(result);
  }
  torch::jit::Stack stack{self, out};
  call_cpu_fallback("aten::logical_not", "out", stack);
  return out;
}
at::Tensor npusim_logical_not(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));
  return npusim_logical_not_out(self, out);
}
at::Tensor& npusim_logical_not_(at::Tensor& self) { return npusim_logical_not_out(self, self); }

// any (IsAny) or all of a bool mask, over everything or one dimension: whether the mask's max (min) as float32 is 1.
template <bool IsAny>
at::Tensor& any_or_all_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  if (self.dim() == 0 && self.device() == out.device()) {  // one element (dimension 0 or -1): a vector of one
    if (dim) at::maybe_wrap_dim(*dim, int64_t{0});
    at::Tensor result = at::empty({0}, out.options());
    any_or_all_out<IsAny>(self.reshape({1}), std::nullopt, false, result);
    at::native::resize_output(out, {});
    return out.copy_(result);
  }
  const bool numbers = self.scalar_type() == at::kComplexFloat ||
                       (self.scalar_type() != at::kBool && element_type(self.scalar_type()) && !self.is_complex());
  if (numbers && self.device() == out.device() && out.scalar_type() == at::kBool)  // of which are not zero
    return any_or_all_out<IsAny>(at::ne(self, 0), dim, keepdim, out);
  if (self.scalar_type() == at::kBool && out.scalar_type() == at::kBool && self.device() == out.device() &&
      self.numel() > 0 && self.dim() > 0) {
    const at::Tensor values = self.to(at::kFloat);
    const std::vector<int64_t> dims = dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{};
    const at::Tensor extreme = IsAny ? at::amax(values, dims, dim && keepdim) : at::amin(values, dims, dim && keepdim);
    const at::Tensor result = at::gt(extreme, 0.5);
    at::native::resize_output(out, result.sizes());
    return out.copy_(result);
  }
  if (self.scalar_type() == at::kBool && out.scalar_type() == at::kBool && self.device() == out.device() &&
      self.numel() == 0 && self.dim() > 0) {  // nothing to look at: any is false, all is true
    std::vector<int64_t> shape;
    if (dim) {
      shape = self.sizes().vec();
      const int64_t reduced = at::maybe_wrap_dim(*dim, self.dim());
      if (keepdim)
        shape[reduced] = 1;
      else
        shape.erase(shape.begin() + reduced);
    }
    at::native::resize_output(out, shape);
    return out.fill_(!IsAny);
  }
  const char* name = IsAny ? "aten::any" : "aten::all";
  if (dim) {
    torch::jit::Stack stack{self, *dim, keepdim, out};
    call_cpu_fallback(name, "out", stack);
  } else {
    torch::jit::Stack stack{self, out};
    call_cpu_fallback(name, "all_out", stack);
  }
  return out;
}
template <bool IsAny>
at::Tensor any_or_all(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));
  return any_or_all_out<IsAny>(self, std::nullopt, false, out);
}
template <bool IsAny>
at::Tensor& any_or_all_everything_out(const at::Tensor& self, at::Tensor& out) {
  return any_or_all_out<IsAny>(self, std::nullopt, false, out);
}
template <bool IsAny>
at::Tensor any_or_all_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));
  return any_or_all_out<IsAny>(self, dim, keepdim, out);
}
template <bool IsAny>
at::Tensor& any_or_all_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return any_or_all_out<IsAny>(self, dim, keepdim, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("any", any_or_all<true>);
  m.impl("any.all_out", any_or_all_everything_out<true>);
  m.impl("any.dim", any_or_all_dim<true>);
  m.impl("any.out", any_or_all_dim_out<true>);
  m.impl("all", any_or_all<false>);
  m.impl("all.all_out", any_or_all_everything_out<false>);
  m.impl("all.dim", any_or_all_dim<false>);
  m.impl("all.out", any_or_all_dim_out<false>);
#define NPUSIM_LOGIC(name, Op)                        \
  m.impl(name ".Tensor", logic<ElementwiseOp::Op>);   \
  m.impl(name "_.Tensor", logic_<ElementwiseOp::Op>); \
  m.impl(name ".Tensor_out", logic_out<ElementwiseOp::Op>);
  NPUSIM_LOGIC("bitwise_and", AndB8)
  NPUSIM_LOGIC("bitwise_or", OrB8)
  NPUSIM_LOGIC("bitwise_xor", XorB8)
#undef NPUSIM_LOGIC
#define NPUSIM_LOGICAL(name, Op)                        \
  m.impl(name, npusim_logical<ElementwiseOp::Op>);      \
  m.impl(name "_", npusim_logical_<ElementwiseOp::Op>); \
  m.impl(name ".out", npusim_logical_out<ElementwiseOp::Op>);
  NPUSIM_LOGICAL("logical_and", AndB8)
  NPUSIM_LOGICAL("logical_or", OrB8)
  NPUSIM_LOGICAL("logical_xor", XorB8)
#undef NPUSIM_LOGICAL
  m.impl("logical_not", npusim_logical_not);
  m.impl("logical_not_", npusim_logical_not_);
  m.impl("logical_not.out", npusim_logical_not_out);
  m.impl("bitwise_not", bitwise_not);
  m.impl("bitwise_not_", bitwise_not_);
  m.impl("bitwise_not.out", not_out);
}

}  // namespace npusim::bridge
