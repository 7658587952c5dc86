// Where a boolean mask is true, on the device: the flat positions of its true elements by stream compaction from
// native kernels (an int64 cumsum numbers the true elements, a scatter sends each position to its number, the false
// ones to a spare slot past the end); only the count crosses to the host, as torch.nonzero's size does on CUDA.
// On top of it: torch.nonzero (of any numbers: where x != 0) and nonzero_static, masked_select, and boolean-mask
// indexing (x[mask], x[mask] = v, x[mask] += v).
#include <ATen/ExpandUtils.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {

at::Tensor true_positions(const at::Tensor& mask) {
  const at::Tensor flat = mask.reshape({-1});
  const at::Tensor numbers = at::cumsum(flat.to(at::kLong), 0);  // 1-based number of each true element
  const int64_t count = flat.numel() == 0 ? 0 : numbers[-1].item<int64_t>();
  const at::Tensor slots = at::where(flat, numbers.sub(1), at::Scalar(count));
  at::Tensor positions = at::empty({count + 1}, numbers.options());
  positions.scatter_(0, slots, at::arange(flat.numel(), numbers.options()));
  return positions.narrow(0, 0, count);
}

namespace {

// [count, ndim] coordinates of the nonzero elements (of a bool mask: the true ones; of numbers: those != 0 on the
// device, NaN included as on the CPU), from their flat positions: (position / stride) % size per dim.
at::Tensor npusim_nonzero(const at::Tensor& self) {
  // A complex number is nonzero where either part is (complex_functions.h compares it).
  if (self.scalar_type() == at::kComplexFloat && self.device().is_privateuseone())
    return npusim_nonzero(at::ne(self, 0));
  if (self.dim() == 0 && element_type(self.scalar_type())) {  // a scalar: one coordinate-less row if it is nonzero
    const int64_t count = npusim_nonzero(self.reshape({1})).size(0);
    return at::empty({count, 0}, self.options().dtype(at::kLong));
  }
  if (!element_type(self.scalar_type())) {
    torch::jit::Stack stack{self};
    call_cpu_fallback("aten::nonzero", "", stack);
    return stack[0].toTensor();
  }
  const at::Tensor positions = true_positions(self.scalar_type() == at::kBool ? self : at::ne(self, 0));
  std::vector<at::Tensor> coordinates;
  int64_t stride = self.numel();
  for (int64_t d = 0; d < self.dim(); ++d) {
    stride /= std::max<int64_t>(self.size(d), 1);
    coordinates.push_back(positions.floor_divide(stride).remainder(self.size(d)));
  }
  return at::stack(coordinates, 1);
}

// nonzero's rows, exactly `size` of them: cut there, or padded with rows of `fill_value`.
at::Tensor npusim_nonzero_static(const at::Tensor& self, int64_t size, int64_t fill_value) {
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  const at::Tensor rows = npusim_nonzero(self);
  if (rows.size(0) >= size) return rows.narrow(0, 0, size).clone();
  const at::Tensor padding = at::full({size - rows.size(0), rows.size(1)}, fill_value, rows.options());
  return at::cat({rows, padding});
}

// The selected elements in row-major order of the broadcast shape of self and mask.
at::Tensor npusim_masked_select(const at::Tensor& self, const at::Tensor& mask) {
  if (mask.scalar_type() == at::kBool && mask.device() == self.device() && element_type(self.scalar_type())) {
    const std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
    return self.expand(shape).reshape({-1}).index_select(0, true_positions(mask.expand(shape)));
  }
  torch::jit::Stack stack{self, mask};
  call_cpu_fallback("aten::masked_select", "", stack);
  return stack[0].toTensor();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", npusim_nonzero);
  m.impl("nonzero_static", npusim_nonzero_static);
  m.impl("masked_select", npusim_masked_select);
}

}  // namespace npusim::bridge
