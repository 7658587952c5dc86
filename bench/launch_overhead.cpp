// Launch overhead of an empty kernel (a lone `halt`):
//  - functional mode, host time: how long Device::launch takes to return, and the sustained time per launch until
//    the device has run them all (submission, device thread, firmware, completion), against the cost of handing one
//    task to another host thread and back measured in the same run (the floor for any asynchronous runtime);
//  - timed mode: the simulated command-processor cycles per launch (firmware instructions around the kernel).
// Every figure is refused (exit 1) unless the device completed exactly the commands launched and the timed kernels took
// cycles. Usage: npusim-bench-launch [launches]   (default 20000; CI's smoke runs 200; the warm-up, one-at-a-time
// and timed runs use min(launches, 1000, 2000, 1000))
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
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

// Exits with a message when a run did not do the work it is timed for.
void require(bool done, const std::string& what) {
  if (done) return;
  fmt::print(stderr, "npusim-bench-launch: {}: no figure\n", what);
  std::exit(1);
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
  require(done == count, fmt::format("the worker thread ran {} of {} tasks", done, count));
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::stoi(argv[1]) : 20000;
  require(launches > 0, fmt::format("{} launches", launches));
  const int warm_up = std::min(launches, 1000), one_at_a_time = std::min(launches, 2000);
  const int timed_launches = std::min(launches, 1000);
  config::ChipConfig config;
  const uint64_t no_arguments[] = {0};

  runtime::Device functional(config, runtime::Mode::Functional);
  const uint64_t empty = functional.load_program(isa::assemble("halt\n", "empty.s"));
  functional.set_recording(false);
  for (int k = 0; k < warm_up; ++k) functional.launch("empty", empty, no_arguments);
  functional.synchronize();
  uint64_t completed = functional.progress().commands;
  Clock::time_point start = Clock::now();
  for (int k = 0; k < launches; ++k) functional.launch("empty", empty, no_arguments);
  const double launch_returns_us = microseconds_since(start, launches);
  functional.synchronize();  // the clock stops once the device has run them all
  const double sustained_us = microseconds_since(start, launches);
  require(functional.progress().commands - completed == static_cast<uint64_t>(launches),
          fmt::format("the device completed {} of {} launches", functional.progress().commands - completed, launches));
  completed = functional.progress().commands;
  start = Clock::now();
  for (int k = 0; k < one_at_a_time; ++k) {
    functional.launch("empty", empty, no_arguments);
    functional.synchronize();
  }
  const double round_trip_us = microseconds_since(start, one_at_a_time);
  require(functional.progress().commands - completed == static_cast<uint64_t>(one_at_a_time),
          fmt::format("the device completed {} of {} launches one at a time",
                      functional.progress().commands - completed, one_at_a_time));
  const double handoff_us = thread_handoff_us(launches);

  runtime::Device timed(config, runtime::Mode::Timed);
  const uint64_t timed_empty = timed.load_program(isa::assemble("halt\n", "empty.s"));
  for (int k = 0; k < timed_launches; ++k) timed.launch("empty", timed_empty, no_arguments);
  const std::vector<runtime::CommandRecord> records = timed.take_records();  // synchronises first
  require(records.size() == static_cast<size_t>(timed_launches),
          fmt::format("the timed device recorded {} of {} launches", records.size(), timed_launches));
  uint64_t firmware_cycles = 0, kernel_cycles = 0;
  for (const runtime::CommandRecord& record : records) {
    require(
        record.kernel_cycles > 0 && record.device_cycles > record.kernel_cycles,
        fmt::format("a timed launch took {} kernel and {} device cycles", record.kernel_cycles, record.device_cycles));
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
