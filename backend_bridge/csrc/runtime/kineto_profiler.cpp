// torch.profiler with ProfilerActivity.PrivateUse1 (shown as NPUSIM): a Kineto activity profiler that reports each
// npusim command as a device activity, so kernels and copies appear in the profiler's table (the device time
// columns) and in its exported Chrome trace. An activity starts when the host submitted the command and lasts its
// simulated duration (timed mode; functional mode has no clock, so its activities last 0); it carries the
// correlation id of the operator that issued it, which links it to that operator.
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <mutex>
#include <set>

#include "npusim/runtime/session.h"
#include "tensor_device.h"

namespace npusim::bridge {
namespace {

const std::set<libkineto::ActivityType>& device_activities() {
  static const std::set<libkineto::ActivityType> types = {libkineto::ActivityType::CONCURRENT_KERNEL,
                                                          libkineto::ActivityType::GPU_MEMCPY};
  return types;
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    status_ = libkineto::TraceStatus::RECORDING;
    for (int index = 0; index < runtime::Session::instance().device_count(); ++index)
      runtime_device(static_cast<c10::DeviceIndex>(index)).set_observer([this, index](const runtime::CommandRecord& r) {
        // On the device thread, when the command completes; its operator's correlation id was stamped at submission.
        const std::lock_guard lock(mutex_);
        commands_.push_back({index, r.name, r.host_ns, r.device_cycles, r.bytes, r.correlation});
      });
  }
  void stop() override {
    for (int index = 0; index < runtime::Session::instance().device_count(); ++index) {
      runtime::Device& device = runtime_device(static_cast<c10::DeviceIndex>(index));
      device.wait_idle();  // the commands issued while profiling complete, and are seen, before the observer goes
      device.set_observer({});
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }
  // `linked_to` finds the operator (the CPU activity) of a correlation id.
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_to, int64_t,
                    int64_t) override {
    const std::lock_guard lock(mutex_);
    activities_.clear();
    activities_.reserve(commands_.size());
    for (const Command& command : commands_) {
      const double clock_ghz = runtime_device(static_cast<c10::DeviceIndex>(command.device)).config().chip_clock_ghz;
      const bool copy = command.name.rfind("copy", 0) == 0;
      libkineto::GenericTraceActivity& activity = activities_.emplace_back(
          span_, copy ? libkineto::ActivityType::GPU_MEMCPY : libkineto::ActivityType::CONCURRENT_KERNEL, command.name);
      activity.startTime = command.host_ns;
      activity.endTime = command.host_ns + static_cast<int64_t>(static_cast<double>(command.cycles) / clock_ghz);
      activity.id = static_cast<int32_t>(command.correlation);
      activity.device = command.device;
      if (linked_to && command.correlation != 0) activity.linked = linked_to(static_cast<int32_t>(command.correlation));
      // Quoted values: the unquoted form formats with the fmt that libtorch keeps to itself.
      activity.addMetadataQuoted("simulated cycles", std::to_string(command.cycles));
      activity.addMetadataQuoted("bytes", std::to_string(command.bytes));
      logger.handleGenericActivity(activity);
    }
  }
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "npusim", "npusim"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {{0, 0, 0, "commands"}}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  // The operator being run, so that the commands it issues link to it.
  void pushCorrelationId(uint64_t id) override {
    {
      const std::lock_guard lock(mutex_);
      correlations_.push_back(id);
    }
    stamp_correlation(id);
  }
  void popCorrelationId() override {
    uint64_t current = 0;
    {
      const std::lock_guard lock(mutex_);
      if (!correlations_.empty()) correlations_.pop_back();
      if (!correlations_.empty()) current = correlations_.back();
    }
    stamp_correlation(current);
  }

 private:
  struct Command {
    int device;
    std::string name;
    int64_t host_ns;
    uint64_t cycles, bytes, correlation;
  };
  // The innermost operator's id goes on the commands submitted from now on. Not under mutex_: the observer takes
  // mutex_ with the device's lock held, so the device's lock must never be taken with mutex_ held.
  static void stamp_correlation(uint64_t current) {
    for (int index = 0; index < runtime::Session::instance().device_count(); ++index)
      runtime_device(static_cast<c10::DeviceIndex>(index)).set_correlation(current);
  }

  std::mutex mutex_;
  std::vector<Command> commands_;
  std::vector<uint64_t> correlations_;
  libkineto::TraceSpan span_{0, 0, "npusim"};
  std::vector<libkineto::GenericTraceActivity> activities_;  // alive while the logger holds them
};

class ActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return device_activities(); }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config&) override {
    for (libkineto::ActivityType type : types)
      if (device_activities().contains(type)) return std::make_unique<Session>();
    return nullptr;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "npusim";
};

REGISTER_PRIVATEUSE1_PROFILER(ActivityProfiler);

}  // namespace
}  // namespace npusim::bridge
