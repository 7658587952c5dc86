// Complex64 tensors as their parts, and the kernels over them (complex_parts.h).
#include "complex_parts.h"

#include <ATen/ops/view_as_real.h>

#include <optional>

#include "bridge.h"
#include "pointwise_output.h"

namespace npusim::bridge {
namespace {

// An operand's real and imaginary parts as float32 tensors (a host scalar's as 0-dim host tensors, which
// launch_formulas copies to the device); a real operand has no imaginary part.
struct Parts {
  at::Tensor real;
  std::optional<at::Tensor> imag;
};

std::optional<Parts> parts_of(const at::Tensor& operand, const at::Device& device) {
  const bool host_scalar = operand.is_cpu() && operand.dim() == 0;
  if (!host_scalar && operand.device() != device) return {};
  if (!operand.is_complex()) return Parts{operand.scalar_type() == at::kFloat ? operand : operand.to(at::kFloat), {}};
  if (operand.scalar_type() != at::kComplexFloat && !host_scalar) return {};  // complex32 and complex128 tensors
  const at::Tensor pairs = at::view_as_real(operand.to(at::kComplexFloat).resolve_conj());
  return Parts{pairs.select(-1, 0), pairs.select(-1, 1)};
}

// The operands' parts as the formula's operands, and a function giving each operand's complex value in a formula.
struct LoadedParts {
  std::vector<Parts> parts;
  std::vector<at::Tensor> loaded;

  std::vector<ComplexValue> values(Formula& f) const {
    std::vector<ComplexValue> result;
    size_t next = 0;
    for (const Parts& p : parts) {
      const Value real = f.x(next++);
      result.emplace_back(real, p.imag ? f.x(next++) : f.constant(0.0));
    }
    return result;
  }
};

std::optional<LoadedParts> load(const std::vector<at::Tensor>& operands, const at::Device& device) {
  LoadedParts result;
  for (const at::Tensor& operand : operands) {
    std::optional<Parts> p = parts_of(operand, device);
    if (!p) return {};
    result.loaded.push_back(p->real);
    if (p->imag) result.loaded.push_back(*p->imag);
    result.parts.push_back(std::move(*p));
  }
  return result;
}

}  // namespace

bool is_complex64_on_device(const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kComplexFloat && tensor.device().is_privateuseone();
}

ComplexValue complex_product(ComplexValue x, ComplexValue y) {
  const auto [a, b] = x;
  const auto [c, d] = y;
  return {a * c - b * d, a * d + b * c};
}

ComplexValue complex_quotient(ComplexValue x, ComplexValue y) {
  const auto [a, b] = x;
  const auto [c, d] = y;
  const Value larger = maximum(abs(c), abs(d));
  const Value scale = 1.0 / larger;
  // An infinite part scales to +-1 (inf / inf would be NaN), so that a finite x over an infinite y is 0.
  const auto scaled = [&](Value part) {
    return where(isinf(part), where(part < 0.0, -1.0, c.formula->constant(1.0)), part * scale);
  };
  const Value a2 = a * scale, b2 = b * scale, c2 = scaled(c), d2 = scaled(d);
  const Value denominator = c2 * c2 + d2 * d2;
  const Value by_zero = larger == 0.0;
  return {where(by_zero, a / larger, (a2 * c2 + b2 * d2) / denominator),
          where(by_zero, b / larger, (b2 * c2 - a2 * d2) / denominator)};
}

bool launch_parts(const char* name, const std::vector<at::Tensor>& operands, at::Tensor& out, const PartsBody& body) {
  const std::optional<LoadedParts> parts = load(operands, out.device());
  if (!parts) return false;
  const at::Tensor pairs = at::view_as_real(out);
  return launch_formulas(name, parts->loaded, {pairs.select(-1, 0), pairs.select(-1, 1)}, [&](Formula& f) {
    const auto [real, imag] = body(parts->values(f));
    return std::vector<Value>{real, imag};
  });
}

bool launch_parts_to_real(const char* name, const std::vector<at::Tensor>& operands, at::Tensor& out,
                          const std::function<Value(const std::vector<ComplexValue>&)>& body) {
  const std::optional<LoadedParts> parts = load(operands, out.device());
  return parts && launch_formula(name, parts->loaded, {}, out, [&](Formula& f) { return body(parts->values(f)); });
}

void resize_for(at::Tensor& out, const std::vector<at::Tensor>& operands) { resize_to_broadcast(out, operands); }

}  // namespace npusim::bridge
