// Argument blocks in submission order (argument_ring.h).
#include "npusim/runtime/argument_ring.h"

#include <fmt/format.h>

#include <algorithm>

#include "npusim/runtime/device_allocator.h"

namespace npusim::runtime {
namespace {

constexpr uint64_t kAlignment = 64;

}  // namespace

ArgumentRing::ArgumentRing(uint64_t base, uint64_t bytes) : base_(base), size_(bytes / kAlignment * kAlignment) {}

uint64_t ArgumentRing::allocate(uint64_t bytes) {
  const uint64_t size = std::max<uint64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (size > size_)
    throw OutOfMemory(
        fmt::format("npusim: a launch's argument block of {} bytes is larger than the {}-byte argument "
                    "ring",
                    bytes, size_));
  std::lock_guard lock(mutex_);
  // A block never wraps: one that would cross the ring's end starts the next lap.
  uint64_t start = head_;
  if (start % size_ + size > size_) start += size_ - start % size_;
  const uint64_t oldest = blocks_.empty() ? start : blocks_.begin()->first;
  if (start + size - oldest > size_) return 0;
  head_ = start + size;
  blocks_.emplace(start, Block{start + size, false});
  return base_ + start % size_;
}

void ArgumentRing::release(uint64_t address) {
  std::lock_guard lock(mutex_);
  // Live blocks span less than one lap, so their offsets in the ring tell them apart.
  for (auto& [start, block] : blocks_)
    if (base_ + start % size_ == address && !block.released) {
      block.released = true;
      break;
    }
  while (!blocks_.empty() && blocks_.begin()->second.released) blocks_.erase(blocks_.begin());
}

}  // namespace npusim::runtime
