// Integer sums as one fused reduction kernel (integer_sum.h).
#include "integer_sum.h"

#include <ATen/native/Resize.h>

#include <algorithm>

#include "bridge.h"
#include "npusim/emitter/fused.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {

bool launch_integer_sum(const at::Tensor& self, const std::vector<int64_t>& reduced, bool keepdim, at::Tensor& out) {
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/true) || out.scalar_type() != at::kLong ||
      self.device() != out.device() || self.dim() == 0)
    return false;
  std::vector<int64_t> kept_dims, shape;
  for (int64_t dim = 0; dim < self.dim(); ++dim) {
    const bool summed = std::find(reduced.begin(), reduced.end(), dim) != reduced.end();
    if (!summed) kept_dims.push_back(dim);
    if (!summed || keepdim) shape.push_back(summed ? 1 : self.size(dim));
  }
  int64_t row = 1;
  for (int64_t dim : reduced) row *= self.size(dim);
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return true;
  if (row == 0) return out.zero_(), true;  // an empty sum
  // Widened to int64 first (exact), as the CPU sums in int64.
  const at::Tensor values = self.scalar_type() == at::kLong ? self : self.to(at::kLong);
  // The space: the kept dimensions (out's), then the summed ones; out's strides over the kept ones, 0 over the rest.
  const at::Tensor out_view = keepdim ? out : [&] {
    at::Tensor view = out;
    for (int64_t dim : std::vector<int64_t>(reduced.rbegin(), reduced.rend())) view = view.unsqueeze(dim);
    return view;
  }();
  emitter::FusedSpec spec;
  spec.name = "sum_i64";
  spec.arguments = 2;
  std::vector<int64_t> in_strides, out_strides;
  for (int64_t dim : kept_dims) {
    spec.sizes.push_back(self.size(dim));
    in_strides.push_back(values.stride(dim));
    out_strides.push_back(out_view.stride(dim));
  }
  if (spec.sizes.empty()) {  // a sum of everything: one row
    spec.sizes.push_back(1);
    in_strides.push_back(0);
    out_strides.push_back(0);
  }
  std::vector<int64_t> summed(reduced.rbegin(), reduced.rend());  // ascending: the last is innermost
  for (int64_t dim : summed) {
    spec.sizes.push_back(self.size(dim));
    in_strides.push_back(values.stride(dim));
    out_strides.push_back(0);
  }
  spec.reduced_dims = static_cast<int>(summed.size());
  using emitter::FusedOpcode;
  constexpr auto kI64 = isa::ElementType::I64;
  spec.loads.push_back({1, kI64, 0, in_strides});
  spec.stores.push_back({0, kI64, 0, out_strides});
  spec.nodes = {{.op = FusedOpcode::Load, .type = kI64, .access = 0},
                {.op = FusedOpcode::ReduceSum, .type = kI64, .a = 0},
                {.op = FusedOpcode::Store, .type = kI64, .a = 1, .access = 0}};
  const uint64_t addresses[] = {device_address(out), device_address(values)};
  return launched_natively([&] { launch_fused(out.device().index(), runtime_device(out), spec, addresses); });
}

}  // namespace npusim::bridge
