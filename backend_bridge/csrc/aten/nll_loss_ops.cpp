// Native nll_loss (so cross_entropy after log_softmax) and its backward for float32 log-probabilities [N x C] or
// [C] with int64 targets on the device, optional per-class weights, every reduction. A target outside the classes
// traps on the device and surfaces as PyTorch's IndexError; unusual shapes and dtypes take the CPU fallback, which
// also gives PyTorch's own errors for mismatched shapes. The 2-D loss (images) is the same kernel over rows.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "bridge.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

bool float_on(const at::Tensor& tensor, const at::Device& device) {
  return tensor.scalar_type() == at::kFloat && tensor.device() == device;
}

// The kernel's specification, or nothing when this case takes the CPU fallback.
std::optional<emitter::NllLossSpec> native_spec(const at::Tensor& self, const at::Tensor& target,
                                                const at::Tensor& weight, int64_t reduction, int64_t ignore_index) {
  if (!float_on(self, self.device()) || (self.dim() != 1 && self.dim() != 2) || self.numel() == 0) return {};
  const int64_t rows = self.dim() == 2 ? self.size(0) : 1, classes = self.size(-1);
  if (target.scalar_type() != at::kLong || target.device() != self.device() || target.dim() != self.dim() - 1 ||
      target.numel() != rows)
    return {};
  if (weight.defined() && (!float_on(weight, self.device()) || weight.numel() != classes)) return {};
  // Without a reduction, 1-D input gives a 0-dim loss; only the 2-D case is native.
  if (reduction == at::Reduction::None && self.dim() != 2) return {};
  emitter::NllLossSpec spec;
  spec.rows = rows;
  spec.classes = classes;
  spec.weighted = weight.defined();
  spec.reduction = reduction == at::Reduction::None  ? emitter::NllReduction::None
                   : reduction == at::Reduction::Sum ? emitter::NllReduction::Sum
                                                     : emitter::NllReduction::Mean;
  spec.ignore_index = ignore_index;
  return spec;
}

// Runs the kernel; a target out of range becomes an IndexError. False when the emitter cannot express the case.
bool launch(const emitter::NllLossSpec& spec, bool backward, const at::Tensor& on, std::span<const uint64_t> args) {
  return launched_checking_indices(
      runtime_device(on), [&] { launch_nll_loss(on.device().index(), runtime_device(on), spec, backward, args); },
      "Target is out of bounds");
}

at::Tensor defined_or_empty(const std::optional<at::Tensor>& weight) {
  return weight.has_value() && weight->defined() ? weight->contiguous() : at::Tensor();
}

std::tuple<at::Tensor&, at::Tensor&> npusim_nll_loss_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                                 const std::optional<at::Tensor>& weight_opt,
                                                                 int64_t reduction, int64_t ignore_index,
                                                                 at::Tensor& output, at::Tensor& total_weight) {
  const at::Tensor weight = defined_or_empty(weight_opt);
  const auto spec = native_spec(self, target, weight, reduction, ignore_index);
  if (spec && float_on(output, self.device()) && float_on(total_weight, self.device())) {
    at::native::resize_output(output,
                              reduction == at::Reduction::None ? at::IntArrayRef{spec->rows} : at::IntArrayRef{});
    at::native::resize_output(total_weight, {});
    const at::Tensor input = self.contiguous(), targets = target.contiguous();
    const uint64_t args[] = {device_address(output), device_address(total_weight), device_address(input),
                             device_address(targets), weight.defined() ? device_address(weight) : 0};
    if (output.is_contiguous() && launch(*spec, false, self, args)) return {output, total_weight};
  }
  torch::jit::Stack stack{self, target, weight_opt, reduction, ignore_index, output, total_weight};
  call_cpu_fallback("aten::nll_loss_forward", "output", stack);
  return {output, total_weight};
}

std::tuple<at::Tensor, at::Tensor> npusim_nll_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                           const std::optional<at::Tensor>& weight, int64_t reduction,
                                                           int64_t ignore_index) {
  at::Tensor output = at::empty({0}, self.options()), total_weight = at::empty({0}, self.options());
  npusim_nll_loss_forward_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor& npusim_nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                         const at::Tensor& target, const std::optional<at::Tensor>& weight_opt,
                                         int64_t reduction, int64_t ignore_index, const at::Tensor& total_weight,
                                         at::Tensor& grad_input) {
  const at::Tensor weight = defined_or_empty(weight_opt);
  const auto spec = native_spec(self, target, weight, reduction, ignore_index);
  const bool grad_shape_ok = reduction == at::Reduction::None
                                 ? grad_output.numel() == spec.value_or(emitter::NllLossSpec{}).rows
                                 : grad_output.numel() == 1;
  if (spec && grad_shape_ok && float_on(grad_output, self.device()) && float_on(total_weight, self.device()) &&
      float_on(grad_input, self.device())) {
    at::native::resize_output(grad_input, self.sizes());
    at::Tensor result = grad_input.is_contiguous() ? grad_input : at::empty(self.sizes(), grad_input.options());
    result.zero_();
    const at::Tensor grad = grad_output.contiguous(), targets = target.contiguous(), total = total_weight.contiguous();
    const uint64_t args[] = {device_address(result), device_address(grad), device_address(targets),
                             weight.defined() ? device_address(weight) : 0, device_address(total)};
    if (launch(*spec, true, self, args)) {
      if (!result.is_same(grad_input)) grad_input.copy_(result);
      return grad_input;
    }
  }
  torch::jit::Stack stack{grad_output, self, target, weight_opt, reduction, ignore_index, total_weight, grad_input};
  call_cpu_fallback("aten::nll_loss_backward", "grad_input", stack);
  return grad_input;
}

at::Tensor npusim_nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                    const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                    const at::Tensor& total_weight) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return npusim_nll_loss_backward_out(grad_output, self, target, weight, reduction, ignore_index, total_weight,
                                      grad_input);
}

// The 2-D loss (cross_entropy over images, or any [N, C, ...] input that PyTorch folds into [N, C, H, W]) is the
// loss above over [N*H*W, C] rows: the channels made the innermost dimension, the targets flattened; without a
// reduction the losses take the targets' shape, and the gradient goes back to [N, C, H, W].
bool folds_into_rows(const at::Tensor& self, const at::Tensor& target) {
  return self.dim() == 4 && target.dim() == 3 && self.size(0) == target.size(0) && self.size(2) == target.size(1) &&
         self.size(3) == target.size(2) && self.device().is_privateuseone();
}
at::Tensor as_rows(const at::Tensor& self) { return self.permute({0, 2, 3, 1}).reshape({-1, self.size(1)}); }

std::tuple<at::Tensor&, at::Tensor&> npusim_nll_loss2d_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   int64_t reduction, int64_t ignore_index,
                                                                   at::Tensor& output, at::Tensor& total_weight) {
  if (!folds_into_rows(self, target)) {
    torch::jit::Stack stack{self, target, weight, reduction, ignore_index, output, total_weight};
    call_cpu_fallback("aten::nll_loss2d_forward", "output", stack);
    return {output, total_weight};
  }
  at::Tensor losses = at::empty({0}, output.options());
  npusim_nll_loss_forward_out(as_rows(self), target.reshape({-1}), weight, reduction, ignore_index, losses,
                              total_weight);
  at::native::resize_output(output, reduction == at::Reduction::None ? target.sizes() : at::IntArrayRef{});
  output.copy_(losses.view(output.sizes()));
  return {output, total_weight};
}

std::tuple<at::Tensor, at::Tensor> npusim_nll_loss2d_forward(const at::Tensor& self, const at::Tensor& target,
                                                             const std::optional<at::Tensor>& weight, int64_t reduction,
                                                             int64_t ignore_index) {
  at::Tensor output = at::empty({0}, self.options()), total_weight = at::empty({0}, self.options());
  npusim_nll_loss2d_forward_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor& npusim_nll_loss2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                           const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                           int64_t reduction, int64_t ignore_index, const at::Tensor& total_weight,
                                           at::Tensor& grad_input) {
  if (!folds_into_rows(self, target)) {
    torch::jit::Stack stack{grad_output, self, target, weight, reduction, ignore_index, total_weight, grad_input};
    call_cpu_fallback("aten::nll_loss2d_backward", "grad_input", stack);
    return grad_input;
  }
  const at::Tensor grad = reduction == at::Reduction::None ? grad_output.reshape({-1}) : grad_output;
  at::Tensor grad_rows = at::empty({0}, grad_input.options());
  npusim_nll_loss_backward_out(grad, as_rows(self), target.reshape({-1}), weight, reduction, ignore_index, total_weight,
                               grad_rows);
  const int64_t n = self.size(0), c = self.size(1), h = self.size(2), w = self.size(3);
  at::native::resize_output(grad_input, self.sizes());
  grad_input.copy_(grad_rows.view({n, h, w, c}).permute({0, 3, 1, 2}));
  return grad_input;
}

at::Tensor npusim_nll_loss2d_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                      const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                      const at::Tensor& total_weight) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return npusim_nll_loss2d_backward_out(grad_output, self, target, weight, reduction, ignore_index, total_weight,
                                        grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nll_loss2d_forward", npusim_nll_loss2d_forward);
  m.impl("nll_loss2d_forward.output", npusim_nll_loss2d_forward_out);
  m.impl("nll_loss2d_backward", npusim_nll_loss2d_backward);
  m.impl("nll_loss2d_backward.grad_input", npusim_nll_loss2d_backward_out);
  m.impl("nll_loss_forward", npusim_nll_loss_forward);
  m.impl("nll_loss_forward.output", npusim_nll_loss_forward_out);
  m.impl("nll_loss_backward", npusim_nll_loss_backward);
  m.impl("nll_loss_backward.grad_input", npusim_nll_loss_backward_out);
}

}  // namespace npusim::bridge
