// The host runtime's CUDA-like semantics: launches that return at once, stream order, events between streams, copies
// of every size and alignment, errors at the next synchronising call, several devices, and many host threads.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include "npusim/isa/assembler.h"
#include "npusim/runtime/device.h"
#include "npusim/runtime/wait_interrupt.h"
#include "test_kernels.h"

namespace npusim {
namespace {

config::ChipConfig test_config(int64_t dram_mib = 128) {
  config::ChipConfig config;
  config.chip_cores = 2;
  config.dram_capacity_mib = dram_mib;
  return config;
}

using test_kernels::kAddAfterSpin;

class Adder {
 public:
  explicit Adder(runtime::Device& device)
      : device_(device), program_(device.load_program(isa::assemble(kAddAfterSpin, "add.s"))) {}
  void add(uint64_t cell, uint64_t amount, uint64_t spins = 0, runtime::StreamId stream = runtime::kCurrentStream) {
    const uint64_t arguments[] = {cell, amount, spins};
    device_.launch("add", program_, arguments, 1, stream);
  }

 private:
  runtime::Device& device_;
  uint64_t program_;
};

uint64_t read_word(runtime::Device& device, uint64_t address) {
  uint64_t value = 0;
  device.copy_device_to_host(&value, address, sizeof value);
  return value;
}

void write_word(runtime::Device& device, uint64_t address, uint64_t value) {
  device.copy_host_to_device(address, &value, sizeof value);
}

TEST(Device, LaunchReturnsBeforeTheKernelHasRun) {
  runtime::Device device(test_config(), runtime::Mode::Functional);
  Adder adder(device);
  const uint64_t cell = device.allocate(8);
  write_word(device, cell, 0);
  adder.add(cell, 1, 20'000'000);  // some 60 M instructions: a good part of a second on the emulator
  EXPECT_FALSE(device.stream_done(0));
  device.synchronize();
  EXPECT_TRUE(device.stream_done(0));
  EXPECT_EQ(read_word(device, cell), 1u);
}

TEST(Device, AnUnloadedProgramRunsToTheEndAndItsSpaceIsReused) {
  runtime::Device device(test_config(), runtime::Mode::Functional);
  const std::vector<uint64_t> words = isa::assemble(kAddAfterSpin, "add.s");
  const uint64_t cell = device.allocate(8);
  write_word(device, cell, 0);
  const uint64_t program = device.load_program(words);
  const uint64_t arguments[] = {cell, 5, 200'000};
  device.launch("add", program, arguments);
  device.unload_program(program);  // waits for the launch: the kernel ran whole
  EXPECT_EQ(read_word(device, cell), 5u);
  // Loading and unloading without end fits in the code region: the freed image's space comes back.
  for (int k = 0; k < 100'000; ++k) device.unload_program(device.load_program(words));
  EXPECT_EQ(device.load_program(words), program);
  EXPECT_THROW(device.unload_program(program + 8), std::invalid_argument);
}

TEST(Device, CommandsOnOneStreamRunInOrderPastTheRingCapacity) {
  runtime::Device device(test_config(), runtime::Mode::Functional);
  Adder adder(device);
  const uint64_t cell = device.allocate(8);
  write_word(device, cell, 1);
  // A snapshot copy after every kernel makes the order visible in the results.
  const uint64_t snapshot = device.allocate(8 * 300);
  for (uint64_t k = 0; k < 300; ++k) {
    adder.add(cell, k, 0, 3);
    device.copy_device_to_device(snapshot + 8 * k, cell, 8, 3);
  }
  device.synchronize_stream(3);
  std::vector<uint64_t> snapshots(300);
  device.copy_device_to_host(snapshots.data(), snapshot, 8 * 300);
  uint64_t expected = 1;
  for (uint64_t k = 0; k < 300; ++k) {
    expected += k;
    ASSERT_EQ(snapshots[k], expected) << "after command " << k;
  }
}

TEST(Device, LaunchesFarAheadOfTheDeviceWaitForArgumentSpace) {
  // 64 MiB: a 1 MiB code region, room for 4096 argument blocks of launches not yet run.
  runtime::Device device(test_config(64), runtime::Mode::Functional);
  Adder adder(device);
  const uint64_t cell = device.allocate(8);
  write_word(device, cell, 0);
  for (int k = 0; k < 20000; ++k) adder.add(cell, 1);
  EXPECT_EQ(read_word(device, cell), 20000u);
}

TEST(Device, AnEventOrdersAStreamAfterAnother) {
  runtime::Device device(test_config(), runtime::Mode::Functional);
  Adder adder(device);
  const uint64_t cell = device.allocate(8), copy = device.allocate(8);
  write_word(device, cell, 0);
  const int event = device.create_event();
  EXPECT_TRUE(device.event_done(event));  // never recorded: complete, as in CUDA
  device.wait_event(event, 2);            // and waiting for it waits for nothing
  adder.add(cell, 100, 2'000'000, 1);     // a long kernel on stream 1
  device.record_event(event, 1);
  device.wait_event(event, 2);
  device.copy_device_to_device(copy, cell, 8, 2);  // stream 2 copies only after stream 1's kernel
  device.synchronize_stream(2);
  EXPECT_TRUE(device.event_done(event));
  EXPECT_EQ(read_word(device, copy), 100u);
  device.destroy_event(event);
  EXPECT_EQ(device.create_event(), event);  // its slot is reused
}

TEST(Device, SynchronizingAStreamWaitsForItAlone) {
  runtime::Device device(test_config(), runtime::Mode::Functional);
  Adder adder(device);
  const uint64_t cell = device.allocate(16);
  device.copy_host_to_device(cell, std::array<uint64_t, 2>{}.data(), 16);
  const int started = device.create_event();
  adder.add(cell + 8, 1, 0, 5);
  device.record_event(started, 5);
  device.synchronize_event(started);
  EXPECT_TRUE(device.stream_done(5));
  EXPECT_EQ(read_word(device, cell + 8), 1u);
}

TEST(Device, CopiesOfEverySizeAndAlignment) {
  runtime::Device device(test_config(256), runtime::Mode::Functional);
  const uint64_t largest = uint64_t{64} << 20;
  const uint64_t a = device.allocate(largest + 512), b = device.allocate(largest + 512);
  std::vector<uint8_t> data(largest + 3), back;
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k * 2654435761u >> 13);
  for (const uint64_t bytes :
       {uint64_t{1}, uint64_t{3}, uint64_t{8}, uint64_t{255}, uint64_t{4097}, (uint64_t{1} << 20) + 13, largest}) {
    for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{129}}) {
      const uint8_t* source = data.data() + (offset % 3);
      device.copy_host_to_device(a + offset, source, bytes);
      device.copy_device_to_device(b + (offset ^ 5), a + offset, bytes);
      back.assign(bytes, 0);
      device.copy_device_to_host(back.data(), b + (offset ^ 5), bytes);
      ASSERT_EQ(0, std::memcmp(back.data(), source, bytes)) << bytes << " bytes at offset " << offset;
      if (bytes == largest) break;  // one 64 MiB round is enough
    }
  }
}

TEST(Device, ATrapOnOneStreamLeavesTheOthersAndTheDeviceWorking) {
  runtime::Device device(test_config(), runtime::Mode::Functional);
  Adder adder(device);
  const uint64_t cell = device.allocate(8);
  write_word(device, cell, 0);
  const uint64_t trapping = device.load_program(isa::assemble("ld r2, 3(r0)\nhalt\n", "trap.s"));
  const uint64_t no_arguments[] = {0};
  device.launch("trapping", trapping, no_arguments, 1, 1);
  for (int k = 0; k < 10; ++k) adder.add(cell, 1, 0, 2);
  try {
    device.synchronize();
    FAIL() << "the trap was not reported";
  } catch (const runtime::DeviceError& error) {
    EXPECT_NE(std::string(error.what()).find("kernel 'trapping' failed: core 0"), std::string::npos) << error.what();
  }
  EXPECT_EQ(read_word(device, cell), 10u);  // stream 2's work all ran
  adder.add(cell, 5);
  EXPECT_EQ(read_word(device, cell), 15u);
}

TEST(Device, LaunchBlockingReportsATrapAtTheLaunch) {
  runtime::Device device(test_config(), runtime::Mode::Functional);
  const uint64_t trapping = device.load_program(isa::assemble("ld r2, 3(r0)\nhalt\n", "trap.s"));
  const uint64_t no_arguments[] = {0};
  setenv("NPUSIM_LAUNCH_BLOCKING", "1", 1);
  EXPECT_THROW(device.launch("trapping", trapping, no_arguments), runtime::DeviceError);
  unsetenv("NPUSIM_LAUNCH_BLOCKING");
  device.launch("trapping", trapping, no_arguments);  // asynchronous again
  EXPECT_THROW(device.synchronize(), runtime::DeviceError);
}

TEST(Device, MemoryFreedWhileAnotherStreamRunsIsReusedOnlyAfterThatWork) {
  runtime::Device device(test_config(), runtime::Mode::Functional);
  Adder adder(device);
  const uint64_t a = device.allocate(256);
  write_word(device, a, 0);
  device.free(device.allocate(256));  // one stream so far: a freed block is reusable at once
  const uint64_t reused = device.allocate(256);
  device.free(reused);
  adder.add(a, 1, 0, 2);  // a second stream runs commands
  device.synchronize();
  // Stream 1 is busy with a block; another stream must not be handed that block while the work is pending.
  const uint64_t busy = device.allocate(256);
  EXPECT_EQ(busy, reused);  // first fit
  adder.add(busy, 1, 20'000'000, 1);
  device.free(busy);
  const uint64_t other = device.allocate(256);
  EXPECT_NE(other, busy);
  EXPECT_THROW(device.free(busy), std::invalid_argument);  // freed twice
  device.synchronize();
  EXPECT_EQ(device.allocate(256), busy);  // the work is done: the block is free again
  device.free(other);
}

class Devices : public testing::TestWithParam<runtime::Mode> {};

TEST_P(Devices, SeveralDevicesHaveTheirOwnMemoryAndRunTogether) {
  auto devices = runtime::Device::open_devices(test_config(), GetParam(), 4);
  std::vector<uint64_t> cells;
  std::vector<std::unique_ptr<Adder>> adders;
  for (auto& device : devices) {
    cells.push_back(device->allocate(8));
    write_word(*device, cells.back(), 0);
    adders.push_back(std::make_unique<Adder>(*device));
  }
  ASSERT_EQ(cells[0], cells[3]);  // the same address on each device, different memory
  for (int round = 0; round < 20; ++round)
    for (size_t index = 0; index < devices.size(); ++index) adders[index]->add(cells[index], index + 1, 1000);
  for (size_t index = 0; index < devices.size(); ++index) {
    EXPECT_EQ(read_word(*devices[index], cells[index]), 20 * (index + 1)) << "device " << index;
    if (GetParam() == runtime::Mode::Timed) EXPECT_GT(devices[index]->elapsed_cycles(), 0u);
  }
}

// A device whose first kernel would spin for days (only a stop can end it: the watchdog allows it), with 100 more
// queued behind it.
struct StuckDevice {
  explicit StuckDevice(runtime::Mode mode) {
    config::ChipConfig config = test_config();
    config.runtime_watchdog_instructions = 1'000'000'000'000'000;
    devices = runtime::Device::open_devices(config, mode, 1);
    adder = std::make_unique<Adder>(device());
    cell = device().allocate(8);
    write_word(device(), cell, 0);
    adder->add(cell, 1, uint64_t{1} << 50);
    for (int k = 0; k < 100; ++k) adder->add(cell, 1);
  }
  runtime::Device& device() { return *devices.front(); }
  // The work given up is reported once, by the next synchronising call; then the device runs new work.
  void expect_abandoned_and_usable() {
    try {
      device().synchronize();
      ADD_FAILURE() << "the abandoned work was not reported";
    } catch (const runtime::DeviceError& error) {
      EXPECT_NE(std::string(error.what()).find("101 unfinished commands were abandoned"), std::string::npos)
          << error.what();
    }
    device().synchronize();
    write_word(device(), cell, 7);
    adder->add(cell, 5);
    EXPECT_EQ(read_word(device(), cell), 12u);
  }
  std::vector<std::unique_ptr<runtime::Device>> devices;
  std::unique_ptr<Adder> adder;
  uint64_t cell = 0;
};

struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST_P(Devices, AnInterruptedWaitAbandonsTheWorkAndTheDeviceStaysUsable) {
  StuckDevice stuck(GetParam());
  int checks = 0;
  runtime::set_wait_interrupt_check([&] {
    if (++checks == 3) throw Interrupted("Ctrl-C");  // what Python's check throws on a pending KeyboardInterrupt
  });
  EXPECT_THROW(stuck.device().synchronize(), Interrupted);
  runtime::set_wait_interrupt_check(nullptr);
  EXPECT_EQ(checks, 3);
  stuck.expect_abandoned_and_usable();
}

TEST_P(Devices, AbandoningWorkStopsTheRunningKernel) {  // as process exit does
  StuckDevice stuck(GetParam());
  stuck.device().abandon_work();
  stuck.expect_abandoned_and_usable();
}

// Host threads each with a device and streams of their own, all launching at once: two devices that share a device
// thread (as timed devices must) and, in functional mode, two more with device threads of their own. Each thread
// launches on two streams joined by an event, copies, synchronises and checks its own results.
TEST_P(Devices, ThreadsLaunchOnTheirOwnDevicesAndStreamsAtOnce) {
  auto devices = runtime::Device::open_devices(test_config(), GetParam(), 2);
  if (GetParam() == runtime::Mode::Functional)
    for (int k = 0; k < 2; ++k) devices.push_back(std::make_unique<runtime::Device>(test_config(), GetParam()));
  constexpr uint64_t kLaunches = 200;
  std::vector<std::string> failures(devices.size());
  std::vector<std::thread> threads;
  for (size_t index = 0; index < devices.size(); ++index) {
    threads.emplace_back([&, index] {
      runtime::Device& device = *devices[index];
      Adder adder(device);
      const runtime::StreamId first = 1 + 2 * index, second = 2 + 2 * index;
      device.set_current_stream(first);
      const uint64_t cells = device.allocate(16);
      device.copy_host_to_device(cells, std::array<uint64_t, 2>{index, 0}.data(), 16);
      for (uint64_t k = 0; k < kLaunches; ++k) adder.add(cells, k, k % 7, first);
      const int event = device.create_event();
      device.record_event(event, first);
      device.wait_event(event, second);
      device.copy_device_to_device(cells + 8, cells, 8, second);
      adder.add(cells + 8, 1, 0, second);
      device.synchronize_stream(second);
      device.destroy_event(event);
      const uint64_t expected = index + kLaunches * (kLaunches - 1) / 2;
      const uint64_t first_cell = read_word(device, cells), second_cell = read_word(device, cells + 8);
      if (first_cell != expected || second_cell != expected + 1)
        failures[index] = fmt::format("device {}: {} and {}, expected {} and {}", index, first_cell, second_cell,
                                      expected, expected + 1);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& failure : failures) EXPECT_EQ(failure, "");
}

INSTANTIATE_TEST_SUITE_P(Modes, Devices, testing::Values(runtime::Mode::Functional, runtime::Mode::Timed),
                         [](const auto& info) { return runtime::mode_name(info.param); });

// Thousands of small launches from several host threads, each on streams of its own, with events between them; then
// every result is checked.
TEST(Device, ManyThreadsOnSeparateStreamsStress) {
  runtime::Device device(test_config(), runtime::Mode::Functional);
  Adder adder(device);
  constexpr int kThreads = 4, kLaunches = 1000, kCells = 8;
  const uint64_t cells = device.allocate(8 * kThreads * kCells);
  device.copy_host_to_device(cells, std::vector<uint64_t>(kThreads * kCells, 0).data(), 8 * kThreads * kCells);
  std::vector<uint64_t> totals(kThreads, 0);
  const uint64_t handoff = device.allocate(8 * kThreads);
  std::vector<std::thread> threads;
  for (int thread = 0; thread < kThreads; ++thread) {
    threads.emplace_back([&, thread] {
      device.set_current_stream(10 + 2 * thread);
      const uint64_t mine = cells + 8 * kCells * thread;
      for (uint64_t k = 0; k < kLaunches; ++k) adder.add(mine + 8 * (k % kCells), k);
      // Hand a copy of cell 0 to a second stream of this thread through an event.
      const int event = device.create_event();
      device.record_event(event, runtime::kCurrentStream);
      device.wait_event(event, 11 + 2 * thread);
      device.copy_device_to_device(handoff + 8 * thread, mine, 8, 11 + 2 * thread);
      device.synchronize_stream(11 + 2 * thread);
      device.destroy_event(event);
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<uint64_t> values(kThreads * kCells), handed(kThreads);
  device.copy_device_to_host(values.data(), cells, 8 * values.size());
  device.copy_device_to_host(handed.data(), handoff, 8 * handed.size());
  for (int thread = 0; thread < kThreads; ++thread) {
    for (int cell = 0; cell < kCells; ++cell) {
      uint64_t expected = 0;
      for (uint64_t k = cell; k < kLaunches; k += kCells) expected += k;
      EXPECT_EQ(values[thread * kCells + cell], expected) << "thread " << thread << " cell " << cell;
    }
    EXPECT_EQ(handed[thread], values[thread * kCells]) << "thread " << thread;
  }
  EXPECT_EQ(device.take_records().size(), static_cast<size_t>(kThreads * (kLaunches + 1) + 3));
}

}  // namespace
}  // namespace npusim
