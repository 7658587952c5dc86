// Page-granular sparse memory with bounds checks.
#include "npusim/emulator/device_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "npusim/emulator/trap.h"

namespace npusim::emulator {

void DeviceMemory::require_range(uint64_t address, uint64_t bytes, const char* access) const {
  if (address > capacity_bytes_ || bytes > capacity_bytes_ - address)
    throw Trap(fmt::format("DRAM {} of {} bytes at 0x{:x} is outside the device's {} MiB", access, bytes, address,
                           capacity_bytes_ >> 20));
}

DeviceMemory::Page* DeviceMemory::page(uint64_t page_index, bool create) const {
  Page& entry = pages_[page_index];  // callers checked the range
  if (!entry.bytes) {
    if (!create) return nullptr;
    entry.bytes = std::make_unique<std::byte[]>(kPageBytes);  // value-initialised: fresh memory reads as zero
  }
  return &entry;
}

std::byte* DeviceMemory::page_for_write(uint64_t page_index) {
  Page* written = page(page_index, true);
  if (written->holds_code) ++code_version_;
  return written->bytes.get();
}

uint64_t DeviceMemory::fetch_word(uint64_t address) {
  uint64_t word = 0;
  read(address, &word, sizeof word);
  page(address / kPageBytes, true)->holds_code = true;
  return word;
}

void DeviceMemory::read(uint64_t address, void* destination, uint64_t bytes) const {
  require_range(address, bytes, "read");
  auto* out = static_cast<std::byte*>(destination);
  while (bytes > 0) {
    const uint64_t offset = address % kPageBytes;
    const uint64_t chunk = std::min(bytes, kPageBytes - offset);
    if (const Page* source = page(address / kPageBytes, false))
      std::memcpy(out, source->bytes.get() + offset, chunk);
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

}  // namespace npusim::emulator
