// Fractional max pooling (nn.FractionalMaxPool2d / 3d) of float32 tensors, composed from native kernels as the CPU
// computes it. Each plane's windows start where its random sample u places them along each pooled dimension:
// start(i) = trunc((i + u) * alpha) - trunc(u * alpha) with alpha = (input - pool) / (output - 1), the last window
// ending at the input's end (float32 arithmetic, as the CPU's). Then, for each offset inside the window, the element
// there is gathered for every output position at once and kept where it beats the running maximum: greater, or NaN
// (NaN wins, and the first maximum keeps its index on ties, as the CPU's `val > max || isnan(val)`). Indices count
// within each plane, as PyTorch's do; the backward adds each output's gradient into the element it took. Other dtypes
// take the CPU fallback.
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/scatter_add.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/trunc.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <limits>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// The windows' first elements along one pooled dimension, for every plane: (N, C, output) int64.
at::Tensor window_starts(const at::Tensor& samples, int64_t input, int64_t output, int64_t pool) {
  const at::Tensor u = samples.unsqueeze(-1);  // (N, C, 1)
  if (output == 1)
    return at::full({samples.size(0), samples.size(1), 1}, input - pool, samples.options().dtype(at::kLong));
  const double alpha = static_cast<float>(input - pool) / static_cast<float>(output - 1);
  const at::Tensor i = at::arange(output - 1, samples.options());
  const at::Tensor starts = at::sub(at::trunc(at::mul(at::add(i, u), alpha)), at::trunc(at::mul(u, alpha)));
  const at::Tensor last =
      at::full({samples.size(0), samples.size(1), 1}, static_cast<double>(input - pool), samples.options());
  return at::cat({starts, last}, -1).to(at::kLong);
}

// Pools `self` (N, C, spatial...) over windows `pool` into `output` sizes with the planes' `samples` (N, C, dims).
void fractional_max_pool(const at::Tensor& self, at::IntArrayRef pool, at::IntArrayRef output,
                         const at::Tensor& samples, at::Tensor& values, at::Tensor& indices) {
  const int64_t dims = static_cast<int64_t>(pool.size());
  const bool batched = self.dim() == dims + 2;
  const at::Tensor input = batched ? self : self.unsqueeze(0);
  const int64_t batch = input.size(0), channels = input.size(1);
  std::vector<at::Tensor> starts;
  for (int64_t d = 0; d < dims; ++d) {
    const int64_t size = input.size(2 + d);
    TORCH_CHECK(output[d] + pool[d] - 1 <= size, "fractional_max_pool", dims, "d(): pool size ", pool[d],
                " too large relative to input size ", size);
    // A plane's samples are (w, h) in 2-D but (t, h, w) in 3-D, as the CPU's kernels read them.
    const int64_t sample = dims == 2 ? 1 - d : d;
    starts.push_back(window_starts(samples.select(2, sample), size, output[d], pool[d]));
  }
  // Each output position's flat index within its plane for a window offset: sum over dims of (start + offset) * stride.
  std::vector<int64_t> strides(dims, 1);
  for (int64_t d = dims - 2; d >= 0; --d) strides[d] = strides[d + 1] * input.size(3 + d);
  std::vector<int64_t> out_shape{batch, channels};
  out_shape.insert(out_shape.end(), output.begin(), output.end());
  const at::Tensor planes = input.reshape({batch, channels, -1});
  at::Tensor best =
      at::full(out_shape, -std::numeric_limits<double>::infinity(), input.options()).reshape({batch, channels, -1});
  at::Tensor best_index = at::zeros_like(best, input.options().dtype(at::kLong));
  bool first = true;
  std::vector<int64_t> offset(dims, 0);
  while (true) {
    at::Tensor flat;
    for (int64_t d = 0; d < dims; ++d) {
      std::vector<int64_t> view{batch, channels};
      for (int64_t e = 0; e < dims; ++e) view.push_back(e == d ? output[d] : 1);
      const at::Tensor along = at::mul(at::add(starts[d], offset[d]), strides[d]).reshape(view);
      flat = flat.defined() ? at::add(flat, along) : along;
    }
    const at::Tensor index = flat.expand(out_shape).reshape({batch, channels, -1});
    const at::Tensor candidate = at::gather(planes, 2, index);
    const at::Tensor wins = first ? at::ones_like(candidate, candidate.options().dtype(at::kBool))
                                  : at::logical_or(at::gt(candidate, best), at::isnan(candidate));
    best = at::where(wins, candidate, best);
    best_index = at::where(wins, index, best_index);
    first = false;
    int64_t d = dims - 1;  // the next offset inside the window, last dimension fastest
    while (d >= 0 && ++offset[d] == pool[d]) offset[d--] = 0;
    if (d < 0) break;
  }
  if (!batched) out_shape.erase(out_shape.begin());
  at::native::resize_output(values, out_shape);
  at::native::resize_output(indices, out_shape);
  values.copy_(best.reshape(out_shape));
  indices.copy_(best_index.reshape(out_shape));
}

bool pools_natively(const at::Tensor& self, const at::Tensor& samples, const at::Tensor& values,
                    const at::Tensor& indices, int64_t dims) {
  return self.device().is_privateuseone() && self.scalar_type() == at::kFloat && samples.device() == self.device() &&
         samples.scalar_type() == at::kFloat && values.device() == self.device() &&
         values.scalar_type() == at::kFloat && indices.scalar_type() == at::kLong &&
         (self.dim() == dims + 1 || self.dim() == dims + 2) && self.numel() > 0 && samples.dim() == 3 &&
         samples.size(2) == dims;
}

template <int Dims>
std::tuple<at::Tensor&, at::Tensor&> fractional_max_pool_out(const at::Tensor& self, at::IntArrayRef pool,
                                                             at::IntArrayRef output, const at::Tensor& samples,
                                                             at::Tensor& values, at::Tensor& indices) {
  if (pools_natively(self, samples, values, indices, Dims) && pool.size() == Dims && output.size() == Dims) {
    fractional_max_pool(self, pool, output, samples, values, indices);
  } else {
    torch::jit::Stack stack{self, pool, output, samples, values, indices};
    call_cpu_fallback(Dims == 2 ? "aten::fractional_max_pool2d" : "aten::fractional_max_pool3d", "output", stack);
  }
  return {values, indices};
}

// The gradient: each output's gradient added into the input element it took (a scatter-add within each plane, in
// the outputs' order, as the CPU adds them).
template <int Dims>
at::Tensor& fractional_max_pool_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                             at::IntArrayRef pool, at::IntArrayRef output, const at::Tensor& indices,
                                             at::Tensor& grad_input) {
  const bool native = self.device().is_privateuseone() && self.scalar_type() == at::kFloat &&
                      grad_output.scalar_type() == at::kFloat && grad_output.device() == self.device() &&
                      indices.device() == self.device() && grad_input.scalar_type() == at::kFloat &&
                      (self.dim() == Dims + 1 || self.dim() == Dims + 2) && grad_output.sizes() == indices.sizes();
  if (!native) {
    torch::jit::Stack stack{grad_output, self, pool, output, indices, grad_input};
    call_cpu_fallback(Dims == 2 ? "aten::fractional_max_pool2d_backward" : "aten::fractional_max_pool3d_backward",
                      "grad_input", stack);
    return grad_input;
  }
  const int64_t planes = self.dim() == Dims + 2 ? self.size(0) * self.size(1) : self.size(0);
  const at::Tensor sums = at::zeros({planes, self.numel() / std::max<int64_t>(planes, 1)}, self.options())
                              .scatter_add_(1, indices.reshape({planes, -1}), grad_output.reshape({planes, -1}));
  at::native::resize_output(grad_input, self.sizes());
  return grad_input.copy_(sums.reshape(self.sizes()));
}

// The 3-D backward's functional form (the 2-D one, a structured operator, reaches the out= form by itself).
at::Tensor fractional_max_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef pool,
                                          at::IntArrayRef output, const at::Tensor& indices) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return fractional_max_pool_backward_out<3>(grad_output, self, pool, output, indices, grad_input);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fractional_max_pool2d.output", fractional_max_pool_out<2>);
  m.impl("fractional_max_pool3d.output", fractional_max_pool_out<3>);
  m.impl("fractional_max_pool2d_backward.grad_input", fractional_max_pool_backward_out<2>);
  m.impl("fractional_max_pool3d_backward.grad_input", fractional_max_pool_backward_out<3>);
  m.impl("fractional_max_pool3d_backward", fractional_max_pool3d_backward);
}

}  // namespace npusim::bridge
