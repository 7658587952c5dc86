// The device behind a tensor and a tensor's device address: what the operators' glue and the runtime glue (allocator,
// profiler) both need of a tensor. Defined with the allocator, in device_registration.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>

#include "npusim/runtime/device.h"

namespace npusim::bridge {

runtime::Device& runtime_device(c10::DeviceIndex index);
runtime::Device& runtime_device(const at::Tensor& tensor);
// The simulated DRAM address of the tensor's first element.
uint64_t device_address(const at::Tensor& tensor);

// Reallocates a storage to `new_bytes` on its device, keeping what fits of its contents (Storage.resize_, resize_).
void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes);

}  // namespace npusim::bridge
