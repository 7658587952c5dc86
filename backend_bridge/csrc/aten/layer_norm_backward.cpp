// layer_norm's backward, float32 (the forward is a row kernel, row_ops.cpp). With rows of D normalised elements,
// x̂ = (x - mean) rstd and g = dy · weight:
//   d bias = Σ_rows dy,  d weight = Σ_rows dy x̂,  dx = rstd (g - mean_D(g) - x̂ mean_D(g x̂)).
// dx is one row kernel (layer_norm_backward_f32); the weight's and the bias's gradients, sums over the rows, are one
// fused kernel over the columns (layer_norm_parameter_gradients_f32) that computes x̂ again as dx's kernel does.
#include <ATen/TensorOperators.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "bridge.h"
#include "runtime/kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

// Σ_rows dy x̂ into grad_weight and Σ_rows dy into grad_bias (either undefined when not wanted) in one kernel over
// [cols, rows], the rows reduced: each column summed over the rows in order, as the two column sums it replaces did.
// dy and x are [rows, cols] contiguous, mean and rstd one value per row. False when it cannot be built.
bool parameter_gradients_in_one_kernel(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& mean,
                                       const at::Tensor& rstd, const at::Tensor& grad_weight,
                                       const at::Tensor& grad_bias) {
  using enum emitter::FusedOpcode;
  const int64_t rows = x.size(0), cols = x.size(1);
  TensorKernel k("layer_norm_parameter_gradients_f32", {cols, rows}, 1);
  const int64_t element[] = {1, cols}, per_row[] = {0, 1}, per_column[] = {1, 0};
  const int gradient = k.load(dy, element);
  if (grad_weight.defined()) {
    const int centered = k.op(Sub, k.load(x, element), k.load(mean, per_row));
    const int normalized = k.op(Mul, centered, k.load(rstd, per_row));
    k.store(k.op(ReduceSum, k.op(Mul, gradient, normalized)), grad_weight, per_column);
  }
  if (grad_bias.defined()) k.store(k.op(ReduceSum, gradient), grad_bias, per_column);
  return k.launch(x);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_native_layer_norm_backward(
    const at::Tensor& grad_output, const at::Tensor& input, c10::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight_opt, const std::optional<at::Tensor>& bias_opt,
    std::array<bool, 3> output_mask) {
  const at::Tensor weight = weight_opt.has_value() ? *weight_opt : at::Tensor();
  const auto float_here = [&](const at::Tensor& t) {
    return !t.defined() || (t.scalar_type() == at::kFloat && t.device() == input.device());
  };
  int64_t cols = 1;
  for (int64_t size : normalized_shape) cols *= size;
  const bool native = input.numel() > 0 && cols > 0 && float_here(input) && float_here(grad_output) &&
                      float_here(mean) && float_here(rstd) && float_here(weight) && mean.defined() && rstd.defined();
  if (!native) {
    torch::jit::Stack stack{
        grad_output, input,      normalized_shape, mean,
        rstd,        weight_opt, bias_opt,         c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]})};
    call_cpu_fallback("aten::native_layer_norm_backward", "", stack);
    return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
  }
  const int64_t rows = input.numel() / cols;
  const at::Tensor x = input.reshape({rows, cols}).contiguous(), dy = grad_output.reshape({rows, cols}).contiguous();
  const at::Tensor row_mean = mean.reshape({rows}).contiguous(), row_rstd = rstd.reshape({rows}).contiguous();
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const emitter::RowSpec spec{emitter::RowOp::LayerNormBackwardF32, rows, cols, weight.defined(), false, 0.0f};
    grad_input = at::empty({rows, cols}, x.options());
    const at::Tensor weight_row = weight.defined() ? weight.contiguous() : at::Tensor();
    const uint64_t addresses[] = {device_address(grad_input), device_address(dy),
                                  device_address(x),          weight.defined() ? device_address(weight_row) : 0,
                                  device_address(row_mean),   device_address(row_rstd)};
    launch_rows(input.device().index(), runtime_device(input), spec, addresses);
    grad_input = grad_input.reshape(input.sizes());
  }
  if (output_mask[1] && weight.defined()) grad_weight = at::empty({cols}, x.options());
  if (output_mask[2] && bias_opt.has_value() && bias_opt->defined()) grad_bias = at::empty({cols}, x.options());
  if ((grad_weight.defined() || grad_bias.defined()) &&
      !parameter_gradients_in_one_kernel(dy, x, row_mean, row_rstd, grad_weight, grad_bias)) {
    const at::Tensor normalized = (x - row_mean.reshape({rows, 1})) * row_rstd.reshape({rows, 1});
    if (grad_weight.defined()) grad_weight = at::sum(dy * normalized, {0});
    if (grad_bias.defined()) grad_bias = at::sum(dy, {0});
  }
  if (grad_weight.defined()) grad_weight = grad_weight.reshape(weight.sizes());
  if (grad_bias.defined()) grad_bias = grad_bias.reshape(bias_opt->sizes());
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_layer_norm_backward", npusim_native_layer_norm_backward); }

}  // namespace npusim::bridge
