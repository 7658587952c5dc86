// Native batch normalisation (nn.BatchNorm1d/2d/3d) forward and backward, training and eval, float32. Training runs
// as one fused kernel each way (batch_norm_fused.h); a channels-last input, and eval, are composed from native kernels:
// per-channel statistics are row sums over the batch and spatial dimensions, the normalisation and the
// running-statistics updates are broadcast elementwise kernels, the output's scale and shift one pass (mul_add), the
// backward's x̂ one pass (sub_mul). Other dtypes take the CPU fallback (half precision widened to float32 first).
#include <ATen/TensorOperators.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "batch_norm_fused.h"
#include "bridge.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

// The per-channel sum of x [N, C, ...]: over the trailing dimensions, then over the batch.
at::Tensor channel_sum(const at::Tensor& x) { return at::sum(x.reshape({x.size(0), x.size(1), -1}), {2}).sum(0); }
// A per-channel vector [C] shaped to broadcast against x [N, C, ...].
at::Tensor per_channel(const at::Tensor& vector, const at::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = x.size(1);
  return vector.view(shape);
}
int64_t per_channel_count(const at::Tensor& x) { return x.numel() / x.size(1); }

// out = a b + c (MulAddF32) or (a - b) c (SubMulF32) in one elementwise pass over float32 tensors of one device,
// b and c broadcast to a's shape; `out` may be a itself. Each step rounds as the two launches it replaces did.
at::Tensor fused_pass(emitter::ElementwiseOp op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                      at::Tensor out) {
  if (!out.defined()) out = at::empty(a.sizes(), a.options());
  const at::Tensor second = b.expand(a.sizes()), third = c.expand(a.sizes());
  emitter::ElementwiseSpec spec{
      op, 4, a.sizes().vec(), {out.strides().vec(), a.strides().vec(), second.strides().vec(), third.strides().vec()}};
  const uint64_t addresses[] = {device_address(out), device_address(a), device_address(second), device_address(third)};
  if (launched_natively([&] { launch_elementwise(a.device().index(), runtime_device(a), spec, addresses); }))
    return out;
  return op == emitter::ElementwiseOp::MulAddF32 ? out.copy_(a * b + c) : out.copy_((a - b) * c);
}

bool runs_natively(const at::Tensor& x, std::initializer_list<const at::Tensor*> optional) {
  if (x.scalar_type() != at::kFloat || x.dim() < 2 || x.numel() == 0) return false;
  for (const at::Tensor* t : optional)
    if (t->defined() && (t->scalar_type() != at::kFloat || t->device() != x.device())) return false;
  return true;
}

at::Tensor value_or_empty(const std::optional<at::Tensor>& t) { return t.has_value() ? *t : at::Tensor(); }

// y = (x - mean) / sqrt(var + eps) * weight + bias with the batch's statistics (training, which also moves the
// running statistics toward them, the variance unbiased) or the running ones (eval). Returns y and, in training, the
// batch mean and 1/std that the backward uses.
std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight_opt, const std::optional<at::Tensor>& bias_opt,
    const std::optional<at::Tensor>& running_mean_opt, const std::optional<at::Tensor>& running_var_opt, bool training,
    double momentum, double eps) {
  const at::Tensor weight = value_or_empty(weight_opt), bias = value_or_empty(bias_opt);
  at::Tensor running_mean = value_or_empty(running_mean_opt), running_var = value_or_empty(running_var_opt);
  if (!runs_natively(input, {&weight, &bias, &running_mean, &running_var}) ||
      (!training && (!running_mean.defined() || !running_var.defined()))) {
    torch::jit::Stack stack{input, weight_opt, bias_opt, running_mean_opt, running_var_opt, training, momentum, eps};
    call_cpu_fallback("aten::native_batch_norm", "", stack);
    return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
  }
  if (training) {
    const at::Tensor output = at::empty(input.sizes(), input.options());
    const at::Tensor batch_mean = at::empty({input.size(1)}, input.options()),
                     batch_invstd = at::empty_like(batch_mean);
    if (batch_norm_forward_in_one_kernel(input, weight, bias, running_mean, running_var, momentum, eps, output,
                                         batch_mean, batch_invstd))
      return {output, batch_mean, batch_invstd};
  }
  at::Tensor mean, invstd, centered;  // centered: x - mean, for the variance and then the output
  if (training) {
    const double count = static_cast<double>(per_channel_count(input));
    mean = channel_sum(input).div_(count);
    centered = input - per_channel(mean, input);
    const at::Tensor variance = channel_sum(centered * centered).div_(count);
    invstd = at::rsqrt(variance + eps);
    if (running_mean.defined()) running_mean.mul_(1 - momentum).add_(mean, momentum);
    if (running_var.defined())
      running_var.mul_(1 - momentum).add_(variance, momentum * count / std::max(count - 1, 1.0));
  } else {
    mean = running_mean;
    invstd = at::rsqrt(running_var + eps);
    centered = input - per_channel(mean, input);
  }
  at::Tensor scale = weight.defined() ? invstd * weight : invstd;
  const at::Tensor output = bias.defined() ? fused_pass(emitter::ElementwiseOp::MulAddF32, centered,
                                                        per_channel(scale, input), per_channel(bias, input), centered)
                                           : centered.mul_(per_channel(scale, input));
  if (!training) return {output, at::empty({0}, input.options()), at::empty({0}, input.options())};
  return {output, mean, invstd};
}

// The functional forms that torch.func and AOTAutograd trace: the running statistics passed (and written), or none.
std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_batch_norm_legit(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, bool training, double momentum, double eps) {
  return npusim_native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_batch_norm_legit_no_stats(const at::Tensor& input,
                                                                                const std::optional<at::Tensor>& weight,
                                                                                const std::optional<at::Tensor>& bias,
                                                                                bool training, double momentum,
                                                                                double eps) {
  return npusim_native_batch_norm(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}

// Training: with x̂ = (x - mean) invstd and M elements per channel,
//   d bias = Σ dy,  d weight = Σ dy x̂,  dx = weight invstd / M (M dy - d bias - x̂ d weight).
// Eval: the statistics are constants, so dx = dy weight invstd.
// The newer training and evaluation entry points (torch.compile's functional graphs, nn.BatchNorm under export):
// native_batch_norm with training on or off, and an empty reserve, as the CPU gives it.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npusim_batch_norm_with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  auto [output, mean, invstd] =
      npusim_native_batch_norm(input, weight, bias, running_mean, running_var, /*training=*/true, momentum, eps);
  return {output, mean, invstd, at::empty({0}, input.options().dtype(at::kByte))};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npusim_batch_norm_no_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, double momentum,
    double eps) {
  const bool statistics = running_mean.has_value() && running_mean->defined();
  auto [output, mean, invstd] =
      npusim_native_batch_norm(input, weight, bias, running_mean, running_var, /*training=*/!statistics, momentum, eps);
  return {output, mean, invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_native_batch_norm_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const std::optional<at::Tensor>& weight_opt,
    const std::optional<at::Tensor>& running_mean_opt, const std::optional<at::Tensor>& running_var_opt,
    const std::optional<at::Tensor>& save_mean_opt, const std::optional<at::Tensor>& save_invstd_opt, bool training,
    double eps, std::array<bool, 3> output_mask) {
  const at::Tensor weight = value_or_empty(weight_opt), running_mean = value_or_empty(running_mean_opt),
                   running_var = value_or_empty(running_var_opt), save_mean = value_or_empty(save_mean_opt),
                   save_invstd = value_or_empty(save_invstd_opt);
  const bool statistics =
      training ? save_mean.defined() && save_invstd.defined() : running_mean.defined() && running_var.defined();
  if (!statistics || grad_output.scalar_type() != at::kFloat ||
      !runs_natively(input, {&weight, &running_mean, &running_var, &save_mean, &save_invstd})) {
    torch::jit::Stack stack{grad_output,
                            input,
                            weight_opt,
                            running_mean_opt,
                            running_var_opt,
                            save_mean_opt,
                            save_invstd_opt,
                            training,
                            eps,
                            c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]})};
    call_cpu_fallback("aten::native_batch_norm_backward", "", stack);
    return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
  }
  if (training && output_mask[0]) {
    const at::Tensor grad_input = at::empty(input.sizes(), input.options());
    const at::Tensor grad_weight = at::empty({input.size(1)}, input.options()), grad_bias = at::empty_like(grad_weight);
    // An expanded gradient (of a loss's sum) is copied once rather than taking the composed path's many passes.
    const at::Tensor dy = input.is_contiguous() ? grad_output.contiguous() : grad_output;
    if (batch_norm_backward_in_one_kernel(dy, input, weight, save_mean, save_invstd, grad_input, grad_weight,
                                          grad_bias))
      return {grad_input, output_mask[1] ? grad_weight : at::Tensor(), output_mask[2] ? grad_bias : at::Tensor()};
  }
  const at::Tensor mean = training ? save_mean : running_mean;
  const at::Tensor invstd = training ? save_invstd : at::rsqrt(running_var + eps);
  // The channel sums are wanted for themselves, or by the training input gradient; eval's needs neither.
  const bool sums = output_mask[1] || output_mask[2] || (training && output_mask[0]);
  at::Tensor normalized, grad_bias, grad_weight, grad_input;
  if (sums) {
    normalized = fused_pass(emitter::ElementwiseOp::SubMulF32, input, per_channel(mean, input),
                            per_channel(invstd, input), at::Tensor());
    grad_bias = channel_sum(grad_output);
    grad_weight = channel_sum(grad_output * normalized);
  }
  if (output_mask[0]) {
    const at::Tensor scale = weight.defined() ? invstd * weight : invstd;
    if (training) {
      const double count = static_cast<double>(per_channel_count(input));
      const at::Tensor centered_grad =
          grad_output * count - per_channel(grad_bias, input) - normalized * per_channel(grad_weight, input);
      grad_input = centered_grad * per_channel(scale / count, input);
    } else {
      grad_input = grad_output * per_channel(scale, input);
    }
  }
  return {grad_input, output_mask[1] ? grad_weight : at::Tensor(), output_mask[2] ? grad_bias : at::Tensor()};
}

// The newer entry points' backward: native_batch_norm's, with `update` as its training flag (the reserve is empty).
std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_batch_norm_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool update, double eps,
    std::array<bool, 3> output_mask, const at::Tensor& /*reserve*/) {
  return npusim_native_batch_norm_backward(grad_output, input, weight, running_mean, running_var, save_mean,
                                           save_invstd, update, eps, output_mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", npusim_native_batch_norm);
  m.impl("native_batch_norm_backward", npusim_native_batch_norm_backward);
  m.impl("batch_norm_backward", npusim_batch_norm_backward);
  m.impl("_batch_norm_with_update", npusim_batch_norm_with_update);
  m.impl("_batch_norm_no_update", npusim_batch_norm_no_update);
  m.impl("_native_batch_norm_legit", npusim_batch_norm_legit);
  m.impl("_native_batch_norm_legit.no_stats", npusim_batch_norm_legit_no_stats);
}

}  // namespace npusim::bridge
