// Native where(condition, self, other): one elementwise kernel that merges self into other under the bool condition
// (the vector engine's vsel), with broadcasting, for any 1-, 4- or 8-byte dtype; scalars (like attention's -inf) are
// converted on the host and copied over. Other cases take the CPU fallback.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/library.h>

#include "bridge.h"
#include "pointwise_output.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

using emitter::ElementwiseOp;

// A value operand: the output's dtype on its device, or a 0-dim scalar that converts exactly enough (as on CPU).
bool value_operand(const at::Tensor& value, const at::Tensor& out) {
  if (value.device() == out.device()) return value.scalar_type() == out.scalar_type();
  return value.dim() == 0 && value.is_cpu();
}

at::Tensor& npusim_where_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other,
                             at::Tensor& out) {
  const bool sizes_ok = out.element_size() == 1 || out.element_size() == 4 || out.element_size() == 8;
  if (sizes_ok && condition.scalar_type() == at::kBool && condition.device() == out.device() &&
      value_operand(self, out) && value_operand(other, out)) {
    const std::vector<int64_t> shape = resize_to_broadcast(out, {condition, self, other});
    if (out.numel() == 0) return out;
    const at::Tensor mask = condition.expand(shape);
    const at::Tensor chosen = self.to(out.device(), out.scalar_type()).expand(shape);
    const at::Tensor otherwise = other.to(out.device(), out.scalar_type()).expand(shape);
    for (const at::Tensor* operand : {&mask, &chosen, &otherwise}) at::assert_no_partial_overlap(out, *operand);
    const ElementwiseOp op = out.element_size() == 1   ? ElementwiseOp::WhereB8
                             : out.element_size() == 4 ? ElementwiseOp::WhereB32
                                                       : ElementwiseOp::WhereB64;
    emitter::ElementwiseSpec spec{
        op,
        static_cast<int>(out.element_size()),
        out.sizes().vec(),
        {out.strides().vec(), otherwise.strides().vec(), mask.strides().vec(), chosen.strides().vec()}};
    const uint64_t addresses[] = {device_address(out), device_address(otherwise), device_address(mask),
                                  device_address(chosen)};
    if (launched_natively([&] { launch_elementwise(out.device().index(), runtime_device(out), spec, addresses); }))
      return out;
  }
  torch::jit::Stack stack{condition, self, other, out};
  call_cpu_fallback("aten::where", "self_out", stack);
  return out;
}

at::Tensor npusim_where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const at::Tensor& on_device = self.is_cpu() ? (other.is_cpu() ? condition : other) : self;
  at::Tensor out = at::empty({0}, on_device.options().dtype(at::result_type(self, other)));
  return npusim_where_out(condition, self, other, out);
}

// masked_fill_: value where the (broadcast) mask holds, a where into a temporary and a copy back. A value tensor
// must be 0-dim, as PyTorch requires.
at::Tensor& npusim_masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  const at::Tensor filled = npusim_where(mask, value.to(self.scalar_type()), self);
  TORCH_CHECK(filled.sizes() == self.sizes(), "masked_fill_: the mask of shape ", mask.sizes(),
              " does not broadcast to the tensor's ", self.sizes());
  return self.copy_(filled);
}
at::Tensor& npusim_masked_fill_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  return npusim_masked_fill_tensor_(self, mask,
                                    at::scalar_tensor(value, at::TensorOptions().dtype(self.scalar_type())));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("masked_fill_.Scalar", npusim_masked_fill_);
  m.impl("masked_fill_.Tensor", npusim_masked_fill_tensor_);
  m.impl("where.self", npusim_where);
  m.impl("where.self_out", npusim_where_out);
}

}  // namespace npusim::bridge
