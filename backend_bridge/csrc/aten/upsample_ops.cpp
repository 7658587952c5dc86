// Nearest-neighbour upsampling (F.interpolate(mode="nearest" or "nearest-exact"), nn.Upsample) of 1, 2 or 3 spatial
// dimensions by whole factors, each way one fused kernel: the forward repeats each input element over its block (a
// copy over [N, C, D1, r1, D2, r2, ...] reading the input with strides 0 over the repeats), the backward sums each
// block of the gradient (over [N, C, D1, D2, ..., r1, r2, ...] with the repeats reduced, in row order from the block's
// first element, as the CPU's kernel adds them; half precision in float32, rounded once). Which input index each
// output index reads is PyTorch's own map, taken from the CPU's kernel of the same mode run on the indices. Sizes
// whose map is not o / r (a fractional factor, downsampling) gather along each dimension in turn (index_select), and
// their backward adds each gradient at the index it read (index_add, last dimension first).
#include <ATen/native/Resize.h>
#include <ATen/ops/_upsample_nearest_exact1d.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/upsample_nearest1d.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "bridge.h"
#include "runtime/kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;
using Scales = std::vector<std::optional<double>>;

// One upsampling op: its name, spatial dimensions and whether it rounds to the nearest ("nearest-exact").
struct Upsampling {
  const char* name;  // "upsample_nearest2d"
  int dims;
  bool exact;
};

// The input index each output index reads along one dimension, by PyTorch's own map for these sizes, scale and
// mode (the CPU's kernel run on the indices themselves, on the host): int64, on the host.
at::Tensor source_indices(bool exact, int64_t input, int64_t output, std::optional<double> scale) {
  const at::Tensor indices = at::arange(input, at::TensorOptions().dtype(at::kDouble)).view({1, 1, input});
  return (exact ? at::_upsample_nearest_exact1d(indices, {output}, scale)
                : at::upsample_nearest1d(indices, {output}, scale))
      .reshape({-1})
      .to(at::kLong);
}

// The whole factor r with which output index o reads input index o / r along one dimension, if PyTorch's map (for
// these sizes, scale and mode) is exactly that.
std::optional<int64_t> whole_factor(bool exact, int64_t input, int64_t output, std::optional<double> scale) {
  if (input <= 0 || output <= 0 || output % input != 0) return std::nullopt;
  const int64_t factor = output / input;
  const at::Tensor sources = source_indices(exact, input, output, scale);
  const auto* source = sources.const_data_ptr<int64_t>();
  for (int64_t o = 0; o < output; ++o)
    if (source[o] != o / factor) return std::nullopt;
  return factor;
}

// Every spatial dimension's factor, for an input and output on one npusim device of a type the kernels hold.
std::optional<std::vector<int64_t>> factors(const Upsampling& op, const at::Tensor& small, const at::Tensor& large,
                                            at::IntArrayRef small_size, at::IntArrayRef large_size,
                                            const Scales& scales) {
  if (static_cast<int>(small_size.size()) != op.dims + 2 || static_cast<int>(large_size.size()) != op.dims ||
      !small.is_privateuseone() || large.device() != small.device() || !element_type(small.scalar_type()) ||
      large.scalar_type() != small.scalar_type())
    return std::nullopt;
  std::vector<int64_t> result;
  for (int d = 0; d < op.dims; ++d) {
    const auto factor = whole_factor(op.exact, small_size[2 + d], large_size[d], scales[d]);
    if (!factor) return std::nullopt;
    result.push_back(*factor);
  }
  return result;
}

// Other sizes (downsampling, fractional factors): the shapes of a gather along each dimension, any dtype the device
// holds, nothing empty.
bool takes_any_sizes(const Upsampling& op, const at::Tensor& small, const at::Tensor& large, at::IntArrayRef small_size,
                     at::IntArrayRef large_size) {
  if (static_cast<int>(small_size.size()) != op.dims + 2 || static_cast<int>(large_size.size()) != op.dims ||
      !small.is_privateuseone() || large.device() != small.device() || !element_type(small.scalar_type()) ||
      large.scalar_type() != small.scalar_type())
    return false;
  for (int64_t size : small_size)
    if (size <= 0) return false;
  for (int64_t size : large_size)
    if (size <= 0) return false;
  return true;
}

// The kernel's space: [N, C, D1, r1, D2, r2, ...] for the forward; [N, C, D1, D2, ..., r1, r2, ...] with the repeats
// reduced for the backward. The small tensor [N, C, D1, D2, ...] has strides 0 over the repeats; the large one is
// [N, C, D1 r1, D2 r2, ...].
struct Blocks {
  std::vector<int64_t> sizes, small_strides, large_strides;
};
Blocks blocks(const at::Tensor& small, const at::Tensor& large, const std::vector<int64_t>& factor, bool reduce) {
  Blocks b;
  for (int d = 0; d < 2; ++d) {
    b.sizes.push_back(small.size(d));
    b.small_strides.push_back(small.stride(d));
    b.large_strides.push_back(large.stride(d));
  }
  const auto spatial = static_cast<int>(factor.size());
  for (int d = 0; d < spatial; ++d) {
    const int64_t r = factor[d], large_stride = large.stride(2 + d);
    b.sizes.push_back(small.size(2 + d));
    b.small_strides.push_back(small.stride(2 + d));
    b.large_strides.push_back(large_stride * r);
    if (!reduce) {  // the repeats right after their dimension
      b.sizes.push_back(r);
      b.small_strides.push_back(0);
      b.large_strides.push_back(large_stride);
    }
  }
  for (int d = 0; d < spatial && reduce; ++d) {  // the repeats last, reduced
    b.sizes.push_back(factor[d]);
    b.small_strides.push_back(0);
    b.large_strides.push_back(large.stride(2 + d));
  }
  return b;
}

std::string kernel_name(const Upsampling& op, const char* suffix, const at::Tensor& tensor) {
  return TensorKernel::name_for(c10::str(op.name, suffix).c_str(), tensor);
}

at::Tensor& upsample_out(const Upsampling& op, const at::Tensor& input, at::IntArrayRef output_size,
                         const Scales& scales, at::Tensor& out) {
  if (const auto factor = factors(op, input, out, input.sizes(), output_size, scales)) {
    std::vector<int64_t> shape = {input.size(0), input.size(1)};
    shape.insert(shape.end(), output_size.begin(), output_size.end());
    at::native::resize_output(out, shape);
    if (out.numel() == 0) return out;
    const Blocks b = blocks(input, out, *factor, /*reduce=*/false);
    TensorKernel k(kernel_name(op, "", input), b.sizes, 0);
    k.store(k.load(input, b.small_strides), out, b.large_strides);
    if (k.launch(input)) return out;
  }
  if (takes_any_sizes(op, input, out, input.sizes(), output_size)) {  // a gather along each dimension in turn
    at::Tensor result = input;
    for (int d = 0; d < op.dims; ++d)
      result = at::index_select(
          result, 2 + d, source_indices(op.exact, input.size(2 + d), output_size[d], scales[d]).to(input.device()));
    at::native::resize_output(out, result.sizes());
    return out.copy_(result);
  }
  torch::jit::Stack stack{input, output_size.vec()};
  for (const auto& scale : scales) stack.emplace_back(scale);
  stack.emplace_back(out);
  call_cpu_fallback(c10::str("aten::", op.name).c_str(), "out", stack);
  return out;
}

// Each input element's gradient: the sum of its block, float16 and bfloat16 in float32 rounded once.
at::Tensor& upsample_backward_out(const Upsampling& op, const at::Tensor& grad_output, at::IntArrayRef output_size,
                                  at::IntArrayRef input_size, const Scales& scales, at::Tensor& grad_input) {
  const bool floats = at::isFloatingType(grad_output.scalar_type()) && grad_output.scalar_type() != at::kDouble;
  const auto factor = floats ? factors(op, grad_input, grad_output, input_size, output_size, scales) : std::nullopt;
  if (factor && grad_output.dim() == op.dims + 2) {
    at::native::resize_output(grad_input, input_size);
    if (grad_input.numel() == 0) return grad_input;
    const Blocks b = blocks(grad_input, grad_output, *factor, /*reduce=*/true);
    TensorKernel k(kernel_name(op, "_backward", grad_output), b.sizes, op.dims);
    int value = k.load(grad_output, b.large_strides);
    if (grad_output.scalar_type() != at::kFloat) value = k.op(FusedOpcode::Convert, value);
    k.store(k.op(FusedOpcode::ReduceSum, value), grad_input, b.small_strides);
    if (k.launch(grad_output)) return grad_input;
  }
  if (floats && grad_output.dim() == op.dims + 2 &&
      takes_any_sizes(op, grad_input, grad_output, input_size, output_size)) {
    // The gathers' adjoints, last dimension first: each output's gradient added at the index it read.
    at::Tensor gradient = grad_output;
    for (int d = op.dims - 1; d >= 0; --d) {
      std::vector<int64_t> shape = gradient.sizes().vec();
      shape[2 + d] = input_size[2 + d];
      gradient =
          at::zeros(shape, gradient.options())
              .index_add_(
                  2 + d,
                  source_indices(op.exact, input_size[2 + d], output_size[d], scales[d]).to(grad_output.device()),
                  gradient);
    }
    at::native::resize_output(grad_input, input_size);
    return grad_input.copy_(gradient);
  }
  torch::jit::Stack stack{grad_output, output_size.vec(), input_size.vec()};
  for (const auto& scale : scales) stack.emplace_back(scale);
  stack.emplace_back(grad_input);
  call_cpu_fallback(c10::str("aten::", op.name, "_backward").c_str(), "grad_input", stack);
  return grad_input;
}

at::Tensor upsample(const Upsampling& op, const at::Tensor& input, at::IntArrayRef output_size, const Scales& scales) {
  std::vector<int64_t> shape = input.sizes().vec();
  if (static_cast<int>(shape.size()) == op.dims + 2 && static_cast<int>(output_size.size()) == op.dims)
    std::copy(output_size.begin(), output_size.end(), shape.begin() + 2);
  at::Tensor out = at::empty(shape, input.options().memory_format(input.suggest_memory_format()));
  return upsample_out(op, input, output_size, scales, out);
}
at::Tensor upsample_backward(const Upsampling& op, const at::Tensor& grad_output, at::IntArrayRef output_size,
                             at::IntArrayRef input_size, const Scales& scales) {
  at::Tensor grad_input =
      at::empty(input_size, grad_output.options().memory_format(grad_output.suggest_memory_format()));
  return upsample_backward_out(op, grad_output, output_size, input_size, scales, grad_input);
}

// The registrations of one op: functional and out= variants each way; its scales are one optional per dimension.
template <const Upsampling& op>
struct Registration;

template <const Upsampling& op>
requires(op.dims == 1) struct Registration<op> {
  using S = std::optional<double>;
  static at::Tensor forward(const at::Tensor& x, at::IntArrayRef size, S s) { return upsample(op, x, size, {s}); }
  static at::Tensor& forward_out(const at::Tensor& x, at::IntArrayRef size, S s, at::Tensor& out) {
    return upsample_out(op, x, size, {s}, out);
  }
  static at::Tensor backward(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input, S s) {
    return upsample_backward(op, g, size, input, {s});
  }
  static at::Tensor& backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input, S s,
                                  at::Tensor& out) {
    return upsample_backward_out(op, g, size, input, {s}, out);
  }
};
template <const Upsampling& op>
requires(op.dims == 2) struct Registration<op> {
  using S = std::optional<double>;
  static at::Tensor forward(const at::Tensor& x, at::IntArrayRef size, S h, S w) {
    return upsample(op, x, size, {h, w});
  }
  static at::Tensor& forward_out(const at::Tensor& x, at::IntArrayRef size, S h, S w, at::Tensor& out) {
    return upsample_out(op, x, size, {h, w}, out);
  }
  static at::Tensor backward(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input, S h, S w) {
    return upsample_backward(op, g, size, input, {h, w});
  }
  static at::Tensor& backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input, S h, S w,
                                  at::Tensor& out) {
    return upsample_backward_out(op, g, size, input, {h, w}, out);
  }
};
template <const Upsampling& op>
requires(op.dims == 3) struct Registration<op> {
  using S = std::optional<double>;
  static at::Tensor forward(const at::Tensor& x, at::IntArrayRef size, S d, S h, S w) {
    return upsample(op, x, size, {d, h, w});
  }
  static at::Tensor& forward_out(const at::Tensor& x, at::IntArrayRef size, S d, S h, S w, at::Tensor& out) {
    return upsample_out(op, x, size, {d, h, w}, out);
  }
  static at::Tensor backward(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input, S d, S h, S w) {
    return upsample_backward(op, g, size, input, {d, h, w});
  }
  static at::Tensor& backward_out(const at::Tensor& g, at::IntArrayRef size, at::IntArrayRef input, S d, S h, S w,
                                  at::Tensor& out) {
    return upsample_backward_out(op, g, size, input, {d, h, w}, out);
  }
};

template <const Upsampling& op>
void add(torch::Library& m) {
  using R = Registration<op>;
  m.impl(op.name, R::forward);
  m.impl(c10::str(op.name, ".out").c_str(), R::forward_out);
  m.impl(c10::str(op.name, "_backward").c_str(), R::backward);
  m.impl(c10::str(op.name, "_backward.grad_input").c_str(), R::backward_out);
}

constexpr Upsampling kNearest1d{"upsample_nearest1d", 1, false};
constexpr Upsampling kNearest2d{"upsample_nearest2d", 2, false};
constexpr Upsampling kNearest3d{"upsample_nearest3d", 3, false};
constexpr Upsampling kExact1d{"_upsample_nearest_exact1d", 1, true};
constexpr Upsampling kExact2d{"_upsample_nearest_exact2d", 2, true};
constexpr Upsampling kExact3d{"_upsample_nearest_exact3d", 3, true};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  add<kNearest1d>(m);
  add<kNearest2d>(m);
  add<kNearest3d>(m);
  add<kExact1d>(m);
  add<kExact2d>(m);
  add<kExact3d>(m);
}

}  // namespace npusim::bridge
