// Kernels whose layout the emitter cannot express (more dimensions than a DMA walks once they are collapsed, as a
// 6-D permuted view has) run as one launch per slice of the output's outermost dimension, each slice one dimension
// fewer, rather than on the CPU.
#pragma once

#include <ATen/ATen.h>

namespace npusim::bridge {

// The dimension of `out` with the largest stride (the first such): slicing it leaves the most contiguous layout.
inline int64_t outermost_dimension(const at::Tensor& out) {
  int64_t outermost = 0;
  for (int64_t dim = 1; dim < out.dim(); ++dim)
    if (out.stride(dim) > out.stride(outermost)) outermost = dim;
  return outermost;
}

// Runs launch_slice(dim, index) for each slice of out's outermost dimension `dim`; false when out has fewer than two
// dimensions or a slice cannot run natively (only the first can fail: the slices share one layout).
template <typename LaunchSlice>
bool launch_by_slices(const at::Tensor& out, LaunchSlice&& launch_slice) {
  if (out.dim() < 2) return false;
  const int64_t dim = outermost_dimension(out);
  for (int64_t index = 0; index < out.size(dim); ++index)
    if (!launch_slice(dim, index)) return false;
  return true;
}

}  // namespace npusim::bridge
