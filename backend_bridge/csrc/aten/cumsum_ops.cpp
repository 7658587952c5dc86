// cumsum and cumprod along any dimension: the dimension moved last and made contiguous (a device copy when needed),
// the scan kernel over the rows, and the result moved back. float32, int32 and int64 natively (bool and narrower
// integers are scanned as int64, as PyTorch promotes them), complex64 ones as their parts' cumsums and by doubling
// products; other types take the CPU fallback. prod is the running product's last element.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include "bridge.h"
#include "runtime/kernel_launcher.h"

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

// A complex64 running product by doubling (Hillis and Steele): after the pass with offset s each element holds the
// product of the 2s elements ending at it (or of all before it), so log2(n) passes of one complex multiplication
// kernel each (the CPU multiplies in sequence: results agree within a few units in the last place).
at::Tensor complex_running_product(const at::Tensor& self, int64_t dim) {
  at::Tensor running = self;
  const int64_t length = self.size(dim);
  for (int64_t offset = 1; offset < length; offset *= 2) {
    const at::Tensor later =
        at::mul(running.narrow(dim, offset, length - offset), running.narrow(dim, 0, length - offset));
    running = at::cat({running.narrow(dim, 0, offset), later}, dim);
  }
  return running;
}

// The scan of `self` along `dim` into `out`: the running sum, or the product. A complex64 running sum is the running
// sums of its parts.
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
  if (self.scalar_type() == at::kComplexFloat && out.scalar_type() == at::kComplexFloat &&
      (!dtype || *dtype == at::kComplexFloat) && self.device() == out.device()) {
    dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
    const at::Tensor shaped = (self.dim() == 0 ? self.reshape({1}) : self).resolve_conj();
    const at::Tensor scanned =
        product ? complex_running_product(shaped, dim) : at::view_as_complex(at::cumsum(at::view_as_real(shaped), dim));
    at::native::resize_output(out, self.sizes());
    return out.copy_(scanned.reshape(self.sizes()));
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

// The product along `dim`: the running product's last element (a sequential product, where the CPU's reduction
// multiplies in another order: floats may differ in their last bits).
at::Tensor& npusim_prod_out(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype,
                            at::Tensor& out) {
  const at::ScalarType type = result_type(self, dtype);
  const bool native_type = (scan_type(type) || type == at::kComplexFloat) && out.scalar_type() == type;
  if (native_type && self.device() == out.device() && (self.dim() == 0 || self.numel() == 0)) {
    // One element (dimension 0 or -1): itself; no elements along a dimension: the empty product, 1.
    std::vector<int64_t> shape = self.sizes().vec();
    if (self.dim() > 0) {
      dim = at::maybe_wrap_dim(dim, self.dim());
      if (keepdim)
        shape[dim] = 1;
      else
        shape.erase(shape.begin() + dim);
    } else {
      at::maybe_wrap_dim(dim, int64_t{0});
    }
    at::native::resize_output(out, shape);
    return self.dim() == 0 ? out.copy_(self) : out.fill_(1);
  }
  if (native_type && self.device() == out.device() && self.dim() > 0) {
    dim = at::maybe_wrap_dim(dim, self.dim());
    at::Tensor scanned = at::empty({0}, self.options().dtype(type));
    scan_out(true, self, dim, dtype, scanned);
    at::Tensor last = scanned.select(dim, -1);
    if (keepdim) last = last.unsqueeze(dim);
    at::native::resize_output(out, last.sizes());
    return out.copy_(last);
  }
  torch::jit::Stack stack{self, dim, keepdim, dtype, out};
  call_cpu_fallback("aten::prod", "int_out", stack);
  return out;
}
at::Tensor npusim_prod_dim(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(result_type(self, dtype)));
  return npusim_prod_out(self, dim, keepdim, dtype, out);
}

// The product of every element: rows of up to kProductRow elements (the last one padded with ones) multiplied along,
// then the rows' products the same way, until one is left.
at::Tensor npusim_prod(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  constexpr int64_t kProductRow = 1024;
  const at::ScalarType type = result_type(self, dtype);
  if (!(scan_type(type) || type == at::kComplexFloat) || self.numel() == 0) {
    torch::jit::Stack stack{self, dtype};
    call_cpu_fallback("aten::prod", "", stack);
    return stack[0].toTensor();
  }
  at::Tensor values = self.reshape({-1}).to(type);
  while (values.numel() > 1) {
    const int64_t rows = (values.numel() + kProductRow - 1) / kProductRow,
                  padding = rows * kProductRow - values.numel();
    if (rows > 1 && padding > 0) values = at::cat({values, at::ones({padding}, values.options())});
    values = npusim_prod_dim(values.view({rows, -1}), 1, false, std::nullopt);
  }
  const at::Tensor product = values.reshape({});
  return product.is_alias_of(self) ? product.clone() : product;  // one element: a new tensor, never a view of self
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("prod", npusim_prod);
  m.impl("prod.dim_int", npusim_prod_dim);
  m.impl("prod.int_out", npusim_prod_out);
  m.impl("cumsum", npusim_cumsum);
  m.impl("cumsum.out", npusim_cumsum_out);
  m.impl("cumprod", npusim_cumprod);
  m.impl("cumprod.out", npusim_cumprod_out);
}

}  // namespace npusim::bridge
