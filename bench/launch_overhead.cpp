// Launch overhead of an empty kernel (a lone `halt`):
//  - functional mode, host time: how long Device::launch takes to return, and the sustained time per launch until
//    the device has run them all (submission, device thread, firmware, completion), against the cost of handing one
//    task to another host thread and back measured in the same run (the floor for any asynchronous runtime);
//  - timed mode: the simulated command-processor cycles per launch (firmware instructions around the kernel).
// Usage: npusim-bench-launch [launches]
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "npusim/isa/assembler.h"
#include "npusim/runtime/device.h"

using namespace npusim;
using Clock = std::chrono::steady_clock;

namespace {

double microseconds_since(Clock::time_point start, int count) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / count;
}

// One task handed to a waiting thread and its completion waited for, per iteration.
double thread_handoff_us(int count) {
  std::mutex mutex;
  std::condition_variable changed;
  int submitted = 0, done = 0;
  bool stop = false;
  std::thread worker([&] {
    std::unique_lock lock(mutex);
    while (true) {
      changed.wait(lock, [&] { return stop || done < submitted; });
      if (done == submitted) return;
      ++done;
      changed.notify_all();
    }
  });
  const Clock::time_point start = Clock::now();
  for (int k = 0; k < count; ++k) {
    std::unique_lock lock(mutex);
    ++submitted;
    changed.notify_all();
    changed.wait(lock, [&] { return done == submitted; });
  }
  const double result = microseconds_since(start, count);
  {
    std::lock_guard lock(mutex);
    stop = true;
  }
  changed.notify_all();
  worker.join();
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::stoi(argv[1]) : 20000;
  config::ChipConfig config;
  const uint64_t no_arguments[] = {0};

  runtime::Device functional(config, runtime::Mode::Functional);
  const uint64_t empty = functional.load_program(isa::assemble("halt\n", "empty.s"));
  functional.set_recording(false);
  for (int k = 0; k < 1000; ++k) functional.launch("empty", empty, no_arguments);  // warm up
  functional.synchronize();
  Clock::time_point start = Clock::now();
  for (int k = 0; k < launches; ++k) functional.launch("empty", empty, no_arguments);
  const double launch_returns_us = microseconds_since(start, launches);
  functional.synchronize();
  const double sustained_us = microseconds_since(start, launches);
  start = Clock::now();
  for (int k = 0; k < 2000; ++k) {
    functional.launch("empty", empty, no_arguments);
    functional.synchronize();
  }
  const double round_trip_us = microseconds_since(start, 2000);
  const double handoff_us = thread_handoff_us(20000);

  runtime::Device timed(config, runtime::Mode::Timed);
  const uint64_t timed_empty = timed.load_program(isa::assemble("halt\n", "empty.s"));
  const int timed_launches = 1000;
  for (int k = 0; k < timed_launches; ++k) timed.launch("empty", timed_empty, no_arguments);
  const std::vector<runtime::CommandRecord> records = timed.take_records();
  uint64_t firmware_cycles = 0, kernel_cycles = 0;
  for (const runtime::CommandRecord& record : records) {
    firmware_cycles += record.device_cycles - record.kernel_cycles;
    kernel_cycles += record.kernel_cycles;
  }
  const double span =
      static_cast<double>(records.back().start_cycle + records.back().device_cycles - records.front().start_cycle);

  fmt::print("launch overhead of an empty kernel, config '{}' ({} launches)\n", config.name, launches);
  fmt::print("  functional, host time per launch call (asynchronous):  {:8.2f} us\n", launch_returns_us);
  fmt::print("  functional, sustained per launch until all have run:   {:8.2f} us\n", sustained_us);
  fmt::print("  functional, launch + synchronize, one at a time:       {:8.2f} us\n", round_trip_us);
  fmt::print("  baseline: one task handed to another host thread and back: {:5.2f} us\n", handoff_us);
  fmt::print("  ratios to the baseline: launch call {:.2f}, sustained {:.2f}, one at a time {:.2f}\n",
             launch_returns_us / handoff_us, sustained_us / handoff_us, round_trip_us / handoff_us);
  fmt::print("  timed, command-processor cycles per launch (device - kernel): {:.1f}\n",
             static_cast<double>(firmware_cycles) / timed_launches);
  fmt::print("  timed, kernel cycles per empty kernel: {:.1f}; device cycles between launches: {:.1f}\n",
             static_cast<double>(kernel_cycles) / timed_launches, span / timed_launches);
  return 0;
}
