// Device memory allocator: hands out simulated DRAM addresses (never host pointers) from the heap region, first fit,
// with coalescing of freed ranges, and keeps the statistics torch.npusim.memory_stats reports.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

namespace npusim::runtime {

struct MemoryStats {
  uint64_t allocated_bytes = 0;
  uint64_t peak_allocated_bytes = 0;
  uint64_t reserved_bytes = 0;  // the heap's size: the simulated device owns all of it
  uint64_t allocations = 0;     // live allocations
  uint64_t peak_allocations = 0;
  uint64_t total_allocations = 0;  // since the device opened, or since reset_accumulated
  uint64_t total_frees = 0;
  uint64_t total_allocated_bytes = 0;
  uint64_t total_freed_bytes = 0;
  uint64_t free_blocks = 0;               // separate free ranges of the heap
  uint64_t largest_free_block_bytes = 0;  // the largest allocation that can succeed

  // The share of free memory outside the largest free block: 0 when all of it is one block, towards 1 when free
  // memory is scattered in pieces too small for a large request.
  double fragmentation() const {
    const uint64_t free_bytes = reserved_bytes - allocated_bytes;
    return free_bytes == 0 ? 0.0
                           : 1.0 - static_cast<double>(largest_free_block_bytes) / static_cast<double>(free_bytes);
  }
};

class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DeviceAllocator {
 public:
  static constexpr uint64_t kAlignment = 256;

  DeviceAllocator(uint64_t heap_base, uint64_t heap_end);

  uint64_t allocate(uint64_t bytes);  // throws OutOfMemory naming the request and the figures
  void free(uint64_t address);        // throws std::invalid_argument for an address it did not hand out
  // Throws the same std::invalid_argument as free would, without freeing.
  void check_freeable(uint64_t address) const;
  MemoryStats stats() const;
  void reset_peak();
  void reset_accumulated();  // the totals of allocations and frees back to 0

 private:
  uint64_t largest_free_block() const;  // caller holds mutex_
  MemoryStats stats_locked() const;     // caller holds mutex_

  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> free_ranges_;  // start → size
  std::map<uint64_t, uint64_t> live_;         // start → size
  MemoryStats stats_;
};

}  // namespace npusim::runtime
