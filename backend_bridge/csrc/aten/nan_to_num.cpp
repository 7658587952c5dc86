// torch.nan_to_num natively: one elementwise kernel for float32, float16 and bfloat16 (NaN, +inf and -inf replaced by
// the given values, or 0 and the dtype's largest and lowest finite values, as PyTorch's defaults); integer and bool
// tensors hold none of them, so the result is a copy, as on the CPU.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <limits>

#include "bridge.h"

namespace npusim::bridge {
namespace {

at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                           std::optional<double> neginf, at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "nan_to_num: dtype of out: ", out.scalar_type(),
              " should be same as input: ", self.scalar_type());
  if (!self.is_floating_point() && !self.is_complex()) {
    if (!out.is_same(self)) {
      at::native::resize_output(out, self.sizes());
      out.copy_(self);
    }
    return out;
  }
  std::array<float, 3> replacements{};
  bool known_dtype = true;
  switch (self.scalar_type()) {
    case at::kFloat: replacements = {0, std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()}; break;
    case at::kHalf:
      replacements = {0, std::numeric_limits<c10::Half>::max(), std::numeric_limits<c10::Half>::lowest()};
      break;
    case at::kBFloat16:
      replacements = {0, std::numeric_limits<c10::BFloat16>::max(), std::numeric_limits<c10::BFloat16>::lowest()};
      break;
    default: known_dtype = false;
  }
  // The given values as the CPU kernel takes them: cast to the tensor's type (float32 here, rounded once when stored).
  if (nan) replacements[0] = static_cast<float>(*nan);
  if (posinf) replacements[1] = static_cast<float>(*posinf);
  if (neginf) replacements[2] = static_cast<float>(*neginf);
  if (known_dtype && launch_unary(emitter::ElementwiseOp::NanToNumF32, self, out, replacements)) return out;
  torch::jit::Stack stack{self, nan, posinf, neginf, out};
  call_cpu_fallback("aten::nan_to_num", "out", stack);
  return out;
}

at::Tensor nan_to_num(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                      std::optional<double> neginf) {
  at::Tensor out = at::empty({0}, self.options());
  return nan_to_num_out(self, nan, posinf, neginf, out);
}

at::Tensor& nan_to_num_(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf) {
  return nan_to_num_out(self, nan, posinf, neginf, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nan_to_num", nan_to_num);
  m.impl("nan_to_num_", nan_to_num_);
  m.impl("nan_to_num.out", nan_to_num_out);
}

}  // namespace npusim::bridge
