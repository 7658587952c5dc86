#include "pinned_memory.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace npusim::bridge {
namespace {

std::mutex blocks_mutex;
std::map<const std::byte*, size_t>& blocks() {                   // start → bytes of every live block
  static auto* live = new std::map<const std::byte*, size_t>();  // outlives tensors freed at exit
  return *live;
}

void free_pinned(void* data) {
  {
    const std::lock_guard lock(blocks_mutex);
    blocks().erase(static_cast<const std::byte*>(data));
  }
  std::free(data);
}

class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    constexpr size_t kAlignment = 64;
    void* data =
        bytes == 0 ? nullptr : std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    TORCH_CHECK(bytes == 0 || data != nullptr, "npusim: out of host memory pinning ", bytes, " bytes");
    if (data != nullptr) {
      const std::lock_guard lock(blocks_mutex);
      blocks()[static_cast<const std::byte*>(data)] = bytes;
    }
    return {data, data, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* destination, const void* source, size_t bytes) const override {
    std::memcpy(destination, source, bytes);
  }
};

}  // namespace

c10::Allocator& pinned_host_allocator() {
  static PinnedHostAllocator allocator;
  return allocator;
}

bool is_pinned_pointer(const void* data) {
  const auto* address = static_cast<const std::byte*>(data);
  const std::lock_guard lock(blocks_mutex);
  auto after = blocks().upper_bound(address);
  if (after == blocks().begin()) return false;
  const auto& [start, bytes] = *std::prev(after);
  return address < start + std::max<size_t>(bytes, 1);
}

}  // namespace npusim::bridge
