// Emits fused scaled-dot-product attention (flash-attention style): for each (batch x head, block of query rows)
// the kernel streams blocks of keys and values through the scratchpad, computes S = Q K^T on the matrix engine,
// scales and (causal) masks it, keeps a running row maximum and sum (the online softmax) on the vector engine, and
// accumulates P V, so the L x S score matrix never goes to DRAM. It also writes each row's log-sum-exp, which the
// backward pass uses to recompute P.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

// Contiguous tensors of `type`: query [heads][q_len][head_dim], key [heads][k_len][head_dim], value
// [heads][k_len][value_dim]; heads is batch x heads. float16 and bfloat16 inputs are widened to float32 in the
// scratchpad, everything is computed in float32, and the output is rounded once.
struct AttentionSpec {
  int64_t heads = 1, q_len = 1, k_len = 1, head_dim = 1, value_dim = 1;
  bool causal = false;                            // query i sees keys 0..i (PyTorch's is_causal: the top-left triangle)
  float scale = 1.0f;                             // multiplies Q K^T
  isa::ElementType type = isa::ElementType::F32;  // of query, key, value and the output: f32, f16 or bf16
};

// The argument block is the addresses of the output [heads][q_len][value_dim] (of `type`), the log-sum-exp
// [heads][q_len] (float32), query, key and value. Throws Unsupported when a block does not fit the scratchpad or
// accumulator.
Kernel emit_attention(const AttentionSpec& spec, const config::ChipConfig& config);

// Whether emit_attention can tile this attention on this chip.
bool attention_fits(const AttentionSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
