#include "device_thread.h"

#include <algorithm>

#include "npusim/runtime/device.h"

namespace npusim::runtime {

DeviceThread::DeviceThread() : thread_([this] { serve_forever(); }) {}

DeviceThread::~DeviceThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void DeviceThread::attach(Device* device) {
  std::lock_guard lock(mutex_);
  devices_.push_back(device);
}

void DeviceThread::detach(Device* device) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !device->has_work(); });
  devices_.erase(std::remove(devices_.begin(), devices_.end(), device), devices_.end());
}

bool DeviceThread::any_work() const {
  return std::any_of(devices_.begin(), devices_.end(), [](const Device* device) { return device->has_work(); });
}

void DeviceThread::serve_forever() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return stopping_ || !tasks_.empty() || any_work(); });
    if (!tasks_.empty()) {
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();  // a packaged task: its exception goes to its caller
      lock.lock();
      continue;
    }
    if (!any_work()) {
      if (stopping_) return;
      continue;
    }
    // Devices may detach while another is served (the lock is released during simulation): serve a snapshot.
    const std::vector<Device*> devices = devices_;
    for (Device* device : devices)
      if (std::find(devices_.begin(), devices_.end(), device) != devices_.end() && device->has_work())
        device->serve(lock);
    changed_.notify_all();
  }
}

}  // namespace npusim::runtime
