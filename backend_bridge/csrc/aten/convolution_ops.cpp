// Native convolution for PyTorch's custom-device hook (convolution_overrideable and its backward), so nn.Conv1d,
// nn.Conv2d and their transposes with any stride, padding, dilation and groups, float32, composed from native kernels:
//   im2col   patches are a strided view of the zero-padded input, made contiguous by a copy kernel;
//   implicit GEMM  ungrouped stride-1 convolutions whose kernel rows are whole K steps read their patches where they
//            lie in the padded NHWC input, one GEMM kernel (conv_f32) and no im2col copy (implicit_convolution);
//   products on the matrix engine: ungrouped convolutions of kernels larger than 1 x 1 channels-last, one GEMM
//            for the whole batch, patches [N*OH*OW x KH*KW*C] @ weights [KH*KW*C x O]; ungrouped 1 x 1 kernels one
//            batched launch, weights [O x C] @ input [C x OH*OW] per sample; grouped ones per sample and group,
//            weights [O/g x C/g*KH*KW] @ patches [C/g*KH*KW x OH*OW];
//   input gradient  of a stride-1 convolution is itself a convolution (of the output gradient, by the kernel turned
//            half a circle with inputs and outputs swapped), run channels-last like a forward; an ungrouped 1 x 1
//            kernel's is one batched product; otherwise col2im adds each kernel offset's patch gradients into a strided
//            view.
//   transposed convolutions (nn.ConvTranspose1d/2d) are the input gradient of the convolution they transpose, and
//            their gradients that convolution's forward and weight gradient, so they take the same routes.
//   3-D convolutions (nn.Conv3d, nn.ConvTranspose3d) are 2-D ones over depth windows (convolution_3d.cpp).
// bfloat16 and float16 convolutions compute in float32 (widened on the device, rounded once at the end, as the CPU
// computes them). Other dtypes run on the CPU, counted as a fallback.
#include <ATen/ops/arange.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <vector>

#include "bridge.h"
#include "convolution_3d.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

// A 2-D convolution's shapes. 1-D convolutions are 2-D ones of height 1.
struct Geometry {
  int64_t batch, channels, height, width, outputs, kernel_h, kernel_w, out_h, out_w, groups;
  std::array<int64_t, 2> stride, padding, dilation;

  int64_t group_channels() const { return channels / groups; }
  int64_t group_outputs() const { return outputs / groups; }
  int64_t patch() const { return group_channels() * kernel_h * kernel_w; }  // one output's inputs in a group
  int64_t padded_h() const { return height + 2 * padding[0]; }
  int64_t padded_w() const { return width + 2 * padding[1]; }
  // How many outputs the windows give along a dimension of the padded input.
  int64_t windows_h() const { return (padded_h() - dilation[0] * (kernel_h - 1) - 1) / stride[0] + 1; }
  int64_t windows_w() const { return (padded_w() - dilation[1] * (kernel_w - 1) - 1) / stride[1] + 1; }
  // Fewer outputs than windows: a transposed convolution's output padding made its input (this convolution's) longer
  // than its outputs reach.
  bool outputs_short_of_the_windows() const { return out_h != windows_h() || out_w != windows_w(); }
};

// Arguments of a 1-D convolution become their 2-D equivalents: height 1, and unit stride, no padding and no dilation
// along it.
std::array<int64_t, 2> as_2d(c10::IntArrayRef values, int64_t height_value) {
  return values.size() == 1 ? std::array<int64_t, 2>{height_value, values[0]}
                            : std::array<int64_t, 2>{values[0], values[1]};
}

Geometry geometry(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride, c10::IntArrayRef padding,
                  c10::IntArrayRef dilation, int64_t groups) {
  Geometry g{};
  g.batch = input.size(0);
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.outputs = weight.size(0);
  g.kernel_h = weight.size(2);
  g.kernel_w = weight.size(3);
  g.groups = groups;
  g.stride = as_2d(stride, 1);
  g.padding = as_2d(padding, 0);
  g.dilation = as_2d(dilation, 1);
  g.out_h = g.windows_h();
  g.out_w = g.windows_w();
  return g;
}

bool runs_natively(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  const auto on_device_f32 = [&](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.device() == input.device();
  };
  return input.dim() >= 3 && input.dim() <= 5 && weight.dim() == input.dim() && on_device_f32(input) &&
         on_device_f32(weight) && (!bias.defined() || on_device_f32(bias)) && input.numel() > 0;
}

// Half-precision operands, all of one dtype: the convolution runs in float32 and rounds its results back.
bool widens_to_float32(const at::Tensor& input, std::initializer_list<at::Tensor> others) {
  if (input.scalar_type() != at::kBFloat16 && input.scalar_type() != at::kHalf) return false;
  for (const at::Tensor& other : others)
    if (other.defined() && (other.scalar_type() != input.scalar_type() || other.device() != input.device()))
      return false;
  return true;
}
at::Tensor widened(const at::Tensor& t) { return t.defined() ? t.to(at::kFloat) : t; }
at::Tensor narrowed(const at::Tensor& t, at::ScalarType type) { return t.defined() ? t.to(type) : t; }

// The input with its zero border, contiguous: [N, C, H + 2 ph, W + 2 pw].
at::Tensor padded(const at::Tensor& input, const Geometry& g) {
  if (g.padding[0] == 0 && g.padding[1] == 0) return input.contiguous();
  at::Tensor result = at::zeros({g.batch, g.channels, g.padded_h(), g.padded_w()}, input.options());
  result.narrow(2, g.padding[0], g.height).narrow(3, g.padding[1], g.width).copy_(input);
  return result;
}

// The patches of one sample of the padded input as a strided view, [C, KH, KW, OH, OW]: element (c, i, j, y, x) is
// padded[c][y * sh + i * dh][x * sw + j * dw]. A view of the gradient's padded input, it is also where col2im adds.
at::Tensor patch_view(const at::Tensor& sample, const Geometry& g) {
  const int64_t row = g.padded_w(), plane = g.padded_h() * row;
  return sample.as_strided({g.channels, g.kernel_h, g.kernel_w, g.out_h, g.out_w},
                           {plane, row * g.dilation[0], g.dilation[1], row * g.stride[0], g.stride[1]},
                           sample.storage_offset());
}

// Rows of the patch matrix of one sample and group: [C/g * KH * KW, OH * OW].
at::Tensor patch_matrix(const at::Tensor& patches, const Geometry& g, int64_t group) {
  return patches.narrow(0, group * g.group_channels(), g.group_channels()).reshape({g.patch(), g.out_h * g.out_w});
}
at::Tensor weight_matrix(const at::Tensor& weight, const Geometry& g, int64_t group) {
  return weight.narrow(0, group * g.group_outputs(), g.group_outputs()).reshape({g.group_outputs(), g.patch()});
}
// One sample's outputs of one group as a matrix view, [O/g, OH * OW].
at::Tensor output_matrix(const at::Tensor& output, const Geometry& g, int64_t sample, int64_t group) {
  return output.select(0, sample)
      .narrow(0, group * g.group_outputs(), g.group_outputs())
      .view({g.group_outputs(), g.out_h * g.out_w});
}

// Ungrouped convolutions run channels-last, as one GEMM for the whole batch whose rows are the output positions
// (N*OH*OW rows: tall products keep the systolic array's fill and drain small against the rows streaming through):
// the padded input as NHWC, its patches [N*OH*OW, KH*KW*C] gathered by one copy kernel moving rows of C channels,
// and the weights as [KH*KW*C, O].
// A 1 x 1 kernel's patches are the input itself: ungrouped, it runs pointwise, NCHW, one batched launch of
// weights [O, C] @ patches [C, OH*OW] per sample, where the channels-last route would add two transposes.
bool runs_channels_last(const Geometry& g) { return g.groups == 1 && g.kernel_h * g.kernel_w > 1; }
bool runs_pointwise(const Geometry& g) { return g.groups == 1 && g.kernel_h * g.kernel_w == 1; }
int64_t output_positions(const Geometry& g) { return g.batch * g.out_h * g.out_w; }
bool patches_are_the_input(const Geometry& g) {
  return g.kernel_h * g.kernel_w == 1 && g.stride == std::array<int64_t, 2>{1, 1} &&
         g.padding == std::array<int64_t, 2>{0, 0} && !g.outputs_short_of_the_windows();
}

// The patches of the padded NHWC input (or of its gradient) as a view [N, OH, OW, KH, KW, C]: element
// (n, y, x, i, j, c) is nhwc[n][y * sh + i * dh][x * sw + j * dw][c].
at::Tensor channels_last_patch_view(const at::Tensor& nhwc, const Geometry& g) {
  const int64_t pixel = g.channels, row = g.padded_w() * pixel, image = g.padded_h() * row;
  return nhwc.as_strided({g.batch, g.out_h, g.out_w, g.kernel_h, g.kernel_w, g.channels},
                         {image, row * g.stride[0], pixel * g.stride[1], row * g.dilation[0], pixel * g.dilation[1], 1},
                         nhwc.storage_offset());
}
at::Tensor channels_last_patches(const at::Tensor& padded_input, const Geometry& g) {
  const at::Tensor nhwc = padded_input.permute({0, 2, 3, 1}).contiguous();
  const at::Tensor view = channels_last_patch_view(nhwc, g);
  // Undilated kernel columns merge with the channels into rows: one copy kernel.
  if (g.dilation[1] == 1) return view.reshape({output_positions(g), g.patch()});
  // Dilated kernel columns leave six dimensions, one more than a copy kernel walks: one copy per sample.
  at::Tensor patches = at::empty(view.sizes(), nhwc.options());
  for (int64_t n = 0; n < g.batch; ++n) patches.select(0, n).copy_(view.select(0, n));
  return patches.view({output_positions(g), g.patch()});
}
at::Tensor channels_last_weights(const at::Tensor& weight, const Geometry& g) {
  return weight.permute({2, 3, 1, 0}).reshape({g.patch(), g.outputs});
}

// An implicit GEMM (gemm_loop.h): the patches are read where they lie in the zero-padded NHWC input rather than
// gathered by a copy. Each image's outputs are computed in rows as wide as its padded rows (OH x Wp positions), so
// that the window of the next position starts C channels on: one image's positions are a single stride, a kernel
// row's window (KW x C) is one run of the patches' columns, and the runs are dh padded rows apart. The Wp - OW extra
// positions per row are computed and dropped (or, for the weights' gradient, meet zeros in the output's gradient);
// they read up to KW - 1 pixels past their image, so the buffer has a padded row to spare at its end.
//
// Taken for stride 1 and undilated kernel columns (with a stride, the next position's window is not the next pixel's),
// when the runs the product reads are whole K steps, and where the extra positions cost the matrix engines less than
// half the cycles the im2col copy costs the DRAM, both at their peak rates (half: the wide output's and gradient's
// own moves take some of the saving back). On the default chip, measured forward and backward with
// bench/conv_roofline.py: a 3 x 3 convolution of 64 channels over 32 x 32 pixels takes the implicit GEMM (6 % more
// positions; 1.62x -> 1.38x its roofline forward, 1.64x -> 1.39x backward), of 128 channels over 16 x 16 (12.5 % more)
// and of 256 over 14 x 14 (14 % more) the copy, with which they were as fast or faster.
bool implicit_gemm_pays(const Geometry& g, const config::ChipConfig& chip) {
  const double extra_products =
      static_cast<double>(g.batch * g.out_h * (g.padded_w() - g.out_w)) * static_cast<double>(g.patch() * g.outputs);
  const double extra_cycles =
      extra_products / static_cast<double>(chip.core_systolic_rows * chip.core_systolic_cols * chip.chip_cores);
  const double copied_bytes = 2.0 * static_cast<double>(output_positions(g) * g.patch()) * sizeof(float);
  const double copy_cycles = copied_bytes / (chip.dram_bandwidth_gbps / chip.chip_clock_ghz);
  return 2 * extra_cycles < copy_cycles;
}
// `run`: the run of K the product reads its operand in (a kernel row's window, or an image's positions).
bool takes_implicit_gemm(const Geometry& g, const config::ChipConfig& chip, int64_t run) {
  return g.stride == std::array<int64_t, 2>{1, 1} && g.dilation[1] == 1 && !g.outputs_short_of_the_windows() &&
         emitter::reads_columns_in_runs(run, chip) && implicit_gemm_pays(g, chip);
}
int64_t wide_positions(const Geometry& g) { return g.out_h * g.padded_w(); }  // an image's, extra ones included

// The zero-padded NHWC input with a padded row to spare, [N x Hp x Wp x C + Wp x C]. Transposed whole, then copied
// into the border in rows of W x C: a transpose into rows of the padded image would move tiles of one image row (on
// the default chip 3x the cycles of both).
at::Tensor padded_nhwc(const at::Tensor& input, const Geometry& g) {
  const int64_t image = g.padded_h() * g.padded_w() * g.channels;
  const at::Tensor buffer = at::zeros({g.batch * image + g.padded_w() * g.channels}, input.options());
  buffer.narrow(0, 0, g.batch * image)
      .view({g.batch, g.padded_h(), g.padded_w(), g.channels})
      .narrow(1, g.padding[0], g.height)
      .narrow(2, g.padding[1], g.width)
      .copy_(input.permute({0, 2, 3, 1}).contiguous());
  return buffer;
}

// C = A @ B with A's columns in runs (MatmulSpec::a_run), every operand a contiguous float32 tensor; false when the
// kernel cannot be built.
bool launched_implicit_gemm(const emitter::MatmulSpec& spec, const at::Tensor& c, const at::Tensor& a,
                            const at::Tensor& b) {
  const std::vector<uint64_t> addresses = {device_address(c), device_address(a), device_address(b)};
  return launched_natively([&] { launch_matmul(c.device().index(), runtime_device(c), spec, addresses); });
}

// The convolution as one implicit GEMM for the batch: the wide positions [N, OH x Wp] (rows) by the weights
// [KH x KW x C, O], each kernel row's window a run of K.
std::optional<at::Tensor> implicit_convolution(const at::Tensor& input, const at::Tensor& weights, const Geometry& g) {
  const int64_t pixel = g.channels, row = g.padded_w() * pixel, positions = wide_positions(g);
  if (!takes_implicit_gemm(g, runtime_device(input).config(), g.kernel_w * pixel)) return std::nullopt;
  const at::Tensor buffer = padded_nhwc(input, g);
  const at::Tensor wide = at::empty({g.batch, positions, g.outputs}, input.options());
  emitter::MatmulSpec spec;
  spec.m = positions;
  spec.k = g.patch();
  spec.n = g.outputs;
  spec.a_row = pixel;
  spec.a_col = 1;
  spec.b_row = spec.c_row = g.outputs;
  spec.b_col = spec.c_col = 1;
  spec.batch = g.batch;
  spec.a_batch = g.padded_h() * row;
  spec.c_batch = positions * g.outputs;
  spec.a_run = g.kernel_w * pixel;
  spec.a_run_stride = g.dilation[0] * row;
  if (!launched_implicit_gemm(spec, wide, buffer, weights)) return std::nullopt;
  return wide
      .transpose(1, 2)  // a whole transpose, then a copy without the extra positions (as padded_nhwc, the other way)
      .contiguous()
      .view({g.batch, g.outputs, g.out_h, g.padded_w()})
      .narrow(3, 0, g.out_w)
      .contiguous();
}

// The weights' gradient as implicit GEMMs, one per kernel row i (a batch entry): the patches' transpose
// [KW x C, N x OH x Wp] (read in columns, each image's positions a run of K) by the output's gradient at the wide
// positions [N x OH x Wp, O], zero at the extra ones; as [O, C, KH, KW].
// Only for products of at least kWeightGradientRows rows (KW x C): each K step of a transposed A loads a weight tile
// and turns its block on the vector engine for those rows alone. In the ResNet example (16 channels, 48 rows) the
// implicit products took several times the cycles of the gathered ones, far more than the copies they save (its
// training step 3.57 -> 4.45 ms; since the GEMM loop loads several K steps at once, 3.20 -> 3.22 ms, still no gain);
// with 64 channels (192 rows, bench/conv_roofline.py's 64-channel 3x3 layer) the backward went from 1.52x to 1.39x
// its roofline.
constexpr int64_t kWeightGradientRows = 128;
std::optional<at::Tensor> implicit_weight_gradient(const at::Tensor& input, const at::Tensor& grad_output,
                                                   const Geometry& g) {
  const int64_t pixel = g.channels, row = g.padded_w() * pixel, positions = wide_positions(g);
  if (g.kernel_w * pixel < kWeightGradientRows || !takes_implicit_gemm(g, runtime_device(input).config(), positions))
    return std::nullopt;
  const at::Tensor buffer = padded_nhwc(input, g);
  const at::Tensor grad_wide = at::zeros({g.batch, g.out_h, g.padded_w(), g.outputs}, grad_output.options());
  grad_wide.narrow(2, 0, g.out_w).copy_(grad_output.permute({0, 2, 3, 1}).contiguous());
  const at::Tensor by_kernel_row = at::empty({g.kernel_h, g.kernel_w * pixel, g.outputs}, input.options());
  emitter::MatmulSpec spec;
  spec.m = g.kernel_w * pixel;
  spec.k = g.batch * positions;
  spec.n = g.outputs;
  spec.a_row = 1;
  spec.a_col = pixel;
  spec.b_row = spec.c_row = g.outputs;
  spec.b_col = spec.c_col = 1;
  spec.batch = g.kernel_h;
  spec.a_batch = g.dilation[0] * row;
  spec.c_batch = g.kernel_w * pixel * g.outputs;
  spec.a_run = positions;
  spec.a_run_stride = g.padded_h() * row;
  if (!launched_implicit_gemm(spec, by_kernel_row, buffer, grad_wide)) return std::nullopt;
  return by_kernel_row.view({g.kernel_h, g.kernel_w, pixel, g.outputs}).permute({3, 2, 0, 1}).contiguous();
}

// The convolution of the NCHW `input` by channels-last weights [KH*KW*C, O], as NCHW: an implicit GEMM where it
// can, else the patches gathered by a copy from the padded input, then one GEMM.
at::Tensor convolution_channels_last(const at::Tensor& input, const at::Tensor& weights, const Geometry& g) {
  if (std::optional<at::Tensor> output = implicit_convolution(input, weights.contiguous(), g)) return *output;
  const at::Tensor rows = at::mm(channels_last_patches(padded(input, g), g), weights);
  return rows.view({g.batch, g.out_h, g.out_w, g.outputs}).permute({0, 3, 1, 2}).contiguous();
}

// A stride-1 convolution's input gradient is the convolution of its output gradient, padded by d (k - 1) - p, by the
// kernel turned half a circle with its inputs and outputs swapped (the transposed convolution): when that padding is
// not negative (and every input is under some output's window).
bool input_gradient_is_convolution(const Geometry& g) {
  for (int d = 0; d < 2; ++d)
    if (g.stride[d] != 1 || g.padding[d] > g.dilation[d] * ((d == 0 ? g.kernel_h : g.kernel_w) - 1)) return false;
  return g.groups == 1 && !g.outputs_short_of_the_windows();
}
Geometry input_gradient_geometry(const Geometry& g) {
  Geometry gradient = g;
  gradient.channels = g.outputs;
  gradient.outputs = g.channels;
  gradient.height = g.out_h;
  gradient.width = g.out_w;
  gradient.out_h = g.height;
  gradient.out_w = g.width;
  gradient.padding = {g.dilation[0] * (g.kernel_h - 1) - g.padding[0], g.dilation[1] * (g.kernel_w - 1) - g.padding[1]};
  return gradient;
}
// Its channels-last weights [KH*KW*O, C]: kernel offset (i, j) takes the weights of (KH-1-i, KW-1-j), which is the
// flattened offsets in reverse.
at::Tensor half_turned_channels_last_weights(const at::Tensor& weight, const Geometry& g) {
  const int64_t offsets = g.kernel_h * g.kernel_w;
  const at::Tensor by_offset = weight.permute({2, 3, 0, 1}).reshape({offsets, g.outputs * g.channels});
  const at::Tensor reversed = at::arange(offsets - 1, -1, -1, weight.options().dtype(at::kLong));
  return by_offset.index_select(0, reversed).view({offsets * g.outputs, g.channels});
}

// The input positions a 1 x 1 kernel visits, as a view [N, C, OH, OW] of the padded input (or of its gradient).
at::Tensor pointwise_view(const at::Tensor& padded_input, const Geometry& g) {
  const int64_t row = g.padded_w(), plane = g.padded_h() * row;
  return padded_input.as_strided({g.batch, g.channels, g.out_h, g.out_w},
                                 {g.channels * plane, plane, row * g.stride[0], g.stride[1]},
                                 padded_input.storage_offset());
}
// The patches of an ungrouped 1 x 1 convolution, [N, C, OH*OW]: that view, copied once unless the stride is 1.
at::Tensor pointwise_patches(const at::Tensor& padded_input, const Geometry& g) {
  return pointwise_view(padded_input, g).reshape({g.batch, g.channels, g.out_h * g.out_w});
}
at::Tensor batch_of(const at::Tensor& matrix, const Geometry& g) {  // one matrix for every sample (batch stride 0)
  return matrix.expand({g.batch, matrix.size(0), matrix.size(1)});
}

at::Tensor convolution_pointwise(const at::Tensor& padded_input, const at::Tensor& weight, const Geometry& g) {
  const at::Tensor products =
      at::bmm(batch_of(weight.view({g.outputs, g.channels}), g), pointwise_patches(padded_input, g));
  return products.view({g.batch, g.outputs, g.out_h, g.out_w});
}

// The convolution of the input (no bias).
at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const Geometry& g) {
  if (runs_channels_last(g)) return convolution_channels_last(input, channels_last_weights(weight, g), g);
  const at::Tensor source = padded(input, g);
  if (runs_pointwise(g)) return convolution_pointwise(source, weight, g);
  at::Tensor output = at::empty({g.batch, g.outputs, g.out_h, g.out_w}, source.options());
  for (int64_t n = 0; n < g.batch; ++n) {
    const at::Tensor patches = patch_view(source.select(0, n), g).contiguous();
    for (int64_t group = 0; group < g.groups; ++group) {
      at::Tensor out = output_matrix(output, g, n, group);
      at::mm_out(out, weight_matrix(weight, g, group), patch_matrix(patches, g, group));
    }
  }
  return output;
}

// The gradient of the weights, [O, C/g, KH, KW], from the input and the output's gradient: ungrouped, one GEMM over
// every output position (channels-last) or one batched product per sample summed over the batch (1 x 1); grouped,
// grad_output @ patches^T per sample and group, summed over the batch.
at::Tensor weight_gradient(const at::Tensor& input, const at::Tensor& grad_output, const Geometry& g) {
  const std::vector<int64_t> weight_sizes{g.outputs, g.group_channels(), g.kernel_h, g.kernel_w};
  if (runs_channels_last(g)) {
    if (std::optional<at::Tensor> gradient = implicit_weight_gradient(input, grad_output, g)) return *gradient;
    const at::Tensor by_output = grad_output.permute({1, 0, 2, 3}).reshape({g.outputs, output_positions(g)});
    return at::mm(by_output, channels_last_patches(padded(input, g), g))
        .view({g.outputs, g.kernel_h, g.kernel_w, g.channels})
        .permute({0, 3, 1, 2})
        .contiguous();
  }
  if (runs_pointwise(g)) {
    const at::Tensor grad_rows = grad_output.reshape({g.batch, g.outputs, g.out_h * g.out_w});
    return at::bmm(grad_rows, pointwise_patches(padded(input, g), g).transpose(1, 2)).sum(0).view(weight_sizes);
  }
  const at::Tensor source = padded(input, g);
  const at::Tensor per_sample = at::empty({g.batch, g.outputs, g.patch()}, grad_output.options());
  for (int64_t n = 0; n < g.batch; ++n) {
    const at::Tensor patches = patch_view(source.select(0, n), g).contiguous();
    for (int64_t group = 0; group < g.groups; ++group) {
      at::Tensor product = per_sample.select(0, n).narrow(0, group * g.group_outputs(), g.group_outputs());
      at::mm_out(product, output_matrix(grad_output, g, n, group), patch_matrix(patches, g, group).t());
    }
  }
  return per_sample.sum(0).view(weight_sizes);
}

// The gradient of the input, [N, C, H, W], from the weights and the output's gradient (which is also what a
// transposed convolution computes). A stride-1 ungrouped one is a convolution of the output gradient; a 1 x 1 kernel's
// whose patches are the input is the weights transposed times the output gradient; otherwise the patches' gradients
// (weights^T @ grad_output) are added into a zero-padded gradient one kernel offset at a time (col2im: within one
// offset, distinct outputs touch distinct inputs), channels-last when ungrouped.
at::Tensor input_gradient(const at::Tensor& weight, const at::Tensor& grad_output, const Geometry& g) {
  const at::TensorOptions options = grad_output.options();
  const auto unpadded = [&](const at::Tensor& nchw) {
    return nchw.narrow(2, g.padding[0], g.height).narrow(3, g.padding[1], g.width).contiguous();
  };
  if (runs_channels_last(g) && input_gradient_is_convolution(g)) {
    const Geometry gradient = input_gradient_geometry(g);
    return convolution_channels_last(grad_output, half_turned_channels_last_weights(weight, g), gradient);
  }
  if (runs_channels_last(g)) {
    const at::Tensor grad_rows = grad_output.permute({0, 2, 3, 1}).reshape({output_positions(g), g.outputs});
    const at::Tensor patch_grads = at::mm(grad_rows, channels_last_weights(weight, g).t())
                                       .view({g.batch, g.out_h, g.out_w, g.kernel_h, g.kernel_w, g.channels});
    const at::Tensor grad_nhwc = at::zeros({g.batch, g.padded_h(), g.padded_w(), g.channels}, options);
    const at::Tensor targets = channels_last_patch_view(grad_nhwc, g);
    for (int64_t i = 0; i < g.kernel_h; ++i)
      for (int64_t j = 0; j < g.kernel_w; ++j)
        targets.select(3, i).select(3, j).add_(patch_grads.select(3, i).select(3, j));
    return unpadded(grad_nhwc.permute({0, 3, 1, 2}));
  }
  if (runs_pointwise(g)) {
    const at::Tensor grad_rows = grad_output.reshape({g.batch, g.outputs, g.out_h * g.out_w});
    const at::Tensor transposed = weight.view({g.outputs, g.channels}).t().contiguous();
    const at::Tensor patch_grads = at::bmm(batch_of(transposed, g), grad_rows);
    if (patches_are_the_input(g)) return patch_grads.view({g.batch, g.channels, g.height, g.width});
    const at::Tensor grad_padded = at::zeros({g.batch, g.channels, g.padded_h(), g.padded_w()}, options);
    pointwise_view(grad_padded, g).copy_(patch_grads.view({g.batch, g.channels, g.out_h, g.out_w}));
    return unpadded(grad_padded);
  }
  if (patches_are_the_input(g)) {
    at::Tensor grad_input = at::empty({g.batch, g.channels, g.height, g.width}, options);
    for (int64_t group = 0; group < g.groups; ++group) {
      const at::Tensor transposed = weight_matrix(weight, g, group).t().contiguous();
      for (int64_t n = 0; n < g.batch; ++n) {
        at::Tensor out = grad_input.select(0, n)
                             .narrow(0, group * g.group_channels(), g.group_channels())
                             .view({g.group_channels(), g.height * g.width});
        at::mm_out(out, transposed, output_matrix(grad_output, g, n, group));
      }
    }
    return grad_input;
  }
  const at::Tensor grad_padded = at::zeros({g.batch, g.channels, g.padded_h(), g.padded_w()}, options);
  for (int64_t n = 0; n < g.batch; ++n) {
    const at::Tensor sample = grad_padded.select(0, n);
    for (int64_t group = 0; group < g.groups; ++group) {
      const at::Tensor patch_grads =
          at::mm(weight_matrix(weight, g, group).t(), output_matrix(grad_output, g, n, group))
              .view({g.group_channels(), g.kernel_h, g.kernel_w, g.out_h, g.out_w});
      const at::Tensor targets = patch_view(sample, g).narrow(0, group * g.group_channels(), g.group_channels());
      for (int64_t i = 0; i < g.kernel_h; ++i)
        for (int64_t j = 0; j < g.kernel_w; ++j)
          targets.select(1, i).select(1, j).add_(patch_grads.select(1, i).select(1, j));
    }
  }
  return unpadded(grad_padded);
}

// A transposed convolution of `input` [N, C_in, H, W] by `weight` [C_in, C_out/g, KH, KW] is the input gradient of
// the convolution it transposes: one of an input [N, C_out, H', W'] by the same weights, with C_in outputs of H x W,
// where H' = (H - 1) sh - 2 ph + dh (KH - 1) + output padding + 1. This is that convolution's geometry.
Geometry transposed_geometry(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                             c10::IntArrayRef padding, c10::IntArrayRef dilation, c10::IntArrayRef output_padding,
                             int64_t groups) {
  Geometry g{};
  g.batch = input.size(0);
  g.outputs = input.size(1);
  g.out_h = input.size(2);
  g.out_w = input.size(3);
  g.channels = weight.size(1) * groups;
  g.kernel_h = weight.size(2);
  g.kernel_w = weight.size(3);
  g.groups = groups;
  g.stride = as_2d(stride, 1);
  g.padding = as_2d(padding, 0);
  g.dilation = as_2d(dilation, 1);
  const std::array<int64_t, 2> extra = as_2d(output_padding, 0);
  g.height = (g.out_h - 1) * g.stride[0] - 2 * g.padding[0] + g.dilation[0] * (g.kernel_h - 1) + extra[0] + 1;
  g.width = (g.out_w - 1) * g.stride[1] - 2 * g.padding[1] + g.dilation[1] * (g.kernel_w - 1) + extra[1] + 1;
  return g;
}

// 1-D tensors (N, C, L) as 2-D ones of height 1.
at::Tensor as_4d(const at::Tensor& t) { return t.dim() == 3 ? t.unsqueeze(2) : t; }
at::Tensor as_given(const at::Tensor& t, const at::Tensor& given) {
  return given.dim() == 3 && t.defined() ? t.squeeze(2) : t;
}

at::Tensor convolution_on_cpu(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                              c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                              bool transposed, c10::IntArrayRef output_padding, int64_t groups) {
  note_cpu_fallback("aten::convolution_overrideable");
  const at::Tensor result = at::convolution(input.cpu(), weight.cpu(), bias.defined() ? bias.cpu() : at::Tensor(),
                                            stride, padding, dilation, transposed, output_padding, groups);
  return result.to(input.device());
}

at::Tensor npusim_convolution(const at::Tensor& input_, const at::Tensor& weight_,
                              const std::optional<at::Tensor>& bias_opt, c10::IntArrayRef stride,
                              c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                              c10::IntArrayRef output_padding, int64_t groups) {
  const at::Tensor bias = bias_opt.has_value() ? *bias_opt : at::Tensor();
  if (widens_to_float32(input_, {weight_, bias}))
    return npusim_convolution(widened(input_), widened(weight_), widened(bias), stride, padding, dilation, transposed,
                              output_padding, groups)
        .to(input_.scalar_type());
  if (!runs_natively(input_, weight_, bias))
    return convolution_on_cpu(input_, weight_, bias, stride, padding, dilation, transposed, output_padding, groups);
  if (input_.dim() == 5) {
    at::Tensor output = convolution_3d(input_, weight_, stride, padding, dilation, transposed, output_padding, groups);
    if (bias.defined()) output.add_(bias.view({1, -1, 1, 1, 1}));
    return output;
  }
  const at::Tensor input = as_4d(input_), weight = as_4d(weight_).contiguous();
  at::Tensor output;
  if (transposed) {
    const Geometry g = transposed_geometry(input, weight, stride, padding, dilation, output_padding, groups);
    output = input_gradient(weight, input.contiguous(), g);
  } else {
    const Geometry g = geometry(input, weight, stride, padding, dilation, groups);
    output = convolution(input, weight, g);
  }
  if (bias.defined()) output.add_(bias.view({1, -1, 1, 1}));
  const at::Tensor result = as_given(output, input_);
  return result.storage_offset() == 0 ? result : result.clone();  // a tensor of its own, as PyTorch's, not a slice
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npusim_convolution_backward(
    const at::Tensor& grad_output_, const at::Tensor& input_, const at::Tensor& weight_, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  if (widens_to_float32(input_, {grad_output_, weight_})) {
    const auto [grad_input, grad_weight, grad_bias] =
        npusim_convolution_backward(widened(grad_output_), widened(input_), widened(weight_), stride, padding, dilation,
                                    transposed, output_padding, groups, output_mask);
    const at::ScalarType type = input_.scalar_type();
    return {narrowed(grad_input, type), narrowed(grad_weight, type), narrowed(grad_bias, type)};
  }
  if (!runs_natively(input_, weight_, at::Tensor()) || grad_output_.scalar_type() != at::kFloat) {
    note_cpu_fallback("aten::convolution_backward_overrideable");
    const std::vector<int64_t> bias_sizes{transposed ? weight_.size(1) * groups : weight_.size(0)};
    auto [grad_input, grad_weight, grad_bias] =
        at::convolution_backward(grad_output_.cpu(), input_.cpu(), weight_.cpu(), at::OptionalIntArrayRef(bias_sizes),
                                 stride, padding, dilation, transposed, output_padding, groups, output_mask);
    const auto back = [&](const at::Tensor& t) { return t.defined() ? t.to(input_.device()) : t; };
    return {back(grad_input), back(grad_weight), back(grad_bias)};
  }
  if (input_.dim() == 5) {
    const auto [grad_input, grad_weight] =
        convolution_3d_backward(grad_output_, input_, weight_, stride, padding, dilation, transposed, output_padding,
                                groups, {output_mask[0], output_mask[1]});
    return {grad_input, grad_weight, output_mask[2] ? grad_output_.sum({0, 2, 3, 4}) : at::Tensor()};
  }
  const at::Tensor input = as_4d(input_), weight = as_4d(weight_).contiguous();
  const at::Tensor grad_output = as_4d(grad_output_).contiguous();
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[2]) grad_bias = grad_output.sum(3).sum(2).sum(0);
  if (transposed) {
    // Transposed, the roles swap: the input's gradient is the forward convolution of the output's gradient (cut to
    // the input's size where output padding gave windows past it), and the weights' gradient takes the output's
    // gradient as the convolution's input and the input as its output's gradient.
    const Geometry g = transposed_geometry(input, weight, stride, padding, dilation, output_padding, groups);
    if (output_mask[0]) {
      const Geometry forward = geometry(grad_output, weight, stride, padding, dilation, groups);
      grad_input = convolution(grad_output, weight, forward).narrow(2, 0, g.out_h).narrow(3, 0, g.out_w).contiguous();
    }
    if (output_mask[1]) grad_weight = weight_gradient(grad_output, input.contiguous(), g);
  } else {
    const Geometry g = geometry(input, weight, stride, padding, dilation, groups);
    if (output_mask[0]) grad_input = input_gradient(weight, grad_output, g);
    if (output_mask[1]) grad_weight = weight_gradient(input, grad_output, g);
  }
  return {as_given(grad_input, input_), as_given(grad_weight, input_), grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", npusim_convolution);
  m.impl("convolution_backward_overrideable", npusim_convolution_backward);
}

}  // namespace npusim::bridge
