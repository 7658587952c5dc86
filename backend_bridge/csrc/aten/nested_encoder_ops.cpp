// Nested tensors on npusim, as far as nn.TransformerEncoder's inference fast path uses them. In eval mode without
// autograd, given a key padding mask, the encoder packs its input into a nested tensor of each sequence's unpadded
// rows (_nested_tensor_from_mask), runs every layer on it (_transformer_encoder_layer_fwd) and pads the result again
// (to_padded_tensor, with zeros). PyTorch routes a PrivateUse1 device down that path; here a nested tensor is a
// device buffer of the sequences back to back, its sizes and offsets on the host (NestedTensorImpl), and a layer runs
// as the dense fast path over the padded batch, the padding masked out of attention, which leaves every unpadded row
// as the nested computation gives it: the padded keys are never attended to, and everything else works row by row.
#include <ATen/NestedTensorImpl.h>
#include <ATen/native/nested/NestedTensorUtils.h>
#include <ATen/ops/_transformer_encoder_layer_fwd.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tensor.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// Whether each row of a [batch, length] host mask is true `lengths` times (its count of true entries), then false.
bool left_aligned(const at::Tensor& kept, const at::Tensor& lengths) {
  const at::Tensor positions = at::arange(kept.size(1)).unsqueeze(0);
  return kept.equal(positions.lt(lengths.unsqueeze(1)));
}

// The sequences' lengths, read on the host from a [batch, length] mask whose true entries (the kept rows) come first
// in every sequence: mask_check makes sure they do, as PyTorch's CPU kernel does.
std::vector<int64_t> kept_lengths(const at::Tensor& mask, bool mask_check) {
  const at::Tensor kept = mask.to(at::kCPU, at::kBool);
  const at::Tensor lengths = kept.sum(1);
  TORCH_CHECK(!mask_check || left_aligned(kept, lengths),
              "_nested_tensor_from_mask: the mask's true entries must come first in every sequence (left-aligned)");
  return std::vector<int64_t>(lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + lengths.numel());
}

// Read on the host, as the encoder reads the answer there to choose its path.
bool npusim_nested_tensor_from_mask_left_aligned(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.dim() == 2, "_nested_tensor_from_mask_left_aligned: expected a [batch, length] mask, got ",
              mask.sizes());
  const at::Tensor kept = mask.to(at::kCPU, at::kBool);
  return left_aligned(kept, kept.sum(1));
}

// The first `lengths[b]` rows of each sequence b of a [batch, length, features] tensor, as a nested tensor.
at::Tensor nested_from_rows(const at::Tensor& padded, const std::vector<int64_t>& lengths) {
  std::vector<at::Tensor> rows;
  std::vector<int64_t> sizes;  // per sequence: its length, then the other dimensions' sizes
  for (size_t b = 0; b < lengths.size(); ++b) {
    rows.push_back(padded[static_cast<int64_t>(b)].narrow(0, 0, lengths[b]).reshape(-1));
    sizes.push_back(lengths[b]);
    for (int64_t d = 2; d < padded.dim(); ++d) sizes.push_back(padded.size(d));
  }
  const at::Tensor nested_sizes =
      at::tensor(sizes, at::kLong).view({static_cast<int64_t>(lengths.size()), padded.dim() - 1});
  return at::native::wrap_buffer(at::cat(rows), nested_sizes);
}

at::Tensor npusim_nested_tensor_from_mask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  TORCH_CHECK(t.dim() == 3 && mask.dim() == 2 && mask.size(0) == t.size(0) && mask.size(1) == t.size(1),
              "_nested_tensor_from_mask: expected a [batch, length, features] tensor and a [batch, length] mask, got ",
              t.sizes(), " and ", mask.sizes());
  return nested_from_rows(t, kept_lengths(mask, mask_check));
}

// A nested tensor's sequences, each a view of its buffer.
std::vector<at::Tensor> sequences(const at::Tensor& nested) {
  const at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(nested);
  const at::Tensor storage = impl->get_unsafe_storage_as_tensor();
  const at::Tensor sizes = impl->get_nested_sizes(), strides = impl->get_nested_strides();
  const at::Tensor offsets = impl->get_storage_offsets();
  std::vector<at::Tensor> result;
  for (int64_t b = 0; b < sizes.size(0); ++b) {
    const auto row = [](const at::Tensor& matrix, int64_t b) {
      return std::vector<int64_t>(matrix[b].data_ptr<int64_t>(), matrix[b].data_ptr<int64_t>() + matrix.size(1));
    };
    result.push_back(storage.as_strided(row(sizes, b), row(strides, b), offsets.data_ptr<int64_t>()[b]));
  }
  return result;
}

// [batch, longest, ...] (or output_size, at least as large), the sequences at the start of each entry, `padding`
// elsewhere.
at::Tensor npusim_nested_to_padded_tensor(const at::Tensor& self, double padding, at::OptionalIntArrayRef output_size) {
  const std::vector<at::Tensor> parts = sequences(self);
  const std::vector<int64_t> longest = at::native::NestedTensor_get_max_size(*at::native::get_nested_tensor_impl(self));
  std::vector<int64_t> shape{static_cast<int64_t>(parts.size())};
  shape.insert(shape.end(), longest.begin(), longest.end());
  if (output_size.has_value()) {
    TORCH_CHECK(output_size->size() == shape.size(), "to_padded_tensor: output_size must have ", shape.size(),
                " dimensions, got ", output_size->size());
    for (size_t d = 0; d < shape.size(); ++d) {
      TORCH_CHECK((*output_size)[d] >= shape[d], "to_padded_tensor: output_size ", *output_size,
                  " is smaller than the nested tensor's largest sizes ", at::IntArrayRef(shape));
      shape[d] = (*output_size)[d];
    }
  }
  at::Tensor padded = at::full(shape, padding, self.options().layout(at::kStrided));
  for (size_t b = 0; b < parts.size(); ++b) {
    at::Tensor place = padded[static_cast<int64_t>(b)];
    for (int64_t d = 0; d < parts[b].dim(); ++d) place = place.narrow(d, 0, parts[b].size(d));
    place.copy_(parts[b]);
  }
  return padded;
}

// A layer over the padded batch with the padding as a key padding mask, then the unpadded rows again.
at::Tensor npusim_nested_transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  TORCH_CHECK(!mask.has_value() || !mask->defined(),
              "_transformer_encoder_layer_fwd: npusim takes a nested input without a mask (its padding is the mask)");
  const at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(src);
  TORCH_CHECK(impl->get_nested_sizes().size(1) == 2,
              "_transformer_encoder_layer_fwd: expected a nested tensor of [length, features] sequences");
  const at::Tensor lengths = impl->get_nested_sizes().select(1, 0).contiguous();
  const std::vector<int64_t> kept(lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + lengths.numel());
  const at::Tensor padded = npusim_nested_to_padded_tensor(src, 0.0, std::nullopt);
  const at::Tensor positions = at::arange(padded.size(1)).unsqueeze(0);
  const at::Tensor padding = positions.ge(lengths.unsqueeze(1)).to(padded.device());
  const at::Tensor out =
      at::_transformer_encoder_layer_fwd(padded, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                         use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                                         norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, padding, 1);
  return nested_from_rows(out, kept);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_tensor_from_mask", npusim_nested_tensor_from_mask);
  m.impl("_nested_tensor_from_mask_left_aligned", npusim_nested_tensor_from_mask_left_aligned);
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("to_padded_tensor", npusim_nested_to_padded_tensor);
  m.impl("_transformer_encoder_layer_fwd", npusim_nested_transformer_encoder_layer_fwd);
}

}  // namespace npusim::bridge
