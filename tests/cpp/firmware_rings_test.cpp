// The command-processor firmware on its own, on the emulator and on the SystemC model: the test writes commands into
// the rings itself and rings the doorbell once, so what the firmware does with a batch (the order it completes
// commands in across rings, event waits, wrap-around) is deterministic and checked exactly.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>

#include "npusim/emulator/functional_chip.h"
#include "npusim/firmware/ring_abi.h"
#include "npusim/isa/assembler.h"
#include "npusim/runtime/device.h"
#include "npusim/sim/timed_chip.h"
#include "test_kernels.h"

namespace npusim {
namespace {

namespace abi = firmware;

// A chip with the firmware booted, and the host's half of the ring protocol written plainly.
class FirmwareHarness {
 public:
  explicit FirmwareHarness(runtime::Mode mode) {
    config::ChipConfig config;
    config.chip_cores = 2;
    config.dram_capacity_mib = 64;
    chip_ = mode == runtime::Mode::Timed ? std::move(sim::make_timed_chips(config, 1).front())
                                         : std::make_unique<emulator::FunctionalChip>(config);
    memory().write(abi::FIRMWARE_BASE, abi::firmware_image(), abi::firmware_image_words() * sizeof(uint64_t));
    chip_->boot(abi::FIRMWARE_BASE);
  }

  // Empty rings and completion queue and the firmware started again, as the runtime does after a firmware fault.
  void reboot() {
    memory().fill(abi::RING_BASE, 0, abi::RING_COUNT << abi::RING_SHIFT);
    memory().fill(abi::COMPLETION_BASE, 0,
                  abi::COMPLETION_ENTRIES + (abi::COMPLETION_CAPACITY << abi::COMPLETION_SHIFT));
    pushed_ = seen_ = 0;
    chip_->boot(abi::FIRMWARE_BASE);
  }

  emulator::DeviceMemory& memory() { return chip_->memory(); }
  emulator::Chip& chip() { return *chip_; }

  // Appends a command to `ring`; its sequence number is the count of commands pushed so far.
  uint64_t push(int ring, uint64_t kind, uint64_t arg0 = 0, uint64_t arg1 = 0, uint64_t arg2 = 0) {
    const uint64_t header = abi::RING_BASE + (static_cast<uint64_t>(ring) << abi::RING_SHIFT);
    uint64_t tail = 0;
    memory().read(header + abi::RING_TAIL, &tail, sizeof tail);
    const abi::CommandSlot slot{kind, arg0, arg1, arg2, ++pushed_, {}};
    memory().write(header + abi::RING_SLOTS + (tail % abi::RING_CAPACITY) * sizeof slot, &slot, sizeof slot);
    ++tail;
    memory().write(header + abi::RING_TAIL, &tail, sizeof tail);
    memory().write(abi::COMPLETION_BASE + abi::COMPLETION_SUBMITTED, &pushed_, sizeof pushed_);
    return pushed_;
  }

  // Rings the doorbell and returns the completion entries the firmware wrote since the last call.
  std::vector<abi::CompletionEntry> run() {
    chip_->ring_doorbell();
    uint64_t tail = 0;
    memory().read(abi::COMPLETION_BASE + abi::COMPLETION_TAIL, &tail, sizeof tail);
    std::vector<abi::CompletionEntry> entries;
    for (; seen_ < tail; ++seen_) {
      abi::CompletionEntry entry;
      memory().read(abi::COMPLETION_BASE + abi::COMPLETION_ENTRIES +
                        ((seen_ % abi::COMPLETION_CAPACITY) << abi::COMPLETION_SHIFT),
                    &entry, sizeof entry);
      entries.push_back(entry);
    }
    return entries;
  }

  uint64_t load(const std::string& source) {
    const std::vector<uint64_t> words = isa::assemble(source, "kernel.s");
    const uint64_t address = next_free_;
    memory().write(address, words.data(), words.size() * sizeof(uint64_t));
    next_free_ += (words.size() * sizeof(uint64_t) + 255) / 256 * 256;
    return address;
  }

  uint64_t read_word(uint64_t address) {
    uint64_t value = 0;
    memory().read(address, &value, sizeof value);
    return value;
  }
  void write_word(uint64_t address, uint64_t value) { memory().write(address, &value, sizeof value); }

 private:
  std::unique_ptr<emulator::Chip> chip_;
  uint64_t pushed_ = 0, seen_ = 0;
  uint64_t next_free_ = abi::HEAP_BASE;
};

std::vector<uint64_t> sequences(const std::vector<abi::CompletionEntry>& entries) {
  std::vector<uint64_t> order;
  for (const auto& entry : entries) order.push_back(entry.sequence);
  return order;
}

// Where the tests keep their data, the kernels' argument blocks (each kernel's r1) and their event.
constexpr uint64_t kData = 0x200000;       // test data, well above the programs
constexpr uint64_t kArguments = 0x300000;  // argument blocks
constexpr uint64_t kEvent = abi::EVENT_BASE;

using test_kernels::kAddAfterSpin;

class FirmwareRings : public testing::TestWithParam<runtime::Mode> {};

TEST_P(FirmwareRings, RunsEveryCommandKind) {
  FirmwareHarness device(GetParam());
  std::vector<uint8_t> host(1000), back(1000, 0);
  std::iota(host.begin(), host.end(), 7);
  const uint64_t program = device.load(kAddAfterSpin);
  device.write_word(kArguments, kData + 4096);
  device.write_word(kArguments + 8, 5);
  device.write_word(kArguments + 16, 0);
  device.write_word(kData + 4096, 10);

  device.push(0, abi::COMMAND_COPY_H2D, kData + 1, reinterpret_cast<uint64_t>(host.data()), host.size());
  device.push(0, abi::COMMAND_COPY_D2D, kData + 2001, kData + 1, host.size());
  device.push(0, abi::COMMAND_COPY_D2H, reinterpret_cast<uint64_t>(back.data()), kData + 2001, back.size());
  device.push(0, abi::COMMAND_LAUNCH, program, kArguments, 0b11);  // both cores add 5
  device.push(0, abi::COMMAND_EVENT_RECORD, kEvent, 3);
  device.push(0, abi::COMMAND_EVENT_WAIT, kEvent, 3);
  device.push(0, abi::COMMAND_FENCE);
  device.push(0, 99);
  const auto entries = device.run();

  EXPECT_EQ(sequences(entries), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(back, host);
  EXPECT_EQ(device.read_word(kData + 4096), 20u);
  EXPECT_EQ(device.read_word(kEvent + abi::EVENT_VALUE), 3u);
  for (size_t k = 0; k + 1 < entries.size(); ++k) EXPECT_EQ(entries[k].status, 0u) << "command " << k + 1;
  EXPECT_EQ(entries.back().status, abi::STATUS_UNKNOWN_COMMAND);
  const auto launches = device.chip().take_launch_records();
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].core_mask, 0b11u);
  if (GetParam() == runtime::Mode::Timed) {
    // Simulated time runs forward through the batch: each command starts after the one before ended, and the event
    // holds the cycle the firmware recorded it at, between its command's start and end.
    for (size_t k = 0; k < entries.size(); ++k) {
      EXPECT_LT(entries[k].start_cycle, entries[k].end_cycle) << "command " << k + 1;
      if (k > 0) EXPECT_LE(entries[k - 1].end_cycle, entries[k].start_cycle) << "command " << k + 1;
    }
    const uint64_t recorded = device.read_word(kEvent + abi::EVENT_CYCLE);
    EXPECT_GE(recorded, entries[4].start_cycle);
    EXPECT_LE(recorded, entries[4].end_cycle);
  }
}

TEST_P(FirmwareRings, RingsWrapAroundManyTimes) {
  FirmwareHarness device(GetParam());
  const uint64_t program = device.load(kAddAfterSpin);
  for (int ring = 0; ring < 3; ++ring) {
    device.write_word(kArguments + 64 * ring, kData + 8 * ring);
    device.write_word(kArguments + 64 * ring + 8, ring + 1);
    device.write_word(kArguments + 64 * ring + 16, 0);
  }
  const int batches = 5;
  for (int batch = 0; batch < batches; ++batch) {
    for (int ring = 0; ring < 3; ++ring)
      for (uint64_t k = 0; k < abi::RING_CAPACITY; ++k)
        device.push(ring, abi::COMMAND_LAUNCH, program, kArguments + 64 * ring, 1);
    ASSERT_EQ(device.run().size(), 3 * abi::RING_CAPACITY);
  }
  for (int ring = 0; ring < 3; ++ring)
    EXPECT_EQ(device.read_word(kData + 8 * ring), static_cast<uint64_t>(batches * abi::RING_CAPACITY * (ring + 1)));
}

// Ring 1 waits for an event that ring 2 records after a long kernel; ring 3's short command, written last, completes
// before ring 1's. Ring 1's kernel then sees ring 2's result.
TEST_P(FirmwareRings, EventWaitsAcrossRingsCompleteOutOfOrder) {
  FirmwareHarness device(GetParam());
  const uint64_t program = device.load(kAddAfterSpin);
  device.write_word(kArguments, kData);  // ring 2's kernel: data += 100 after a spin
  device.write_word(kArguments + 8, 100);
  device.write_word(kArguments + 16, 1000);
  device.write_word(kArguments + 64, kData);  // ring 1's kernel: data += 1
  device.write_word(kArguments + 72, 1);
  device.write_word(kArguments + 80, 0);
  device.write_word(kArguments + 128, kData + 8);  // ring 3's kernel: its own word += 7
  device.write_word(kArguments + 136, 7);
  device.write_word(kArguments + 144, 0);

  const uint64_t long_kernel = device.push(2, abi::COMMAND_LAUNCH, program, kArguments, 1);
  const uint64_t record = device.push(2, abi::COMMAND_EVENT_RECORD, kEvent, 1);
  const uint64_t wait = device.push(1, abi::COMMAND_EVENT_WAIT, kEvent, 1);
  const uint64_t dependent = device.push(1, abi::COMMAND_LAUNCH, program, kArguments + 64, 1);
  const uint64_t independent = device.push(3, abi::COMMAND_LAUNCH, program, kArguments + 128, 1);
  // Pass 1: ring 1 waits (skipped), ring 2 runs its kernel, ring 3 its kernel. Pass 2: ring 1 still waits, ring 2
  // records. Pass 3: ring 1's wait is over, then its kernel in pass 4.
  EXPECT_EQ(sequences(device.run()), (std::vector<uint64_t>{long_kernel, independent, record, wait, dependent}));
  EXPECT_EQ(device.read_word(kData), 101u);
  EXPECT_EQ(device.read_word(kData + 8), 7u);
}

TEST_P(FirmwareRings, AWaitForAnEventNotYetRecordedWaitsForALaterDoorbell) {
  FirmwareHarness device(GetParam());
  const uint64_t wait = device.push(4, abi::COMMAND_EVENT_WAIT, kEvent + 16, 2);
  EXPECT_TRUE(device.run().empty());  // the firmware sleeps with the wait pending
  device.push(5, abi::COMMAND_EVENT_RECORD, kEvent + 16, 1);
  EXPECT_EQ(device.run().size(), 1u);  // value 1 is not enough
  const uint64_t record = device.push(5, abi::COMMAND_EVENT_RECORD, kEvent + 16, 2);
  EXPECT_EQ(sequences(device.run()), (std::vector<uint64_t>{record, wait}));
}

TEST_P(FirmwareRings, ATrappedKernelCompletesWithItsCoreAndTheRingGoesOn) {
  FirmwareHarness device(GetParam());
  // Core 1 loads from a misaligned address; core 0 halts.
  const uint64_t trapping = device.load("csrr r3, coreid\n beq r3, r0, ok\n ld r4, 3(r0)\nok:\n halt\n");
  device.push(0, abi::COMMAND_LAUNCH, trapping, kArguments, 0b11);
  device.push(0, abi::COMMAND_FENCE);
  const auto entries = device.run();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].status, 2u);  // 1 + core 1
  EXPECT_EQ(entries[1].status, 0u);
  const auto launches = device.chip().take_launch_records();
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_TRUE(launches[0].fault.has_value());
  EXPECT_EQ(launches[0].fault->core, 1);
}

// With the firmware's memory protected (as the runtime boots it), a kernel's scalar store or DMA store there traps,
// naming the address, and the firmware goes on: its rings and completions are intact.
TEST_P(FirmwareRings, AKernelStoreIntoTheCommandProcessorsMemoryTraps) {
  FirmwareHarness device(GetParam());
  device.chip().protect_below(abi::HEAP_BASE);
  const uint64_t scalar_store = device.load(fmt::format("li r2, {}\n st r2, 8(r2)\n halt\n", abi::RING_BASE));
  // A strided DMA store whose second element lands in the completion queue, its first above the heap's base.
  const uint64_t dma_store = device.load(fmt::format("li r2, {}\n li r3, 2\n dma.st.b32 r2, r0, r3, -{}\n halt\n",
                                                     abi::HEAP_BASE + 64, abi::HEAP_BASE - abi::COMPLETION_BASE));
  const uint64_t fine = device.load(fmt::format("li r2, {}\n st r2, 0(r2)\n halt\n", kData));
  device.push(0, abi::COMMAND_LAUNCH, scalar_store, kArguments, 1);
  device.push(0, abi::COMMAND_LAUNCH, dma_store, kArguments, 1);
  device.push(0, abi::COMMAND_LAUNCH, fine, kArguments, 1);
  device.push(0, abi::COMMAND_FENCE);
  const auto entries = device.run();
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].status, 1u);  // 1 + core 0
  EXPECT_EQ(entries[1].status, 1u);
  EXPECT_EQ(entries[2].status, 0u);
  EXPECT_EQ(entries[3].status, 0u);
  EXPECT_EQ(device.read_word(kData), kData);
  const auto launches = device.chip().take_launch_records();
  ASSERT_EQ(launches.size(), 3u);
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(launches[k].fault.has_value()) << k;
    EXPECT_NE(launches[k].fault->describe().find("in the command processor's memory (below 0x100000)"),
              std::string::npos)
        << launches[k].fault->describe();
  }
  EXPECT_EQ(device.read_word(abi::RING_BASE + abi::RING_TAIL), 4u);  // the store aimed at ring 0's tail
}

// Found by the ring fuzz target: an event record whose address was ring 0's header overwrote the ring's head and tail,
// after which the firmware ran stale slots and never reached the commands written next.
TEST_P(FirmwareRings, AnEventAddressOutsideTheEventTableIsRejected) {
  FirmwareHarness device(GetParam());
  device.push(0, abi::COMMAND_EVENT_RECORD, abi::RING_BASE, 999);
  device.push(0, abi::COMMAND_EVENT_WAIT, abi::FIRMWARE_BASE, 1);
  device.push(0, abi::COMMAND_EVENT_RECORD, abi::EVENT_BASE + (abi::EVENT_COUNT << abi::EVENT_SHIFT), 1);
  device.push(0, abi::COMMAND_EVENT_RECORD, kEvent, 4);
  const auto entries = device.run();
  ASSERT_EQ(entries.size(), 4u);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(entries[k].status, abi::STATUS_BAD_EVENT) << "command " << k + 1;
  EXPECT_EQ(entries[3].status, 0u);
  EXPECT_EQ(device.read_word(kEvent + abi::EVENT_VALUE), 4u);
  device.push(0, abi::COMMAND_FENCE);
  EXPECT_EQ(device.run().size(), 1u);  // the ring goes on
}

// Found by the program fuzz target: a kernel's strided store wrote over ring 0's tail and the count of submitted
// commands, and the firmware ran the ring's stale slots without end. Past its budget it now traps instead, and a boot
// makes it usable again.
TEST_P(FirmwareRings, FirmwareRunningCorruptedRingsTrapsInsteadOfHanging) {
  FirmwareHarness device(GetParam());
  device.write_word(abi::RING_BASE + abi::RING_TAIL, uint64_t{1} << 40);
  device.write_word(abi::COMPLETION_BASE + abi::COMPLETION_SUBMITTED, uint64_t{1} << 40);
  try {
    device.run();
    FAIL() << "the firmware went to sleep";
  } catch (const emulator::CommandProcessorFault& fault) {
    EXPECT_NE(std::string(fault.what()).find("watchdog: more than 16777216 firmware instructions"), std::string::npos)
        << fault.what();
  }
  device.reboot();
  const uint64_t fence = device.push(1, abi::COMMAND_FENCE);
  EXPECT_EQ(sequences(device.run()), (std::vector<uint64_t>{fence}));
}

// A boot restarts the firmware from its entry point even when it did not fail but sleeps in wfd (the timed model once
// ignored such a boot and went on with the old run's registers, so its completions went to stale slots).
TEST_P(FirmwareRings, BootingAgainRestartsASleepingFirmware) {
  FirmwareHarness device(GetParam());
  for (int k = 0; k < 3; ++k) device.push(0, abi::COMMAND_FENCE);
  ASSERT_EQ(device.run().size(), 3u);
  device.reboot();
  const uint64_t fence = device.push(1, abi::COMMAND_FENCE);
  EXPECT_EQ(sequences(device.run()), (std::vector<uint64_t>{fence}));
  EXPECT_EQ(device.read_word(abi::COMPLETION_BASE + abi::COMPLETION_TAIL), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, FirmwareRings, testing::Values(runtime::Mode::Functional, runtime::Mode::Timed),
                         [](const auto& info) { return runtime::mode_name(info.param); });

}  // namespace
}  // namespace npusim
