// The autograd profiler's custom-device path (torch.autograd.profiler.profile(use_device="npusim")): PyTorch stamps
// each operator's start and end through these stubs, and npusim's stamps are the device's simulated clock (a stamp
// waits for the work submitted before it), so the
// profiler's "npusim time" columns give each operator's simulated time (zero in functional mode, which has none).
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "npusim/runtime/session.h"
#include "tensor_device.h"

namespace npusim::bridge {
namespace {

struct ClockStamp {
  uint64_t cycle;
  double clock_ghz;
};

class SimulatedClockStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
    if (device != nullptr) *device = index;
    runtime::Device& chip = runtime_device(index);
    *event = std::make_shared<ClockStamp>(ClockStamp{chip.elapsed_cycles(), chip.config().chip_clock_ghz});
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
  }
  // Microseconds between two stamps, as the CUDA stubs give.
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    const auto* from = static_cast<const ClockStamp*>(start->get());
    const auto* to = static_cast<const ClockStamp*>(end->get());
    return static_cast<float>((static_cast<double>(to->cycle) - static_cast<double>(from->cycle)) /
                              (from->clock_ghz * 1e3));
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (int index = 0; index < runtime::Session::instance().device_count(); ++index) op(index);
  }
  void synchronize() const override {
    runtime_device(c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index()).synchronize();
  }
};

const bool stubs_registered = [] {
  static SimulatedClockStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

}  // namespace
}  // namespace npusim::bridge
