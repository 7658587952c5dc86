// Native arange for float32, int64 and int32 on the device, with no iota instruction: the first element is filled in,
// then each step doubles the filled prefix, out[n .. 2n) = out[0 .. n) + n * step, one elementwise kernel each, so a
// length-L range takes about log2(L) kernels. The integers are exact (a whole-number start and step; others take the
// fallback, as do other dtypes); float32 adds the offsets in float32, which for whole-number steps and starts is exact
// up to 2^24. linspace is built on it.
#include <ATen/native/RangeFactories.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsub.h>
#include <torch/library.h>

#include <cmath>

#include "bridge.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

at::Tensor& npusim_arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  const bool integers = out.scalar_type() == at::kLong || out.scalar_type() == at::kInt;
  const bool native_dtype =
      out.scalar_type() == at::kFloat || (integers && start.isIntegral(false) && step.isIntegral(false));
  const double first = start.toDouble(), last = end.toDouble(), stride = step.toDouble();
  const bool valid = stride != 0 && std::isfinite(first) && std::isfinite(last) && (last - first) / stride >= 0;
  if (native_dtype && valid && out.is_contiguous()) {
    const int64_t length = static_cast<int64_t>(std::ceil((last - first) / stride));
    at::native::resize_output(out, {length});
    if (length == 0) return out;
    out.narrow(0, 0, 1).fill_(start);
    for (int64_t filled = 1; filled < length;) {
      const int64_t count = std::min(filled, length - filled);
      const at::Scalar offset =
          integers ? at::Scalar(filled * step.toLong()) : at::Scalar(static_cast<double>(filled) * stride);
      at::Tensor destination = out.narrow(0, filled, count);
      at::add_out(destination, out.narrow(0, 0, count), at::scalar_tensor(offset, out.options().device(c10::kCPU)));
      filled += count;
    }
    return out;
  }
  torch::jit::Stack stack{start, end, step, out};
  call_cpu_fallback("aten::arange", "start_out", stack);
  return out;
}

// linspace in float32 as the CPU computes it: step = (end - start) / (steps - 1) in float32, the first half of the
// points start + step i, the others end - step (steps - 1 - i), so that both ends are exact, each a fused
// multiply-add (the CPU's vectorised kernel is compiled for FMA, so each point is rounded once): one formula kernel
// per half over the native arange's whole numbers.
at::Tensor& npusim_linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (out.scalar_type() == at::kFloat && !start.isComplex() && !end.isComplex() && steps <= (int64_t{1} << 24)) {
    at::native::resize_output(out, {steps});
    if (steps <= 1) return steps == 0 ? out : out.fill_(start);
    const float first = start.to<float>(), last = end.to<float>();
    const float step = (last - first) / static_cast<float>(steps - 1);
    const int64_t halfway = steps / 2;
    const at::Tensor index = at::arange(steps, out.options());  // whole numbers, exact in float32 up to 2^24
    at::Tensor lower = out.narrow(0, 0, halfway), upper = out.narrow(0, halfway, steps - halfway);
    const at::Tensor from_end = at::rsub(index.narrow(0, halfway, steps - halfway), static_cast<double>(steps - 1));
    const bool launched =
        launch_formula("linspace", {index.narrow(0, 0, halfway)}, {}, lower,
                       [&](Formula& f) { return mul_add(f.x(0), f.constant(step), f.constant(first)); }) &&
        launch_formula("linspace", {from_end}, {}, upper,
                       [&](Formula& f) { return mul_add(f.x(0), f.constant(-step), f.constant(last)); });
    if (launched) return out;
  }
  torch::jit::Stack stack{start, end, steps, out};
  call_cpu_fallback("aten::linspace", "out", stack);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", npusim_arange_out);
  m.impl("linspace.out", npusim_linspace_out);
}

}  // namespace npusim::bridge
