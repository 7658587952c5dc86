// torch.eye on the device: the result zeroed and its main diagonal filled with ones (two fill kernels), in every
// dtype npusim fills.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "bridge.h"

namespace npusim::bridge {
namespace {

at::Tensor& npusim_eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  at::native::resize_output(out, {n, m});
  out.zero_();
  out.diagonal().fill_(1);
  return out;
}
at::Tensor& npusim_eye_out(int64_t n, at::Tensor& out) { return npusim_eye_m_out(n, n, out); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("eye.m_out", npusim_eye_m_out);
  m.impl("eye.out", npusim_eye_out);
}

}  // namespace npusim::bridge
