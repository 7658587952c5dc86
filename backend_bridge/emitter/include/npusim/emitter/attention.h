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

// Where a [batch][heads][length][dim] tensor's elements are, in elements: column d of row i of head h of batch entry
// b is at b * batch + h * head + i * row + d (a view such as the heads of a fused q, k, v projection, read and
// written where it is). All zero: contiguous, [heads][length][dim].
struct AttentionLayout {
  int64_t batch = 0, head = 0, row = 0;
};

// Tensors of `type`: query [heads][q_len][head_dim], key [heads][k_len][head_dim], value [heads][k_len][value_dim],
// the output [heads][q_len][value_dim]; heads is batch entries x heads_per_batch, each tensor laid out as its layout
// says. float16 and bfloat16 inputs are widened to float32 in the scratchpad, everything is computed in float32, and
// the output is rounded once.
struct AttentionSpec {
  int64_t heads = 1, q_len = 1, k_len = 1, head_dim = 1, value_dim = 1;
  bool causal = false;                            // query i sees keys 0..i (PyTorch's is_causal: the top-left triangle)
  float scale = 1.0f;                             // multiplies Q K^T
  isa::ElementType type = isa::ElementType::F32;  // of query, key, value and the output: f32, f16 or bf16
  int64_t heads_per_batch = 1;
  AttentionLayout query, key, value, output;
};

// The layout itself, or for all zeros the contiguous one of a [heads][length][dim] tensor.
AttentionLayout resolved(const AttentionLayout& layout, int64_t heads_per_batch, int64_t length, int64_t dim);

// The argument block is the addresses of the output (of `type`), the log-sum-exp [heads][q_len] (float32,
// contiguous), query, key and value. Throws Unsupported when a block does not fit the scratchpad or accumulator.
Kernel emit_attention(const AttentionSpec& spec, const config::ChipConfig& config);

// Whether emit_attention can tile this attention on this chip.
bool attention_fits(const AttentionSpec& spec, const config::ChipConfig& config);

// The backward of emit_attention, as FlashAttention-2 computes it without atomic adds: two kernels, run in order,
// that recompute P = exp(scale Q K^T - lse) block by block from the saved log-sum-exp, so that no L x S matrix goes
// to DRAM. With dO the output's gradient and D = rowsum(dO * O):
//  - Query: per block of query rows (tall, as the forward's), over the key blocks: dP = dO V^T, dS = P (dP - D),
//    dQ = scale * sum of dS K. It writes D for the second kernel.
//  - KeyValue: per block of key rows (tall), over the query blocks: dV = sum of P^T dO, dK = scale * sum of dS^T Q,
//    computed transposed (S^T = K Q^T) so that every product streams the key block's rows.
// float32 only (the caller widens half precision).
enum class AttentionGradient : uint8_t { Query, KeyValue };

struct AttentionGradientSpec {
  AttentionSpec attention;  // its type must be f32; its output layout is O's
  AttentionGradient part = AttentionGradient::Query;
  AttentionLayout grad_output, grad_query, grad_key, grad_value;  // dO's (as O's shape), dQ's, dK's and dV's
};

// Argument blocks: Query: dQ, D [heads][q_len] (written), query, key, value, dO, O, lse; KeyValue: dK, dV, query,
// key, value, dO, lse, D (D and lse contiguous). Throws Unsupported when a block does not fit the scratchpad or
// accumulator.
Kernel emit_attention_gradient(const AttentionGradientSpec& spec, const config::ChipConfig& config);

// Whether both kernels of the backward can tile this attention on this chip.
bool attention_gradient_fits(const AttentionSpec& spec, const config::ChipConfig& config);

}  // namespace npusim::emitter
