// Native index_select along dim 0 (so nn.Embedding's lookups) as a row-gather kernel, for any dtype: rows are moved
// as bytes; along other dimensions element by element (scatter_gather_ops.cpp); and embedding's backward as a row
// scatter-add kernel, float32. An index outside the table traps on the device and surfaces as PyTorch's IndexError.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "bridge.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

bool gathers_natively(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  return self.dim() >= 1 && at::maybe_wrap_dim(dim, self.dim()) == 0 && index.dim() <= 1 &&
         (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt) && index.device() == self.device();
}

at::Tensor& npusim_index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  if (gathers_natively(self, dim, index) && out.scalar_type() == self.scalar_type()) {
    std::vector<int64_t> shape = self.sizes().vec();
    shape[0] = index.numel();
    at::native::resize_output(out, shape);
    if (out.numel() == 0) return out;
    const at::Tensor table = self.contiguous(), indices = index.contiguous();
    at::Tensor result = out.is_contiguous() ? out : at::empty(shape, out.options());
    const emitter::GatherSpec spec{self.size(0),
                                   static_cast<int64_t>(table.numel() / self.size(0) * table.element_size()),
                                   indices.numel(), static_cast<int>(indices.element_size())};
    const uint64_t addresses[] = {device_address(result), device_address(table), device_address(indices)};
    if (launched_checking_indices(
            runtime_device(out), [&] { launch_gather(out.device().index(), runtime_device(out), spec, addresses); },
            "index out of range in self")) {
      if (!result.is_same(out)) out.copy_(result);
      return out;
    }
  }
  // A 0-dim tensor is a one-element row, and its one selected element a 0-dim result, as on the CPU.
  if (self.dim() == 0 && index.numel() == 1 && index.device() == self.device() &&
      out.scalar_type() == self.scalar_type()) {
    at::Tensor element = at::empty({1}, self.options());
    npusim_index_select_out(self.reshape({1}), 0, index.reshape({1}), element);
    at::native::resize_output(out, {});
    out.copy_(element.reshape({}));
    return out;
  }
  // Along another dimension: element by element.
  const int64_t wrapped = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  if (self.dim() >= 1 && index.dim() <= 1 && index.device() == self.device() &&
      out.scalar_type() == self.scalar_type()) {
    std::vector<int64_t> shape = self.sizes().vec();
    shape[wrapped] = index.numel();
    at::native::resize_output(out, shape);
    if (out.numel() == 0) return out;
    at::Tensor result = out.is_contiguous() ? out : at::empty(shape, out.options());
    if (gather_along(self, wrapped, index.reshape({-1}), result, false, "index out of range in self")) {
      if (!result.is_same(out)) out.copy_(result);
      return out;
    }
  }
  torch::jit::Stack stack{self, dim, index, out};
  call_cpu_fallback("aten::index_select", "out", stack);
  return out;
}

at::Tensor npusim_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_index_select_out(self, dim, index, out);
}

// The embedding table's gradient: zero, then each looked-up row's gradient added to its index's row (padding_idx's
// rows left out). scale_grad_by_freq takes the CPU fallback.
at::Tensor npusim_embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                           int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq) {
  const int64_t row_length = grad_output.dim() > 0 ? grad_output.size(-1) : 0;
  if (!scale_grad_by_freq && grad_output.scalar_type() == at::kFloat && num_weights > 0 && row_length > 0 &&
      (indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt) &&
      indices.device() == grad_output.device() && grad_output.numel() == indices.numel() * row_length) {
    at::Tensor grad_weight = at::zeros({num_weights, row_length}, grad_output.options());
    if (indices.numel() == 0) return grad_weight;
    const at::Tensor rows = grad_output.contiguous(), flat = indices.contiguous();
    const emitter::ScatterAddRowsSpec spec{num_weights, row_length, flat.numel(), static_cast<int>(flat.element_size()),
                                           padding_idx};
    const uint64_t addresses[] = {device_address(grad_weight), device_address(rows), device_address(flat)};
    if (launched_checking_indices(
            runtime_device(grad_output),
            [&] {
              launch_scatter_add_rows(grad_output.device().index(), runtime_device(grad_output), spec, addresses);
            },
            "index out of range in embedding's backward"))
      return grad_weight;
  }
  torch::jit::Stack stack{grad_output, indices, num_weights, padding_idx, scale_grad_by_freq};
  call_cpu_fallback("aten::embedding_dense_backward", "", stack);
  return stack[0].toTensor();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", npusim_index_select);
  m.impl("index_select.out", npusim_index_select_out);
  m.impl("embedding_dense_backward", npusim_embedding_dense_backward);
}

}  // namespace npusim::bridge
