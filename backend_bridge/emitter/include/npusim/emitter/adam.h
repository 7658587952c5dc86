// Emits the fused Adam / AdamW step (torch._fused_adam_ / _fused_adamw_) for one float32 parameter tensor: one pass
// over parameter, gradient and moments, tile by tile on all cores, with the bias corrections computed on the device
// from the step counter, so the host never reads it. Hyperparameters and sizes are arguments: one program serves
// every parameter tensor and every learning rate.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

struct AdamSpec {
  bool decoupled_weight_decay = false;  // AdamW: param *= 1 - lr wd; Adam: grad += wd param
  bool weight_decay = false;            // whether wd is non-zero (the step skips it otherwise, as PyTorch's does)
  bool amsgrad = false;
  bool maximize = false;
};

// The argument block, 64-bit words: the addresses of param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad, else
// unused) and the float32 step counter (already incremented), the element count, then float32 values two to a word
// (low half first): lr, weight_decay, beta1, beta2, eps, ln(beta1), ln(beta2), 1 - beta1, 1 - beta2, 1.
inline constexpr int kAdamScalarWords = 5;
Kernel emit_adam(const AdamSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
