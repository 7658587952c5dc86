// One PROT_NONE reservation per device, made when the device is first used.
#include "device_pointers.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <array>
#include <mutex>
#include <stdexcept>

#include "npusim/runtime/session.h"

namespace npusim::bridge {
namespace {

struct Reservation {
  uintptr_t base = 0;
  uint64_t bytes = 0;
};
constexpr int kMaxDevices = 16;
std::array<Reservation, kMaxDevices> reservations;
std::mutex reservation_mutex;

const Reservation& reservation(int device) {
  std::lock_guard lock(reservation_mutex);
  Reservation& slot = reservations.at(device);
  if (slot.base == 0) {
    const uint64_t bytes = runtime::Session::instance().device(device).config().dram_capacity_bytes();
    void* base = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
      throw std::runtime_error(fmt::format("cannot reserve {} bytes of address space for npusim:{}", bytes, device));
    slot = {reinterpret_cast<uintptr_t>(base), bytes};
  }
  return slot;
}

}  // namespace

void* device_address_to_pointer(int device, uint64_t address) {
  return reinterpret_cast<void*>(reservation(device).base + address);
}

int device_of_pointer(const void* pointer) {
  const auto value = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard lock(reservation_mutex);
  for (int device = 0; device < kMaxDevices; ++device) {
    const Reservation& slot = reservations[device];
    if (slot.base != 0 && value >= slot.base && value - slot.base <= slot.bytes) return device;
  }
  return -1;
}

uint64_t pointer_to_device_address(const void* pointer) {
  const int device = device_of_pointer(pointer);
  if (device < 0) throw std::invalid_argument(fmt::format("{} is not an npusim device pointer", pointer));
  std::lock_guard lock(reservation_mutex);
  return reinterpret_cast<uintptr_t>(pointer) - reservations[device].base;
}

}  // namespace npusim::bridge
