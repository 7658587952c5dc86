// Device addresses as PyTorch data pointers. Each device reserves an inaccessible range of host address space as
// large as its DRAM; a tensor's data pointer is base + device address. Host code that dereferences one faults at
// once instead of silently reading host memory, and the range costs no memory.
#pragma once

#include <cstdint>

namespace npusim::bridge {

void* device_address_to_pointer(int device, uint64_t address);
uint64_t pointer_to_device_address(const void* pointer);  // throws std::invalid_argument for a non-device pointer
int device_of_pointer(const void* pointer);               // -1 if the pointer is not a device pointer

}  // namespace npusim::bridge
