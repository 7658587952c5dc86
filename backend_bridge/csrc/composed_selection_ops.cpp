// Selections composed from native kernels on the device:
//   channel_shuffle     the channels viewed as [groups, C / groups] and transposed: one copy
//   repeat_interleave   (the index form) output position j takes the index of the first running total of the
//                       repeats above j: a cumsum and a bucketize
//   index_fill          a per-position mask along the dimension (an index_put of true), then masked_fill
// Other dtypes and devices take the CPU fallback, which also raises PyTorch's own errors.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bucketize.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

at::Tensor npusim_channel_shuffle(const at::Tensor& self, c10::SymInt groups_) {
  const int64_t groups = groups_.expect_int();
  if (self.device().is_privateuseone() && self.dim() >= 3 && groups > 0 && self.size(1) % groups == 0) {
    std::vector<int64_t> grouped = self.sizes().vec();
    grouped[1] = self.size(1) / groups;
    grouped.insert(grouped.begin() + 1, groups);
    return self.reshape(grouped).transpose(1, 2).contiguous().view(self.sizes());
  }
  torch::jit::Stack stack{self, groups};
  call_cpu_fallback("aten::channel_shuffle", "", stack);
  return stack[0].toTensor();
}

at::Tensor npusim_repeat_interleave(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  if (repeats.device().is_privateuseone() && repeats.dim() == 1 &&
      (repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt)) {
    const at::Tensor totals = at::cumsum(repeats, 0, at::kLong);
    const int64_t size = repeats.numel() == 0 ? 0 : totals[-1].item<int64_t>();
    TORCH_CHECK(!output_size || output_size->expect_int() == size, "allocated size does not match required size");
    TORCH_CHECK(repeats.numel() == 0 || at::ge(repeats, 0).all().item<bool>(), "repeats can not be negative");
    const at::Tensor positions = at::arange(size, totals.options());
    return at::bucketize(positions, totals, /*out_int32=*/false, /*right=*/true).to(repeats.scalar_type());
  }
  torch::jit::Stack stack{repeats, output_size ? c10::IValue(output_size->expect_int()) : c10::IValue()};
  call_cpu_fallback("aten::repeat_interleave", "Tensor", stack);
  return stack[0].toTensor();
}

at::Tensor& npusim_index_fill_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  if (self.device().is_privateuseone() && index.device() == self.device() && index.scalar_type() == at::kLong &&
      index.dim() <= 1 && element_type(self.scalar_type())) {
    const int64_t wrapped = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
    const int64_t length = self.dim() == 0 ? 1 : self.size(wrapped);
    at::Tensor chosen = at::zeros({length}, self.options().dtype(at::kBool));
    chosen.index_put_({index.reshape({-1})}, at::ones({}, chosen.options()));
    at::Tensor target = self.dim() == 0 ? self.view({1}) : self;  // a 0-dim tensor as a one-element row
    std::vector<int64_t> along(target.dim(), 1);
    along[wrapped] = length;
    target.masked_fill_(chosen.view(along), value);
    return self;
  }
  torch::jit::Stack stack{self, dim, index, value};
  call_cpu_fallback("aten::index_fill_", "int_Scalar", stack);
  return self;
}

// The value as a 0-dim tensor (PyTorch's own requirement): its one element.
at::Tensor& npusim_index_fill_tensor_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return npusim_index_fill_(self, dim, index, value.item());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_fill_.int_Tensor", npusim_index_fill_tensor_);
  m.impl("channel_shuffle", npusim_channel_shuffle);
  m.impl("repeat_interleave.Tensor", npusim_repeat_interleave);
  m.impl("index_fill_.int_Scalar", npusim_index_fill_);
}

}  // namespace npusim::bridge
