// group_norm's backward, float32, composed from native kernels (the forward is PyTorch's composition of native ops).
// With x viewed as [N, G, D x HW] (D channels per group), x̂ = (x - mean) rstd per (n, g), and g = dy · weight[c]:
//   d bias[c] = Σ_{n,hw} dy,  d weight[c] = Σ_{n,hw} dy x̂,  dx = rstd (g - mean_group(g) - x̂ mean_group(g x̂)).
#include <ATen/TensorOperators.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_native_group_norm_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight_opt, int64_t batch, int64_t channels, int64_t spatial, int64_t groups,
    std::array<bool, 3> output_mask) {
  const at::Tensor weight = weight_opt.has_value() ? *weight_opt : at::Tensor();
  const auto float_here = [&](const at::Tensor& t) {
    return !t.defined() || (t.scalar_type() == at::kFloat && t.device() == input.device());
  };
  const bool native = input.numel() > 0 && groups > 0 && channels % groups == 0 && float_here(input) &&
                      float_here(grad_output) && float_here(mean) && float_here(rstd) && float_here(weight);
  if (!native) {
    torch::jit::Stack stack{
        grad_output, input,    mean,    rstd,   weight_opt,
        batch,       channels, spatial, groups, c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]})};
    call_cpu_fallback("aten::native_group_norm_backward", "", stack);
    return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
  }
  // [N, C, HW] and per-(n, g) statistics broadcast over each group's channels.
  const at::Tensor x = input.reshape({batch, channels, spatial}), dy = grad_output.reshape({batch, channels, spatial});
  const int64_t per_group = channels / groups;
  const at::Tensor group_mean = mean.reshape({batch, groups, 1, 1}), group_rstd = rstd.reshape({batch, groups, 1, 1});
  const at::Tensor normalized =
      ((x.reshape({batch, groups, per_group, spatial}) - group_mean) * group_rstd).reshape({batch, channels, spatial});
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    const at::Tensor g = weight.defined() ? dy * weight.reshape({1, channels, 1}) : dy;
    const auto group_mean_of = [&](const at::Tensor& t) {
      return at::sum(t.reshape({batch, groups, per_group * spatial}), {2}, /*keepdim=*/true) *
             (1.0 / static_cast<double>(per_group * spatial));
    };
    const at::Tensor g_grouped = g.reshape({batch, groups, per_group * spatial});
    const at::Tensor normalized_grouped = normalized.reshape({batch, groups, per_group * spatial});
    grad_input = ((g_grouped - group_mean_of(g) - normalized_grouped * group_mean_of(g * normalized)) *
                  rstd.reshape({batch, groups, 1}))
                     .reshape(input.sizes());
  }
  if (output_mask[1] && weight.defined()) grad_weight = at::sum(dy * normalized, {0, 2}).reshape(weight.sizes());
  if (output_mask[2] && weight.defined()) grad_bias = at::sum(dy, {0, 2}).reshape(weight.sizes());
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_group_norm_backward", npusim_native_group_norm_backward); }

}  // namespace npusim::bridge
