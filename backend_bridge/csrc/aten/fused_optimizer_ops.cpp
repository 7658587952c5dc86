// The fused optimizer steps PyTorch's Adam, AdamW and SGD run with fused=True (torch._fused_adam_, _fused_adamw_,
// _fused_sgd_): one multi-tensor kernel per call updates every float32 parameter tensor and its optimizer state in a
// single pass (adam.h, sgd.h), Adam's bias corrections derived on the device from the step counters. Other cases (a
// tensor learning rate, AMP's grad_scale / found_inf, other dtypes) take the CPU fallback, which is exact.
#include <torch/library.h>

#include <bit>
#include <cmath>
#include <vector>

#include "bridge.h"
#include "npusim/emitter/adam.h"
#include "npusim/emitter/sgd.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

uint64_t float_word(double value) { return std::bit_cast<uint32_t>(static_cast<float>(value)); }

// One launch over the parameter tensors (their element counts), with the segments' argument entries in `block`.
void launch_step(const at::Tensor& on, const emitter::FusedSpec& spec, const std::vector<uint64_t>& block) {
  if (!spec.segments.empty()) launch_fused(on.device().index(), runtime_device(on), spec, block);
}

bool is_float32_on(const at::Tensor& tensor, const at::Tensor& like) {
  return tensor.scalar_type() == at::kFloat && tensor.device() == like.device() && tensor.is_contiguous() &&
         tensor.numel() == like.numel();
}

template <bool Decoupled>
void npusim_fused_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                       at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr, double beta1,
                       double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                       const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  bool native = !grad_scale && !found_inf && grads.size() == params.size() && exp_avgs.size() == params.size() &&
                exp_avg_sqs.size() == params.size() && state_steps.size() == params.size() &&
                (!amsgrad || max_exp_avg_sqs.size() == params.size());
  for (size_t i = 0; native && i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    native = p.is_privateuseone() && p.device() == params[0].device() && is_float32_on(p, p) &&
             is_float32_on(grads[i], p) && is_float32_on(exp_avgs[i], p) && is_float32_on(exp_avg_sqs[i], p) &&
             (!amsgrad || is_float32_on(max_exp_avg_sqs[i], p)) && state_steps[i].scalar_type() == at::kFloat &&
             state_steps[i].device() == p.device() && state_steps[i].numel() == 1;
  }
  if (!native) {
    torch::jit::Stack stack{params, grads,        exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,       beta1,
                            beta2,  weight_decay, eps,      amsgrad,     maximize,        grad_scale,  found_inf};
    call_cpu_fallback(Decoupled ? "aten::_fused_adamw_" : "aten::_fused_adam_", "", stack);
    return;
  }
  const emitter::AdamSpec spec{Decoupled, weight_decay != 0.0, amsgrad, maximize};
  std::vector<int64_t> elements;
  std::vector<uint64_t> block;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (p.numel() == 0) continue;
    elements.push_back(p.numel());
    block.insert(block.end(), {device_address(p), device_address(grads[i]), device_address(exp_avgs[i]),
                               device_address(exp_avg_sqs[i]), amsgrad ? device_address(max_exp_avg_sqs[i]) : 0,
                               device_address(state_steps[i]), float_word(lr), float_word(weight_decay),
                               float_word(beta1), float_word(beta2), float_word(eps), float_word(std::log(beta1)),
                               float_word(std::log(beta2)), float_word(1.0 - beta1), float_word(1.0 - beta2)});
  }
  if (!params.empty()) launch_step(params[0], emitter::adam_spec(spec, elements), block);
}

void npusim_fused_sgd(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
                      double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                      const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  const bool with_momentum = momentum != 0.0;
  bool native = !grad_scale && !found_inf && grads.size() == params.size() &&
                (!with_momentum || momentum_buffers.size() == params.size());
  for (size_t i = 0; native && i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    native = p.is_privateuseone() && p.device() == params[0].device() && is_float32_on(p, p) &&
             is_float32_on(grads[i], p) && (!with_momentum || is_float32_on(momentum_buffers[i], p));
  }
  if (!native) {
    torch::jit::Stack stack{params,    grads,    momentum_buffers, weight_decay,  momentum,   lr,
                            dampening, nesterov, maximize,         is_first_step, grad_scale, found_inf};
    call_cpu_fallback("aten::_fused_sgd_", "", stack);
    return;
  }
  const emitter::SgdSpec spec{weight_decay != 0.0, with_momentum, with_momentum && is_first_step, nesterov, maximize};
  std::vector<int64_t> elements;
  std::vector<uint64_t> block;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (p.numel() == 0) continue;
    elements.push_back(p.numel());
    block.insert(block.end(),
                 {device_address(p), device_address(grads[i]), with_momentum ? device_address(momentum_buffers[i]) : 0,
                  float_word(lr), float_word(weight_decay), float_word(momentum), float_word(1.0 - dampening)});
  }
  if (!params.empty()) launch_step(params[0], emitter::sgd_spec(spec, elements), block);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", npusim_fused_adam<false>);
  m.impl("_fused_adamw_", npusim_fused_adam<true>);
  m.impl("_fused_sgd_", npusim_fused_sgd);
}

}  // namespace npusim::bridge
