// Selections composed from native kernels on the device:
//   channel_shuffle     the channels viewed as [groups, C / groups] and transposed: one copy
//   repeat_interleave   (the index form) output position j takes the index of the first running total of the
//                       repeats above j: a cumsum and a bucketize
//   index_fill          a per-position mask along the dimension (an index_put of true), then masked_fill
//   masked_scatter      the mask's true positions (stream compaction), then an index_put of the source
//   max_unpool2d        a scatter of each value to its index in its plane
//   im2col (unfold)     a strided view of the zero-padded input, copied
// Other dtypes and devices take the CPU fallback, which also raises PyTorch's own errors.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bucketize.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ge.h>
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

// The source's first elements, in order, into the positions where the (broadcast) mask is true.
at::Tensor& npusim_masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  if (self.device().is_privateuseone() && mask.device() == self.device() && source.device() == self.device() &&
      mask.scalar_type() == at::kBool && source.scalar_type() == self.scalar_type() &&
      element_type(self.scalar_type())) {
    const at::Tensor positions = true_positions(mask.expand(self.sizes()));
    TORCH_CHECK(source.numel() >= positions.numel(), "masked_scatter: expected source to have at least ",
                positions.numel(), " elements (one per true element of the mask), got ", source.numel());
    at::Tensor flat = self.is_contiguous() ? self.view({-1}) : self.reshape({-1});
    flat.index_put_({positions}, source.reshape({-1}).narrow(0, 0, positions.numel()));
    if (!self.is_contiguous()) self.copy_(flat.view(self.sizes()));
    return self;
  }
  torch::jit::Stack stack{self, mask, source};
  call_cpu_fallback("aten::masked_scatter_", "", stack);
  return self;
}

// Each value to its index (h * W + w) of its plane of the [.., OH, OW] output, zeros elsewhere: a scatter.
at::Tensor& npusim_max_unpool2d_out(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef size,
                                    at::Tensor& out) {
  if (self.device().is_privateuseone() && indices.device() == self.device() && indices.scalar_type() == at::kLong &&
      (self.dim() == 3 || self.dim() == 4) && size.size() == 2 && indices.sizes() == self.sizes() &&
      element_type(self.scalar_type()) && out.scalar_type() == self.scalar_type()) {
    const int64_t height = size[0].expect_int(), width = size[1].expect_int();
    const int64_t planes = self.numel() / std::max<int64_t>(self.size(-1) * self.size(-2), 1);
    std::vector<int64_t> shape = self.sizes().vec();
    shape[shape.size() - 2] = height;
    shape[shape.size() - 1] = width;
    at::Tensor result = at::zeros({planes, height * width}, self.options());
    if (self.numel() > 0) result.scatter_(1, indices.reshape({planes, -1}), self.reshape({planes, -1}));
    at::native::resize_output(out, shape);
    return out.copy_(result.view(shape));
  }
  torch::jit::Stack stack{self, indices, c10::IValue(size.vec()), out};
  call_cpu_fallback("aten::max_unpool2d", "out", stack);
  return out;
}
at::Tensor npusim_max_unpool2d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef size) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_max_unpool2d_out(self, indices, size, out);
}

// unfold: every sliding window's patch as a column, [N, C kh kw, L]: a strided view of the zero-padded input,
// copied once.
at::Tensor& npusim_im2col_out(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef dilation,
                              at::IntArrayRef padding, at::IntArrayRef stride, at::Tensor& out) {
  if (self.device().is_privateuseone() && (self.dim() == 3 || self.dim() == 4) && element_type(self.scalar_type()) &&
      out.scalar_type() == self.scalar_type() && kernel.size() == 2 && dilation.size() == 2 && padding.size() == 2 &&
      stride.size() == 2 && self.size(-1) > 0 && self.size(-2) > 0 && self.size(-3) > 0) {
    const at::Tensor input = self.dim() == 3 ? self.unsqueeze(0) : self;
    const int64_t n = input.size(0), c = input.size(1), padded_h = input.size(2) + 2 * padding[0],
                  padded_w = input.size(3) + 2 * padding[1];
    const int64_t out_h = (padded_h - dilation[0] * (kernel[0] - 1) - 1) / stride[0] + 1;
    const int64_t out_w = (padded_w - dilation[1] * (kernel[1] - 1) - 1) / stride[1] + 1;
    if (out_h > 0 && out_w > 0) {
      at::Tensor padded = at::zeros({n, c, padded_h, padded_w}, input.options());
      padded.narrow(2, padding[0], input.size(2)).narrow(3, padding[1], input.size(3)).copy_(input);
      const at::Tensor windows =
          padded.as_strided({n, c, kernel[0], kernel[1], out_h, out_w},
                            {c * padded_h * padded_w, padded_h * padded_w, dilation[0] * padded_w, dilation[1],
                             stride[0] * padded_w, stride[1]});
      at::Tensor columns = windows.reshape({n, c * kernel[0] * kernel[1], out_h * out_w});
      if (self.dim() == 3) columns = columns.squeeze(0);
      at::native::resize_output(out, columns.sizes());
      return out.copy_(columns);
    }
  }
  torch::jit::Stack stack{self, kernel.vec(), dilation.vec(), padding.vec(), stride.vec(), out};
  call_cpu_fallback("aten::im2col", "out", stack);
  return out;
}
at::Tensor npusim_im2col(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef dilation,
                         at::IntArrayRef padding, at::IntArrayRef stride) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_im2col_out(self, kernel, dilation, padding, stride, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("masked_scatter_", npusim_masked_scatter_);
  m.impl("max_unpool2d", npusim_max_unpool2d);
  m.impl("max_unpool2d.out", npusim_max_unpool2d_out);
  m.impl("im2col", npusim_im2col);
  m.impl("im2col.out", npusim_im2col_out);
  m.impl("index_fill_.int_Tensor", npusim_index_fill_tensor_);
  m.impl("channel_shuffle", npusim_channel_shuffle);
  m.impl("repeat_interleave.Tensor", npusim_repeat_interleave);
  m.impl("index_fill_.int_Scalar", npusim_index_fill_);
}

}  // namespace npusim::bridge
