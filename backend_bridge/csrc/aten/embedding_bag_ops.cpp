// Native nn.EmbeddingBag / F.embedding_bag (sum, mean and max bags; per-sample weights; padding_idx;
// include_last_offset; max_norm's renormalisation, nn.Embedding's too) and its gradients, float32, composed from native
// kernels, so recommendation models' sparse features stay on the device:
//   bags      each index's bag is the count of bag starts at or before it (a scatter-add of ones at the offsets, then
//             a cumsum); indices equal to padding_idx are left out (a 0/1 weight per index);
//   sum/mean  the gathered rows, scaled by their per-sample weights, added into their bags (the row scatter-add
//             kernel); a mean divides by the bag's count of kept indices;
//   max       a scatter of amax into the bags, then the index of each maximum: the first position in the bag that
//             holds it (a scatter of amin over positions), as the CPU's kernel keeps its first maximum;
//   backward  each index's row of the weight gradient receives its bag's gradient, scaled as the forward scaled it
//             (divided by the index's count in the batch with scale_grad_by_freq), by the row scatter-add kernel; in
//             max mode, each maximum's weight row receives the gradient.
// The auxiliary results are laid out as PyTorch's meta function predicts for an accelerator (as CUDA's): offset2bag
// [n], bag_size [offsets], max_indices [bags, D] in max mode (-1 for an empty bag), else empty. Empty bags give zeros.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <limits>
#include <optional>
#include <tuple>

#include "bridge.h"

namespace npusim::bridge {
namespace {

constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

// Where each index goes.
struct Bags {
  int64_t count;         // bags
  at::Tensor of_index;   // int64 [n]: each index's bag
  at::Tensor kept;       // float [n]: 0 where the index is padding_idx, else 1
  at::Tensor kept_size;  // float [count]: each bag's kept indices
};

Bags bags_of(const at::Tensor& indices, const at::Tensor& offsets, bool include_last_offset, int64_t padding_idx,
             const at::TensorOptions& float_options) {
  const int64_t n = indices.numel();
  Bags bags;
  bags.count = offsets.size(0) - (include_last_offset ? 1 : 0);
  // Bag b starts at offsets[b]; bag 0 at 0, so the later starts are counted, one more for each at or before i.
  const at::Tensor later_starts = offsets.narrow(0, 1, std::max<int64_t>(bags.count - 1, 0)).to(at::kLong);
  const at::Tensor starts =
      at::zeros({n + 1}, indices.options().dtype(at::kLong)).index_add_(0, later_starts, at::ones_like(later_starts));
  bags.of_index = at::cumsum(starts, 0).narrow(0, 0, n);
  bags.kept = padding_idx >= 0 ? indices.ne(padding_idx).to(float_options.dtype()) : at::ones({n}, float_options);
  bags.kept_size = at::zeros({bags.count}, float_options).index_add_(0, bags.of_index, bags.kept);
  return bags;
}

bool runs_natively(const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
                   const at::Tensor& per_sample_weights) {
  const auto here = [&](const at::Tensor& t) { return t.device() == weight.device(); };
  return weight.scalar_type() == at::kFloat && weight.dim() == 2 && indices.dim() == 1 && offsets.dim() == 1 &&
         here(indices) && here(offsets) &&
         (!per_sample_weights.defined() ||
          (per_sample_weights.scalar_type() == at::kFloat && here(per_sample_weights)));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag_on_cpu(
    const char* name, const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets,
    bool scale_grad_by_freq, int64_t mode, bool sparse, const std::optional<at::Tensor>& per_sample_weights,
    bool include_last_offset, int64_t padding_idx) {
  torch::jit::Stack stack{
      weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset, padding_idx};
  call_cpu_fallback(name, "", stack);
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor(), stack[3].toTensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npusim_embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices_, const at::Tensor& offsets, bool scale_grad_by_freq,
    int64_t mode, bool sparse, const std::optional<at::Tensor>& per_sample_weights, bool include_last_offset,
    int64_t padding_idx) {
  // An absent tensor may also come as an undefined one (the padding_idx overload passes it on so).
  const at::Tensor sample_weights = per_sample_weights.value_or(at::Tensor());
  if (!runs_natively(weight, indices_, offsets, sample_weights))
    return embedding_bag_on_cpu("aten::_embedding_bag", weight, indices_, offsets, scale_grad_by_freq, mode, sparse,
                                per_sample_weights, include_last_offset, padding_idx);
  TORCH_CHECK(!sample_weights.defined() || mode == kSum,
              "embedding_bag: per_sample_weights only supported with mode='sum'");
  TORCH_CHECK(!include_last_offset || offsets.size(0) >= 1, "include_last_offset: numBags should be at least 1");
  TORCH_CHECK(!sample_weights.defined() || sample_weights.sizes() == indices_.sizes(),
              "embedding_bag: expected per_sample_weights to be a 1-D tensor the size of indices, got ",
              sample_weights.sizes(), " for ", indices_.sizes());
  const at::Tensor indices = indices_.to(at::kLong);
  const Bags bags = bags_of(indices, offsets, include_last_offset, padding_idx, weight.options());
  const int64_t width = weight.size(1), n = indices.numel();
  const at::Tensor rows = weight.index_select(0, indices);  // [n, D]
  at::Tensor output, max_indices = at::empty({0}, indices_.options());
  if (mode == kMax) {
    // Padding rows and empty bags never win: -inf, then empty bags' zeros.
    const at::Tensor candidates =
        at::where(bags.kept.unsqueeze(1).gt(0), rows, -std::numeric_limits<float>::infinity());
    const at::Tensor bag_of_element = bags.of_index.unsqueeze(1).expand({-1, width});
    const at::Tensor best = at::full({bags.count, width}, -std::numeric_limits<double>::infinity(), weight.options())
                                .scatter_reduce(0, bag_of_element, candidates, "amax");
    const at::Tensor empty_bag = bags.kept_size.eq(0).unsqueeze(1);
    output = at::where(empty_bag, 0.0, best);
    // The first position in its bag holding the maximum, then the weight row there.
    const at::Tensor position = at::arange(n, indices.options()).unsqueeze(1).expand({-1, width});
    const at::Tensor holds_maximum = candidates.eq(best.index_select(0, bags.of_index));
    const at::Tensor first = at::full({bags.count, width}, n, indices.options())
                                 .scatter_reduce(0, bag_of_element, at::where(holds_maximum, position, n), "amin");
    const at::Tensor row_of_first =  // (position n: an empty bag's, replaced below)
        n == 0 ? first : indices.index_select(0, at::where(first.lt(n), first, 0).flatten()).view_as(first);
    max_indices = at::where(empty_bag, -1, row_of_first).to(indices_.scalar_type());
  } else {
    at::Tensor scale = bags.kept;
    if (sample_weights.defined()) scale = scale * sample_weights;
    output = at::zeros({bags.count, width}, weight.options()).index_add_(0, bags.of_index, rows * scale.unsqueeze(1));
    if (mode == kMean) output.div_(at::clamp_min(bags.kept_size, 1).unsqueeze(1));
  }
  at::Tensor bag_size = at::zeros({offsets.size(0)}, indices_.options());
  bag_size.narrow(0, 0, bags.count).copy_(bags.kept_size);
  return {output, bags.of_index.to(indices_.scalar_type()), bag_size, max_indices};
}

at::Tensor npusim_embedding_bag_dense_backward(const at::Tensor& grad, const at::Tensor& indices_,
                                               const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                               const at::Tensor& maximum_indices, int64_t num_weights,
                                               bool scale_grad_by_freq, int64_t mode,
                                               const std::optional<at::Tensor>& per_sample_weights,
                                               int64_t padding_idx) {
  // Only npusim's own forward gives this backward its offset2bag (the CPU's may leave it empty), so no fallback here.
  TORCH_CHECK(grad.scalar_type() == at::kFloat, "npusim: embedding_bag's backward computes in float32, got ",
              grad.scalar_type());
  const int64_t width = grad.size(1);
  const at::Tensor weight_grad = at::zeros({num_weights, width}, grad.options());
  if (mode == kMax) {
    const at::Tensor won = maximum_indices.ge(0);
    return weight_grad.scatter_add_(0, at::where(won, maximum_indices, 0).to(at::kLong), at::where(won, grad, 0.0));
  }
  const at::Tensor indices = indices_.to(at::kLong), bag = offset2bag.to(at::kLong);
  at::Tensor scale =
      padding_idx >= 0 ? indices.ne(padding_idx).to(at::kFloat) : at::ones(indices.sizes(), grad.options());
  if (per_sample_weights && per_sample_weights->defined()) scale = scale * *per_sample_weights;
  if (mode == kMean) scale = scale / at::clamp_min(bag_size.index_select(0, bag).to(at::kFloat), 1);
  if (scale_grad_by_freq) {
    const at::Tensor frequency = at::zeros({num_weights}, grad.options()).index_add_(0, indices, at::ones_like(scale));
    scale = scale / frequency.index_select(0, indices);
  }
  return weight_grad.index_add_(0, indices, grad.index_select(0, bag) * scale.unsqueeze(1));
}

// autograd's entry point (a CPU kernel only in PyTorch, hence registered here too): dense gradients only.
at::Tensor npusim_embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                         const at::Tensor& offset2bag, const at::Tensor& bag_size,
                                         const at::Tensor& maximum_indices, int64_t num_weights,
                                         bool scale_grad_by_freq, int64_t mode, bool sparse,
                                         const std::optional<at::Tensor>& per_sample_weights, int64_t padding_idx) {
  TORCH_CHECK(!sparse, "npusim: embedding_bag with sparse=True is not supported (npusim has no sparse tensors); ",
              "use sparse=False");
  return npusim_embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                             scale_grad_by_freq, mode, per_sample_weights, padding_idx);
}

at::Tensor npusim_embedding_bag_per_sample_weights_backward(const at::Tensor& grad, const at::Tensor& weight,
                                                            const at::Tensor& indices_, const at::Tensor& offsets,
                                                            const at::Tensor& offset2bag, int64_t mode,
                                                            int64_t padding_idx) {
  TORCH_CHECK(mode == kSum, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  const at::Tensor indices = indices_.to(at::kLong);
  at::Tensor products = (grad.index_select(0, offset2bag.to(at::kLong)) * weight.index_select(0, indices)).sum(1);
  return padding_idx >= 0 ? products * indices.ne(padding_idx) : products;
}

// max_norm's renormalisation (nn.Embedding and nn.EmbeddingBag with max_norm), in place: each row an index names is
// scaled by max_norm / (norm + 1e-7) where its norm exceeds max_norm, as PyTorch does; a row named twice is written
// twice with the same value.
at::Tensor& npusim_embedding_renorm_(at::Tensor& self, const at::Tensor& indices, double max_norm, double norm_type) {
  if (self.scalar_type() != at::kFloat || self.dim() != 2 || indices.device() != self.device()) {
    torch::jit::Stack stack{self, indices, max_norm, norm_type};
    call_cpu_fallback("aten::embedding_renorm_", "", stack);
    return self;
  }
  const at::Tensor index = indices.flatten().to(at::kLong);
  const at::Tensor rows = self.index_select(0, index);
  const at::Tensor norms = at::linalg_vector_norm(rows, norm_type, 1, /*keepdim=*/true);
  const at::Tensor scale = at::where(norms.gt(max_norm), max_norm / (norms + 1e-7), 1.0);
  return self.index_put_({index}, rows * scale);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("embedding_renorm_", npusim_embedding_renorm_);
  m.impl("_embedding_bag", npusim_embedding_bag);
  m.impl("_embedding_bag_forward_only", npusim_embedding_bag);
  m.impl("_embedding_bag_backward", npusim_embedding_bag_backward);
  m.impl("_embedding_bag_dense_backward", npusim_embedding_bag_dense_backward);
  m.impl("_embedding_bag_per_sample_weights_backward", npusim_embedding_bag_per_sample_weights_backward);
}

}  // namespace npusim::bridge
