// The fused Adam / AdamW step (torch._fused_adam_ / _fused_adamw_) over every float32 parameter tensor of a group in
// one launch: a multi-tensor fused kernel (fused.h), one segment per parameter tensor, one pass over parameter,
// gradient and moments. The bias corrections are computed on the device from each tensor's step counter, once per
// tile, so the host never reads it; the hyperparameters are arguments, so a new learning rate needs no new kernel.
#pragma once

#include <cstdint>
#include <span>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/fused.h"

namespace npusim::emitter {

struct AdamSpec {
  bool decoupled_weight_decay = false;  // AdamW: param *= 1 - lr wd; Adam: grad += wd param
  bool weight_decay = false;            // whether wd is non-zero (the step skips it otherwise, as PyTorch's does)
  bool amsgrad = false;
  bool maximize = false;
};

// Each segment's entries of the argument block, 64-bit words: the addresses of param, grad, exp_avg, exp_avg_sq,
// max_exp_avg_sq (amsgrad, else unused) and the float32 step counter (already incremented), then float32 values, one
// to a word (low half): lr, weight_decay, beta1, beta2, eps, ln(beta1), ln(beta2), 1 - beta1, 1 - beta2.
inline constexpr int kAdamTensors = 6;
inline constexpr int kAdamArguments = kAdamTensors + 9;

// The step as a fused kernel's spec over parameter tensors of `elements` elements each (named adam_f32 or
// adamw_f32); emit it with emit_fused.
FusedSpec adam_spec(const AdamSpec& spec, std::span<const int64_t> elements);

}  // namespace npusim::emitter
