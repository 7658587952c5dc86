// at::_efficientzerotensor on the device: the gradient autograd gives where a derivative is zero everywhere (sgn's
// and sign's for real inputs, a product's with a zero-tensor factor). As on the CPU and CUDA it is a ZeroTensor with
// no memory behind it: PyTorch's ZeroTensor kernels fold it away or make real zeros on npusim when an operator needs
// its values, so nothing is launched until then.
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

#include <map>
#include <mutex>

#include "bridge.h"

namespace npusim::bridge {
namespace {

// An allocator per device that hands out no memory; a tensor's storage keeps a pointer to it, so it lives forever.
c10::Allocator* zero_tensor_allocator(at::Device device) {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, at::native::ZeroTensorAllocator> allocators;
  const std::lock_guard lock(mutex);
  return &allocators.try_emplace(device.index(), device).first->second;
}

at::Tensor npusim_efficientzerotensor(c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                                      std::optional<at::Layout> /*layout*/, std::optional<at::Device> device,
                                      std::optional<bool> /*pin_memory*/) {
  at::Device target = device.value_or(at::Device(c10::DeviceType::PrivateUse1));
  if (!target.has_index())
    target = at::Device(target.type(), c10::impl::getDeviceGuardImpl(target.type())->getDevice().index());
  const auto keys =
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(C10_AS_INTARRAYREF_SLOW(size), zero_tensor_allocator(target), keys,
                                   dtype.value_or(c10::get_default_dtype_as_scalartype()), std::nullopt);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_efficientzerotensor", npusim_efficientzerotensor); }

}  // namespace npusim::bridge
