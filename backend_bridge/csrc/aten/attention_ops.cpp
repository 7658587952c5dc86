// torch.nn.functional.scaled_dot_product_attention on npusim: PyTorch asks each device which SDPA backend to use
// (its _fused_sdp_choice dispatch stub); npusim answers "overrideable" for float attention without dropout, an
// explicit mask or grouped-query heads, and implements that backend's forward as the fused attention kernel (the
// score matrix never reaches DRAM) and its backward as the two fused backward kernels, which recompute P from the
// saved log-sum-exp block by block (native kernels op by op where those do not fit), in float32 for float16 and
// bfloat16 inputs too. Everything else takes PyTorch's math path, itself native.
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "bridge.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

double softmax_scale(const at::Tensor& query, std::optional<double> scale) {
  return scale.value_or(1.0 / std::sqrt(static_cast<double>(query.size(-1))));
}

// The kernel's view of an attention call: query [..., L, E], key [..., S, E], value [..., S, Ev], the leading
// dimensions flattened into heads.
std::optional<emitter::AttentionSpec> attention_spec(const at::Tensor& query, const at::Tensor& key,
                                                     const at::Tensor& value, bool is_causal,
                                                     std::optional<double> scale) {
  if (query.dim() < 2 || key.dim() != query.dim() || value.dim() != query.dim()) return std::nullopt;
  if (!is_float_kind(query.scalar_type())) return std::nullopt;
  for (const at::Tensor* t : {&query, &key, &value})
    if (t->scalar_type() != query.scalar_type() || t->device() != query.device() || t->numel() == 0)
      return std::nullopt;
  for (int64_t d = 0; d + 2 < query.dim(); ++d)
    if (key.size(d) != query.size(d) || value.size(d) != query.size(d)) return std::nullopt;
  if (key.size(-1) != query.size(-1) || value.size(-2) != key.size(-2)) return std::nullopt;
  emitter::AttentionSpec spec;
  spec.q_len = query.size(-2);
  spec.k_len = key.size(-2);
  spec.head_dim = query.size(-1);
  spec.value_dim = value.size(-1);
  spec.heads = query.numel() / (spec.q_len * spec.head_dim);
  spec.causal = is_causal;
  spec.scale = static_cast<float>(softmax_scale(query, scale));
  spec.type = float_element_type(query);
  spec.heads_per_batch = query.dim() >= 3 ? query.size(-3) : 1;
  if (!emitter::attention_fits(spec, runtime_device(query).config())) return std::nullopt;
  return spec;
}

// Where the kernels find a [..., length, dim] tensor's rows in place (its leading dimensions as batch entries x
// heads, the heads being the last of them): nullopt when no layout says it (a row's elements not contiguous, leading
// dimensions before the heads that do not collapse into one, or a stride beyond the DMA's immediate).
std::optional<emitter::AttentionLayout> layout_of(const at::Tensor& t) {
  const int64_t n = t.dim();
  if (t.size(-1) > 1 && t.stride(-1) != 1) return std::nullopt;
  emitter::AttentionLayout layout;
  layout.row = t.size(-2) > 1 ? t.stride(-2) : t.size(-1);
  if (n >= 3) layout.head = t.stride(n - 3);
  if (n >= 4) layout.batch = t.stride(n - 4);
  for (int64_t d = 0; d + 4 < n; ++d)
    if (t.size(d) > 1 && t.stride(d) != t.stride(d + 1) * t.size(d + 1)) return std::nullopt;
  if (layout.row == 0 || layout.row * t.element_size() > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return layout;
}

// The tensor itself where the kernels can read or write it in place (setting `layout`), else a contiguous copy (the
// layout left contiguous).
at::Tensor in_place_or_contiguous(const at::Tensor& t, emitter::AttentionLayout& layout) {
  if (const auto found = layout_of(t)) {
    layout = *found;
    return t;
  }
  layout = {};
  return t.contiguous();
}

}  // namespace

int64_t npusim_fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                                std::optional<double> scale, bool enable_gqa) {
  // torch.nn.attention.sdpa_kernel chooses among the enabled backends.
  if (!at::globalContext().userEnabledOverrideableSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  const bool plain = (!attn_mask || !attn_mask->defined()) && dropout_p == 0.0 && !enable_gqa;
  const bool fused = plain && attention_spec(query, key, value, is_causal, scale).has_value();
  return static_cast<int64_t>(fused ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

namespace {

// A result laid out as the query is (its dimensions in the query's memory order), as PyTorch's meta function for
// the fused attention allocates it: a compiled graph checks the strides it was traced with.
at::Tensor empty_like_query(const at::Tensor& query, at::IntArrayRef shape) {
  if (query.sizes() == shape) return at::empty_like(query);
  std::vector<int64_t> order(query.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return query.stride(a) > query.stride(b); });
  std::vector<int64_t> strides(query.dim());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= shape[*it];
  }
  return at::empty_strided(shape, strides, query.options());
}

using FusedAttention = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
                                  at::Tensor, at::Tensor>;

FusedAttention npusim_fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                      const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                                      bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK((!attn_bias || !attn_bias->defined()) && dropout_p == 0.0,
              "npusim's fused attention takes no attention mask and no dropout (PyTorch's math path does)");
  const auto spec = attention_spec(query, key, value, is_causal, scale);
  TORCH_CHECK(spec,
              "npusim's fused attention takes float query, key and value of one dtype and of matching shapes that "
              "fit its scratchpad; got ",
              query.sizes(), ", ", key.sizes(), ", ", value.sizes(), " of ", query.scalar_type());
  at::DimVector out_shape(query.sizes().begin(), query.sizes().end());
  out_shape.back() = value.size(-1);
  const at::Tensor result = empty_like_query(query, out_shape);
  emitter::AttentionSpec kernel = *spec;
  at::Tensor out = in_place_or_contiguous(result, kernel.output);
  at::Tensor logsumexp =
      at::empty(at::IntArrayRef(out_shape).slice(0, out_shape.size() - 1), query.options().dtype(at::kFloat));
  const at::Tensor q = in_place_or_contiguous(query, kernel.query), k = in_place_or_contiguous(key, kernel.key),
                   v = in_place_or_contiguous(value, kernel.value);
  const uint64_t addresses[] = {device_address(out), device_address(logsumexp), device_address(q), device_address(k),
                                device_address(v)};
  launch_attention(query.device().index(), runtime_device(query), kernel, addresses);
  if (!result.is_same(out)) result.copy_(out);
  // As the meta function: no cumulative sequence lengths or debug mask, and 0-dimensional seed and offset.
  const at::Tensor seed = at::empty({}, query.options().dtype(at::kLong));
  return {result,
          logsumexp,
          at::Tensor(),
          at::Tensor(),
          c10::SymInt(spec->q_len),
          c10::SymInt(spec->k_len),
          seed,
          at::empty({}, query.options().dtype(at::kLong)),
          at::Tensor()};
}

// The backward's two fused kernels (emit_attention_gradient), in float32: dQ (and D = rowsum(dO O)), then dK and dV.
// nullopt when they cannot tile this attention; the caller then takes the unfused path.
std::optional<std::tuple<at::Tensor, at::Tensor, at::Tensor>> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& out, const at::Tensor& logsumexp, bool is_causal, std::optional<double> scale) {
  auto spec = attention_spec(query, key, value, is_causal, scale);
  if (!spec || grad_out.sizes() != out.sizes() || logsumexp.scalar_type() != at::kFloat) return std::nullopt;
  spec->type = isa::ElementType::F32;
  runtime::Device& device = runtime_device(query);
  if (!emitter::attention_gradient_fits(*spec, device.config())) return std::nullopt;
  // Q, K, V and dO are read by both kernels, row block by row block: they are made contiguous first (a strided head
  // of a fused projection puts its rows in few DRAM channels, and on the transformer block of bench/
  // compile_speedup.py reading them in place cost more cycles than the copies). O, read once, and the gradients,
  // written once, stay where they are (the gradients laid out as their inputs, as the meta function's empty_like).
  emitter::AttentionGradientSpec kernel{*spec};
  emitter::AttentionSpec& a = kernel.attention;
  const auto wide = [](const at::Tensor& t, emitter::AttentionLayout& layout) {
    return in_place_or_contiguous(t.to(at::kFloat), layout);
  };
  const auto contiguous = [](const at::Tensor& t) { return t.to(at::kFloat).contiguous(); };
  const at::Tensor q = contiguous(query), k = contiguous(key), v = contiguous(value), d_out = contiguous(grad_out),
                   o = wide(out, a.output), lse = logsumexp.contiguous();
  const at::Tensor grad_query = in_place_or_contiguous(at::empty_like(query, at::kFloat), kernel.grad_query),
                   grad_key = in_place_or_contiguous(at::empty_like(key, at::kFloat), kernel.grad_key),
                   grad_value = in_place_or_contiguous(at::empty_like(value, at::kFloat), kernel.grad_value),
                   row_dots = at::empty_like(lse);
  const int index = query.device().index();
  const uint64_t first[] = {device_address(grad_query), device_address(row_dots), device_address(q),
                            device_address(k),          device_address(v),        device_address(d_out),
                            device_address(o),          device_address(lse)};
  kernel.part = emitter::AttentionGradient::Query;
  launch_attention_gradient(index, device, kernel, first);
  const uint64_t second[] = {device_address(grad_key), device_address(grad_value), device_address(q),
                             device_address(k),        device_address(v),          device_address(d_out),
                             device_address(lse),      device_address(row_dots)};
  kernel.part = emitter::AttentionGradient::KeyValue;
  launch_attention_gradient(index, device, kernel, second);
  return std::tuple{grad_query, grad_key, grad_value};
}

// With P = softmax(S), S = scale Q K^T (causal: -inf right of the diagonal), dO the output's gradient:
// dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ = scale dS K, dK = scale dS^T Q; in float32, as the
// forward computes, the gradients then rounded to the inputs' type. The fused kernels where they fit, else native
// kernels op by op.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npusim_fused_attention_backward(
    const at::Tensor& grad_out_, const at::Tensor& query_, const at::Tensor& key_, const at::Tensor& value_,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out_,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, int64_t max_q, int64_t max_k,
    double dropout_p, bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    std::optional<double> scale) {
  // Laid out like the inputs, as the meta function (empty_like) promises.
  const auto like = [](const at::Tensor& input, const at::Tensor& gradient) {
    const at::Tensor result = at::empty_like(input);
    const bool same = result.strides() == gradient.strides() && result.scalar_type() == gradient.scalar_type();
    return same ? gradient : result.copy_(gradient);
  };
  if (const auto fused = fused_attention_backward(grad_out_, query_, key_, value_, out_, logsumexp, is_causal, scale)) {
    const auto& [grad_query, grad_key, grad_value] = *fused;
    return {like(query_, grad_query), like(key_, grad_key), like(value_, grad_value), at::Tensor()};
  }
  const auto wide = [](const at::Tensor& t) { return t.to(at::kFloat); };
  const at::Tensor grad_out = wide(grad_out_), query = wide(query_), key = wide(key_), value = wide(value_),
                   out = wide(out_);
  const double factor = softmax_scale(query, scale);
  at::Tensor scores = at::matmul(query, key.transpose(-2, -1)).mul_(factor);
  if (is_causal) {
    const at::Tensor hidden = at::ones({query.size(-2), key.size(-2)}, query.options().dtype(at::kBool)).triu_(1);
    scores.masked_fill_(hidden, -std::numeric_limits<double>::infinity());
  }
  const at::Tensor probabilities = at::exp(scores.sub_(logsumexp.unsqueeze(-1)));
  const at::Tensor grad_value = at::matmul(probabilities.transpose(-2, -1), grad_out);
  const at::Tensor grad_probabilities = at::matmul(grad_out, value.transpose(-2, -1));
  const at::Tensor row_dot = at::sum(grad_out.mul(out), {-1}, /*keepdim=*/true);
  const at::Tensor grad_scores = probabilities.mul(grad_probabilities.sub_(row_dot));
  const at::Tensor grad_query = at::matmul(grad_scores, key).mul_(factor);
  const at::Tensor grad_key = at::matmul(grad_scores.transpose(-2, -1), query).mul_(factor);
  return {like(query_, grad_query), like(key_, grad_key), like(value_, grad_value), at::Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", npusim_fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", npusim_fused_attention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", npusim_fused_attention_backward);
}

}  // namespace npusim::bridge

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &npusim::bridge::npusim_fused_sdp_choice)
}  // namespace at::native
