// Complex64 arithmetic on the device (complex_arithmetic.h), on the operands' parts (complex_parts.h). Quotients are
// within a few units in the last place of the CPU's, whose vectorised and scalar divisions differ from each other
// too.
#include "complex_arithmetic.h"

#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/WrapDimMinimal.h>

#include <vector>

#include "bridge.h"
#include "complex_parts.h"

namespace npusim::bridge {

bool complex_binary(ComplexOp op, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out) {
  if (!is_complex64_on_device(out) || out.is_conj()) return false;
  const bool scaled =
      (op == ComplexOp::Add || op == ComplexOp::Sub) && !(alpha.isIntegral(true) && alpha.toLong() == 1);
  std::vector<at::Tensor> operands{self, other};
  if (scaled) operands.push_back(at::scalar_tensor(alpha, at::TensorOptions().dtype(at::kComplexDouble)));
  resize_for(out, {self, other});
  if (out.numel() == 0) return true;
  const char* names[] = {"complex_add", "complex_sub", "complex_mul", "complex_div"};
  return launch_parts(names[static_cast<int>(op)], operands, out, [&](const std::vector<ComplexValue>& v) {
    const auto [a, b] = v[0];
    const auto [c, d] = scaled ? complex_product(v[2], v[1]) : v[1];
    if (op == ComplexOp::Add) return ComplexValue{a + c, b + d};
    if (op == ComplexOp::Sub) return ComplexValue{a - c, b - d};
    return op == ComplexOp::Mul ? complex_product(v[0], {c, d}) : complex_quotient(v[0], {c, d});
  });
}

bool complex_sum(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, at::Tensor& out) {
  if (!is_complex64_on_device(out) || self.scalar_type() != at::kComplexFloat || self.device() != out.device() ||
      self.dim() == 0 || out.is_conj())
    return false;
  std::vector<int64_t> reduced;
  if (dims && !dims->empty()) {
    for (int64_t dim : *dims) reduced.push_back(c10::maybe_wrap_dim(dim, self.dim()));
  } else {
    for (int64_t dim = 0; dim < self.dim(); ++dim) reduced.push_back(dim);
  }
  // The parts' sums: the real view's last dimension (real, imaginary) is never summed.
  const at::Tensor totals = at::sum(at::view_as_real(self.resolve_conj()), reduced, keepdim);
  at::native::resize_output(out, totals.sizes().slice(0, totals.dim() - 1));
  at::view_as_real(out).copy_(totals);
  return true;
}

bool complex_matmul(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  if (!is_complex64_on_device(out) || out.is_conj() || a.scalar_type() != at::kComplexFloat ||
      b.scalar_type() != at::kComplexFloat || a.device() != out.device() || b.device() != out.device())
    return false;
  const bool batched = a.dim() == 3;
  const auto multiply = [&](const at::Tensor& x, const at::Tensor& y) {
    return batched ? at::bmm(x, y) : at::mm(x, y);
  };
  const at::Tensor a_parts = at::view_as_real(a.resolve_conj()), b_parts = at::view_as_real(b.resolve_conj());
  const at::Tensor ar = a_parts.select(-1, 0), ai = a_parts.select(-1, 1);
  const at::Tensor br = b_parts.select(-1, 0), bi = b_parts.select(-1, 1);
  std::vector<int64_t> shape = a.sizes().vec();
  shape.back() = b.size(-1);
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return true;
  const bool overlapping = may_share_memory(out, a) || may_share_memory(out, b);
  at::Tensor result = overlapping ? at::empty(out.sizes(), out.options()) : out;
  const at::Tensor pairs = at::view_as_real(result);
  at::Tensor real = pairs.select(-1, 0), imag = pairs.select(-1, 1);
  at::sub_out(real, multiply(ar, br), multiply(ai, bi));
  at::add_out(imag, multiply(ar, bi), multiply(ai, br));
  if (overlapping) out.copy_(result);
  return true;
}

}  // namespace npusim::bridge
