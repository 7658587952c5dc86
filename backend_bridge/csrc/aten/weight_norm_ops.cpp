// Weight normalisation's fused operators (torch.nn.utils.weight_norm and its parametrization, wav2vec2's positional
// convolution): _weight_norm_interface computes w = v (g / ||v||) and the norms, its backward grad_g = sum(grad_w v)
// / norm and grad_v = a grad_w - b v with a = g / norm, b = a grad_g / norm, as PyTorch's kernels do, each one fused
// row kernel over v's rows (dim 0) or columns (the last dim), in float32 (float16 and bfloat16 rounded once; their
// norms kept in float32). Other dims take the fallback, as they do on the CPU.
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "bridge.h"
#include "runtime/kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::FusedOpcode;
constexpr auto kF32 = isa::ElementType::F32;

// The kernels' space: [rows, cols] with cols reduced, a row being what one norm covers; v (contiguous) walked by
// `full` strides, g and the norms (one element per row, along `dim`) by `per_row` strides.
struct NormRows {
  std::vector<int64_t> sizes, full;
  int64_t dim;
  std::vector<int64_t> per_row(const at::Tensor& tensor) const { return {tensor.stride(dim), 0}; }
};

NormRows norm_rows(const at::Tensor& v, int64_t dim) {
  if (dim == 0) {
    const int64_t rows = v.size(0), cols = v.numel() / std::max<int64_t>(rows, 1);
    return {{rows, cols}, {cols, 1}, 0};
  }
  const int64_t cols = v.size(-1), rows = v.numel() / std::max<int64_t>(cols, 1);
  return {{cols, rows}, {1, cols}, v.dim() - 1};  // a column per row of the space
}

// A float node of `tensor`'s value, converted to float32 when it is narrower.
int in_f32(TensorKernel& k, int value, const at::Tensor& tensor) {
  return tensor.scalar_type() == at::kFloat ? value : k.op(FusedOpcode::Convert, value, -1, -1, kF32);
}

bool fused(const at::Tensor& v, const at::Tensor& g, int64_t dim) {
  const auto type = v.scalar_type();
  return v.is_privateuseone() && g.device() == v.device() && g.scalar_type() == type &&
         (type == at::kFloat || type == at::kHalf || type == at::kBFloat16) && v.dim() > 0 &&
         (dim == 0 || dim == v.dim() - 1) && v.numel() > 0;
}

std::tuple<at::Tensor, at::Tensor> npusim_weight_norm_interface(const at::Tensor& v_in, const at::Tensor& g,
                                                                int64_t dim) {
  if (fused(v_in, g, dim)) {
    const at::Tensor v = v_in.contiguous();
    at::Tensor w = at::empty_like(v, at::MemoryFormat::Contiguous);
    at::Tensor norm = at::empty_strided(g.sizes(), g.strides(), g.options().dtype(at::kFloat));  // float32 always
    const NormRows r = norm_rows(v, dim);
    TensorKernel k(TensorKernel::name_for("weight_norm", v), r.sizes, 1);
    const int x = in_f32(k, k.load(v, r.full), v);
    const int length = k.op(FusedOpcode::Sqrt, k.op(FusedOpcode::ReduceSum, k.op(FusedOpcode::Mul, x, x)));
    const int scale = k.op(FusedOpcode::Div, in_f32(k, k.load(g, r.per_row(g)), g), length);
    k.store(k.op(FusedOpcode::Mul, x, scale), w, r.full);
    k.store(length, norm, r.per_row(norm));
    if (k.launch(v)) return {w, norm};
  }
  torch::jit::Stack stack{v_in, g, dim};
  call_cpu_fallback("aten::_weight_norm_interface", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

std::tuple<at::Tensor, at::Tensor> npusim_weight_norm_interface_backward(const at::Tensor& grad_w,
                                                                         const at::Tensor& saved_v,
                                                                         const at::Tensor& saved_g,
                                                                         const at::Tensor& saved_norm, int64_t dim) {
  TORCH_CHECK(saved_v.is_contiguous(), "saved_v must be contiguous");
  TORCH_CHECK(saved_g.is_contiguous(), "saved_g must be contiguous");
  TORCH_CHECK(saved_norm.is_contiguous(), "saved_norm must be contiguous");
  if (fused(saved_v, saved_g, dim) && grad_w.device() == saved_v.device() &&
      grad_w.scalar_type() == saved_v.scalar_type() && grad_w.sizes() == saved_v.sizes() &&
      saved_norm.device() == saved_v.device() && saved_norm.scalar_type() == at::kFloat) {
    at::Tensor grad_v = at::empty_like(saved_v, at::MemoryFormat::Contiguous);
    at::Tensor grad_g = at::empty_like(saved_g, at::MemoryFormat::Contiguous);
    const NormRows r = norm_rows(saved_v, dim);
    const at::Tensor gradient = grad_w.contiguous();
    TensorKernel k(TensorKernel::name_for("weight_norm_backward", saved_v), r.sizes, 1);
    const int dw = in_f32(k, k.load(gradient, r.full), gradient);
    const int x = in_f32(k, k.load(saved_v, r.full), saved_v);
    const int length = k.load(saved_norm, r.per_row(saved_norm));
    const int dg = k.op(FusedOpcode::Div, k.op(FusedOpcode::ReduceSum, k.op(FusedOpcode::Mul, dw, x)), length);
    k.store(dg, grad_g, r.per_row(grad_g));
    const int a = k.op(FusedOpcode::Div, in_f32(k, k.load(saved_g, r.per_row(saved_g)), saved_g), length);
    const int b = k.op(FusedOpcode::Div, k.op(FusedOpcode::Mul, a, dg), length);
    k.store(k.op(FusedOpcode::Sub, k.op(FusedOpcode::Mul, a, dw), k.op(FusedOpcode::Mul, b, x)), grad_v, r.full);
    if (k.launch(saved_v)) return {grad_v, grad_g};
  }
  torch::jit::Stack stack{grad_w, saved_v, saved_g, saved_norm, dim};
  call_cpu_fallback("aten::_weight_norm_interface_backward", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_weight_norm_interface", npusim_weight_norm_interface);
  m.impl("_weight_norm_interface_backward", npusim_weight_norm_interface_backward);
}

}  // namespace npusim::bridge
