// torch.autocast(device_type="npusim"): PyTorch's own autocast op lists, with CUDA's policies, for npusim's autocast
// dispatch key (matmul-like ops in the lower precision, precision-sensitive ones in float32, mixed-type ones promoted,
// binary cross entropy refused), and a fallthrough for every other op. The device module lists the types autocast may
// use.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace npusim::bridge {
namespace {

using at::Scalar;
using at::ScalarType;
using at::Tensor;
using c10::IntArrayRef;

#define NPUSIM_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NPUSIM_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NPUSIM_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NPUSIM_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define NPUSIM_DIFFERENT_REDISPATCH_SIGNATURE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE,         \
                                              REDISPATCH_SIGNATURE, POLICY)                               \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE, \
                                                      REDISPATCH_SIGNATURE, POLICY)

// As on CUDA, binary cross entropy refuses to run under autocast: on a float16 probability from a sigmoid it loses
// the precision the loss depends on, where the logits form is stable.
Tensor binary_cross_entropy_refused(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast: a float16 "
              "probability loses the precision the loss needs. Give the logits to "
              "torch.nn.functional.binary_cross_entropy_with_logits (or torch.nn.BCEWithLogitsLoss) instead of the "
              "sigmoid's output; those are safe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NPUSIM_LOWER_PRECISION_FP)
  AT_FORALL_FP32(NPUSIM_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NPUSIM_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(NPUSIM_DIFFERENT_REDISPATCH_SIGNATURE)
  AT_FORALL_PROMOTE(NPUSIM_PROMOTE)
  m.impl("binary_cross_entropy", binary_cross_entropy_refused);
}

}  // namespace
}  // namespace npusim::bridge
