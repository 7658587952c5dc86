// layer_norm's backward, float32 (the forward is a row kernel, row_ops.cpp). With rows of D normalised elements,
// x̂ = (x - mean) rstd and g = dy · weight:
//   d bias = Σ_rows dy,  d weight = Σ_rows dy x̂,  dx = rstd (g - mean_D(g) - x̂ mean_D(g x̂)).
// dx is one row kernel (layer_norm_backward_f32), which also writes x̂ when the weight's gradient needs it; the two
// column sums are native reductions.
#include <ATen/TensorOperators.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "bridge.h"
#include "kernel_launcher.h"

namespace npusim::bridge {
namespace {

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
  const bool weight_gradient = output_mask[1] && weight.defined();
  at::Tensor grad_input, grad_weight, grad_bias, normalized;
  if (output_mask[0]) {
    const emitter::RowSpec spec{
        emitter::RowOp::LayerNormBackwardF32, rows, cols, weight.defined(), false, 0.0f, weight_gradient};
    grad_input = at::empty({rows, cols}, x.options());
    if (weight_gradient) normalized = at::empty({rows, cols}, x.options());
    const at::Tensor row_mean = mean.contiguous(), row_rstd = rstd.contiguous();
    const at::Tensor weight_row = weight.defined() ? weight.contiguous() : at::Tensor();
    const uint64_t addresses[] = {device_address(grad_input),
                                  device_address(dy),
                                  device_address(x),
                                  weight.defined() ? device_address(weight_row) : 0,
                                  device_address(row_mean),
                                  device_address(row_rstd),
                                  weight_gradient ? device_address(normalized) : 0};
    launch_rows(input.device().index(), runtime_device(input), spec, addresses);
    grad_input = grad_input.reshape(input.sizes());
  } else if (weight_gradient) {
    normalized = (x - mean.reshape({rows, 1})) * rstd.reshape({rows, 1});
  }
  if (weight_gradient) grad_weight = at::sum(dy * normalized, {0}).reshape(weight.sizes());
  if (output_mask[2] && bias_opt.has_value() && bias_opt->defined())
    grad_bias = at::sum(dy, {0}).reshape(bias_opt->sizes());
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_layer_norm_backward", npusim_native_layer_norm_backward); }

}  // namespace npusim::bridge
