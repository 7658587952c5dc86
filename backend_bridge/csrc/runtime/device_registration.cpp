// Registers npusim with PyTorch's PrivateUse1 slot: the allocator of device memory, the device guard (devices,
// streams, events), and the runtime hooks.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceCapability.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <map>

#include "device_generator.h"
#include "device_pointers.h"
#include "npusim/runtime/session.h"
#include "npusim_torch.h"
#include "pinned_memory.h"
#include "tensor_device.h"

namespace npusim::bridge {

runtime::Device& runtime_device(c10::DeviceIndex index) {
  try {
    return runtime::Session::instance().device(index < 0 ? 0 : index);
  } catch (const std::exception& error) {
    TORCH_CHECK(false, "npusim: cannot open device ", static_cast<int>(index), ": ", error.what());
  }
}

runtime::Device& runtime_device(const at::Tensor& tensor) { return runtime_device(tensor.device().index()); }

uint64_t device_address(const at::Tensor& tensor) { return pointer_to_device_address(tensor.const_data_ptr()); }

namespace {

thread_local c10::DeviceIndex current_device = 0;

void free_device_pointer(void* pointer) {
  if (runtime::Session::in_bad_fork()) return;  // the memory is the parent's, on a device this process cannot reach
  const int device = device_of_pointer(pointer);
  if (device >= 0) runtime_device(static_cast<c10::DeviceIndex>(device)).free(pointer_to_device_address(pointer));
}

// PyTorch's device allocator interface (torch.accelerator's memory functions use it): the runtime's first-fit heap,
// whose figures (runtime::MemoryStats) fill PyTorch's statistics. It caches nothing, and a block freed while another
// stream may still use it returns to the heap only when that work is done (docs/runtime.md, Memory), so emptyCache
// and recordStream have nothing to do.
class DeviceMemoryAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const c10::DeviceIndex index = current_device;
    const c10::Device device(c10::DeviceType::PrivateUse1, index);
    if (bytes == 0) return {nullptr, nullptr, &free_device_pointer, device};
    uint64_t address = 0;
    try {
      address = runtime_device(index).allocate(bytes);
    } catch (const runtime::OutOfMemory& error) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, error.what());
    }
    void* pointer = device_address_to_pointer(index, address);
    return {pointer, pointer, &free_device_pointer, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_device_pointer; }
  bool initialized() override { return runtime::Session::instance().devices_open(); }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    const runtime::MemoryStats figures = runtime_device(device).memory_stats();
    c10::CachingDeviceAllocator::DeviceStats stats;
    const auto fill = [](c10::CachingAllocator::StatArray& stat, uint64_t current, uint64_t peak, uint64_t allocated,
                         uint64_t freed) {
      c10::CachingAllocator::Stat& all = stat[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
      all.current = static_cast<int64_t>(current);
      all.peak = static_cast<int64_t>(peak);
      all.allocated = static_cast<int64_t>(allocated);
      all.freed = static_cast<int64_t>(freed);
    };
    fill(stats.allocation, figures.allocations, figures.peak_allocations, figures.total_allocations,
         figures.total_frees);
    fill(stats.active, figures.allocations, figures.peak_allocations, figures.total_allocations, figures.total_frees);
    fill(stats.allocated_bytes, figures.allocated_bytes, figures.peak_allocated_bytes, figures.total_allocated_bytes,
         figures.total_freed_bytes);
    fill(stats.active_bytes, figures.allocated_bytes, figures.peak_allocated_bytes, figures.total_allocated_bytes,
         figures.total_freed_bytes);
    fill(stats.requested_bytes, figures.allocated_bytes, figures.peak_allocated_bytes, figures.total_allocated_bytes,
         figures.total_freed_bytes);
    fill(stats.segment, 1, 1, 1, 0);  // the heap, reserved whole when the device opens
    fill(stats.reserved_bytes, figures.reserved_bytes, figures.reserved_bytes, figures.reserved_bytes, 0);
    return stats;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override { runtime_device(device).reset_accumulated_memory(); }
  void resetPeakStats(c10::DeviceIndex device) override { runtime_device(device).reset_peak_memory(); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    const runtime::MemoryStats figures = runtime_device(device).memory_stats();
    return {figures.reserved_bytes - figures.allocated_bytes, figures.reserved_bytes};  // free, total
  }
  void copy_data(void* destination, const void* source, size_t bytes) const override {
    const int device = device_of_pointer(destination);
    runtime_device(static_cast<c10::DeviceIndex>(device))
        .copy_device_to_device(pointer_to_device_address(destination), pointer_to_device_address(source), bytes);
  }
};

DeviceMemoryAllocator allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator)

// Streams and events are the runtime's: a stream id names a command ring's queue (0 the default), each thread has a
// current stream per device (kept by the runtime, which launches there), and an event is a device event whose
// recording the firmware stamps with the simulated clock, so elapsed_time is simulated time.
std::atomic<c10::StreamId> next_stream_id{1};

struct DeviceEvent {
  c10::DeviceIndex device;
  c10::EventFlag flag;  // BACKEND_DEFAULT: created with enable_timing=True
  int id;               // the runtime's event
};

// The configuration's device count; 0 when it cannot be read (opening a device then raises the reason).
c10::DeviceIndex device_count() noexcept {
  try {
    return static_cast<c10::DeviceIndex>(runtime::Session::instance().device_count());
  } catch (...) {
    return 0;
  }
}

// Runs a runtime call that may raise a deferred kernel error, as a PyTorch error.
template <typename Call>
auto reporting_device_errors(Call&& call) {
  try {
    return call();
  } catch (const runtime::DeviceError& error) {
    TORCH_CHECK(false, error.what());
  }
}

class DeviceGuard final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device previous = getDevice();
    setDevice(device);
    return previous;
  }
  c10::Device getDevice() const override { return {c10::DeviceType::PrivateUse1, current_device}; }
  void setDevice(c10::Device device) const override {
    const int count = runtime::Session::instance().device_count();  // raises a configuration's error
    TORCH_CHECK(device.index() >= 0 && device.index() < count, "npusim device ", static_cast<int>(device.index()),
                " does not exist; there ", count == 1 ? "is " : "are ", count);
    current_device = device.index();
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override { current_device = device.index(); }
  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::UNSAFE, device, runtime_device(device.index()).current_stream());
  }
  c10::Stream getDefaultStream(c10::Device device) const override { return c10::Stream(c10::Stream::DEFAULT, device); }
  c10::Stream getNewStream(c10::Device device, int) const override {
    // torch.Stream(device="npusim") names no index: the stream is the current device's, as CUDA's would be
    if (!device.has_index()) device = getDevice();
    return c10::Stream(c10::Stream::UNSAFE, device, next_stream_id++);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool) const override { return getNewStream(device, 0); }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    const c10::Stream previous = getStream(stream.device());
    runtime_device(stream.device_index()).set_current_stream(stream.id());
    return previous;
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "npusim: event device index ",
                static_cast<int>(device_index), " does not match the recording stream's ",
                static_cast<int>(stream.device_index()));
    runtime::Device& device = runtime_device(stream.device_index());
    if (*event == nullptr) *event = new DeviceEvent{stream.device_index(), flag, device.create_event()};
    auto* recorded = static_cast<DeviceEvent*>(*event);
    TORCH_CHECK(recorded->device == stream.device_index(), "npusim: an event of device ",
                static_cast<int>(recorded->device), " cannot be recorded on device ",
                static_cast<int>(stream.device_index()));
    device.record_event(recorded->id, stream.id());
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    auto* destroyed = static_cast<DeviceEvent*>(event);
    try {
      runtime_device(destroyed->device).destroy_event(destroyed->id);
    } catch (...) {  // a deferred kernel error belongs to the next synchronising call, not to a destructor
    }
    delete destroyed;
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;  // never recorded: nothing to wait for
    const auto* waited = static_cast<DeviceEvent*>(event);
    if (waited->device != stream.device_index()) {
      // Another device's event: the devices share no command ring, so the host waits for it before anything more
      // is queued on the stream (CUDA's devices wait for each other without the host; the order is the same).
      reporting_device_errors([&] { runtime_device(waited->device).synchronize_event(waited->id); });
      return;
    }
    runtime_device(waited->device).wait_event(waited->id, stream.id());
  }
  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    const auto* queried = static_cast<DeviceEvent*>(event);
    return runtime_device(queried->device).event_done(queried->id);
  }
  void synchronizeEvent(void* event) const override {
    if (event == nullptr) return;
    const auto* waited = static_cast<DeviceEvent*>(event);
    reporting_device_errors([&] { runtime_device(waited->device).synchronize_event(waited->id); });
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "npusim: both events must be recorded before calculating elapsed time");
    const auto *from = static_cast<DeviceEvent*>(start), *to = static_cast<DeviceEvent*>(end);
    TORCH_CHECK(from->flag == c10::EventFlag::BACKEND_DEFAULT && to->flag == c10::EventFlag::BACKEND_DEFAULT,
                "npusim: elapsed_time needs both events created with enable_timing=True");
    runtime::Device& device = runtime_device(device_index < 0 ? from->device : device_index);
    TORCH_CHECK(device.mode() == runtime::Mode::Timed,
                "npusim: Event.elapsed_time is simulated time, which needs timed mode (NPUSIM_MODE=timed or "
                "npusim.init(mode=\"timed\")); functional mode has no clock");
    const double cycles = reporting_device_errors([&] {
      return static_cast<double>(device.event_cycle(to->id)) - static_cast<double>(device.event_cycle(from->id));
    });
    return cycles / (device.config().chip_clock_ghz * 1e6);  // milliseconds
  }
  // Every dtype but the quantized ones: any is stored and copied on the device (computation in a dtype without native
  // kernels takes the counted CPU fallback); quantized tensors have no npusim backend.
  c10::DeviceCapability getDeviceCapability(c10::Device) const override {
    c10::DeviceCapability capability;
    auto& types = capability.capability_data.supported_scalar_types;
    types.has_QInt8 = types.has_QUInt8 = types.has_QInt32 = types.has_QUInt4x2 = types.has_QUInt2x4 = 0;
    return capability;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  bool queryStream(const c10::Stream& stream) const override {
    return runtime_device(stream.device_index()).stream_done(stream.id());
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    reporting_device_errors([&] { runtime_device(stream.device_index()).synchronize_stream(stream.id()); });
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    reporting_device_errors([&] { runtime_device(index < 0 ? current_device : index).synchronize(); });
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, DeviceGuard);

class Hooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override { return default_generator(device); }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override { return new_generator(device); }
  c10::Device getDeviceFromPtr(void* data) const override {
    return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(std::max(0, device_of_pointer(data)))};
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { current_device = device; }
  c10::DeviceIndex getCurrentDevice() const override { return current_device; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return std::exchange(current_device, device);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override;
  bool isPinnedPtr(const void* data) const override { return is_pinned_pointer(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &pinned_host_allocator(); }
};

void Hooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const {
  resize_storage_bytes(storage, new_bytes);
}

const bool hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  return true;
}();

}  // namespace

void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes) {
  c10::DataPtr fresh = allocator.allocate(new_bytes);
  const size_t kept = std::min(new_bytes, storage.nbytes());
  if (kept > 0 && storage.data() != nullptr) allocator.copy_data(fresh.get(), storage.data(), kept);
  storage.set_data_ptr_noswap(std::move(fresh));
  storage.set_nbytes(new_bytes);
}

}  // namespace npusim::bridge

namespace npusim {

void register_backend() {
  if (c10::get_privateuse1_backend() != "npusim") c10::register_privateuse1_backend("npusim");
}

}  // namespace npusim
