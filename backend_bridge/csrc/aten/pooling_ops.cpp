// Native average, max, adaptive average and adaptive max pooling (nn.AvgPool2d, nn.MaxPool2d, nn.AdaptiveAvgPool2d,
// nn.AdaptiveMaxPool2d, and their 1-D forms; nn.AdaptiveMaxPool3d too) forward and backward, float32, composed from
// native kernels.
//   average: window sums as products with 0/1 window matrices on both sides of every plane (R x C^T, two tall GEMMs
//            for the whole batch; padding contributes nothing), divided once; the backward is R^T (g / divisor) C;
//   max:     each of the KH x KW window offsets is a strided view of the padded input; over the offsets in order,
//            an offset's value replaces the best so far where it is greater or NaN (as on the CPU, so ties keep the
//            first), a comparison and three selects each, the index alongside; padding is -inf, which never
//            replaces anything. The backward adds each output's gradient at its index with the
//            row scatter-add kernel.
// ceil_mode's partial last windows and average padding left out of the count (a divisor per output, a product of
// a count per row and one per column) as the CPU has them.
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "bridge.h"
#include "pointwise_output.h"
#include "runtime/kernel_launcher.h"
#include "window_matrices.h"

namespace npusim::bridge {
namespace {

struct Window {
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  int64_t dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false, count_include_pad = true;
  std::optional<int64_t> divisor_override;
};

// The window, or nothing when this case takes the CPU fallback.
std::optional<Window> native_window(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef stride,
                                    at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                    std::optional<int64_t> divisor_override) {
  // An empty batch is fine (an empty result); an empty plane or channel list is PyTorch's error to raise.
  if (input.scalar_type() != at::kFloat || (input.dim() != 3 && input.dim() != 4) || input.size(-1) == 0 ||
      input.size(-2) == 0 || input.size(-3) == 0)
    return {};
  const auto pick = [](at::IntArrayRef values, size_t k, int64_t otherwise) {
    return values.empty() ? otherwise : values[values.size() == 1 ? 0 : k];
  };
  Window w{};
  w.kernel_h = pick(kernel, 0, 1);
  w.kernel_w = pick(kernel, 1, 1);
  w.stride_h = pick(stride, 0, w.kernel_h);
  w.stride_w = pick(stride, 1, w.kernel_w);
  w.pad_h = pick(padding, 0, 0);
  w.pad_w = pick(padding, 1, 0);
  if (divisor_override && *divisor_override == 0) return {};  // PyTorch's own error
  w.ceil_mode = ceil_mode;
  w.count_include_pad = count_include_pad;
  w.divisor_override = divisor_override;
  return w;
}

// The padded input's shape [N, C, Hp, Wp] (N = 1 for 3-D input) and each offset's strided view of it,
// [N, C, OH, OW].
struct PaddedLayout {
  int64_t batch, channels, height, width, padded_h, padded_w, out_h, out_w;

  PaddedLayout(const at::Tensor& input, const Window& w) {
    batch = input.dim() == 4 ? input.size(0) : 1;
    channels = input.size(-3);
    height = input.size(-2);
    width = input.size(-1);
    out_h = pooled_size(height, w.kernel_h, w.stride_h, w.pad_h, w.dilation_h, w.ceil_mode);
    out_w = pooled_size(width, w.kernel_w, w.stride_w, w.pad_w, w.dilation_w, w.ceil_mode);
    // ceil_mode's last window may reach past the right padding: the padded plane covers it.
    padded_h = std::max(height + 2 * w.pad_h, (out_h - 1) * w.stride_h + w.dilation_h * (w.kernel_h - 1) + 1);
    padded_w = std::max(width + 2 * w.pad_w, (out_w - 1) * w.stride_w + w.dilation_w * (w.kernel_w - 1) + 1);
  }
  at::Tensor offset_view(const at::Tensor& padded, const Window& w, int64_t i, int64_t j) const {
    return padded.as_strided({batch, channels, out_h, out_w},
                             {channels * padded_h * padded_w, padded_h * padded_w, padded_w * w.stride_h, w.stride_w},
                             padded.storage_offset() + i * w.dilation_h * padded_w + j * w.dilation_w);
  }
  std::vector<int64_t> pooled_shape(const at::Tensor& input) const {
    std::vector<int64_t> shape = input.sizes().vec();
    shape[shape.size() - 2] = out_h;
    shape[shape.size() - 1] = out_w;
    return shape;
  }
  at::Tensor inner(const at::Tensor& padded, const Window& w) const {
    return padded.narrow(2, w.pad_h, height).narrow(3, w.pad_w, width);
  }
};

// What each output's window sum is divided by, [OH, OW]: PyTorch's window size, clipped to the input and its padding
// (to the input alone without count_include_pad), a product of one count per row and one per column; or the
// override.
at::Tensor divisors(const PaddedLayout& layout, const Window& w, const at::Tensor& like) {
  if (w.divisor_override)
    return at::full({layout.out_h, layout.out_w}, static_cast<double>(*w.divisor_override), like.options());
  const at::Tensor rows =
      window_counts(layout.height, layout.out_h, w.kernel_h, w.stride_h, w.pad_h, w.count_include_pad);
  const at::Tensor columns =
      window_counts(layout.width, layout.out_w, w.kernel_w, w.stride_w, w.pad_w, w.count_include_pad);
  return at::outer(rows, columns).to(like.device());
}

at::Tensor rows_of_windows(const PaddedLayout& layout, const Window& w, const at::Tensor& like) {
  return window_sums(layout.height, layout.out_h, w.kernel_h, w.stride_h, w.pad_h, like);
}
at::Tensor columns_of_windows(const PaddedLayout& layout, const Window& w, const at::Tensor& like) {
  return window_sums(layout.width, layout.out_w, w.kernel_w, w.stride_w, w.pad_w, like);
}

at::Tensor& npusim_avg_pool2d_out(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef stride,
                                  at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                  std::optional<int64_t> divisor_override, at::Tensor& out) {
  const auto w = native_window(input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  if (w && out.scalar_type() == at::kFloat) {
    const PaddedLayout layout(input, *w);
    if (layout.out_h > 0 && layout.out_w > 0 && input.numel() == 0) {
      at::native::resize_output(out, layout.pooled_shape(input));
      return out;
    }
    if (layout.out_h > 0 && layout.out_w > 0) {
      const at::Tensor planes = input.reshape({layout.batch * layout.channels, layout.height, layout.width});
      at::Tensor sum =
          apply_on_both_sides(planes, rows_of_windows(layout, *w, input), columns_of_windows(layout, *w, input));
      sum.div_(divisors(layout, *w, input));
      std::vector<int64_t> shape = input.sizes().vec();
      shape[shape.size() - 2] = layout.out_h;
      shape[shape.size() - 1] = layout.out_w;
      at::native::resize_output(out, shape);
      return out.copy_(sum.view(shape));
    }
  }
  torch::jit::Stack stack{input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, out};
  call_cpu_fallback("aten::avg_pool2d", "out", stack);
  return out;
}

at::Tensor npusim_avg_pool2d(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef stride,
                             at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                             std::optional<int64_t> divisor_override) {
  at::Tensor out = at::empty({0}, input.options());
  return npusim_avg_pool2d_out(input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, out);
}

at::Tensor& npusim_avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& input,
                                           at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                                           bool ceil_mode, bool count_include_pad,
                                           std::optional<int64_t> divisor_override, at::Tensor& grad_input) {
  const auto w = native_window(input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
  if (w && grad_output.scalar_type() == at::kFloat && grad_input.scalar_type() == at::kFloat) {
    const PaddedLayout layout(input, *w);
    const at::Tensor share =
        grad_output.reshape({layout.batch * layout.channels, layout.out_h, layout.out_w}) / divisors(layout, *w, input);
    const at::Tensor spread =
        apply_on_both_sides(share, rows_of_windows(layout, *w, input).t(), columns_of_windows(layout, *w, input).t());
    at::native::resize_output(grad_input, input.sizes());
    return grad_input.copy_(spread.view(input.sizes()));
  }
  torch::jit::Stack stack{grad_output,      input,     kernel, stride, padding, ceil_mode, count_include_pad,
                          divisor_override, grad_input};
  call_cpu_fallback("aten::avg_pool2d_backward", "grad_input", stack);
  return grad_input;
}

at::Tensor npusim_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& input, at::IntArrayRef kernel,
                                      at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                                      bool count_include_pad, std::optional<int64_t> divisor_override) {
  at::Tensor grad_input = at::empty({0}, input.options());
  return npusim_avg_pool2d_backward_out(grad_output, input, kernel, stride, padding, ceil_mode, count_include_pad,
                                        divisor_override, grad_input);
}

// The max pool's window, or nothing when this case takes the CPU fallback.
std::optional<Window> max_window(const at::Tensor& input, at::IntArrayRef kernel, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  auto w = native_window(input, kernel, stride, padding, ceil_mode, true, std::nullopt);
  if (!w) return {};
  w->dilation_h = dilation.empty() ? 1 : dilation[0];
  w->dilation_w = dilation.empty() ? 1 : dilation[dilation.size() == 1 ? 0 : 1];
  return w;
}

// Flat indices (h * W + w in the unpadded plane) of each output's window corner, and of its first position inside
// the input, the index PyTorch reports when nothing in the window beats -inf. Shape constants, made on the host.
std::pair<at::Tensor, at::Tensor> window_indices(const PaddedLayout& layout, const Window& w,
                                                 const at::Device& device) {
  const at::Tensor rows = at::arange(layout.out_h, at::kLong) * w.stride_h - w.pad_h;
  const at::Tensor cols = at::arange(layout.out_w, at::kLong) * w.stride_w - w.pad_w;
  const auto first_inside = [](const at::Tensor& start, int64_t step) {  // start + the fewest steps to reach 0
    return start + (start.neg().clamp_min(0) + step - 1).div(step, "floor") * step;
  };
  const at::Tensor corner = rows.view({-1, 1}) * layout.width + cols.view({1, -1});
  const at::Tensor first =
      first_inside(rows, w.dilation_h).view({-1, 1}) * layout.width + first_inside(cols, w.dilation_w).view({1, -1});
  return {corner.to(device), first.to(device)};
}

std::tuple<at::Tensor&, at::Tensor&> npusim_max_pool2d_with_indices_out(const at::Tensor& input, at::IntArrayRef kernel,
                                                                        at::IntArrayRef stride, at::IntArrayRef padding,
                                                                        at::IntArrayRef dilation, bool ceil_mode,
                                                                        at::Tensor& out, at::Tensor& indices) {
  const auto w = max_window(input, kernel, stride, padding, dilation, ceil_mode);
  if (w && out.scalar_type() == at::kFloat && indices.scalar_type() == at::kLong) {
    const PaddedLayout layout(input, *w);
    if (layout.out_h > 0 && layout.out_w > 0 && input.numel() == 0) {
      at::native::resize_output(out, layout.pooled_shape(input));
      at::native::resize_output(indices, layout.pooled_shape(input));
      return {out, indices};
    }
    if (layout.out_h > 0 && layout.out_w > 0) {
      const at::Tensor source = input.reshape({layout.batch, layout.channels, layout.height, layout.width});
      at::Tensor padded = at::full({layout.batch, layout.channels, layout.padded_h, layout.padded_w},
                                   -std::numeric_limits<double>::infinity(), input.options());
      layout.inner(padded, *w).copy_(source);
      const auto [corner, first] = window_indices(layout, *w, input.device());
      at::Tensor best = at::full({layout.batch, layout.channels, layout.out_h, layout.out_w},
                                 -std::numeric_limits<double>::infinity(), input.options());
      at::Tensor best_index = first.expand(best.sizes()).contiguous();
      for (int64_t i = 0; i < w->kernel_h; ++i)
        for (int64_t j = 0; j < w->kernel_w; ++j) {
          const at::Tensor value = layout.offset_view(padded, *w, i, j);
          const at::Tensor nan = at::ne(value, value);
          const at::Tensor take = at::where(nan, nan, at::gt(value, best));
          best = at::where(take, value, best);
          best_index = at::where(take, corner + (i * w->dilation_h * layout.width + j * w->dilation_w), best_index);
        }
      std::vector<int64_t> shape = input.sizes().vec();
      shape[shape.size() - 2] = layout.out_h;
      shape[shape.size() - 1] = layout.out_w;
      // Laid out as the input suggests (channels-last stays channels-last), as PyTorch's max pool's results are.
      resize_output_in_format(out, shape, input.suggest_memory_format());
      resize_output_in_format(indices, shape, input.suggest_memory_format());
      out.copy_(best.view(shape));
      indices.copy_(best_index.view(shape));
      return {out, indices};
    }
  }
  torch::jit::Stack stack{input, kernel, stride, padding, dilation, ceil_mode, out, indices};
  call_cpu_fallback("aten::max_pool2d_with_indices", "out", stack);
  return {out, indices};
}

std::tuple<at::Tensor, at::Tensor> npusim_max_pool2d_with_indices(const at::Tensor& input, at::IntArrayRef kernel,
                                                                  at::IntArrayRef stride, at::IntArrayRef padding,
                                                                  at::IntArrayRef dilation, bool ceil_mode) {
  at::Tensor out = at::empty({0}, input.options()), indices = at::empty({0}, input.options().dtype(at::kLong));
  npusim_max_pool2d_with_indices_out(input, kernel, stride, padding, dilation, ceil_mode, out, indices);
  return {out, indices};
}

// A max pool's backward: each output's gradient added at its index (h * W + w) of its own plane of the input, with
// the row scatter-add kernel over rows of one element. False when the tensors are not what it takes.
bool added_at_indices(const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& indices,
                      at::Tensor& grad_input, const char* op, int64_t spatial = 2) {
  if (grad_output.scalar_type() != at::kFloat || grad_input.scalar_type() != at::kFloat ||
      indices.scalar_type() != at::kLong || indices.device() != input.device() ||
      grad_output.numel() != indices.numel() || (input.dim() != spatial + 1 && input.dim() != spatial + 2))
    return false;
  int64_t plane = 1;  // the pooled dimensions' elements (an index counts them)
  for (int64_t d = 1; d <= spatial; ++d) plane *= input.size(-d);
  const int64_t planes = plane == 0 ? 0 : input.numel() / plane;
  at::native::resize_output(grad_input, input.sizes());
  if (input.numel() == 0) return true;
  const at::Tensor plane_starts = at::arange(0, planes * plane, plane, indices.options());
  const at::Tensor flat = (indices.reshape({planes, -1}) + plane_starts.view({planes, 1})).contiguous();
  at::Tensor sums = at::zeros({planes * plane}, input.options());
  const at::Tensor grads = grad_output.contiguous();
  const emitter::ScatterAddRowsSpec spec{planes * plane, 1, flat.numel(), 8, -1};
  const uint64_t addresses[] = {device_address(sums), device_address(grads), device_address(flat)};
  const std::string message = c10::str(op, "'s backward: an index outside the input");
  if (!launched_checking_indices(
          runtime_device(input),
          [&] { launch_scatter_add_rows(input.device().index(), runtime_device(input), spec, addresses); },
          message.c_str()))
    return false;
  grad_input.copy_(sums.view(input.sizes()));
  return true;
}

// Each output's gradient added at its index of its own plane.
at::Tensor& npusim_max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& input,
                                           at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                                           at::IntArrayRef dilation, bool ceil_mode, const at::Tensor& indices,
                                           at::Tensor& grad_input) {
  const auto w = max_window(input, kernel, stride, padding, dilation, ceil_mode);
  if (w && added_at_indices(grad_output, input, indices, grad_input, "max_pool2d")) return grad_input;
  torch::jit::Stack stack{grad_output, input, kernel, stride, padding, dilation, ceil_mode, indices, grad_input};
  call_cpu_fallback("aten::max_pool2d_with_indices_backward", "grad_input", stack);
  return grad_input;
}

at::Tensor npusim_max_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& input, at::IntArrayRef kernel,
                                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                      bool ceil_mode, const at::Tensor& indices) {
  at::Tensor grad_input = at::empty(input.sizes(), input.options().memory_format(input.suggest_memory_format()));
  return npusim_max_pool2d_backward_out(grad_output, input, kernel, stride, padding, dilation, ceil_mode, indices,
                                        grad_input);
}

// float32 planes (or volumes: `spatial` 3), perhaps an empty batch of them.
bool pools_adaptively(const at::Tensor& input, int64_t spatial = 2) {
  if (input.scalar_type() != at::kFloat || (input.dim() != spatial + 1 && input.dim() != spatial + 2)) return false;
  for (int64_t d = 1; d <= spatial + 1; ++d)
    if (input.size(-d) == 0) return false;
  return true;
}

// The input's shape with its last output_size.size() dimensions pooled to output_size.
std::vector<int64_t> with_planes_of(const at::Tensor& input, at::IntArrayRef output_size) {
  std::vector<int64_t> shape = input.sizes().vec();
  std::copy(output_size.begin(), output_size.end(), shape.end() - static_cast<std::ptrdiff_t>(output_size.size()));
  return shape;
}

// Adaptive max pooling: output o's window along a dimension is inputs floor(o in / out) .. ceil((o + 1) in / out),
// at most K long. For each of the K_h x K_w (or K_d x K_h x K_w) offsets, a gather along each pooled dimension (an
// offset past a short window repeats its last input, which cannot change a maximum or its first index) gives every
// window's candidate; over the offsets in order a candidate replaces the best so far where it is greater or NaN, the
// index alongside, as the CPU's kernel scans its window. Any sizes; the backward adds each gradient at its index, as
// max pooling's.
struct AdaptiveWindows {
  at::Tensor start, size;  // per output, int64 on the host
  int64_t longest = 0;
  AdaptiveWindows(int64_t in, int64_t out) : start(at::empty({out}, at::kLong)), size(at::empty({out}, at::kLong)) {
    auto first = start.accessor<int64_t, 1>(), count = size.accessor<int64_t, 1>();
    for (int64_t o = 0; o < out; ++o) {
      first[o] = o * in / out;
      count[o] = ((o + 1) * in + out - 1) / out - first[o];
      longest = std::max(longest, count[o]);
    }
  }
  at::Tensor at_offset(int64_t k) const { return start + at::clamp_max(size - 1, k); }
};

// Adaptive max pooling over the last output_size.size() dimensions (2 or 3), natively; false if it cannot.
bool adaptive_max_pooled(const at::Tensor& input, at::IntArrayRef output_size, at::Tensor& out, at::Tensor& indices) {
  const auto spatial = static_cast<int64_t>(output_size.size());
  if (!pools_adaptively(input, spatial) || out.scalar_type() != at::kFloat || indices.scalar_type() != at::kLong)
    return false;
  for (const int64_t size : output_size)
    if (size <= 0) return false;
  const std::vector<int64_t> shape = with_planes_of(input, output_size);
  at::native::resize_output(out, shape);
  at::native::resize_output(indices, shape);
  if (input.numel() == 0) return true;
  std::vector<AdaptiveWindows> windows;
  std::vector<int64_t> strides(spatial);  // of a pooled dimension within an index (the flattened window)
  for (int64_t d = 0, stride = 1; d < spatial; ++d) {
    windows.emplace_back(input.size(d - spatial), output_size[d]);
    strides[spatial - 1 - d] = stride;
    stride *= input.size(-1 - d);
  }
  const at::Tensor source = input.contiguous();  // the gathers read whole rows of a laid-out input
  at::Tensor best = at::full(shape, -std::numeric_limits<double>::infinity(), input.options());
  at::Tensor best_index = at::zeros(shape, input.options().dtype(at::kLong));
  std::vector<int64_t> offset(spatial, 0);  // the window offset along each dimension, an odometer
  for (bool first = true;; first = false) {
    at::Tensor value = source;
    at::Tensor position = at::zeros(output_size, at::kLong);
    for (int64_t d = 0; d < spatial; ++d) {
      const at::Tensor taken = windows[d].at_offset(offset[d]);
      value = at::index_select(value, d - spatial, taken.to(input.device()));
      std::vector<int64_t> along(spatial, 1);
      along[d] = output_size[d];
      position = position + taken.view(along) * strides[d];
    }
    const at::Tensor nan = at::ne(value, value);
    const at::Tensor take = first ? at::ones_like(nan) : at::where(nan, nan, at::gt(value, best));
    best = at::where(take, value, best);
    best_index = at::where(take, position.to(input.device()), best_index);
    int64_t d = spatial - 1;
    while (d >= 0 && ++offset[d] == windows[d].longest) offset[d--] = 0;
    if (d < 0) break;
  }
  out.copy_(best);
  indices.copy_(best_index);
  return true;
}

std::tuple<at::Tensor&, at::Tensor&> npusim_adaptive_max_pool2d_out(const at::Tensor& input,
                                                                    at::IntArrayRef output_size, at::Tensor& out,
                                                                    at::Tensor& indices) {
  if (output_size.size() == 2 && adaptive_max_pooled(input, output_size, out, indices)) return {out, indices};
  torch::jit::Stack stack{input, output_size.vec(), out, indices};
  call_cpu_fallback("aten::adaptive_max_pool2d", "out", stack);
  return {out, indices};
}

std::tuple<at::Tensor, at::Tensor> npusim_adaptive_max_pool2d(const at::Tensor& input, at::IntArrayRef output_size) {
  at::Tensor out = at::empty({0}, input.options()), indices = at::empty({0}, input.options().dtype(at::kLong));
  npusim_adaptive_max_pool2d_out(input, output_size, out, indices);
  return {out, indices};
}

at::Tensor& npusim_adaptive_max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& input,
                                                    const at::Tensor& indices, at::Tensor& grad_input) {
  if (added_at_indices(grad_output, input, indices, grad_input, "adaptive_max_pool2d")) return grad_input;
  torch::jit::Stack stack{grad_output, input, indices, grad_input};
  call_cpu_fallback("aten::adaptive_max_pool2d_backward", "grad_input", stack);
  return grad_input;
}

at::Tensor npusim_adaptive_max_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                               const at::Tensor& indices) {
  at::Tensor grad_input = at::empty({0}, input.options());
  return npusim_adaptive_max_pool2d_backward_out(grad_output, input, indices, grad_input);
}

std::tuple<at::Tensor&, at::Tensor&> npusim_adaptive_max_pool3d_out(const at::Tensor& input,
                                                                    at::IntArrayRef output_size, at::Tensor& out,
                                                                    at::Tensor& indices) {
  if (output_size.size() == 3 && adaptive_max_pooled(input, output_size, out, indices)) return {out, indices};
  torch::jit::Stack stack{input, output_size.vec(), out, indices};
  call_cpu_fallback("aten::adaptive_max_pool3d", "out", stack);
  return {out, indices};
}

std::tuple<at::Tensor, at::Tensor> npusim_adaptive_max_pool3d(const at::Tensor& input, at::IntArrayRef output_size) {
  at::Tensor out = at::empty({0}, input.options()), indices = at::empty({0}, input.options().dtype(at::kLong));
  npusim_adaptive_max_pool3d_out(input, output_size, out, indices);
  return {out, indices};
}

at::Tensor& npusim_adaptive_max_pool3d_backward_out(const at::Tensor& grad_output, const at::Tensor& input,
                                                    const at::Tensor& indices, at::Tensor& grad_input) {
  if (added_at_indices(grad_output, input, indices, grad_input, "adaptive_max_pool3d", 3)) return grad_input;
  torch::jit::Stack stack{grad_output, input, indices, grad_input};
  call_cpu_fallback("aten::adaptive_max_pool3d_backward", "grad_input", stack);
  return grad_input;
}

at::Tensor npusim_adaptive_max_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                               const at::Tensor& indices) {
  at::Tensor grad_input = at::empty({0}, input.options());
  return npusim_adaptive_max_pool3d_backward_out(grad_output, input, indices, grad_input);
}

// Adaptive average pooling as two products with averaging matrices (window_means), out = R x C^T: any sizes,
// overlapping windows included; the backward is R^T g C.
at::Tensor npusim_adaptive_avg_pool2d(const at::Tensor& input, at::IntArrayRef output_size) {
  if (pools_adaptively(input) && output_size.size() == 2 && output_size[0] > 0 && output_size[1] > 0 &&
      input.numel() == 0)
    return at::empty(with_planes_of(input, output_size), input.options());
  if (pools_adaptively(input) && output_size.size() == 2 && output_size[0] > 0 && output_size[1] > 0) {
    const at::Tensor rows = window_means(input.size(-2), output_size[0], input);
    const at::Tensor cols = window_means(input.size(-1), output_size[1], input);
    const at::Tensor planes = input.reshape({-1, input.size(-2), input.size(-1)});
    std::vector<int64_t> shape = input.sizes().vec();
    shape[shape.size() - 2] = output_size[0];
    shape[shape.size() - 1] = output_size[1];
    return apply_on_both_sides(planes, rows, cols).view(shape);
  }
  torch::jit::Stack stack{input, output_size};
  call_cpu_fallback("aten::_adaptive_avg_pool2d", "", stack);
  return stack[0].toTensor();
}

at::Tensor npusim_adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& input) {
  if (pools_adaptively(input) && grad_output.scalar_type() == at::kFloat && grad_output.dim() == input.dim()) {
    const at::Tensor rows = window_means(input.size(-2), grad_output.size(-2), input);
    const at::Tensor cols = window_means(input.size(-1), grad_output.size(-1), input);
    const at::Tensor planes = grad_output.reshape({-1, grad_output.size(-2), grad_output.size(-1)});
    return apply_on_both_sides(planes, rows.t(), cols.t()).view(input.sizes());
  }
  torch::jit::Stack stack{grad_output, input};
  call_cpu_fallback("aten::_adaptive_avg_pool2d_backward", "", stack);
  return stack[0].toTensor();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_adaptive_avg_pool2d", npusim_adaptive_avg_pool2d);
  m.impl("adaptive_max_pool2d", npusim_adaptive_max_pool2d);
  m.impl("adaptive_max_pool2d.out", npusim_adaptive_max_pool2d_out);
  m.impl("adaptive_max_pool2d_backward", npusim_adaptive_max_pool2d_backward);
  m.impl("adaptive_max_pool2d_backward.grad_input", npusim_adaptive_max_pool2d_backward_out);
  m.impl("adaptive_max_pool3d", npusim_adaptive_max_pool3d);
  m.impl("adaptive_max_pool3d.out", npusim_adaptive_max_pool3d_out);
  m.impl("adaptive_max_pool3d_backward", npusim_adaptive_max_pool3d_backward);
  m.impl("adaptive_max_pool3d_backward.grad_input", npusim_adaptive_max_pool3d_backward_out);
  m.impl("_adaptive_avg_pool2d_backward", npusim_adaptive_avg_pool2d_backward);
  m.impl("max_pool2d_with_indices", npusim_max_pool2d_with_indices);
  m.impl("max_pool2d_with_indices.out", npusim_max_pool2d_with_indices_out);
  m.impl("max_pool2d_with_indices_backward", npusim_max_pool2d_backward);
  m.impl("max_pool2d_with_indices_backward.grad_input", npusim_max_pool2d_backward_out);
  m.impl("avg_pool2d", npusim_avg_pool2d);
  m.impl("avg_pool2d.out", npusim_avg_pool2d_out);
  m.impl("avg_pool2d_backward", npusim_avg_pool2d_backward);
  m.impl("avg_pool2d_backward.grad_input", npusim_avg_pool2d_backward_out);
}

}  // namespace npusim::bridge
