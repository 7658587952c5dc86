// Lazy creation of the process's devices.
#include "npusim/runtime/session.h"

#include <fmt/format.h>

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace npusim::runtime {

SessionOptions options_from_environment(SessionOptions defaults) {
  if (const char* config = std::getenv("NPUSIM_CONFIG"); config && *config) defaults.config = config;
  if (const char* mode = std::getenv("NPUSIM_MODE"); mode && *mode) {
    try {
      defaults.mode = parse_mode(mode);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(fmt::format("NPUSIM_MODE: {}", error.what()));
    }
  }
  if (defaults.config_dirs.empty()) defaults.config_dirs.push_back(config::source_config_dir());
  return defaults;
}

namespace {

// Set in a child forked after the devices opened (pthread_atfork): the device threads, and any work they were
// running, stayed in the parent.
std::atomic<bool> forked_after_open{false};

}  // namespace

bool Session::in_bad_fork() { return forked_after_open.load(); }

Session& Session::instance() {
  // Never destroyed: devices may still be referenced by tensors freed during interpreter shutdown.
  static Session* session = new Session();
  return *session;
}

void Session::configure(const SessionOptions& options) {
  std::lock_guard lock(mutex_);
  if (!devices_.empty()) {
    if (options.config != options_.config || options.mode != options_.mode)
      throw std::logic_error(fmt::format(
          "npusim is already running config '{}' in {} mode; choose the chip before the first use of the device",
          options_.config, mode_name(options_.mode)));
    return;
  }
  options_ = options;
  configured_ = true;
}

void Session::set_default_recording(bool enabled) {
  std::lock_guard lock(mutex_);
  default_recording_ = enabled;
}

void Session::set_default_config_dirs(std::vector<std::filesystem::path> dirs) {
  std::lock_guard lock(mutex_);
  default_config_dirs_ = std::move(dirs);
}

const SessionOptions& Session::options() {
  std::lock_guard lock(mutex_);
  if (!configured_) {
    SessionOptions defaults;
    defaults.config_dirs = default_config_dirs_;
    options_ = options_from_environment(defaults);  // a bad NPUSIM_MODE raises here, at first use
    configured_ = true;
  }
  return options_;
}

int Session::device_count() {
  {
    std::lock_guard lock(mutex_);
    if (!devices_.empty()) return static_cast<int>(devices_.size());
  }
  const SessionOptions chosen = options();
  // Read from the configuration without opening the devices, so npusim.init may still choose another chip.
  return static_cast<int>(config::load_config(chosen.config, chosen.config_dirs).system_devices);
}

bool Session::devices_open() {
  std::lock_guard lock(mutex_);
  return !devices_.empty();
}

Device& Session::device(int index) {
  if (in_bad_fork())
    throw std::runtime_error(
        "npusim cannot be used in a process forked after its parent opened the npusim devices (their threads do not "
        "survive fork); use multiprocessing's 'spawn' or 'forkserver' start method, or first use npusim after forking");
  open_devices();
  std::lock_guard lock(mutex_);
  if (index < 0 || index >= static_cast<int>(devices_.size()))
    throw std::out_of_range(fmt::format("npusim device {} does not exist; there {} {}", index,
                                        devices_.size() == 1 ? "is" : "are", devices_.size()));
  return *devices_[index];
}

void Session::open_devices() {
  const SessionOptions& chosen = options();
  std::lock_guard lock(mutex_);
  if (devices_.empty()) {
    config::ChipConfig config = config::load_config(chosen.config, chosen.config_dirs);
    if (const char* watchdog = std::getenv("NPUSIM_WATCHDOG"); watchdog && *watchdog) {
      char* end = nullptr;
      const long long budget = std::strtoll(watchdog, &end, 10);
      if (*end != '\0' || budget < 1)
        throw std::invalid_argument(fmt::format("NPUSIM_WATCHDOG: '{}' is not a positive instruction count", watchdog));
      config.runtime_watchdog_instructions = budget;
    }
    devices_ = Device::open_devices(config, chosen.mode, static_cast<int>(config.system_devices));
    for (auto& device : devices_) device->set_recording(default_recording_);
    // A program may exit with work still queued or running on the device thread: nobody can read its results any
    // more, so it is abandoned (an exit does not wait for a long queue), and the device thread comes to rest before
    // the exit handlers registered earlier (the simulation kernel's among them) tear down what it uses.
    std::atexit([] {
      if (in_bad_fork()) return;
      for (auto& device : Session::instance().devices_) device->abandon_work();
      for (auto& device : Session::instance().devices_) device->wait_idle();
    });
    pthread_atfork(nullptr, nullptr, [] { forked_after_open.store(true); });
  }
}

}  // namespace npusim::runtime
