// Emits ISA programs for the negative log-likelihood loss (cross_entropy's second half) and its gradient, on float32
// log-probabilities [rows x classes] and int64 class targets: out[i] = -weight[t_i] * input[i][t_i], summed or
// averaged over the weights of the targets that are not ignore_index. A target outside [0, classes) stops the
// kernel with `trap 1`, never a read outside the input.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"
#include "npusim/emitter/gather.h"

namespace npusim::emitter {

enum class NllReduction { None, Mean, Sum };  // PyTorch's reduction codes 0, 1, 2

struct NllLossSpec {
  int64_t rows = 0, classes = 0;  // input is contiguous [rows x classes]
  bool weighted = false;          // per-class weights, else 1 for every class
  NllReduction reduction = NllReduction::Mean;
  int64_t ignore_index = -100;
};

// Forward: the argument block is out (rows floats for None, else one), total_weight (one float), input, target and
// weight (unused when not weighted) addresses.
Kernel emit_nll_loss(const NllLossSpec& spec, const config::ChipConfig& config);

// Backward: grad_input [rows x classes] must already be zero; the kernel writes the target entries,
// -weight[t_i] * grad (grad_output[i] for None; grad_output, divided by total_weight for Mean). The argument block is
// grad_input, grad_output, target, weight and total_weight addresses.
Kernel emit_nll_loss_backward(const NllLossSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
