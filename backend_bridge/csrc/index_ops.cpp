// Native index_select along dim 0 (so nn.Embedding's lookups) as a row-gather kernel, for any dtype: rows are moved
// as bytes. An index outside the table traps on the device and surfaces as PyTorch's IndexError.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "bridge.h"
#include "kernel_launcher.h"

namespace npusim::bridge {
namespace {

bool gathers_natively(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  return self.dim() >= 1 && at::maybe_wrap_dim(dim, self.dim()) == 0 && index.dim() <= 1 &&
         (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt) && index.device() == self.device();
}

at::Tensor& npusim_index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  if (gathers_natively(self, dim, index) && out.scalar_type() == self.scalar_type()) {
    std::vector<int64_t> shape = self.sizes().vec();
    shape[0] = index.numel();
    at::native::resize_output(out, shape);
    if (out.numel() == 0) return out;
    const at::Tensor table = self.contiguous(), indices = index.contiguous();
    at::Tensor result = out.is_contiguous() ? out : at::empty(shape, out.options());
    const emitter::GatherSpec spec{self.size(0),
                                   static_cast<int64_t>(table.numel() / self.size(0) * table.element_size()),
                                   indices.numel(), static_cast<int>(indices.element_size())};
    const uint64_t addresses[] = {device_address(result), device_address(table), device_address(indices)};
    try {
      launch_gather(out.device().index(), runtime_device(out), spec, addresses);
      if (!result.is_same(out)) out.copy_(result);
      return out;
    } catch (const emitter::Unsupported&) {
      // falls through to the CPU
    } catch (const runtime::DeviceError& error) {
      const bool out_of_range =
          std::string(error.what()).find("code " + std::to_string(emitter::kIndexOutOfRangeTrap)) != std::string::npos;
      TORCH_CHECK_INDEX(!out_of_range, "index out of range in self (npusim: ", error.what(), ")");
      TORCH_CHECK(false, error.what());
    }
  }
  torch::jit::Stack stack{self, dim, index, out};
  call_cpu_fallback("aten::index_select", "out", stack);
  return out;
}

at::Tensor npusim_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_index_select_out(self, dim, index, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", npusim_index_select);
  m.impl("index_select.out", npusim_index_select_out);
}

}  // namespace npusim::bridge
