// PyTorch's inference fast paths for transformers (nn.MultiheadAttention and nn.TransformerEncoderLayer in eval mode
// without autograd call _native_multi_head_attention and _transformer_encoder_layer_fwd), composed from npusim's
// native kernels as PyTorch's CPU and CUDA kernels compose them: the q, k, v projection, attention per head (the fused
// attention kernel when no weights are asked for and nothing is masked; else the scores, their softmax with the masked
// ones at -inf, and the product with v), the output projection; the encoder layer adds its residuals, layer norms
// (before or after) and feed-forward block (ReLU or exact GELU).
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <ATen/ops/softmax.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
#include <tuple>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// [B, L, D] as heads [B, H, L, D / H].
at::Tensor heads(const at::Tensor& x, int64_t num_heads) {
  return x.view({x.size(0), x.size(1), num_heads, x.size(2) / num_heads}).transpose(1, 2);
}

// The fast path's mask (true, or non-zero: do not attend) as a bool one broadcasting over the scores [B, H, L, S], as
// PyTorch's _masked_softmax reads it: mask_type 1 is a key padding mask [B, S], 0 a [L, S] mask, 2 the scores' shape.
at::Tensor masked_out(const at::Tensor& mask, std::optional<int64_t> mask_type) {
  const at::Tensor out = mask.scalar_type() == at::kBool ? mask : mask.to(at::kBool);
  if (out.dim() == 2 && mask_type == 1) return out.view({out.size(0), 1, 1, out.size(1)});
  if (out.dim() == 2) return out.view({1, 1, out.size(0), out.size(1)});
  return out;
}

std::tuple<at::Tensor, at::Tensor> npusim_native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_heads,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, "expected 3-D `query`, `key` and `value`");
  TORCH_CHECK(embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads");
  at::Tensor q, k, v;
  if (query.is_same(key) && key.is_same(value)) {  // self-attention: one projection
    const auto parts = at::linear(query, qkv_weight, qkv_bias).split(embed_dim, -1);
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    const auto weights = qkv_weight.split(embed_dim), biases = qkv_bias.split(embed_dim);
    q = at::linear(query, weights[0], biases[0]);
    k = at::linear(key, weights[1], biases[1]);
    v = at::linear(value, weights[2], biases[2]);
  }
  q = heads(q, num_heads), k = heads(k, num_heads), v = heads(v, num_heads);
  at::Tensor context, weights;  // undefined (None) unless asked for
  if (!need_weights && !mask.has_value()) {
    context = at::scaled_dot_product_attention(q, k, v);
  } else {
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
    if (mask.has_value()) scores.masked_fill_(masked_out(*mask, mask_type).expand(scores.sizes()), -INFINITY);
    const at::Tensor probabilities = at::softmax(scores, -1);  // a fully masked row is NaN, as on the CPU
    context = at::matmul(probabilities, v);
    if (need_weights) weights = average_attn_weights ? probabilities.sum(1).div_(num_heads) : probabilities;
  }
  const at::Tensor merged = context.transpose(1, 2).reshape({query.size(0), query.size(1), embed_dim});
  return {at::linear(merged, proj_weight, proj_bias), weights};
}

at::Tensor npusim_transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  if (src.numel() == 0) return src.clone();
  const auto norm = [&](const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
    return at::layer_norm(x, {embed_dim}, weight, bias, eps);
  };
  at::Tensor x = norm_first ? norm(src, norm_weight_1, norm_bias_1) : src;
  x = std::get<0>(npusim_native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                                     proj_bias, mask, false, true, mask_type));
  x.add_(src);
  if (!norm_first) x = norm(x, norm_weight_1, norm_bias_1);
  const at::Tensor before_ffn = x;
  if (norm_first) x = norm(x, norm_weight_2, norm_bias_2);
  x = at::linear(x, ffn_weight_1, ffn_bias_1);
  x = use_gelu ? at::gelu(x) : at::relu(x);
  x = at::linear(x, ffn_weight_2, ffn_bias_2);
  x.add_(before_ffn);
  if (!norm_first) x = norm(x, norm_weight_2, norm_bias_2);
  return x;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", npusim_native_multi_head_attention);
  m.impl("_transformer_encoder_layer_fwd", npusim_transformer_encoder_layer_fwd);
}

}  // namespace npusim::bridge
