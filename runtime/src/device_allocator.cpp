// First-fit allocation over an ordered map of free ranges.
#include "npusim/runtime/device_allocator.h"

#include <fmt/format.h>

#include <algorithm>

namespace npusim::runtime {

DeviceAllocator::DeviceAllocator(uint64_t heap_base, uint64_t heap_end) {
  free_ranges_.emplace(heap_base, heap_end - heap_base);
  stats_.reserved_bytes = heap_end - heap_base;
}

uint64_t DeviceAllocator::allocate(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  const uint64_t size = bytes > stats_.reserved_bytes
                            ? UINT64_MAX  // cannot fit; also keeps the rounding below from wrapping
                            : std::max<uint64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  for (auto it = free_ranges_.begin(); it != free_ranges_.end(); ++it) {
    if (it->second < size) continue;
    const uint64_t address = it->first;
    const uint64_t remaining = it->second - size;
    free_ranges_.erase(it);
    if (remaining > 0) free_ranges_.emplace(address + size, remaining);
    live_.emplace(address, size);
    stats_.allocated_bytes += size;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    ++stats_.allocations;
    stats_.peak_allocations = std::max(stats_.peak_allocations, stats_.allocations);
    ++stats_.total_allocations;
    stats_.total_allocated_bytes += size;
    return address;
  }
  throw OutOfMemory(fmt::format(
      "npusim device out of memory: tried to allocate {} bytes; {} bytes allocated in {} blocks, {} bytes free of {} "
      "(largest free block {} bytes, {} free blocks, fragmentation {:.1f}%)",
      bytes, stats_.allocated_bytes, stats_.allocations, stats_.reserved_bytes - stats_.allocated_bytes,
      stats_.reserved_bytes, largest_free_block(), free_ranges_.size(), 100 * stats_locked().fragmentation()));
}

uint64_t DeviceAllocator::largest_free_block() const {
  uint64_t largest = 0;
  for (const auto& [start, size] : free_ranges_) largest = std::max(largest, size);
  return largest;
}

void DeviceAllocator::check_freeable(uint64_t address) const {
  std::lock_guard lock(mutex_);
  if (!live_.contains(address))
    throw std::invalid_argument(fmt::format("free of unknown device address 0x{:x}", address));
}

void DeviceAllocator::free(uint64_t address) {
  std::lock_guard lock(mutex_);
  auto live = live_.find(address);
  if (live == live_.end()) throw std::invalid_argument(fmt::format("free of unknown device address 0x{:x}", address));
  uint64_t start = address, size = live->second;
  live_.erase(live);
  stats_.allocated_bytes -= size;
  --stats_.allocations;
  ++stats_.total_frees;
  stats_.total_freed_bytes += size;
  auto next = free_ranges_.lower_bound(start);
  if (next != free_ranges_.end() && start + size == next->first) {
    size += next->second;
    next = free_ranges_.erase(next);
  }
  if (next != free_ranges_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      start = previous->first;
      size += previous->second;
      free_ranges_.erase(previous);
    }
  }
  free_ranges_.emplace(start, size);
}

MemoryStats DeviceAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_locked();
}

MemoryStats DeviceAllocator::stats_locked() const {
  MemoryStats stats = stats_;
  stats.free_blocks = free_ranges_.size();
  stats.largest_free_block_bytes = largest_free_block();
  return stats;
}

void DeviceAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_allocations = stats_.allocations;
}

void DeviceAllocator::reset_accumulated() {
  std::lock_guard lock(mutex_);
  stats_.total_allocations = 0;
  stats_.total_frees = 0;
  stats_.total_allocated_bytes = 0;
  stats_.total_freed_bytes = 0;
}

}  // namespace npusim::runtime
