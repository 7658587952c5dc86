// The command-processor firmware driven through the host runtime on the emulator: copies, launches, ring
// wrap-around, errors, memory accounting, and a device that stays usable after failures.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>

#include "npusim/firmware/ring_abi.h"
#include "npusim/isa/assembler.h"
#include "npusim/runtime/device.h"

namespace npusim {
namespace {

config::ChipConfig small_config() {
  config::ChipConfig config;
  config.dram_capacity_mib = 128;
  return config;
}

TEST(Firmware, CopiesHostToDeviceToDeviceToHost) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  std::vector<uint8_t> source(100003);
  std::iota(source.begin(), source.end(), 0);
  const uint64_t a = device.allocate(source.size()), b = device.allocate(source.size());
  device.copy_host_to_device(a, source.data(), source.size());
  device.copy_device_to_device(b, a, source.size());
  std::vector<uint8_t> back(source.size());
  device.copy_device_to_host(back.data(), b, back.size());
  EXPECT_EQ(back, source);
  const auto records = device.take_records();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].name, "copy_h2d");
  EXPECT_EQ(records[2].bytes, source.size());
}

TEST(Firmware, LaunchPassesArgumentsInR1) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  const uint64_t out = device.allocate(8);
  const uint64_t program =
      device.load_program(isa::assemble("ld r2, 0(r1)\n ld r3, 8(r1)\n st r3, 0(r2)\n halt\n", "k.s"));
  const uint64_t arguments[] = {out, 0xfeedface};
  device.launch("store_argument", program, arguments);
  uint64_t value = 0;
  device.copy_device_to_host(&value, out, 8);
  EXPECT_EQ(value, 0xfeedfaceu);
  const auto records = device.take_records();
  EXPECT_EQ(records[0].name, "store_argument");
  EXPECT_EQ(records[0].instructions(), 4u);
  EXPECT_EQ(records[0].stats.instructions_scalar, 4u);
  EXPECT_EQ(records[0].stats.dram_bytes_read, 16u);
  EXPECT_EQ(records[0].stats.dram_bytes_written, 8u);
}

TEST(Firmware, RingWrapsAroundManyTimes) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  const uint64_t cell = device.allocate(8);
  for (uint64_t k = 0; k < 3 * firmware::RING_CAPACITY + 5; ++k) {
    device.copy_host_to_device(cell, &k, 8);
    uint64_t back = 0;
    device.copy_device_to_host(&back, cell, 8);
    ASSERT_EQ(back, k);
  }
}

TEST(Firmware, KernelFaultSurfacesAtTheNextSynchronizeNamingKernelCorePcAndInstruction) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  const uint64_t program = device.load_program(isa::assemble("li r2, 3\n ld r3, 0(r2)\n halt\n", "k.s"));
  const uint64_t arguments[] = {0};
  device.launch("misaligned", program, arguments);  // returns at once; the kernel fails on the device thread
  try {
    device.synchronize();
    FAIL() << "no error";
  } catch (const runtime::DeviceError& error) {
    EXPECT_EQ(std::string(error.what()),
              fmt::format("npusim kernel 'misaligned' failed: core 0, pc 0x{:x} (ld r3, 0(r2)): misaligned 8-byte "
                          "access at 0x3",
                          program + 8));
  }
  EXPECT_NO_THROW(device.synchronize());  // reported once
  // The device keeps working.
  const uint64_t cell = device.allocate(8);
  const uint64_t value = 42;
  device.copy_host_to_device(cell, &value, 8);
  uint64_t back = 0;
  device.copy_device_to_host(&back, cell, 8);
  EXPECT_EQ(back, 42u);
}

TEST(Firmware, BadCopyAddressFaultsTheFirmwareWhichIsRebooted) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  uint64_t value = 1;
  EXPECT_THROW(device.copy_host_to_device(uint64_t{1} << 40, &value, 8), runtime::DeviceError);
  const uint64_t cell = device.allocate(8);
  device.copy_host_to_device(cell, &value, 8);
  uint64_t back = 0;
  device.copy_device_to_host(&back, cell, 8);
  EXPECT_EQ(back, 1u);
}

TEST(DeviceAllocator, OutOfMemoryNamesTheFigures) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  try {
    device.allocate(uint64_t{1} << 30);
    FAIL();
  } catch (const runtime::OutOfMemory& error) {
    EXPECT_NE(std::string(error.what()).find("tried to allocate 1073741824 bytes"), std::string::npos);
  }
}

TEST(DeviceAllocator, FullHeapAndHugeRequestsRaiseOutOfMemory) {
  runtime::DeviceAllocator allocator(0x1000, 0x1000 + 4096);
  const uint64_t all = allocator.allocate(4096);
  EXPECT_THROW(allocator.allocate(1), runtime::OutOfMemory);  // no free range left at all
  EXPECT_THROW(allocator.allocate(UINT64_MAX - 10), runtime::OutOfMemory);
  allocator.free(all);
  EXPECT_EQ(allocator.allocate(100), all);
}

// Argument blocks come in submission order whatever finished when: the addresses are the same for any order of
// releases, a block whose space is still held waits (0) and then gets the address it would have had, and a block
// that would cross the ring's end starts the next lap.
TEST(ArgumentRing, AddressesDependOnTheAllocationsAloneNotOnWhatFinished) {
  runtime::ArgumentRing ring(0x1000, 256);
  EXPECT_EQ(ring.allocate(8), 0x1000u);
  EXPECT_EQ(ring.allocate(100), 0x1040u);  // 64-byte aligned
  EXPECT_EQ(ring.allocate(64), 0x10c0u);
  EXPECT_EQ(ring.allocate(64), 0u);  // would wrap onto the first block, still held
  ring.release(0x1040);              // out of order: the oldest still holds the ring's start
  EXPECT_EQ(ring.allocate(64), 0u);
  ring.release(0x1000);
  EXPECT_EQ(ring.allocate(64), 0x1000u);  // the next lap, as if everything had finished at once
  EXPECT_EQ(ring.allocate(128), 0x1040u);
  EXPECT_THROW(ring.allocate(257), runtime::OutOfMemory);
}

TEST(Firmware, LaunchWithBadCoreMaskIsRejectedBeforeReachingTheDevice) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  const uint64_t program = device.load_program(isa::assemble("halt\n", "k.s"));
  const uint64_t arguments[] = {0};
  EXPECT_THROW(device.launch("k", program, arguments, 0b10), std::invalid_argument);
  EXPECT_NO_THROW(device.launch("k", program, arguments, 0b1));
}

TEST(Firmware, ProgramsDoNotCountAsAllocatedMemory) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  device.load_program(isa::assemble("halt\n", "k.s"));
  EXPECT_EQ(device.memory_stats().allocated_bytes, 0u);
}

TEST(DeviceAllocator, ReusesFreedMemoryAndTracksPeak) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  const uint64_t a = device.allocate(1000);
  const uint64_t b = device.allocate(1000);
  device.free(a);
  device.free(b);
  EXPECT_EQ(device.allocate(2000), a);  // coalesced
  const auto stats = device.memory_stats();
  EXPECT_EQ(stats.allocated_bytes, 2048u);
  EXPECT_EQ(stats.peak_allocated_bytes, 2048u);
  EXPECT_THROW(device.free(12345), std::invalid_argument);
}

// The totals PyTorch's allocator statistics report (torch.accelerator.memory_stats): counts and bytes of every
// allocation and free (sizes rounded to the 256-byte alignment), the peak of live allocations, and their reset.
TEST(DeviceAllocator, CountsAllocationsAndFreesUntilReset) {
  runtime::Device device(small_config(), runtime::Mode::Functional);
  const uint64_t a = device.allocate(1000), b = device.allocate(100);
  device.free(a);
  auto stats = device.memory_stats();
  EXPECT_EQ(stats.total_allocations, 2u);
  EXPECT_EQ(stats.total_frees, 1u);
  EXPECT_EQ(stats.total_allocated_bytes, 1024u + 256u);
  EXPECT_EQ(stats.total_freed_bytes, 1024u);
  EXPECT_EQ(stats.peak_allocations, 2u);
  device.reset_accumulated_memory();
  device.reset_peak_memory();
  device.free(b);
  stats = device.memory_stats();
  EXPECT_EQ(stats.total_allocations, 0u);
  EXPECT_EQ(stats.total_frees, 1u);
  EXPECT_EQ(stats.total_freed_bytes, 256u);
  EXPECT_EQ(stats.peak_allocations, 1u);
  EXPECT_EQ(stats.allocations, 0u);
}

TEST(DeviceAllocator, ReportsFragmentation) {
  runtime::DeviceAllocator allocator(0, 4096);  // sixteen 256-byte blocks
  std::vector<uint64_t> blocks;
  for (int k = 0; k < 16; ++k) blocks.push_back(allocator.allocate(256));
  EXPECT_EQ(allocator.stats().fragmentation(), 0.0);  // nothing free
  for (int k = 0; k < 16; k += 2) allocator.free(blocks[k]);
  // 8 free blocks of 256 bytes, the largest 256 of 2048 free bytes: 7/8 of free memory is outside it.
  runtime::MemoryStats stats = allocator.stats();
  EXPECT_EQ(stats.free_blocks, 8u);
  EXPECT_EQ(stats.largest_free_block_bytes, 256u);
  EXPECT_DOUBLE_EQ(stats.fragmentation(), 7.0 / 8.0);
  try {
    allocator.allocate(512);
    FAIL() << "a 512-byte request fits in no free block";
  } catch (const runtime::OutOfMemory& error) {
    EXPECT_NE(std::string(error.what()).find("largest free block 256 bytes, 8 free blocks, fragmentation 87.5%"),
              std::string::npos)
        << error.what();
  }
  for (int k = 1; k < 16; k += 2) allocator.free(blocks[k]);
  stats = allocator.stats();
  EXPECT_EQ(stats.free_blocks, 1u);
  EXPECT_EQ(stats.fragmentation(), 0.0);
}

TEST(Mode, UnknownModeIsAClearError) {
  try {
    runtime::parse_mode("fast");
    FAIL();
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(), "unknown mode 'fast': expected 'functional' or 'timed'");
  }
}

}  // namespace
}  // namespace npusim
