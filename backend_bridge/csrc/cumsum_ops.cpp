// cumsum and cumprod along any dimension: the dimension moved last and made contiguous (a device copy when needed),
// the scan kernel over the rows, and the result moved back. float32, int32 and int64 natively (bool and narrower
// integers are scanned as int64, as PyTorch promotes them); other types take the CPU fallback.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "bridge.h"
#include "kernel_launcher.h"

namespace npusim::bridge {
namespace {

std::optional<isa::ElementType> scan_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return isa::ElementType::F32;
    case at::kInt: return isa::ElementType::I32;
    case at::kLong: return isa::ElementType::I64;
    default: return std::nullopt;
  }
}

at::ScalarType result_type(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
}

// The scan of `self` along `dim` into `out`: the running sum, or the product.
at::Tensor& scan_out(bool product, const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                     at::Tensor& out) {
  const auto type = scan_type(result_type(self, dtype));
  if (type && out.scalar_type() == result_type(self, dtype) && self.device() == out.device()) {
    dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
    at::native::resize_output(out, self.sizes());
    if (self.numel() == 0) return out;
    const at::Tensor shaped = self.dim() == 0 ? self.reshape({1}) : self;
    const at::Tensor rows = shaped.to(out.scalar_type()).movedim(dim, -1).contiguous();
    at::Tensor scanned = at::empty(rows.sizes(), rows.options());
    const emitter::CumsumSpec spec{rows.numel() / rows.size(-1), rows.size(-1), *type, product};
    const uint64_t addresses[] = {device_address(scanned), device_address(rows)};
    if (launched_natively([&] { launch_cumsum(out.device().index(), runtime_device(out), spec, addresses); }))
      return out.copy_(scanned.movedim(-1, dim).reshape(self.sizes()));
  }
  torch::jit::Stack stack{self, dim, dtype, out};
  call_cpu_fallback(product ? "aten::cumprod" : "aten::cumsum", "out", stack);
  return out;
}

at::Tensor& npusim_cumsum_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                              at::Tensor& out) {
  return scan_out(false, self, dim, dtype, out);
}
at::Tensor npusim_cumsum(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(result_type(self, dtype)));
  return scan_out(false, self, dim, dtype, out);
}
at::Tensor& npusim_cumprod_out(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype,
                               at::Tensor& out) {
  return scan_out(true, self, dim, dtype, out);
}
at::Tensor npusim_cumprod(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(result_type(self, dtype)));
  return scan_out(true, self, dim, dtype, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cumsum", npusim_cumsum);
  m.impl("cumsum.out", npusim_cumsum_out);
  m.impl("cumprod", npusim_cumprod);
  m.impl("cumprod.out", npusim_cumprod_out);
}

}  // namespace npusim::bridge
