// Indexed writes composed from the native index_put and index_add (one indexed-DMA kernel each), on the device:
//   index_copy        self[..., index[i], ...] = source[..., i, ...]: index_put with the index at `dim`
//   put_              self.view(-1)[index] = source (or += with accumulate), negative indices wrapped (through a
//                     contiguous copy of a strided self)
//   unfold_backward   Tensor.unfold's gradient: each window's elements added at their positions along `dim` (windows
//                     that overlap sum there), one index_add over the windows laid side by side
//   col2im            F.fold (so F.unfold's gradient): each patch element added at its pixel of the padded image, one
//                     index_add over the image's flattened pixels, then the padding cropped
// Float32, complex64 through the parts (complex_in_parts.cpp), half precision widened to float32 (float32_compute.cpp).
// Other cases, and the argument errors PyTorch raises, take the CPU fallback.
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/zeros.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/library.h>

#include <vector>

#include "bridge.h"

namespace npusim::bridge {
namespace {

bool float32_on_one_device(std::initializer_list<at::Tensor> tensors) {
  const at::Device device = tensors.begin()->device();
  for (const at::Tensor& t : tensors)
    if (t.scalar_type() != at::kFloat || t.device() != device || !device.is_privateuseone()) return false;
  return true;
}

at::Tensor& npusim_index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                  const at::Tensor& source, at::Tensor& out) {
  if (self.dim() == 0 && source.dim() == 0 && index.numel() == 1 && float32_on_one_device({self, source, out})) {
    c10::maybe_wrap_dim(dim, int64_t{0});  // one element (dimension 0 or -1): a vector of one
    at::Tensor result = at::empty({0}, out.options());
    npusim_index_copy_out(self.reshape({1}), 0, index.reshape({1}), source.reshape({1}), result);
    at::native::resize_output(out, {});
    return out.copy_(result.reshape({}));
  }
  const bool takes = float32_on_one_device({self, source, out}) && index.scalar_type() == at::kLong &&
                     index.dim() <= 1 && index.device() == self.device() && self.dim() > 0;
  if (takes) {
    dim = c10::maybe_wrap_dim(dim, self.dim());
    std::vector<int64_t> expected = self.sizes().vec();  // source's shape: self's with index's length at dim
    expected[dim] = index.numel();
    if (source.sizes() == at::IntArrayRef(expected)) {
      c10::List<std::optional<at::Tensor>> indices;
      for (int64_t d = 0; d < dim; ++d) indices.push_back(std::nullopt);
      indices.push_back(index.reshape({-1}));
      if (!out.is_same(self)) {
        at::native::resize_output(out, self.sizes());
        out.copy_(self);
      }
      return out.index_put_(indices, source);
    }
  }
  torch::jit::Stack stack{self, dim, index, source, out};
  call_cpu_fallback("aten::index_copy", "out", stack);
  return out;
}
at::Tensor npusim_index_copy(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_index_copy_out(self, dim, index, source, out);
}
at::Tensor& npusim_index_copy_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  return npusim_index_copy_out(self, dim, index, source, self);
}

at::Tensor& npusim_put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  if (float32_on_one_device({self, source}) && index.scalar_type() == at::kLong && index.device() == self.device() &&
      index.numel() == source.numel()) {
    at::Tensor laid_out = self.contiguous();  // indices count in row-major order
    laid_out.view({-1}).index_put_({index.reshape({-1})}, source.reshape({-1}), accumulate);
    return laid_out.is_same(self) ? self : self.copy_(laid_out);
  }
  torch::jit::Stack stack{self, index, source, accumulate};
  call_cpu_fallback("aten::put_", "", stack);
  return self;
}

at::Tensor& npusim_unfold_backward_out(const at::Tensor& grad_in, c10::SymIntArrayRef input_sizes, int64_t dim,
                                       int64_t size, int64_t step, at::Tensor& out) {
  const std::vector<int64_t> sizes = C10_AS_INTARRAYREF_SLOW(input_sizes).vec();
  if (float32_on_one_device({grad_in, out}) && sizes.empty() && grad_in.dim() == 1) {
    // A 0-dim input's single window of `size` (0 or 1) elements: its element's gradient is their sum.
    at::native::resize_output(out, {});
    return out.copy_(grad_in.sum());
  }
  if (float32_on_one_device({grad_in, out}) && !sizes.empty() &&
      grad_in.dim() == static_cast<int64_t>(sizes.size()) + 1) {
    dim = c10::maybe_wrap_dim(dim, static_cast<int64_t>(sizes.size()));
    const int64_t windows = grad_in.size(dim);
    // grad_in is [..., windows, ..., size]: each window's elements next to each other along dim, then flattened.
    const at::Tensor side_by_side = grad_in.movedim(-1, dim + 1).flatten(dim, dim + 1);
    const at::TensorOptions longs = grad_in.options().dtype(at::kLong);
    const at::Tensor positions =
        (at::arange(windows, longs).mul_(step).unsqueeze(1) + at::arange(size, longs).unsqueeze(0)).reshape({-1});
    at::Tensor result = at::zeros(sizes, grad_in.options());
    if (grad_in.numel() > 0) result.index_add_(dim, positions, side_by_side);  // nothing to add to an empty result
    at::native::resize_output(out, sizes);
    return out.copy_(result);
  }
  torch::jit::Stack stack{grad_in, sizes, dim, size, step, out};
  call_cpu_fallback("aten::unfold_backward", "out", stack);
  return out;
}
at::Tensor npusim_unfold_backward(const at::Tensor& grad_in, c10::SymIntArrayRef input_sizes, int64_t dim, int64_t size,
                                  int64_t step) {
  at::Tensor out = at::empty({0}, grad_in.options());
  return npusim_unfold_backward_out(grad_in, input_sizes, dim, size, step, out);
}

at::Tensor& npusim_col2im_out(const at::Tensor& self, c10::SymIntArrayRef output_size, at::IntArrayRef kernel_size,
                              at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride,
                              at::Tensor& out) {
  const std::vector<int64_t> image = C10_AS_INTARRAYREF_SLOW(output_size).vec();
  const bool shapes = image.size() == 2 && kernel_size.size() == 2 && dilation.size() == 2 && padding.size() == 2 &&
                      stride.size() == 2 && (self.dim() == 2 || self.dim() == 3);
  if (shapes && float32_on_one_device({self, out})) {
    const at::Tensor columns = self.dim() == 2 ? self.unsqueeze(0) : self;
    const int64_t padded_h = image[0] + 2 * padding[0], padded_w = image[1] + 2 * padding[1];
    const int64_t blocks_h = (padded_h - (dilation[0] * (kernel_size[0] - 1) + 1)) / stride[0] + 1;
    const int64_t blocks_w = (padded_w - (dilation[1] * (kernel_size[1] - 1) + 1)) / stride[1] + 1;
    const int64_t kernel = kernel_size[0] * kernel_size[1];
    if (blocks_h > 0 && blocks_w > 0 && columns.size(1) % kernel == 0 && columns.size(2) == blocks_h * blocks_w) {
      // Column (c, ki, kj) at block (bh, bw) lands on the padded image's pixel (bh sh + ki dh, bw sw + kj dw).
      const at::TensorOptions longs = self.options().dtype(at::kLong);
      const at::Tensor rows = at::arange(kernel_size[0], longs).mul_(dilation[0]).view({-1, 1, 1, 1}) +
                              at::arange(blocks_h, longs).mul_(stride[0]).view({1, 1, -1, 1});
      const at::Tensor cols = at::arange(kernel_size[1], longs).mul_(dilation[1]).view({1, -1, 1, 1}) +
                              at::arange(blocks_w, longs).mul_(stride[1]).view({1, 1, 1, -1});
      const at::Tensor pixels = (rows * padded_w + cols).reshape({-1});  // in (ki, kj, bh, bw) order
      const int64_t batch = columns.size(0), channels = columns.size(1) / kernel;
      const at::Tensor flat = columns.reshape({batch, channels, kernel * columns.size(2)});
      at::Tensor padded = at::zeros({batch, channels, padded_h * padded_w}, self.options());
      if (flat.numel() > 0) padded.index_add_(2, pixels, flat);  // nothing to add to an empty batch
      const at::Tensor summed = padded.view({batch, channels, padded_h, padded_w})
                                    .narrow(2, padding[0], image[0])
                                    .narrow(3, padding[1], image[1]);
      const at::Tensor result = self.dim() == 2 ? summed.squeeze(0) : summed;
      at::native::resize_output(out, result.sizes());
      return out.copy_(result);
    }
  }
  torch::jit::Stack stack{self, image, kernel_size.vec(), dilation.vec(), padding.vec(), stride.vec(), out};
  call_cpu_fallback("aten::col2im", "out", stack);
  return out;
}
at::Tensor npusim_col2im(const at::Tensor& self, c10::SymIntArrayRef output_size, at::IntArrayRef kernel_size,
                         at::IntArrayRef dilation, at::IntArrayRef padding, at::IntArrayRef stride) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_col2im_out(self, output_size, kernel_size, dilation, padding, stride, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_copy", npusim_index_copy);
  m.impl("index_copy_", npusim_index_copy_);
  m.impl("index_copy.out", npusim_index_copy_out);
  m.impl("put_", npusim_put_);
  m.impl("unfold_backward", npusim_unfold_backward);
  m.impl("unfold_backward.out", npusim_unfold_backward_out);
  m.impl("col2im", npusim_col2im);
  m.impl("col2im.out", npusim_col2im_out);
}

}  // namespace npusim::bridge
