// Native comparisons (eq, ne, lt, le, gt, ge) of float32, int64 and int32 tensors and scalars, with broadcasting,
// into bool tensors (eq and ne of complex64 ones too, complex_functions.h), and clamp, clamp_min and clamp_max of
// float32, float16 and bfloat16 tensors composed from maximum and minimum. Other dtypes take the CPU fallback.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/library.h>

#include "bridge.h"
#include "complex_functions.h"
#include "integer_pointwise.h"
#include "pointwise_output.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

using emitter::ElementwiseOp;

// The type a comparison runs in on the device: PyTorch's promoted type, int64 and int32 as they are, bool and bytes
// as int32, and the float types as float32 (operands are first rounded to the promoted type, as PyTorch compares them,
// then widened, which is exact). Operands are tensors on the output's device or CPU scalars.
std::optional<at::ScalarType> comparison_type(const at::Tensor& self, const at::Tensor& other, const at::Tensor& out) {
  const auto usable = [&](const at::Tensor& t) {
    return (t.device() == out.device() && element_type(t.scalar_type())) ||
           (t.dim() == 0 && t.is_cpu() && !t.is_complex());
  };
  if (!usable(self) || !usable(other)) return std::nullopt;
  const at::ScalarType promoted = at::result_type(self, other);
  if (promoted == at::kLong || promoted == at::kInt) return promoted;
  if (promoted == at::kBool || promoted == at::kByte || promoted == at::kChar) return at::kInt;
  if (is_float_kind(promoted)) return at::kFloat;
  return std::nullopt;
}

// The integer form of a float32 comparison.
ElementwiseOp integer_form(ElementwiseOp op, at::ScalarType type) {
  const bool wide = type == at::kLong;
  switch (op) {
    case ElementwiseOp::EqF32: return wide ? ElementwiseOp::EqI64 : ElementwiseOp::EqI32;
    case ElementwiseOp::NeF32: return wide ? ElementwiseOp::NeI64 : ElementwiseOp::NeI32;
    case ElementwiseOp::LtF32: return wide ? ElementwiseOp::LtI64 : ElementwiseOp::LtI32;
    case ElementwiseOp::LeF32: return wide ? ElementwiseOp::LeI64 : ElementwiseOp::LeI32;
    case ElementwiseOp::GtF32: return wide ? ElementwiseOp::GtI64 : ElementwiseOp::GtI32;
    default: return wide ? ElementwiseOp::GeI64 : ElementwiseOp::GeI32;
  }
}

// `other_argument` is what the CPU fallback gets for `other`: the tensor, or the Scalar of the Scalar overloads.
template <ElementwiseOp Op>
at::Tensor& compare_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out, const char* name,
                        const char* overload, const c10::IValue& other_argument) {
  const auto type = comparison_type(self, other, out);
  const bool on_device = self.device() == out.device() || other.device() == out.device();
  if (out.scalar_type() != at::kBool && type && on_device) {
    // A result of another dtype (x.eq_(y) writes 1 and 0 into x's floats): the bool result, converted into it.
    at::Tensor truth = at::empty({0}, out.options().dtype(at::kBool));
    compare_out<Op>(self, other, truth, name, overload, other_argument);
    TORCH_CHECK(!out.is_same(self) || truth.sizes() == out.sizes(), "output with shape ", out.sizes(),
                " doesn't match the broadcast shape ", truth.sizes());
    at::native::resize_output(out, truth.sizes());
    return out.copy_(truth);
  }
  if (out.scalar_type() == at::kBool && type && on_device) {
    const std::vector<int64_t> shape = resize_to_broadcast(out, {self, other});
    if (out.numel() == 0) return out;
    const at::ScalarType promoted = at::result_type(self, other);
    const at::Tensor a = self.to(out.device(), promoted).to(*type).expand(shape);
    const at::Tensor b = other.to(out.device(), promoted).to(*type).expand(shape);
    emitter::ElementwiseSpec spec{*type == at::kFloat ? Op : integer_form(Op, *type),
                                  1,
                                  out.sizes().vec(),
                                  {out.strides().vec(), a.strides().vec(), b.strides().vec()}};
    const uint64_t addresses[] = {device_address(out), device_address(a), device_address(b)};
    if (!may_share_memory(out, a) && !may_share_memory(out, b) &&
        launched_natively([&] { launch_elementwise(out.device().index(), runtime_device(out), spec, addresses); }))
      return out;
  }
  if ((Op == ElementwiseOp::EqF32 || Op == ElementwiseOp::NeF32) && on_device &&
      complex_equality(Op == ElementwiseOp::EqF32, self, other, out))
    return out;
  torch::jit::Stack stack{self, other_argument, out};
  call_cpu_fallback(name, overload, stack);
  return out;
}

// Each comparison's Tensor and Scalar forms, functional and out=.
#define NPUSIM_COMPARISON(name, Op)                                                                 \
  at::Tensor& name##_tensor_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) { \
    return compare_out<ElementwiseOp::Op>(self, other, out, "aten::" #name, "Tensor_out", other);   \
  }                                                                                                 \
  at::Tensor name##_tensor(const at::Tensor& self, const at::Tensor& other) {                       \
    at::Tensor out = at::empty({0}, (self.is_cpu() ? other : self).options().dtype(at::kBool));     \
    return name##_tensor_out(self, other, out);                                                     \
  }                                                                                                 \
  at::Tensor& name##_scalar_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) { \
    /* a wrapped number, so that type promotion treats it as the Python scalar it is */             \
    const at::Tensor wrapped = at::native::wrapped_scalar_tensor(other);                            \
    return compare_out<ElementwiseOp::Op>(self, wrapped, out, "aten::" #name, "Scalar_out", other); \
  }                                                                                                 \
  at::Tensor name##_scalar(const at::Tensor& self, const at::Scalar& other) {                       \
    at::Tensor out = at::empty({0}, self.options().dtype(at::kBool));                               \
    return name##_scalar_out(self, other, out);                                                     \
  }
NPUSIM_COMPARISON(eq, EqF32)
NPUSIM_COMPARISON(ne, NeF32)
NPUSIM_COMPARISON(lt, LtF32)
NPUSIM_COMPARISON(le, LeF32)
NPUSIM_COMPARISON(gt, GtF32)
NPUSIM_COMPARISON(ge, GeF32)
#undef NPUSIM_COMPARISON

// clamp(self, min, max) = minimum(maximum(self, min), max), NaN propagating like PyTorch's clamp; float32, float16
// and bfloat16 (the bounds compared in float32, as the CPU does).
at::Tensor& npusim_clamp_out(const at::Tensor& self, const std::optional<at::Scalar>& min,
                             const std::optional<at::Scalar>& max, at::Tensor& out) {
  if (is_float_kind(self.scalar_type()) && out.scalar_type() == self.scalar_type() && self.device() == out.device() &&
      (min || max)) {
    const auto bound = [&](const at::Scalar& value) { return at::scalar_tensor(value, at::kFloat); };
    at::Tensor result = self;
    if (min) result = at::maximum(result, bound(*min));
    if (max) result = at::minimum(result, bound(*max));
    resize_to_broadcast(out, {self});
    return out.copy_(result);
  }
  if (launch_integer_clamp(self, min, max, out)) return out;
  torch::jit::Stack stack{self, min, max, out};
  call_cpu_fallback("aten::clamp", "out", stack);
  return out;
}
at::Tensor npusim_clamp(const at::Tensor& self, const std::optional<at::Scalar>& min,
                        const std::optional<at::Scalar>& max) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_clamp_out(self, min, max, out);
}
at::Tensor& npusim_clamp_(at::Tensor& self, const std::optional<at::Scalar>& min,
                          const std::optional<at::Scalar>& max) {
  return npusim_clamp_out(self, min, max, self);
}

// clamp_min and clamp_max: clamp with one bound.
template <bool Lower>
at::Tensor& clamp_one_out(const at::Tensor& self, const at::Scalar& bound, at::Tensor& out) {
  if (is_float_kind(self.scalar_type()) && out.scalar_type() == self.scalar_type() && self.device() == out.device())
    return Lower ? npusim_clamp_out(self, bound, std::nullopt, out) : npusim_clamp_out(self, std::nullopt, bound, out);
  torch::jit::Stack stack{self, bound, out};
  call_cpu_fallback(Lower ? "aten::clamp_min" : "aten::clamp_max", "out", stack);
  return out;
}
template <bool Lower>
at::Tensor clamp_one(const at::Tensor& self, const at::Scalar& bound) {
  at::Tensor out = at::empty({0}, self.options());
  return clamp_one_out<Lower>(self, bound, out);
}
template <bool Lower>
at::Tensor& clamp_one_(at::Tensor& self, const at::Scalar& bound) {
  return clamp_one_out<Lower>(self, bound, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("clamp_min", clamp_one<true>);
  m.impl("clamp_min_", clamp_one_<true>);
  m.impl("clamp_min.out", clamp_one_out<true>);
  m.impl("clamp_max", clamp_one<false>);
  m.impl("clamp_max_", clamp_one_<false>);
  m.impl("clamp_max.out", clamp_one_out<false>);
#define NPUSIM_REGISTER_COMPARISON(name)          \
  m.impl(#name ".Tensor", name##_tensor);         \
  m.impl(#name ".Tensor_out", name##_tensor_out); \
  m.impl(#name ".Scalar", name##_scalar);         \
  m.impl(#name ".Scalar_out", name##_scalar_out);
  NPUSIM_REGISTER_COMPARISON(eq)
  NPUSIM_REGISTER_COMPARISON(ne)
  NPUSIM_REGISTER_COMPARISON(lt)
  NPUSIM_REGISTER_COMPARISON(le)
  NPUSIM_REGISTER_COMPARISON(gt)
  NPUSIM_REGISTER_COMPARISON(ge)
#undef NPUSIM_REGISTER_COMPARISON
  m.impl("clamp", npusim_clamp);
  m.impl("clamp_", npusim_clamp_);
  m.impl("clamp.out", npusim_clamp_out);
}

}  // namespace npusim::bridge
