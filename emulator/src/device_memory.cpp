// Page-granular sparse memory with bounds checks.
#include "npusim/emulator/device_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "npusim/emulator/trap.h"

namespace npusim::emulator {
namespace {
// Tile rows are often short (64 bytes for a row of 16 floats), and a call to memcpy then costs more than the copy:
// short rows go in fixed-size pieces the compiler copies inline.
void copy_row(std::byte* out, const std::byte* in, uint64_t bytes) {
  if (bytes > 256) {
    std::memcpy(out, in, bytes);
    return;
  }
  for (; bytes >= 16; bytes -= 16, out += 16, in += 16) std::memcpy(out, in, 16);
  if (bytes > 0) std::memcpy(out, in, bytes);
}
}  // namespace

void DeviceMemory::require_range(uint64_t address, uint64_t bytes, const char* access) const {
  if (address > capacity_bytes_ || bytes > capacity_bytes_ - address)
    throw Trap(fmt::format("DRAM {} of {} bytes at 0x{:x} is outside the device's {} MiB", access, bytes, address,
                           capacity_bytes_ >> 20));
}

void DeviceMemory::check_kernel_store(uint64_t address, uint64_t bytes) const {
  const uint64_t limit = protected_limit_.load(std::memory_order_relaxed);
  if (bytes > 0 && address < limit)
    throw Trap(
        fmt::format("DRAM store of {} bytes at 0x{:x} is in the command processor's memory (below 0x{:x}), "
                    "which kernels may not write",
                    bytes, address, limit));
}

DeviceMemory::~DeviceMemory() {
  for (Page& entry : pages_) delete[] entry.bytes.load();
}

std::byte* DeviceMemory::page(uint64_t page_index, bool create) const {
  Page& entry = pages_[page_index];  // callers checked the range
  std::byte* bytes = entry.bytes.load(std::memory_order_acquire);
  if (bytes || !create) return bytes;
  std::lock_guard lock(allocation_mutex_);  // another thread may be creating the same page
  bytes = entry.bytes.load(std::memory_order_relaxed);
  if (!bytes) {
    bytes = new std::byte[kPageBytes]();  // value-initialised: fresh memory reads as zero
    entry.bytes.store(bytes, std::memory_order_release);
    resident_pages_.fetch_add(1, std::memory_order_relaxed);
  }
  return bytes;
}

std::byte* DeviceMemory::page_for_write(uint64_t page_index) {
  Page& entry = pages_[page_index];
  if (entry.holds_code.load(std::memory_order_relaxed)) code_version_.fetch_add(1);
  std::byte* bytes = page(page_index, true);
  if (!entry.written.load(std::memory_order_relaxed)) entry.written.store(true, std::memory_order_relaxed);
  return bytes;
}

uint64_t DeviceMemory::fetch_word(uint64_t address) {
  uint64_t word = 0;
  read(address, &word, sizeof word);
  pages_[address / kPageBytes].holds_code.store(true, std::memory_order_relaxed);
  return word;
}

void DeviceMemory::read(uint64_t address, void* destination, uint64_t bytes) const {
  require_range(address, bytes, "read");
  auto* out = static_cast<std::byte*>(destination);
  while (bytes > 0) {
    const uint64_t offset = address % kPageBytes;
    const uint64_t chunk = std::min(bytes, kPageBytes - offset);
    if (const std::byte* source = page(address / kPageBytes, false))
      std::memcpy(out, source + offset, chunk);
    else
      std::memset(out, 0, chunk);
    out += chunk;
    address += chunk;
    bytes -= chunk;
  }
}

void DeviceMemory::write(uint64_t address, const void* source, uint64_t bytes) {
  require_range(address, bytes, "write");
  const auto* in = static_cast<const std::byte*>(source);
  while (bytes > 0) {
    const uint64_t offset = address % kPageBytes;
    const uint64_t chunk = std::min(bytes, kPageBytes - offset);
    std::memcpy(page_for_write(address / kPageBytes) + offset, in, chunk);
    in += chunk;
    address += chunk;
    bytes -= chunk;
  }
}

void DeviceMemory::fill(uint64_t address, uint8_t value, uint64_t bytes) {
  require_range(address, bytes, "write");
  while (bytes > 0) {
    const uint64_t offset = address % kPageBytes;
    const uint64_t chunk = std::min(bytes, kPageBytes - offset);
    std::memset(page_for_write(address / kPageBytes) + offset, value, chunk);
    address += chunk;
    bytes -= chunk;
  }
}

void DeviceMemory::clear() {
  for (Page& entry : pages_)
    if (entry.written.exchange(false, std::memory_order_relaxed))
      std::memset(entry.bytes.load(std::memory_order_acquire), 0, kPageBytes);
  code_version_.fetch_add(1);
}

namespace {
// The lowest and one-past-highest byte of a strided tile, or nullopt when they do not fit 64 bits.
bool tile_extent(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows, uint64_t& low, uint64_t& bytes) {
  if (rows == 0 || row_bytes == 0) {
    low = address;
    bytes = 0;
    return true;
  }
  __int128 first = address, last = static_cast<__int128>(address) + static_cast<__int128>(stride) * (rows - 1);
  if (last < first) std::swap(first, last);
  const __int128 end = last + row_bytes;
  if (first < 0 || end > static_cast<__int128>(UINT64_MAX)) return false;
  low = static_cast<uint64_t>(first);
  bytes = static_cast<uint64_t>(end - first);
  return true;
}
}  // namespace

void DeviceMemory::read_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows,
                             void* destination) const {
  uint64_t low = 0, bytes = 0;
  if (!tile_extent(address, stride, row_bytes, rows, low, bytes))
    throw Trap(fmt::format("DRAM read of {} rows of {} bytes, {} apart, from 0x{:x} leaves the address space", rows,
                           row_bytes, stride, address));
  require_range(low, bytes, "read");
  if (bytes == 0) return;  // no row has a byte: a stride that leaves the device must not reach the page table
  auto* out = static_cast<std::byte*>(destination);
  for (uint64_t r = 0; r < rows; ++r, out += row_bytes) {
    const uint64_t row = address + r * stride;
    const uint64_t offset = row % kPageBytes;
    if (offset + row_bytes > kPageBytes) {  // a row across pages takes the general path
      read(row, out, row_bytes);
      continue;
    }
    if (const std::byte* source = page(row / kPageBytes, false))
      copy_row(out, source + offset, row_bytes);
    else
      std::memset(out, 0, row_bytes);
  }
}

void DeviceMemory::write_rows(uint64_t address, int64_t stride, uint64_t row_bytes, uint64_t rows, const void* source) {
  uint64_t low = 0, bytes = 0;
  if (!tile_extent(address, stride, row_bytes, rows, low, bytes))
    throw Trap(fmt::format("DRAM write of {} rows of {} bytes, {} apart, to 0x{:x} leaves the address space", rows,
                           row_bytes, stride, address));
  require_range(low, bytes, "write");
  if (bytes == 0) return;  // as in read_rows
  const auto* in = static_cast<const std::byte*>(source);
  for (uint64_t r = 0; r < rows; ++r, in += row_bytes) {
    const uint64_t row = address + r * stride;
    const uint64_t offset = row % kPageBytes;
    if (offset + row_bytes > kPageBytes) {
      write(row, in, row_bytes);
      continue;
    }
    copy_row(page_for_write(row / kPageBytes) + offset, in, row_bytes);
  }
}

}  // namespace npusim::emulator
