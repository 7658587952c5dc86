// The host thread a simulated chip runs on. It serves the devices attached to it: whenever one has commands waiting,
// it writes them into the chip's rings, rings the doorbell, and collects the completions. One mutex guards the queues
// of all its devices; `changed` is notified after every round, for host threads waiting on completions.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace npusim::runtime {

class Device;

class DeviceThread {
 public:
  DeviceThread();
  ~DeviceThread();  // serves what is still submitted, then stops
  DeviceThread(const DeviceThread&) = delete;
  DeviceThread& operator=(const DeviceThread&) = delete;

  std::mutex& mutex() { return mutex_; }
  std::condition_variable& changed() { return changed_; }
  void wake() { work_.notify_one(); }

  void attach(Device* device);
  void detach(Device* device);  // waits until the device has no work

  // Runs `task` on the device thread between simulation runs and returns its result (or rethrows its exception):
  // for whatever must happen on the thread that drives the chips (building them, reading their clocks).
  template <typename Task>
  auto call(Task task) {
    std::packaged_task<decltype(task())()> packaged(std::move(task));
    auto result = packaged.get_future();
    {
      std::lock_guard lock(mutex_);
      tasks_.emplace_back([&packaged] { packaged(); });
    }
    work_.notify_one();
    return result.get();
  }

 private:
  void serve_forever();
  bool any_work() const;  // caller holds mutex_

  std::mutex mutex_;
  std::condition_variable work_, changed_;
  std::vector<Device*> devices_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace npusim::runtime
