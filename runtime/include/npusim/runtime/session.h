// The process-wide set of simulated devices, created on first use from the chosen configuration and mode
// (NPUSIM_CONFIG / NPUSIM_MODE, or configure() before first use).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "npusim/runtime/device.h"

namespace npusim::runtime {

struct SessionOptions {
  std::string config = "default";  // preset name or YAML path
  Mode mode = Mode::Functional;
  std::vector<std::filesystem::path> config_dirs;  // where preset names are looked up
};

// NPUSIM_CONFIG and NPUSIM_MODE over the given defaults; a bad NPUSIM_MODE raises std::invalid_argument naming it.
SessionOptions options_from_environment(SessionOptions defaults);

class Session {
 public:
  static Session& instance();

  // Chooses the chip before first use; afterwards only the same choice is accepted (std::logic_error otherwise).
  void configure(const SessionOptions& options);
  // Where preset names are looked up when the choice comes from the environment at first use.
  void set_default_config_dirs(std::vector<std::filesystem::path> dirs);
  // Whether devices created from now on start with command recording on (Device::set_recording).
  void set_default_recording(bool enabled);
  const SessionOptions& options();
  // All devices, created together on first use (SystemC elaborates one design per process). In a child process
  // forked after they were created, throws std::runtime_error: their threads do not survive fork.
  Device& device(int index);
  // Whether this process was forked from one whose devices were open: it can use none of them, and must not wait for
  // or free anything on them.
  static bool in_bad_fork();
  int device_count();   // the configuration's system.devices; opens no device
  bool devices_open();  // whether the devices have been created (torch.npusim.is_initialized)

 private:
  Session() = default;
  void open_devices();
  mutable std::mutex mutex_;
  bool configured_ = false;
  SessionOptions options_;
  std::vector<std::filesystem::path> default_config_dirs_;
  bool default_recording_ = true;
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace npusim::runtime
