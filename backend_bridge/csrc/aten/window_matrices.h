// Pooling and resizing by window matrices: a window's sum or mean along a dimension is a product with a 0/1 (or
// 1/count) matrix whose row o picks output o's window, so average pooling, adaptive or not, in 1, 2 or 3 dimensions,
// is a few tall products on the matrix engine (pooling_ops.cpp, average_pooling_3d.cpp); bicubic and antialiased
// resizing likewise, with a few weights a row (separable_resize_ops.cpp). The matrices are shape constants, made on
// the host.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace npusim::bridge {

// PyTorch's pooled size along one dimension: with ceil_mode a last, partial window counts if it starts inside the
// input or its left padding.
int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode);

// [out, in]: row o is 1 at the inputs of output o's window (positions o * stride - pad + k, k < kernel, inside the
// input; padding adds zeros), 0 elsewhere; on `like`'s device.
at::Tensor window_sums(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad, const at::Tensor& like);

// [out]: what each window's sum is divided by along one dimension, on the host: PyTorch's window size clipped to the
// input and its padding, or to the input alone without count_include_pad (a divisor is the product over dimensions).
at::Tensor window_counts(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad, bool count_include_pad);

// [out, in]: row o averages adaptive pooling's window of inputs floor(o in / out) .. ceil((o + 1) in / out).
at::Tensor window_means(int64_t in, int64_t out, const at::Tensor& like);

// A resize's input samples per output sample along one dimension, as PyTorch computes it in float32: (in - 1) /
// (out - 1) aligning corners, else 1 / scale when a scale is given, else in / out.
float resize_ratio(int64_t in, int64_t out, bool align_corners, std::optional<double> scale);

// left @ plane @ right^T for every plane of `planes` [B, H, W]: [B, OH, OW] for left [OH, H] and right [OW, W].
at::Tensor apply_on_both_sides(const at::Tensor& planes, const at::Tensor& left, const at::Tensor& right);

}  // namespace npusim::bridge
