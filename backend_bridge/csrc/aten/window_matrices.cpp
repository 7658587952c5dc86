#include "window_matrices.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>

#include <algorithm>

namespace npusim::bridge {

int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

at::Tensor window_sums(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad, const at::Tensor& like) {
  at::Tensor sums = at::zeros({out, in}, at::TensorOptions().dtype(at::kFloat));
  auto entries = sums.accessor<float, 2>();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t k = 0; k < kernel; ++k)
      if (const int64_t i = o * stride - pad + k; i >= 0 && i < in) entries[o][i] = 1.0f;
  return sums.to(like.device());
}

at::Tensor window_counts(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad, bool count_include_pad) {
  at::Tensor sizes = at::empty({out}, at::TensorOptions().dtype(at::kFloat));
  auto size = sizes.accessor<float, 1>();
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * stride - pad, end = std::min(start + kernel, in + pad);
    size[o] = static_cast<float>(count_include_pad ? end - start : std::min(end, in) - std::max<int64_t>(start, 0));
  }
  return sizes;
}

float resize_ratio(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  return scale && *scale > 0 ? static_cast<float>(1.0 / *scale) : static_cast<float>(in) / static_cast<float>(out);
}

at::Tensor window_means(int64_t in, int64_t out, const at::Tensor& like) {
  at::Tensor means = at::zeros({out, in}, at::TensorOptions().dtype(at::kFloat));
  auto entries = means.accessor<float, 2>();
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t i = start; i < end; ++i) entries[o][i] = 1.0f / static_cast<float>(end - start);
  }
  return means.to(like.device());
}

// Two GEMMs over all planes at once (the planes' rows, then their columns after a tiled transpose), so pooling runs
// as a few tall products instead of a strided add per window offset or a product per plane.
at::Tensor apply_on_both_sides(const at::Tensor& planes, const at::Tensor& left, const at::Tensor& right) {
  const int64_t count = planes.size(0), height = planes.size(1), width = planes.size(2);
  const at::Tensor columns_done = at::mm(planes.reshape({count * height, width}), right.t());  // [B*H, OW]
  const at::Tensor by_column = columns_done.view({count, height, right.size(0)}).transpose(1, 2);
  const at::Tensor rows_done = at::mm(by_column.reshape({-1, height}), left.t());  // [B*OW, OH]
  return rows_done.view({count, right.size(0), left.size(0)}).transpose(1, 2).contiguous();
}

}  // namespace npusim::bridge
