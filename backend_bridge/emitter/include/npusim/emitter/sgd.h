// The fused SGD step (torch._fused_sgd_, SGD with fused=True) over every float32 parameter tensor of a group in one
// launch: a multi-tensor fused kernel (fused.h), one segment per parameter tensor, with weight decay, momentum (the
// buffer set to the gradient on the first step), dampening, Nesterov and maximize in one pass. The hyperparameters are
// arguments, so a new learning rate needs no new kernel.
#pragma once

#include <cstdint>
#include <span>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/fused.h"

namespace npusim::emitter {

struct SgdSpec {
  bool weight_decay = false;  // whether the decay is non-zero
  bool momentum = false;      // whether momentum is non-zero (else there is no buffer)
  bool first_step = false;    // the buffer starts as the gradient
  bool nesterov = false;
  bool maximize = false;
};

// Each segment's entries of the argument block, 64-bit words: the addresses of param, grad and momentum_buffer
// (unused without momentum), then float32 values, one to a word (low half): lr, weight_decay, momentum,
// 1 - dampening.
inline constexpr int kSgdTensors = 3;
inline constexpr int kSgdArguments = kSgdTensors + 4;

// The step as a fused kernel's spec over parameter tensors of `elements` elements each (named sgd_f32); emit it with
// emit_fused.
FusedSpec sgd_spec(const SgdSpec& spec, std::span<const int64_t> elements);

}  // namespace npusim::emitter
