// Losses that are a sum or mean of one value per element, and their gradients: each element's loss (or gradient)
// one formula kernel (pointwise_formula.h) by the CPU kernel's own branches, then the reduction (mean or sum,
// native). With z = |input - target|:
//   huber_loss(delta)     z < delta ? z^2 / 2 : delta (z - delta / 2)
//   smooth_l1_loss(beta)  z < beta ? z^2 / 2 / beta : z - beta / 2     (beta 0: z)
//   binary_cross_entropy  w ((t - 1) max(log1p(-x), -100) - t max(log x, -100)), its gradient
//                         w g (x - t) / max((1 - x) x, 1e-12)
// float32 on one device (half precision widened by the fallback); other cases take the CPU fallback.
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/le.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "bridge.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

bool float32_on_one_device(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && a.device() == b.device() &&
         a.device().is_privateuseone();
}

// Each element's loss, reduced as asked, into `out`; false when not native. `weight` (optional) is a third operand.
bool loss_into(const char* name, const at::Tensor& input, const at::Tensor& target, int64_t reduction,
               const FormulaBody& element_loss, at::Tensor& out, const at::Tensor& weight = {}) {
  if (!float32_on_one_device(input, target) || out.scalar_type() != at::kFloat) return false;
  if (weight.defined() && !float32_on_one_device(input, weight)) return false;
  const std::vector<at::Tensor> operands =
      weight.defined() ? std::vector<at::Tensor>{input, target, weight} : std::vector<at::Tensor>{input, target};
  if (reduction == at::Reduction::None) return launch_formula(name, operands, {}, out, element_loss);
  at::Tensor losses = at::empty({0}, input.options());
  if (!launch_formula(name, operands, {}, losses, element_loss)) return false;
  at::native::resize_output(out, {});
  out.copy_(reduction == at::Reduction::Mean ? at::mean(losses) : at::sum(losses));
  return true;
}

// The gradient with respect to the input, grad_output broadcast (a 0-dim one after a reduction), divided by the
// element count for the mean.
bool gradient_into(const char* name, const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& target,
                   int64_t reduction, const FormulaBody& element_gradient, at::Tensor& grad_input,
                   const at::Tensor& weight = {}) {
  if (!float32_on_one_device(input, target) || !float32_on_one_device(input, grad_output) ||
      grad_input.scalar_type() != at::kFloat || target.sizes() != input.sizes() ||
      (weight.defined() && !float32_on_one_device(input, weight)))
    return false;
  const double scale = reduction == at::Reduction::Mean ? 1.0 / static_cast<double>(input.numel()) : 1.0;
  at::native::resize_output(grad_input, input.sizes());
  std::vector<at::Tensor> operands{input, target, grad_output.expand(input.sizes())};
  if (weight.defined()) operands.push_back(weight);
  return launch_formula(name, operands, {scale}, grad_input, element_gradient);
}

Value huber(Formula& f, double delta) {
  const Value z = abs(f.x(0) - f.x(1));
  return where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta));
}
// d/dx times the gradient (g) and the mean's scale (n), in the CPU's order: -n g delta at or below -delta, n g delta
// at or above delta, n x g between.
Value huber_gradient(Formula& f, double delta) {
  const Value x = f.x(0) - f.x(1), g = f.x(2);
  const double n = f.parameter(0).value();
  return where(x <= -delta, -n * g * delta, where(x >= delta, n * g * delta, n * x * g));
}
Value smooth_l1(Formula& f, double beta) {
  const Value z = abs(f.x(0) - f.x(1));
  if (beta == 0) return z;
  return where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta);
}
// d/dx times the gradient and the mean's scale, in the CPU's order: -n g at or below -beta, n g at or above beta,
// n x g / beta between (beta 0: the sign, x = 0 counting as negative, as the CPU's branches give it).
Value smooth_l1_gradient(Formula& f, double beta) {
  const Value x = f.x(0) - f.x(1), g = f.x(2);
  const double n = f.parameter(0).value();
  return where(x <= -beta, -n * g, where(x >= beta, n * g, n * x * g / beta));
}

// With the CPU's clamp of each log at -100 (so 0 and 1 give finite losses).
Value binary_cross_entropy(Formula& f, bool weighted) {
  const Value x = f.x(0), t = f.x(1);
  const Value loss = (t - 1.0) * maximum(log1p(-x), f.constant(-100)) - t * maximum(log(x), f.constant(-100));
  return weighted ? f.x(2) * loss : loss;
}
// g (x - t) / max((1 - x) x, 1e-12), weighted, times the mean's scale.
Value binary_cross_entropy_gradient(Formula& f, bool weighted) {
  const Value x = f.x(0), t = f.x(1), g = f.x(2) * f.parameter(0).value();
  const Value gradient = g * (x - t) / maximum((1.0 - x) * x, f.constant(1e-12));
  return weighted ? gradient * f.x(3) : gradient;
}

at::Tensor& npusim_binary_cross_entropy_out(const at::Tensor& self, const at::Tensor& target,
                                            const std::optional<at::Tensor>& weight, int64_t reduction,
                                            at::Tensor& out) {
  const bool weighted = weight.has_value() && weight->defined();
  if (float32_on_one_device(self, target))
    TORCH_CHECK(at::logical_and(at::ge(self, 0), at::le(self, 1)).all().item<bool>(),
                "all elements of input should be between 0 and 1");
  if (loss_into(
          "binary_cross_entropy", self, target, reduction,
          [&](Formula& f) { return binary_cross_entropy(f, weighted); }, out,
          weighted ? weight->expand(self.sizes()) : at::Tensor()))
    return out;
  torch::jit::Stack stack{self, target, weight, reduction, out};
  call_cpu_fallback("aten::binary_cross_entropy", "out", stack);
  return out;
}
at::Tensor npusim_binary_cross_entropy(const at::Tensor& self, const at::Tensor& target,
                                       const std::optional<at::Tensor>& weight, int64_t reduction) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_binary_cross_entropy_out(self, target, weight, reduction, out);
}
at::Tensor& npusim_binary_cross_entropy_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                                     const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                                     int64_t reduction, at::Tensor& grad_input) {
  const bool weighted = weight.has_value() && weight->defined();
  if (gradient_into(
          "binary_cross_entropy_backward", grad_output, self, target, reduction,
          [&](Formula& f) { return binary_cross_entropy_gradient(f, weighted); }, grad_input,
          weighted ? weight->expand(self.sizes()) : at::Tensor()))
    return grad_input;
  torch::jit::Stack stack{grad_output, self, target, weight, reduction, grad_input};
  call_cpu_fallback("aten::binary_cross_entropy_backward", "grad_input", stack);
  return grad_input;
}
at::Tensor npusim_binary_cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                                int64_t reduction) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return npusim_binary_cross_entropy_backward_out(grad_output, self, target, weight, reduction, grad_input);
}

at::Tensor& npusim_huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta,
                                  at::Tensor& out) {
  if (loss_into(
          "huber_loss", self, target, reduction, [&](Formula& f) { return huber(f, delta); }, out))
    return out;
  torch::jit::Stack stack{self, target, reduction, delta, out};
  call_cpu_fallback("aten::huber_loss", "out", stack);
  return out;
}
at::Tensor npusim_huber_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double delta) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_huber_loss_out(self, target, reduction, delta, out);
}
at::Tensor& npusim_huber_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                           const at::Tensor& target, int64_t reduction, double delta,
                                           at::Tensor& grad_input) {
  if (gradient_into(
          "huber_loss_backward", grad_output, self, target, reduction,
          [&](Formula& f) { return huber_gradient(f, delta); }, grad_input))
    return grad_input;
  torch::jit::Stack stack{grad_output, self, target, reduction, delta, grad_input};
  call_cpu_fallback("aten::huber_loss_backward", "out", stack);
  return grad_input;
}
at::Tensor npusim_huber_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                      int64_t reduction, double delta) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return npusim_huber_loss_backward_out(grad_output, self, target, reduction, delta, grad_input);
}

at::Tensor& npusim_smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta,
                                      at::Tensor& out) {
  if (loss_into(
          "smooth_l1_loss", self, target, reduction, [&](Formula& f) { return smooth_l1(f, beta); }, out))
    return out;
  torch::jit::Stack stack{self, target, reduction, beta, out};
  call_cpu_fallback("aten::smooth_l1_loss", "out", stack);
  return out;
}
at::Tensor npusim_smooth_l1_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double beta) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_smooth_l1_loss_out(self, target, reduction, beta, out);
}
at::Tensor& npusim_smooth_l1_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                               const at::Tensor& target, int64_t reduction, double beta,
                                               at::Tensor& grad_input) {
  if (gradient_into(
          "smooth_l1_loss_backward", grad_output, self, target, reduction,
          [&](Formula& f) { return smooth_l1_gradient(f, beta); }, grad_input))
    return grad_input;
  torch::jit::Stack stack{grad_output, self, target, reduction, beta, grad_input};
  call_cpu_fallback("aten::smooth_l1_loss_backward", "grad_input", stack);
  return grad_input;
}
at::Tensor npusim_smooth_l1_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                          const at::Tensor& target, int64_t reduction, double beta) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return npusim_smooth_l1_loss_backward_out(grad_output, self, target, reduction, beta, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("binary_cross_entropy", npusim_binary_cross_entropy);
  m.impl("binary_cross_entropy.out", npusim_binary_cross_entropy_out);
  m.impl("binary_cross_entropy_backward", npusim_binary_cross_entropy_backward);
  m.impl("binary_cross_entropy_backward.grad_input", npusim_binary_cross_entropy_backward_out);
  m.impl("huber_loss", npusim_huber_loss);
  m.impl("huber_loss.out", npusim_huber_loss_out);
  m.impl("huber_loss_backward", npusim_huber_loss_backward);
  m.impl("huber_loss_backward.out", npusim_huber_loss_backward_out);
  m.impl("smooth_l1_loss", npusim_smooth_l1_loss);
  m.impl("smooth_l1_loss.out", npusim_smooth_l1_loss_out);
  m.impl("smooth_l1_loss_backward", npusim_smooth_l1_loss_backward);
  m.impl("smooth_l1_loss_backward.grad_input", npusim_smooth_l1_loss_backward_out);
}

}  // namespace npusim::bridge
