// out= variants of operators whose functional form runs natively on npusim, declared by one line each: a boxed kernel
// calls the functional overload through the dispatcher with the call's other arguments, then writes each result into
// its out argument as PyTorch's out= contract says (the result's dtype must cast to out's; out is resized with
// resize_output, which warns when a non-empty out has another shape). PyTorch's own out= wrappers of composite
// operators do the same (mvlgamma_out: the functional result copied into out). A functional form that computes
// through its own out= variant cannot be listed: the two would call each other without end.
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "bridge.h"

namespace npusim::bridge {
namespace {

class FromFunctional final : public c10::OperatorKernel {
 public:
  FromFunctional(const char* name, const char* overload) : name_(name), overload_(overload) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack) {
    const std::vector<c10::Argument>& schema = op.schema().arguments();
    size_t outs = 0;  // the schema's out arguments come last
    while (outs < schema.size() && schema[schema.size() - 1 - outs].is_out()) ++outs;
    std::vector<at::Tensor> out;
    for (const c10::IValue& value : torch::jit::last(*stack, outs)) out.push_back(value.toTensor());
    torch::jit::drop(*stack, outs);
    functional().callBoxed(stack);
    const auto results = torch::jit::last(*stack, outs);
    for (size_t k = 0; k < outs; ++k) {
      const at::Tensor result = results[k].toTensor();
      TORCH_CHECK(at::can_cast(result.scalar_type(), out[k].scalar_type()), op.schema().name(), ": result type ",
                  result.scalar_type(), " can't be cast to the desired output type ", out[k].scalar_type());
      at::native::resize_output(out[k], result.sizes());
      out[k].copy_(result);
    }
    torch::jit::drop(*stack, outs);
    for (const at::Tensor& tensor : out) torch::jit::push(*stack, tensor);
  }

 private:
  const c10::OperatorHandle& functional() {
    if (!functional_) functional_ = c10::Dispatcher::singleton().findSchemaOrThrow(name_, overload_);
    return *functional_;
  }

  const char* name_;
  const char* overload_;
  std::optional<c10::OperatorHandle> functional_;
};

// Registers `out_schema` (an overload of aten::`name`) from the functional overload `overload` of the same operator.
void from_functional(torch::Library& m, const char* out_schema, const char* name, const char* overload) {
  m.impl(out_schema, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<FromFunctional>(name, overload)));
}

// conj_physical of a real tensor is a copy; of a complex64 one, a copy whose imaginary parts are negated in place.
// Not from the functional form: that one computes a complex tensor's conjugate through this out= variant.
at::Tensor& conj_physical_out(const at::Tensor& self, at::Tensor& out) {
  const bool native = !self.is_complex() || self.scalar_type() == at::kComplexFloat;
  if (!native || out.scalar_type() != self.scalar_type() || out.device() != self.device()) {
    torch::jit::Stack stack{self, out};
    call_cpu_fallback("aten::conj_physical", "out", stack);
    return out;
  }
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (self.is_complex()) at::view_as_real(out).select(-1, 1).neg_();
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("conj_physical.out", conj_physical_out);
  from_functional(m, "max.unary_out", "aten::max", "");
  from_functional(m, "min.unary_out", "aten::min", "");
  from_functional(m, "std.correction_out", "aten::std", "correction");
  from_functional(m, "histogram.bin_ct_out", "aten::histogram", "bin_ct");
  from_functional(m, "var.correction_out", "aten::var", "correction");
  from_functional(m, "searchsorted.Tensor_out", "aten::searchsorted", "Tensor");
  from_functional(m, "bucketize.Tensor_out", "aten::bucketize", "Tensor");
  from_functional(m, "log_sigmoid_forward.output", "aten::log_sigmoid_forward", "");
  from_functional(m, "nonzero.out", "aten::nonzero", "");
  from_functional(m, "masked_select.out", "aten::masked_select", "");
  from_functional(m, "narrow_copy.out", "aten::narrow_copy", "");
  from_functional(m, "mvlgamma.out", "aten::mvlgamma", "");
  from_functional(m, "avg_pool3d.out", "aten::avg_pool3d", "");
  from_functional(m, "avg_pool3d_backward.grad_input", "aten::avg_pool3d_backward", "");
  from_functional(m, "adaptive_avg_pool3d.out", "aten::adaptive_avg_pool3d", "");
  from_functional(m, "upsample_bicubic2d.out", "aten::upsample_bicubic2d", "");
  from_functional(m, "upsample_bicubic2d_backward.grad_input", "aten::upsample_bicubic2d_backward", "");
  from_functional(m, "_upsample_bilinear2d_aa.out", "aten::_upsample_bilinear2d_aa", "");
  from_functional(m, "_upsample_bilinear2d_aa_backward.grad_input", "aten::_upsample_bilinear2d_aa_backward", "");
  from_functional(m, "_upsample_bicubic2d_aa.out", "aten::_upsample_bicubic2d_aa", "");
  from_functional(m, "_upsample_bicubic2d_aa_backward.grad_input", "aten::_upsample_bicubic2d_aa_backward", "");
}

}  // namespace npusim::bridge
