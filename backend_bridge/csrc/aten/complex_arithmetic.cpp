// Complex64 arithmetic on the device (complex_arithmetic.h). A product is the CPU's (ac - bd) + (ad + bc)i, unfused;
// an exponential e^a cos b + i e^a sin b; a quotient scales both operands by the reciprocal of the divisor's larger
// part, so that |c|^2 + |d|^2 neither overflows nor underflows where the quotient itself is representable (within a
// few units in the last place of the CPU's, whose vectorised and scalar divisions differ from each other too).
#include "complex_arithmetic.h"

#include <ATen/ExpandUtils.h>
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

#include <optional>
#include <vector>

#include "bridge.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

bool is_complex64_on_device(const at::Tensor& out) {
  return out.scalar_type() == at::kComplexFloat && out.device().is_privateuseone();
}

// An operand's real and imaginary parts as float32 tensors (a host scalar's as 0-dim host tensors, which
// launch_formulas copies to the device); a real operand has no imaginary part (zero, as PyTorch's promotion gives).
struct Parts {
  at::Tensor real;
  std::optional<at::Tensor> imag;
};

std::optional<Parts> parts_of(const at::Tensor& operand, const at::Tensor& out) {
  const bool host_scalar = operand.is_cpu() && operand.dim() == 0;
  if (!host_scalar && operand.device() != out.device()) return {};
  if (!operand.is_complex()) return Parts{operand.scalar_type() == at::kFloat ? operand : operand.to(at::kFloat), {}};
  if (operand.scalar_type() != at::kComplexFloat && !host_scalar) return {};  // complex32 and complex128 tensors
  const at::Tensor pairs = at::view_as_real(operand.to(at::kComplexFloat).resolve_conj());
  return Parts{pairs.select(-1, 0), pairs.select(-1, 1)};
}

// The product of two complex values given by their parts, as the CPU computes it.
std::pair<Value, Value> product(Value a, Value b, Value c, Value d) { return {a * c - b * d, a * d + b * c}; }

// (a + bi) / (c + di) with both scaled by 1 / max(|c|, |d|); by zero, (a / 0, b / 0) as the CPU gives it.
std::pair<Value, Value> quotient(Value a, Value b, Value c, Value d) {
  const Value larger = maximum(abs(c), abs(d));
  const Value scale = 1.0 / larger;
  const Value a2 = a * scale, b2 = b * scale, c2 = c * scale, d2 = d * scale;
  const Value denominator = c2 * c2 + d2 * d2;
  const Value by_zero = larger == 0.0;
  return {where(by_zero, a / larger, (a2 * c2 + b2 * d2) / denominator),
          where(by_zero, b / larger, (b2 * c2 - a2 * d2) / denominator)};
}

// Runs `parts_of_result` over the operands' parts into out's two parts: through a temporary when out overlaps an
// operand in another layout (the kernel reads each element's operands just before writing it, so an identical
// layout, as in place, is safe).
template <typename Body>
bool launch_parts(const char* name, const std::vector<at::Tensor>& operands, at::Tensor& out, Body parts_of_result) {
  std::vector<Parts> parts;
  std::vector<at::Tensor> loaded;
  for (const at::Tensor& operand : operands) {
    std::optional<Parts> p = parts_of(operand, out);
    if (!p) return false;
    loaded.push_back(p->real);
    if (p->imag) loaded.push_back(*p->imag);
    parts.push_back(std::move(*p));
  }
  bool overlapping = false;
  for (const at::Tensor& operand : operands)
    overlapping |= !operand.is_same(out) && !operand.is_cpu() && may_share_memory(operand, out);
  at::Tensor result = overlapping ? at::empty(out.sizes(), out.options()) : out;
  const at::Tensor pairs = at::view_as_real(result);
  const bool launched = launch_formulas(name, loaded, {pairs.select(-1, 0), pairs.select(-1, 1)}, [&](Formula& f) {
    std::vector<std::pair<Value, Value>> values;
    size_t next = 0;
    for (const Parts& p : parts) {
      const Value real = f.x(next++);
      values.emplace_back(real, p.imag ? f.x(next++) : f.constant(0.0));
    }
    const auto [real, imag] = parts_of_result(values);
    return std::vector<Value>{real, imag};
  });
  if (launched && overlapping) out.copy_(result);
  return launched;
}

// out resized to the operands' broadcast shape; in place, an error if the result would grow.
void resize_for(at::Tensor& out, const std::vector<at::Tensor>& operands) {
  std::vector<int64_t> shape;
  for (const at::Tensor& operand : operands) shape = at::infer_size(shape, operand.sizes());
  const bool in_place =
      std::any_of(operands.begin(), operands.end(), [&](const at::Tensor& t) { return t.is_same(out); });
  if (in_place) {
    TORCH_CHECK(out.sizes() == c10::IntArrayRef(shape), "output with shape ", out.sizes(),
                " doesn't match the broadcast shape ", shape);
  } else {
    at::native::resize_output(out, shape);
  }
}

}  // namespace

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
  return launch_parts(names[static_cast<int>(op)], operands, out, [&](const auto& v) {
    const auto [a, b] = v[0];
    const auto [c, d] = scaled ? product(v[2].first, v[2].second, v[1].first, v[1].second) : v[1];
    if (op == ComplexOp::Add) return std::pair{a + c, b + d};
    if (op == ComplexOp::Sub) return std::pair{a - c, b - d};
    return op == ComplexOp::Mul ? product(a, b, c, d) : quotient(a, b, c, d);
  });
}

bool complex_unary(ComplexUnaryOp op, const at::Tensor& self, at::Tensor& out) {
  if (!is_complex64_on_device(out) || out.is_conj() || !self.is_complex()) return false;
  resize_for(out, {self});
  if (out.numel() == 0) return true;
  const char* names[] = {"complex_neg", "complex_reciprocal", "complex_exp"};
  return launch_parts(names[static_cast<int>(op)], {self}, out, [&](const auto& v) {
    const auto [a, b] = v[0];
    if (op == ComplexUnaryOp::Neg) return std::pair{-a, -b};
    if (op == ComplexUnaryOp::Exp) return std::pair{exp(a) * cos(b), exp(a) * sin(b)};
    Formula& f = *a.formula;
    return quotient(f.constant(1.0), f.constant(0.0), a, b);
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
