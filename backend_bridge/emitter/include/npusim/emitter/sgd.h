// Emits the fused SGD step (torch._fused_sgd_, SGD with fused=True) for one float32 parameter tensor: weight decay,
// momentum (the buffer set to the gradient on the first step), dampening, Nesterov and maximize in one pass.
// Hyperparameters and sizes are arguments, so one program serves every tensor and learning rate.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

struct SgdSpec {
  bool weight_decay = false;  // whether the decay is non-zero
  bool momentum = false;      // whether momentum is non-zero (else there is no buffer)
  bool first_step = false;    // the buffer starts as the gradient
  bool nesterov = false;
  bool maximize = false;
};

// The argument block, 64-bit words: the addresses of param, grad and momentum_buffer (unused without momentum), the
// element count, then float32 values two to a word (low half first): lr, weight_decay, momentum, 1 - dampening.
Kernel emit_sgd(const SgdSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
