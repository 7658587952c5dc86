// Pointwise ops that optimizers use, composed from native kernels: lerp (Adam's first moment), addcmul (its second
// moment) and addcdiv (its update). Each step is an emitted kernel on the device, so an optimizer step runs without
// the CPU fallback; other dtypes, devices and mixes take the fallback, counted and reported.
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <torch/library.h>

#include <cmath>
#include <initializer_list>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// float32 tensors on the output's device: the elementwise kernels take these.
bool all_float_on_device(const at::Tensor& out, std::initializer_list<at::Tensor> operands) {
  if (out.scalar_type() != at::kFloat) return false;
  for (const at::Tensor& operand : operands)
    if (operand.scalar_type() != at::kFloat || operand.device() != out.device()) return false;
  return true;
}

// out = self + weight (end - self), by PyTorch's formula: from self for |weight| < 0.5, else from end as
// end - (1 - weight)(end - self), which is exact at weight 1.
at::Tensor& npusim_lerp_out(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  if (all_float_on_device(out, {self, end})) {
    const double w = weight.toDouble();
    const at::Tensor difference = at::sub(end, self);
    return std::abs(w) < 0.5 ? at::add_out(out, self, difference, w) : at::sub_out(out, end, difference, 1 - w);
  }
  torch::jit::Stack stack{self, end, weight, out};
  call_cpu_fallback("aten::lerp", "Scalar_out", stack);
  return out;
}
at::Tensor npusim_lerp(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_lerp_out(self, end, weight, out);
}
at::Tensor& npusim_lerp_(at::Tensor& self, const at::Tensor& end, const at::Scalar& weight) {
  return npusim_lerp_out(self, end, weight, self);
}

// out = self + value * combine(tensor1, tensor2), for addcmul (a product) and addcdiv (a quotient).
template <bool Divide>
at::Tensor& add_combined_out(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                             const at::Scalar& value, at::Tensor& out) {
  if (all_float_on_device(out, {self, tensor1, tensor2})) {
    const at::Tensor combined = Divide ? at::div(tensor1, tensor2) : at::mul(tensor1, tensor2);
    return at::add_out(out, self, combined, value);
  }
  torch::jit::Stack stack{self, tensor1, tensor2, value, out};
  call_cpu_fallback(Divide ? "aten::addcdiv" : "aten::addcmul", "out", stack);
  return out;
}
template <bool Divide>
at::Tensor add_combined(const at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                        const at::Scalar& value) {
  at::Tensor out = at::empty({0}, self.options());
  return add_combined_out<Divide>(self, tensor1, tensor2, value, out);
}
template <bool Divide>
at::Tensor& add_combined_(at::Tensor& self, const at::Tensor& tensor1, const at::Tensor& tensor2,
                          const at::Scalar& value) {
  return add_combined_out<Divide>(self, tensor1, tensor2, value, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("lerp.Scalar", npusim_lerp);
  m.impl("lerp_.Scalar", npusim_lerp_);
  m.impl("lerp.Scalar_out", npusim_lerp_out);
  m.impl("addcmul", add_combined<false>);
  m.impl("addcmul_", add_combined_<false>);
  m.impl("addcmul.out", add_combined_out<false>);
  m.impl("addcdiv", add_combined<true>);
  m.impl("addcdiv_", add_combined_<true>);
  m.impl("addcdiv.out", add_combined_out<true>);
}

}  // namespace npusim::bridge
