// Pinned ("page-locked") host memory for npusim, so that `pin_memory=True`, Tensor.pin_memory() and DataLoader's
// pin_memory work as on CUDA. The simulated host link moves pinned and pageable memory alike, so the blocks are
// ordinary aligned host memory that the allocator remembers (is_pinned answers from that record).
#pragma once

#include <c10/core/Allocator.h>

namespace npusim::bridge {

c10::Allocator& pinned_host_allocator();
// Whether `data` points into a block pinned_host_allocator() handed out and has not freed.
bool is_pinned_pointer(const void* data);

}  // namespace npusim::bridge
