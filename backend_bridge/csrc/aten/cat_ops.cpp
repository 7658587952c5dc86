// Native cat: each input is copied into its slice of the output by the strided copy kernel, for any dtype. Inputs on
// other devices or of other dtypes than the output, and shapes PyTorch rejects, take the CPU fallback (which gives
// PyTorch's own errors).
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "bridge.h"
#include "pointwise_output.h"

namespace npusim::bridge {
namespace {

// The inputs that take part (PyTorch skips legacy empty 1-D tensors), or nothing when the case is not native.
std::optional<std::vector<at::Tensor>> native_inputs(const at::ITensorListRef& tensors, int64_t dim,
                                                     const at::Tensor& out) {
  std::vector<at::Tensor> inputs;
  for (const at::Tensor& t : tensors) {
    if (t.dim() == 1 && t.size(0) == 0) continue;
    if (t.device() != out.device() || t.scalar_type() != out.scalar_type()) return {};
    if (!inputs.empty()) {
      const at::Tensor& first = inputs.front();
      if (t.dim() != first.dim()) return {};
      for (int64_t d = 0; d < t.dim(); ++d)
        if (d != at::maybe_wrap_dim(dim, t.dim()) && t.size(d) != first.size(d)) return {};
    }
    if (at::get_overlap_status(out, t) != at::MemOverlapStatus::No) return {};
    inputs.push_back(t);
  }
  if (inputs.empty() || inputs.front().dim() == 0) return {};
  return inputs;
}

// PyTorch's rule for a result cat resizes: channels-last (2-D or 3-D) when every input is, else contiguous.
c10::MemoryFormat output_memory_format(const at::ITensorListRef& tensors) {
  std::optional<c10::MemoryFormat> format;
  for (const at::Tensor& t : tensors) {
    const c10::MemoryFormat suggested = t.suggest_memory_format();
    if (suggested == c10::MemoryFormat::Contiguous || (format && *format != suggested))
      return c10::MemoryFormat::Contiguous;
    format = suggested;
  }
  return format.value_or(c10::MemoryFormat::Contiguous);
}

at::Tensor& npusim_cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  if (const auto inputs = native_inputs(tensors, dim, out)) {
    const int64_t axis = at::maybe_wrap_dim(dim, inputs->front().dim());
    std::vector<int64_t> shape = inputs->front().sizes().vec();
    shape[axis] = 0;
    for (const at::Tensor& t : *inputs) shape[axis] += t.size(axis);
    resize_output_in_format(out, shape, output_memory_format(tensors));
    int64_t offset = 0;
    for (const at::Tensor& t : *inputs) {
      if (t.numel() > 0) out.narrow(axis, offset, t.size(axis)).copy_(t);
      offset += t.size(axis);
    }
    return out;
  }
  torch::jit::Stack stack{std::vector<at::Tensor>(tensors.begin(), tensors.end()), dim, out};
  call_cpu_fallback("aten::cat", "out", stack);
  return out;
}

at::Tensor npusim_cat(const at::ITensorListRef& tensors, int64_t dim) {
  TORCH_CHECK(tensors.size() > 0, "torch.cat(): expected a non-empty list of Tensors");
  const at::Tensor& first = *tensors.begin();
  at::ScalarType dtype = first.scalar_type();
  for (const at::Tensor& t : tensors) dtype = at::promote_types(dtype, t.scalar_type());
  at::Tensor out = at::empty({0}, first.options().dtype(dtype));
  return npusim_cat_out(tensors, dim, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat", npusim_cat);
  m.impl("cat.out", npusim_cat_out);
}

}  // namespace npusim::bridge
