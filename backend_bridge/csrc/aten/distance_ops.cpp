// Distances and norm limits composed from native kernels on the device:
//   cdist     Euclidean distances as the CPU computes them when it uses a product (|a|^2 - 2 a.b + |b|^2 by one
//             batched GEMM of padded operands, clamped at 0, square-rooted), whenever the CPU would (p = 2 and
//             more than 25 rows, or asked for); otherwise the vector norm of every pair's difference
//   pdist     the vector norm of each pair (i < j) of rows' difference, pairs gathered by host-made index lists
//   their gradients (_cdist_backward, _pdist_backward) from each pair's difference and distance, at every order
//   renorm    each slice scaled by maxnorm / (norm + 1e-7) where its norm exceeds maxnorm, as the CPU does
// float32 on one npusim device (renorm complex64 too, by its magnitudes' norms); other cases take the CPU fallback.
#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <cmath>

#include "bridge.h"

namespace npusim::bridge {
namespace {

bool float32_on_npusim(const at::Tensor& t) { return t.scalar_type() == at::kFloat && t.device().is_privateuseone(); }

// The CPU's product form of Euclidean distances: [-2 x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T.
at::Tensor euclidean_by_product(const at::Tensor& x1, const at::Tensor& x2) {
  const at::Tensor norm1 = at::sum(x1 * x1, -1, true), norm2 = at::sum(x2 * x2, -1, true);
  const at::Tensor left = at::cat({x1 * -2, norm1, at::ones_like(norm1)}, -1);
  const at::Tensor right = at::cat({x2, at::ones_like(norm2), norm2}, -1);
  return at::sqrt(at::clamp_min(at::matmul(left, right.transpose(-1, -2)), 0));
}

at::Tensor npusim_cdist_forward(const at::Tensor& x1, const at::Tensor& x2, double p,
                                std::optional<int64_t> compute_mode) {
  if (float32_on_npusim(x1) && float32_on_npusim(x2) && x1.device() == x2.device() && x1.dim() >= 2 && x2.dim() >= 2 &&
      x1.size(-1) == x2.size(-1) && x1.size(-1) > 0 && p >= 0) {
    const int64_t rows1 = x1.size(-2), rows2 = x2.size(-2), mode = compute_mode.value_or(0);
    std::vector<int64_t> batch = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
    std::vector<int64_t> shape1 = batch, shape2 = batch;
    shape1.insert(shape1.end(), {rows1, x1.size(-1)});
    shape2.insert(shape2.end(), {rows2, x2.size(-1)});
    const at::Tensor a = x1.expand(shape1), b = x2.expand(shape2);
    if (p == 2 && (mode == 1 || (mode == 0 && (rows1 > 25 || rows2 > 25)))) return euclidean_by_product(a, b);
    const at::Tensor differences = a.unsqueeze(-2) - b.unsqueeze(-3);
    return at::linalg_vector_norm(differences, p, -1);
  }
  torch::jit::Stack stack{x1, x2, p, compute_mode};
  call_cpu_fallback("aten::_cdist_forward", "", stack);
  return stack[0].toTensor();
}

// The derivative of each pair's distance r = |d|_p with respect to its first row, times the pair's gradient g, for
// differences d = a - b, as the CPU's kernels define it at every order (zero where r = 0, the derivative's limit):
//   p = 0: 0;  p = 1: sign(d) g;  p < 2: sign(d) |d|^(p-1) g / r^(p-1) (also 0 where d = 0 and p < 1);
//   p = 2: d g / r;  p = inf: sign(d) g where |d| = r;  p > 2: d |d|^(p-2) g / r^(p-1).
// `distances` and `grad` hold one value per pair, broadcast along the rows' elements.
at::Tensor pair_gradients(const at::Tensor& differences, const at::Tensor& distances, const at::Tensor& grad,
                          double p) {
  if (p == 0) return at::zeros_like(differences);
  if (p == 1) return at::sign(differences) * grad;
  if (std::isinf(p)) return at::sign(differences) * grad * at::eq(at::abs(differences), distances);
  const at::Tensor at_zero = at::eq(distances, 0);
  if (p == 2) return (differences * grad / distances).masked_fill(at_zero, 0);
  const at::Tensor magnitudes = at::abs(differences);
  at::Tensor derivative;
  if (p < 2) {
    derivative = at::sign(differences) * at::pow(magnitudes, p - 1) * grad / at::pow(distances, p - 1);
    if (p < 1) derivative.masked_fill_(at::eq(differences, 0), 0);
  } else {
    derivative = differences * at::pow(magnitudes, p - 2) * grad / at::pow(distances, p - 1);
  }
  return derivative.masked_fill(at_zero, 0);
}

// The pairs (i < j) of n rows, in pdist's order, as two index lists on `device`.
std::pair<at::Tensor, at::Tensor> row_pairs(int64_t n, at::Device device) {
  const int64_t pairs = n * (n - 1) / 2;
  at::Tensor first = at::empty({pairs}, at::kLong), second = at::empty({pairs}, at::kLong);
  auto i = first.accessor<int64_t, 1>(), j = second.accessor<int64_t, 1>();
  int64_t k = 0;
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = a + 1; b < n; ++b, ++k) {
      i[k] = a;
      j[k] = b;
    }
  return {first.to(device), second.to(device)};
}

at::Tensor npusim_pdist_forward(const at::Tensor& self, double p) {
  if (float32_on_npusim(self) && self.dim() == 2 && p >= 0) {
    const int64_t n = self.size(0);
    const int64_t pairs = n * (n - 1) / 2;
    if (pairs == 0 || self.size(1) == 0) return at::zeros({pairs}, self.options());
    const auto [first, second] = row_pairs(n, self.device());
    const at::Tensor differences = at::index_select(self, 0, first) - at::index_select(self, 0, second);
    return at::linalg_vector_norm(differences, p, 1);
  }
  torch::jit::Stack stack{self, p};
  call_cpu_fallback("aten::_pdist_forward", "", stack);
  return stack[0].toTensor();
}

// pdist's gradient: each pair's derivative added to its first row and subtracted from its second.
at::Tensor npusim_pdist_backward(const at::Tensor& grad, const at::Tensor& self, double p, const at::Tensor& pdist) {
  if (float32_on_npusim(self) && float32_on_npusim(grad) && float32_on_npusim(pdist) && self.dim() == 2 && p >= 0 &&
      grad.device() == self.device() && pdist.device() == self.device()) {
    const int64_t n = self.size(0);
    at::Tensor result = at::zeros(self.sizes(), self.options());
    if (n < 2 || self.size(1) == 0) return result;
    const auto [first, second] = row_pairs(n, self.device());
    const at::Tensor differences = at::index_select(self, 0, first) - at::index_select(self, 0, second);
    const at::Tensor derivatives = pair_gradients(differences, pdist.unsqueeze(1), grad.unsqueeze(1), p);
    return result.index_add_(0, first, derivatives).index_add_(0, second, derivatives, -1);
  }
  torch::jit::Stack stack{grad, self, p, pdist};
  call_cpu_fallback("aten::_pdist_backward", "", stack);
  return stack[0].toTensor();
}

// cdist's gradient with respect to x1 (autograd calls it with the operands swapped for x2's): each pair's derivative
// summed over x2's rows, x1 expanded to the batch shape as the CPU returns it.
at::Tensor npusim_cdist_backward(const at::Tensor& grad, const at::Tensor& x1, const at::Tensor& x2, double p,
                                 const at::Tensor& cdist) {
  const at::Device device = x1.device();
  if (float32_on_npusim(x1) && float32_on_npusim(x2) && float32_on_npusim(grad) && float32_on_npusim(cdist) &&
      x2.device() == device && grad.device() == device && cdist.device() == device && x1.dim() >= 2 && x2.dim() >= 2 &&
      x1.size(-1) == x2.size(-1) && p >= 0) {
    std::vector<int64_t> batch = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
    std::vector<int64_t> shape1 = batch, shape2 = batch;
    shape1.insert(shape1.end(), {x1.size(-2), x1.size(-1)});
    shape2.insert(shape2.end(), {x2.size(-2), x2.size(-1)});
    if (x1.numel() == 0 || x2.numel() == 0 || c10::multiply_integers(batch) == 0) return at::zeros_like(x1);
    const at::Tensor differences = x1.expand(shape1).unsqueeze(-2) - x2.expand(shape2).unsqueeze(-3);
    const at::Tensor derivatives = pair_gradients(differences, cdist.unsqueeze(-1), grad.unsqueeze(-1), p);
    return at::sum(derivatives, -2).contiguous();
  }
  torch::jit::Stack stack{grad, x1, x2, p, cdist};
  call_cpu_fallback("aten::_cdist_backward", "", stack);
  return stack[0].toTensor();
}

at::Tensor& npusim_renorm_out(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm,
                              at::Tensor& out) {
  const bool complex64 = self.scalar_type() == at::kComplexFloat && self.device().is_privateuseone();
  if ((float32_on_npusim(self) || complex64) && out.scalar_type() == self.scalar_type() && self.dim() > 0 &&
      p.toDouble() > 0 && maxnorm.toDouble() >= 0 && out.device() == self.device()) {
    const int64_t kept = at::maybe_wrap_dim(dim, self.dim());
    std::vector<int64_t> reduced;
    for (int64_t d = 0; d < self.dim(); ++d)
      if (d != kept) reduced.push_back(d);
    const at::Tensor norm = at::linalg_vector_norm(self, p, reduced, /*keepdim=*/true);
    const double limit = maxnorm.toDouble();
    const at::Tensor one = at::scalar_tensor(1.0, norm.options());
    const at::Tensor factor = at::where(at::gt(norm, limit), limit / (norm + 1e-7), one);
    const at::Tensor result = self * factor;
    at::native::resize_output(out, self.sizes());
    return out.copy_(result);
  }
  torch::jit::Stack stack{self, p, dim, maxnorm, out};
  call_cpu_fallback("aten::renorm", "out", stack);
  return out;
}
at::Tensor npusim_renorm(const at::Tensor& self, const at::Scalar& p, int64_t dim, const at::Scalar& maxnorm) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_renorm_out(self, p, dim, maxnorm, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_cdist_forward", npusim_cdist_forward);
  m.impl("_pdist_forward", npusim_pdist_forward);
  m.impl("_cdist_backward", npusim_cdist_backward);
  m.impl("_pdist_backward", npusim_pdist_backward);
  m.impl("renorm", npusim_renorm);
  m.impl("renorm.out", npusim_renorm_out);
}

}  // namespace npusim::bridge
