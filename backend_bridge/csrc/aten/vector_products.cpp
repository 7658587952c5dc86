// Products with vectors as the matrix engine's products: dot and vdot are a 1 x n by n x 1 product, addmv (so mv,
// whose composite calls it) a product with an n x 1 matrix whose pointwise epilogue is addmm's (complex64 too).
// Arguments the products cannot take (other dtypes, mixed devices, shapes PyTorch rejects) take the CPU fallback, which
// raises PyTorch's own errors.
#include <ATen/native/Resize.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

#include <initializer_list>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// Tensors of one float type, or all complex64, on one device; the first of `first_dim` dimensions.
bool float_vectors_on_one_device(std::initializer_list<const at::Tensor*> tensors, int64_t first_dim) {
  const at::Tensor& first = **tensors.begin();
  for (const at::Tensor* t : tensors) {
    const bool computes = is_float_kind(t->scalar_type()) || t->scalar_type() == at::kComplexFloat;
    if (!computes || t->scalar_type() != first.scalar_type() || t->device() != first.device()) return false;
  }
  return first.dim() == first_dim;
}

bool complex_vectors_on_one_device(const at::Tensor& self, const at::Tensor& other) {
  return self.scalar_type() == at::kComplexFloat && other.scalar_type() == at::kComplexFloat &&
         self.device() == other.device() && self.dim() == 1;
}

at::Tensor npusim_dot(const at::Tensor& self, const at::Tensor& other) {
  const bool vectors = float_vectors_on_one_device({&self, &other}, 1);  // complex64 ones too
  if (vectors && other.dim() == 1 && self.size(0) == other.size(0))
    return at::mm(self.unsqueeze(0), other.unsqueeze(1)).reshape({});
  torch::jit::Stack stack{self, other};
  call_cpu_fallback("aten::dot", "", stack);
  return stack[0].toTensor();
}

at::Tensor npusim_vdot(const at::Tensor& self, const at::Tensor& other) {
  if (!self.is_complex() && !other.is_complex()) return npusim_dot(self, other);  // conj of reals is themselves
  if (complex_vectors_on_one_device(self, other)) return npusim_dot(self.conj(), other);
  torch::jit::Stack stack{self, other};
  call_cpu_fallback("aten::vdot", "", stack);
  return stack[0].toTensor();
}

bool addmv_runs_natively(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec) {
  return float_vectors_on_one_device({&mat, &vec, &self}, 2) && vec.dim() == 1 && mat.size(1) == vec.size(0) &&
         self.dim() <= 1 && (self.dim() == 0 || self.size(0) == mat.size(0) || self.size(0) == 1);
}

// beta self + alpha (mat @ vec), with beta = 0 ignoring self (NaNs included), as addmm's epilogue does.
at::Tensor& npusim_addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                             const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  if (addmv_runs_natively(self, mat, vec) && out.scalar_type() == mat.scalar_type() && out.device() == mat.device()) {
    const at::Tensor bias = self.dim() == 1 ? self.unsqueeze(1) : self;
    const at::Tensor product = at::addmm(bias, mat, vec.unsqueeze(1), beta, alpha).squeeze(1);
    at::native::resize_output(out, product.sizes());
    return out.copy_(product);
  }
  torch::jit::Stack stack{self, mat, vec, beta, alpha, out};
  call_cpu_fallback("aten::addmv", "out", stack);
  return out;
}
at::Tensor npusim_addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                        const at::Scalar& alpha) {
  at::Tensor out = at::empty({0}, mat.options().dtype(at::result_type(mat, vec)));
  return npusim_addmv_out(self, mat, vec, beta, alpha, out);
}
at::Tensor& npusim_addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                          const at::Scalar& alpha) {
  if (addmv_runs_natively(self, mat, vec) && self.dim() == 1 && self.size(0) == mat.size(0))
    return self.copy_(npusim_addmv(self, mat, vec, beta, alpha));
  torch::jit::Stack stack{self, mat, vec, beta, alpha};
  call_cpu_fallback("aten::addmv_", "", stack);
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("dot", npusim_dot);
  m.impl("vdot", npusim_vdot);
  m.impl("addmv", npusim_addmv);
  m.impl("addmv_", npusim_addmv_);
  m.impl("addmv.out", npusim_addmv_out);
}

}  // namespace npusim::bridge
