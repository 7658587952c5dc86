// Device DRAM: a sparse host backing of the simulated address space. Only pages that were written cost host memory,
// so a 16 GiB device is cheap until used; unwritten memory reads as zero. Cores emulated on several host threads
// may use it at once: pages appear atomically, and the code version is atomic. (Two cores writing the same bytes
// without a barrier between them is a race in the simulated program, as on hardware.)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace npusim::emulator {

// Copies between memories move at most this many bytes per step, so staging buffers stay small.
inline constexpr uint64_t kCopyChunkBytes = 1 << 20;

class DeviceMemory {
 public:
  static constexpr uint64_t kPageBytes = 64 * 1024;

  // The page table is a flat array (16 bytes per 64 KiB page: 4 MiB for 16 GiB); pages are allocated on first write.
  explicit DeviceMemory(uint64_t capacity_bytes)
      : capacity_bytes_(capacity_bytes), pages_((capacity_bytes + kPageBytes - 1) / kPageBytes) {}

  uint64_t capacity_bytes() const { return capacity_bytes_; }
  // Host memory holding device pages: the pages written so far.
  uint64_t resident_bytes() const { return resident_pages_.load(std::memory_order_relaxed) * kPageBytes; }

  // Both throw Trap (out of bounds) for a range outside [0, capacity).
  void read(uint64_t address, void* destination, uint64_t bytes) const;
  void write(uint64_t address, const void* source, uint64_t bytes);
  void fill(uint64_t address, uint8_t value, uint64_t bytes);
  // Every byte reads as zero again, as in a fresh device; not to be called while a core runs. Pages stay allocated,
  // and only those written since the last clear are zeroed: a fuzz target clears between inputs, and zeroing every
  // page a wild copy once touched (64 MiB each time) took most of its time.
  void clear();
  // `rows` runs of `row_bytes`, `stride` bytes apart in device memory, packed in host memory: one range check for
  // the whole tile (2-D DMA moves many short rows).
  void read_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows, void* destination) const;
  void write_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows, const void* source);
  // Traps unless [address, address + bytes) lies within the device; `access` names it in the message.
  void require_range(uint64_t address, uint64_t bytes, const char* access) const;

  // DRAM below `limit` is the command processor's (its firmware, rings, completions and events): from now on a
  // kernel's store there traps (check_kernel_store) instead of corrupting them. 0, the default, protects nothing; the
  // runtime protects the firmware's region when it boots it. The host and the command processor write anywhere.
  void protect_below(uint64_t limit) { protected_limit_.store(limit, std::memory_order_relaxed); }
  // Traps when a kernel's store of `bytes` at `address` would land in the protected memory.
  void check_kernel_store(uint64_t address, uint64_t bytes) const;

  // Instruction fetch: reads the 64-bit word at `address` and marks its page as holding code. Any later write to a
  // code page changes code_version(), so decoded copies of instructions know when they are stale.
  uint64_t fetch_word(uint64_t address);
  uint64_t code_version() const { return code_version_.load(std::memory_order_acquire); }

  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

 private:
  std::atomic<uint64_t> protected_limit_{0};
  struct Page {
    std::atomic<std::byte*> bytes{nullptr};  // owned; allocated on first write
    std::atomic<bool> holds_code{false};
    std::atomic<bool> written{false};  // since the last clear()
  };
  // The page's bytes; nullptr for a page never written unless `create`.
  std::byte* page(uint64_t page_index, bool create) const;
  std::byte* page_for_write(uint64_t page_index);

  uint64_t capacity_bytes_;
  mutable std::vector<Page> pages_;
  mutable std::mutex allocation_mutex_;
  std::atomic<uint64_t> code_version_{0};
  mutable std::atomic<uint64_t> resident_pages_{0};
};

}  // namespace npusim::emulator
