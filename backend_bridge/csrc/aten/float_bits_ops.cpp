// nextafter and frexp of float32, from the bits of the values (a float32 tensor viewed as int32) with native integer
// and float kernels: the next float toward y is the next integer of the bits, up or down as the step moves away from
// or toward zero; a value's exponent and mantissa are fields of its bits (subnormals scaled by 2^24 first). Other
// dtypes and devices take the CPU fallback, which also raises PyTorch's own errors.
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <cstdint>
#include <tuple>

#include "bridge.h"
#include "pointwise_output.h"

namespace npusim::bridge {
namespace {

constexpr int32_t kExponentBits = 0x7f800000;
constexpr int32_t kSignAndMantissaBits = static_cast<int32_t>(0x807fffffu);
constexpr int32_t kExponentOfAHalf = 0x3f000000;  // the bits of 0.5's exponent: a mantissa in [0.5, 1)
constexpr int32_t kMantissaUnit = 1 << 23;        // the exponent field's lowest bit
constexpr int32_t kSmallestNegative = static_cast<int32_t>(0x80000001u);  // -(the smallest subnormal)

at::Tensor float_bits(const at::Tensor& values) { return values.view(at::kInt); }
at::Tensor floats(const at::Tensor& bits) { return bits.view(at::kFloat); }

bool float32_on_device(const at::Tensor& out, const at::Tensor& self, const at::Tensor& other) {
  return self.scalar_type() == at::kFloat && other.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat &&
         self.device() == out.device() && other.device() == out.device();
}

// std::nextafter: NaN if either is; y if x == y; from zero the smallest subnormal toward y.
at::Tensor& npusim_nextafter_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (!float32_on_device(out, self, other)) {
    torch::jit::Stack stack{self, other, out};
    call_cpu_fallback("aten::nextafter", "out", stack);
    return out;
  }
  const at::Tensor away_from_zero = (other > self) == (self > 0);
  const at::Tensor step = at::where(away_from_zero, 1, -1).to(at::kInt);
  const at::Tensor from_zero = floats(at::where(other > 0, 1, kSmallestNegative).to(at::kInt));
  at::Tensor next = at::where(self == 0, from_zero, floats(float_bits(self) + step));
  next = at::where(self == other, other, next);
  next = at::where(at::isnan(self).logical_or(at::isnan(other)), self + other, next);
  resize_to_broadcast(out, {self, other});
  return out.copy_(next);
}
at::Tensor npusim_nextafter(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::result_type(self, other)));
  return npusim_nextafter_out(self, other, out);
}
at::Tensor& npusim_nextafter_(at::Tensor& self, const at::Tensor& other) {
  return npusim_nextafter_out(self, other, self);
}

// std::frexp: x = mantissa * 2^exponent with |mantissa| in [0.5, 1); zero, infinities and NaN are their own mantissa
// with exponent 0.
std::tuple<at::Tensor&, at::Tensor&> npusim_frexp_out(const at::Tensor& self, at::Tensor& mantissa,
                                                      at::Tensor& exponent) {
  if (self.scalar_type() != at::kFloat || mantissa.scalar_type() != at::kFloat || exponent.scalar_type() != at::kInt ||
      mantissa.device() != self.device() || exponent.device() != self.device()) {
    torch::jit::Stack stack{self, mantissa, exponent};
    call_cpu_fallback("aten::frexp", "Tensor_out", stack);
    return {mantissa, exponent};
  }
  const at::Tensor subnormal = (float_bits(self) & kExponentBits) == 0;
  const at::Tensor scaled = float_bits(at::where(subnormal, self * double(1 << 24), self));
  const at::Tensor biased = at::floor_divide(scaled & kExponentBits, kMantissaUnit);
  const at::Tensor power = at::where(subnormal, biased - (126 + 24), biased - 126);
  const at::Tensor fraction = floats((scaled & kSignAndMantissaBits) | kExponentOfAHalf);
  const at::Tensor special = (self == 0).logical_or_(at::isinf(self)).logical_or_(at::isnan(self));
  at::native::resize_output(mantissa, self.sizes());
  at::native::resize_output(exponent, self.sizes());
  mantissa.copy_(at::where(special, self, fraction));
  exponent.copy_(at::where(special, 0, power));
  return {mantissa, exponent};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nextafter", npusim_nextafter);
  m.impl("nextafter_", npusim_nextafter_);
  m.impl("nextafter.out", npusim_nextafter_out);
  m.impl("frexp.Tensor_out", npusim_frexp_out);
}

}  // namespace npusim::bridge
