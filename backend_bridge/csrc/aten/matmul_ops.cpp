// Matrix multiplication on the matrix engine: mm, addmm (and so nn.Linear, which PyTorch lowers to them), bmm and
// baddbmm (and so batched matmul, attention's products) on float32, float16 or bfloat16 tensors of any strides,
// accumulating in float32; complex64 ones as four real products (complex_arithmetic.h). Other dtypes take the CPU
// fallback.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

#include "bridge.h"
#include "complex_arithmetic.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {

bool launch_bmm(const at::Tensor& a_, const at::Tensor& b, const at::Tensor& out,
                const emitter::MatmulEpilogue& epilogue, const at::Tensor& bias) {
  const auto operands = element_type(a_.scalar_type()), result = element_type(out.scalar_type());
  if (!operands || !result) return false;
  // The kernel reads A in rows, or (a transposed A, as in a linear layer's weight gradient) in columns that it
  // transposes on the vector engine. Strided both ways, each element would cost a DRAM transaction: such an A is
  // first made contiguous, one pass.
  const bool transposed = a_.size(1) > 1 && a_.stride(1) == 1;
  const bool strided_rows = a_.size(2) > 1 && a_.stride(2) != 1 && a_.stride(2) != 0 && !transposed;
  const at::Tensor a = strided_rows ? a_.contiguous() : a_;
  const bool single = a.size(0) == 1;  // no batch strides: one program for every layout of the batch dimension
  emitter::MatmulSpec spec{a.size(1),
                           a.size(2),
                           b.size(2),
                           a.stride(1),
                           a.stride(2),
                           b.stride(1),
                           b.stride(2),
                           out.stride(1),
                           out.stride(2),
                           *operands,
                           *result,
                           a.size(0),
                           single ? 0 : a.stride(0),
                           single ? 0 : b.stride(0),
                           single ? 0 : out.stride(0),
                           epilogue};
  if (epilogue.bias) {
    spec.epilogue.bias_row = bias.stride(1);
    spec.epilogue.bias_col = bias.stride(2);
    spec.epilogue.bias_batch = single ? 0 : bias.stride(0);
  }
  std::vector<uint64_t> addresses = {device_address(out), device_address(a), device_address(b)};
  if (epilogue.bias) addresses.push_back(device_address(bias));
  return launched_natively([&] { launch_matmul(out.device().index(), runtime_device(out), spec, addresses); });
}

bool launch_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  return launch_bmm(a.unsqueeze(0), b.unsqueeze(0), out.unsqueeze(0));
}

namespace {

// Every operand float32, float16 or bfloat16 (the same one) on the output's device.
bool all_float_on(const at::Tensor& out, std::initializer_list<const at::Tensor*> inputs) {
  for (const at::Tensor* input : inputs)
    if (input->scalar_type() != out.scalar_type() || input->device() != out.device()) return false;
  return is_float_kind(out.scalar_type());
}

at::Tensor& npusim_mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D tensors, got ", a.dim(), "-D and ", b.dim(), "-D");
  TORCH_CHECK(a.size(1) == b.size(0), "mm: mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
              " and ", b.size(0), "x", b.size(1), ")");
  const auto on_cpu = [&]() -> at::Tensor& {
    torch::jit::Stack stack{a, b, out};
    call_cpu_fallback("aten::mm", "out", stack);
    return out;
  };
  if (out.is_complex() && complex_matmul(a, b, out)) return out;
  if (!all_float_on(out, {&a, &b})) return on_cpu();
  at::native::resize_output(out, {a.size(0), b.size(1)});
  if (out.numel() == 0) return out;
  if (a.size(1) == 0) return out.zero_();
  // The kernel reads its inputs tile by tile after storing earlier output tiles: an output sharing memory with an
  // input gets the product through a temporary.
  if (may_share_memory(out, a) || may_share_memory(out, b)) return out.copy_(at::mm(a, b));
  if (!launch_mm(a, b, out)) return on_cpu();
  return out;
}

at::Tensor npusim_mm(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({0}, a.options().dtype(at::result_type(a, b)));
  return npusim_mm_out(a, b, out);
}

// One kernel for the whole batch (its entries' blocks share the cores and the pipeline).
at::Tensor& npusim_bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, got ", a.dim(), "-D and ", b.dim(), "-D");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm: batch1 and batch2 shapes cannot be multiplied (",
              a.sizes(), " and ", b.sizes(), ")");
  if (out.is_complex() && complex_matmul(a, b, out)) return out;
  if (!all_float_on(out, {&a, &b})) {
    torch::jit::Stack stack{a, b, out};
    call_cpu_fallback("aten::bmm", "out", stack);
    return out;
  }
  at::native::resize_output(out, {a.size(0), a.size(1), b.size(2)});
  if (may_share_memory(out, a) || may_share_memory(out, b)) {
    at::Tensor product = at::empty(out.sizes(), out.options());
    npusim_bmm_out(a, b, product);
    return out.copy_(product);
  }
  if (out.numel() == 0) return out;
  if (a.size(2) == 0) return out.zero_();
  if (launch_bmm(a, b, out)) return out;
  torch::jit::Stack stack{a, b, out};
  call_cpu_fallback("aten::bmm", "out", stack);
  return out;
}
at::Tensor npusim_bmm(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({0}, a.options().dtype(at::result_type(a, b)));
  return npusim_bmm_out(a, b, out);
}

// a @ b in float32 for half-precision operands (matrices, or batches of them): the bias is then added before the one
// rounding, as the CPU does it.
at::Tensor float32_product(const at::Tensor& a, const at::Tensor& b, bool batched) {
  if (!batched) {
    at::Tensor product = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));
    return product.numel() == 0 || a.size(1) == 0 || !launch_mm(a, b, product)
               ? at::mm(a.to(at::kFloat), b.to(at::kFloat))
               : product;
  }
  at::Tensor product = at::empty({a.size(0), a.size(1), b.size(2)}, a.options().dtype(at::kFloat));
  return product.numel() == 0 || a.size(2) == 0 || !launch_bmm(a, b, product)
             ? at::bmm(a.to(at::kFloat), b.to(at::kFloat))
             : product;
}

// addmm / baddbmm as one GEMM kernel whose epilogue scales the product and adds beta * bias to each block before its
// one rounding (a linear layer with a bias is one launch). False where it does not apply: a zero beta (the bias is
// ignored, NaNs included), an output overlapping an operand, shapes the kernel cannot take.
bool fused_add_product(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                       const at::Scalar& alpha, at::Tensor& out, bool batched) {
  if (beta.toDouble() == 0.0 || a.dim() != (batched ? 3 : 2) || b.dim() != a.dim()) return false;
  const int64_t k = a.size(-1);
  if (k == 0 || b.size(-2) != k || (batched && a.size(0) != b.size(0))) return false;
  std::vector<int64_t> shape = {a.size(-2), b.size(-1)};
  if (batched) shape.insert(shape.begin(), a.size(0));
  if (!at::is_expandable_to(bias.sizes(), shape)) return false;
  if (out.is_same(bias) ? out.sizes() != at::IntArrayRef(shape) : may_share_memory(out, bias)) return false;
  if (may_share_memory(out, a) || may_share_memory(out, b)) return false;
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return true;
  const emitter::MatmulEpilogue epilogue{static_cast<float>(alpha.toDouble()), true,
                                         static_cast<float>(beta.toDouble())};
  const at::Tensor expanded = bias.expand(shape);
  if (batched) return launch_bmm(a, b, out, epilogue, expanded);
  return launch_bmm(a.unsqueeze(0), b.unsqueeze(0), out.unsqueeze(0), epilogue, expanded.unsqueeze(0));
}

// beta * bias + alpha * (a @ b), of matrices (addmm) or batches of them (baddbmm): one fused kernel where it applies,
// else the product on the matrix engine (in float32 for half-precision operands, rounded once at the end), scaling
// and the bias on the vector engine.
template <bool Batched>
at::Tensor& add_product_out(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                            const at::Scalar& alpha, at::Tensor& out) {
  const char* name = Batched ? "aten::baddbmm" : "aten::addmm";
  const auto complex64_here = [&](const at::Tensor& t) {
    return t.scalar_type() == at::kComplexFloat && t.device() == out.device();
  };
  const bool complex = complex64_here(bias) && complex64_here(a) && complex64_here(b) && complex64_here(out);
  if (!complex && !all_float_on(out, {&bias, &a, &b})) {
    torch::jit::Stack stack{bias, a, b, beta, alpha, out};
    call_cpu_fallback(name, "out", stack);
    return out;
  }
  // Complex products are four real ones (complex_arithmetic.h), scaled and added unfused.
  if (!complex && fused_add_product(bias, a, b, beta, alpha, out, Batched)) return out;
  const bool half = !complex && out.scalar_type() != at::kFloat;
  at::Tensor product = half ? float32_product(a, b, Batched) : Batched ? at::bmm(a, b) : at::mm(a, b);
  if (out.is_same(bias))  // in place: bias cannot grow into the product's shape
    TORCH_CHECK(out.sizes() == product.sizes(), name, "_: self of shape ", out.sizes(), " does not match the product ",
                product.sizes());
  if (!alpha.equal(1)) product.mul_(alpha);
  at::native::resize_output(out, product.sizes());
  if (beta.equal(0)) return out.copy_(product);  // bias is ignored, NaNs included, as on CPU
  if (half && !beta.equal(1))                    // beta * bias in float32 too
    return at::add_out(out, product, at::mul(bias.to(at::kFloat), beta).expand_as(product));
  return at::add_out(out, product, bias.expand_as(product), beta);
}

template <bool Batched>
at::Tensor add_product(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                       const at::Scalar& alpha) {
  at::Tensor out = at::empty({0}, a.options());
  return add_product_out<Batched>(bias, a, b, beta, alpha, out);
}

template <bool Batched>
at::Tensor& add_product_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                         const at::Scalar& alpha) {
  return add_product_out<Batched>(self, a, b, beta, alpha, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", npusim_mm);
  m.impl("mm.out", npusim_mm_out);
  m.impl("bmm", npusim_bmm);
  m.impl("bmm.out", npusim_bmm_out);
  m.impl("addmm", add_product<false>);
  m.impl("addmm.out", add_product_out<false>);
  m.impl("addmm_", add_product_<false>);
  m.impl("baddbmm", add_product<true>);
  m.impl("baddbmm.out", add_product_out<true>);
  m.impl("baddbmm_", add_product_<true>);
}

}  // namespace npusim::bridge
