// The entry point for libtorch C++ programs: call npusim::register_backend() once, then use
// torch::Device(c10::DeviceType::PrivateUse1, 0) (printed as "npusim:0").
#pragma once

namespace npusim {

// Names PrivateUse1 "npusim". Idempotent; the kernels and the allocator register themselves when the library loads.
void register_backend();

}  // namespace npusim
