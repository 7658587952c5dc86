// Running maxima, minima and log-sum-exps along a dimension (cummax, cummin, logcumsumexp), composed from native
// kernels as a Hillis-Steele scan: log2(n) steps, step d combining each element with the one d before it (whole
// tensors at a time), with a combination that is associative, so the result is the sequential scan's:
//   cummax   the later of two segments wins if it holds a NaN, or neither does and its maximum is >= the earlier's
//            (so ties and NaN give the last index, as the CPU's loop `x >= best || isnan(x)` does); cummin alike
//   logcumsumexp  logaddexp (the CPU's formula, same infinities; complex64 with its complex logaddexp, element by
//                 element along the dimension as the CPU adds them).
// float32 and integer tensors on npusim; float16 and bfloat16 ones are scanned in float32 and rounded once, as the
// CPU's running value is float32 too (for the extrema, exact both ways); other dtypes take the CPU fallback.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/le.h>
#include <ATen/ops/logaddexp.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

bool scans_natively(const at::Tensor& self) {
  return self.device().is_privateuseone() &&
         (is_float_kind(self.scalar_type()) || self.scalar_type() == at::kLong || self.scalar_type() == at::kInt);
}

// The tensor the scan runs over: half precision widened to float32.
at::Tensor scanned(const at::Tensor& self) {
  return is_float_kind(self.scalar_type()) && self.scalar_type() != at::kFloat ? self.to(at::kFloat) : self;
}

// One step of the scan: elements d.. combined with the elements d before them, the first d unchanged.
template <typename Combine>
at::Tensor step(const at::Tensor& running, int64_t d, const Combine& combine) {
  const int64_t n = running.size(-1);
  return at::cat({running.narrow(-1, 0, d), combine(running.narrow(-1, 0, n - d), running.narrow(-1, d, n - d))}, -1);
}

// cummax (Greater) or cummin into values and indices, along `dim`.
template <bool Greater>
void extremum_scan(const at::Tensor& self, const at::Tensor& values, const at::Tensor& indices, int64_t dim) {
  const int64_t wrapped = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const at::Tensor source = scanned(self);
  at::Tensor value = source.dim() == 0 ? source.reshape({1}) : source.movedim(wrapped, -1).contiguous();
  const int64_t n = value.size(-1);
  at::Tensor index = at::arange(n, value.options().dtype(at::kLong)).expand(value.sizes()).contiguous();
  for (int64_t d = 1; d < n; d *= 2) {
    const at::Tensor earlier = value.narrow(-1, 0, n - d), later = value.narrow(-1, d, n - d);
    const at::Tensor better = Greater ? at::ge(later, earlier) : at::le(later, earlier);
    const at::Tensor later_wins =
        at::logical_or(at::isnan(later), at::logical_and(at::logical_not(at::isnan(earlier)), better));
    value = step(value, d, [&](const at::Tensor& a, const at::Tensor& b) { return at::where(later_wins, b, a); });
    index = step(index, d, [&](const at::Tensor& a, const at::Tensor& b) { return at::where(later_wins, b, a); });
  }
  const auto back = [&](const at::Tensor& t) { return self.dim() == 0 ? t.reshape({}) : t.movedim(-1, wrapped); };
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  values.copy_(back(value));
  indices.copy_(back(index));
}

void npusim_cummax_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  if (scans_natively(self) && self.numel() > 0 && values.scalar_type() == self.scalar_type())
    return extremum_scan<true>(self, values, indices, dim);
  torch::jit::Stack stack{self, values, indices, dim};
  call_cpu_fallback("aten::_cummax_helper", "", stack);
}
void npusim_cummin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  if (scans_natively(self) && self.numel() > 0 && values.scalar_type() == self.scalar_type())
    return extremum_scan<false>(self, values, indices, dim);
  torch::jit::Stack stack{self, values, indices, dim};
  call_cpu_fallback("aten::_cummin_helper", "", stack);
}

at::Tensor& npusim_logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  if (self.device().is_privateuseone() &&
      (is_float_kind(self.scalar_type()) || self.scalar_type() == at::kComplexFloat) &&
      out.scalar_type() == self.scalar_type() && self.numel() > 0) {
    const int64_t wrapped = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
    const at::Tensor source = scanned(self);
    at::Tensor running = source.dim() == 0 ? source.reshape({1}) : source.movedim(wrapped, -1).contiguous();
    if (self.is_complex()) {
      // One element after another, as the CPU adds them: a complex log-sum-exp's imaginary part is an angle known
      // only up to whole turns, and another order of additions lands on another turn.
      std::vector<at::Tensor> sums{running.narrow(-1, 0, 1)};
      for (int64_t k = 1; k < running.size(-1); ++k)
        sums.push_back(at::logaddexp(running.narrow(-1, k, 1), sums.back()));
      running = at::cat(sums, -1);
    } else {
      for (int64_t d = 1; d < running.size(-1); d *= 2)
        running = step(running, d, [](const at::Tensor& a, const at::Tensor& b) { return at::logaddexp(a, b); });
    }
    at::native::resize_output(out, self.sizes());
    return out.copy_(self.dim() == 0 ? running.reshape({}) : running.movedim(-1, wrapped));
  }
  torch::jit::Stack stack{self, dim, out};
  call_cpu_fallback("aten::_logcumsumexp", "out", stack);
  return out;
}
at::Tensor npusim_logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_logcumsumexp_out(self, dim, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_cummax_helper", npusim_cummax_helper);
  m.impl("_cummin_helper", npusim_cummin_helper);
  m.impl("_logcumsumexp", npusim_logcumsumexp);
  m.impl("_logcumsumexp.out", npusim_logcumsumexp_out);
}

}  // namespace npusim::bridge
