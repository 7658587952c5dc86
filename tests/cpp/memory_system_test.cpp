// The timed model's memory system against closed forms: DRAM channels, the on-chip network's links, contention
// between cores, and scratchpad bank conflicts. Each test changes only the parameters it is about from test_config().
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "npusim/isa/assembler.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim {
namespace {

// The records of the sources' kernels, run one after another on every core with one 128 KiB buffer as argument 0 (on
// one device: a process holds one SystemC design).
std::vector<runtime::CommandRecord> run_kernels(const config::ChipConfig& config,
                                                const std::vector<std::string>& sources) {
  runtime::Device timed(config, runtime::Mode::Timed);
  const uint64_t buffer = timed.allocate(128 << 10);
  const uint64_t arguments[] = {buffer};
  std::vector<runtime::CommandRecord> records;
  for (const std::string& source : sources) {
    const uint64_t every_core = (uint64_t{1} << config.chip_cores) - 1;
    timed.launch("kernel", timed.load_program(isa::assemble(source, "kernel.s")), arguments, every_core);
    records.push_back(kernel_record(timed.take_records(), "kernel"));
  }
  return records;
}

config::ChipConfig four_channels() {
  config::ChipConfig config = test_config();
  config.dram_channels = 4;  // 25 GB/s each; 256-byte interleave
  config.dram_interleave_bytes = 256;
  config.interconnect_link_bytes_per_cycle = 65536;  // too wide to matter here
  return config;
}

TEST(MemorySystem, StridedDmaOnOneChannelTakesFourTimesLonger) {
  // 64 elements 1024 bytes apart all sit in one channel; 256 bytes apart, they spread over all four.
  const std::string same_channel = "li r2, 64\n ld r3, 0(r1)\n dma.ld.b32 r0, r3, r2, 1024\n fence\n halt\n";
  const std::string spread = "li r2, 64\n ld r3, 0(r1)\n dma.ld.b32 r0, r3, r2, 256\n fence\n halt\n";
  const std::vector<runtime::CommandRecord> records = run_kernels(four_channels(), {same_channel, spread});
  // li 1 cycle; ld 1 cycle + one 64-byte burst on a 25 GB/s channel (2.56 ns) + latency 100 ns, ending at
  // 104.56 ns. The DMA: 64 bursts back to back on one channel, 64 x 2.56 = 163.84 ns, + latency 100 + setup 16 =
  // 279.84 ns, ending at 384.4 ns; fence and halt 1 cycle each → 386.4 ns → 387 cycles.
  EXPECT_EQ(records[0].kernel_cycles, 387u);
  // 16 bursts per channel, the channels side by side: 16 x 2.56 = 40.96 ns, + 100 + 16 = 156.96 ns, ending at
  // 261.52 ns; + 2 cycles → 263.52 → 264 cycles.
  EXPECT_EQ(records[1].kernel_cycles, 264u);
}

TEST(MemorySystem, ContiguousDmaUsesEveryChannel) {
  // 4096 contiguous bytes: 1024 per channel at 25 GB/s = 40.96 ns, as one channel of 100 GB/s would take. li 1, ld
  // 1 + 2.56 + 100 → 104.56 ns; DMA 16 + 40.96 + 100 = 156.96 → 261.52 ns; + 2 cycles → 264 cycles.
  EXPECT_EQ(run_kernels(four_channels(), {"li r2, 1024\n ld r3, 0(r1)\n dma.ld.b32 r0, r3, r2, 4\n fence\n halt\n"})[0]
                .kernel_cycles,
            264u);
}

TEST(MemorySystem, BroadcastDmaReadsDramOnce) {
  // A stride-0 load of 64 elements reads the same 4 bytes 64 times: the DMA engine serves the repeats from the burst
  // it read. li 1; ld 1 + 0.64 + 100 → 102.64 ns; the DMA 16 + one burst 0.64 + latency 100 = 116.64 → 219.28 ns;
  // fence and halt → 221.28 → 222 cycles (64 bursts would take 40.32 ns more).
  EXPECT_EQ(run_kernels(test_config(), {"li r2, 64\n ld r3, 0(r1)\n dma.ld.b32 r0, r3, r2, 0\n fence\n halt\n"})[0]
                .kernel_cycles,
            222u);
}

TEST(MemorySystem, NarrowCoreLinkLimitsADma) {
  config::ChipConfig config = test_config();
  config.interconnect_link_bytes_per_cycle = 16;  // 16 GB/s, below the DRAM's 100
  config.interconnect_latency_cycles = 10;
  // li 1; ld: 1 cycle + 10 cycles across the network + 0.64 + 100 in the DRAM (its 8 bytes cross the link in
  // 0.5 ns, well before) → 112.64 ns. The DMA's 64 KiB occupy the link for 65536 / 16 = 4096 ns and the DRAM for
  // 655.36 ns (+ 100 latency) from 10 ns in: the link decides, 4096 + 10 = 4106 ns, + setup 16 → ends at
  // 4234.64 ns; + fence and halt → 4236.64 → 4237 cycles.
  EXPECT_EQ(
      run_kernels(config, {"li r2, 16384\n ld r3, 0(r1)\n dma.ld.b32 r0, r3, r2, 4\n fence\n halt\n"})[0].kernel_cycles,
      4237u);
}

TEST(MemorySystem, CoresContendForTheDram) {
  config::ChipConfig config = test_config();
  config.chip_cores = 2;
  // Each core loads its own 64 KiB half of the buffer.
  const std::string source =
      "li r2, 16384\n ld r3, 0(r1)\n csrr r5, coreid\n slli r5, r5, 16\n add r3, r3, r5\n"
      " dma.ld.b32 r0, r3, r2, 4\n fence\n halt\n";
  // Both cores' argument loads meet in the DRAM at 1 ns: 1 → 1.64 and 1.64 → 2.28 ns, + 100 latency, + the ld's cycle:
  // the cores issue their DMAs 3 cycles later, at 105.64 and 106.28 ns. The first DMA holds the DRAM for 655.36 ns
  // (to 761 ns); the second follows it, to 1416.36 ns, + latency 100 + setup 16 → 1532.36 ns; fence and halt →
  // 1534.36 → 1535 cycles. Alone, a core would take 105.64 + 771.36 + 2 = 879 cycles.
  EXPECT_EQ(run_kernels(config, {source})[0].kernel_cycles, 1535u);
}

TEST(MemorySystem, TransposedWeightLoadWaitsForBanks) {
  // mx.ldwt of a 16 x 16 f32 tile: weight row k reads column k, 16 elements 64 bytes apart, which fall in banks
  // {0, 4, 8, 12} (16 banks of 16 bytes), four in each: 2 cycles per row with 2 read ports. li 1 cycle; mx.ldwt 16
  // rows x 2 = 32 cycles, ending at 33; fence and halt → 35 cycles (mx.ldw, reading rows, takes 16: 19 cycles).
  const std::vector<runtime::CommandRecord> records = run_kernels(
      test_config(),
      {"li r2, 16\n mx.ldwt.f32 r0, r2, r2\n fence\n halt\n", "li r2, 16\n mx.ldw.f32 r0, r2, r2\n fence\n halt\n"});
  EXPECT_EQ(records[0].kernel_cycles, 35u);
  EXPECT_EQ(records[0].stats.bank_conflict_cycles, 16u);
  EXPECT_EQ(records[0].stats.scratchpad_bytes, 16u * 16 * 4);
  EXPECT_EQ(records[1].kernel_cycles, 19u);
}

TEST(MemorySystem, VectorOperandsInTheSameBanksShareTheReadPorts) {
  config::ChipConfig config = test_config();
  config.core_scratchpad_bank_read_ports = 1;
  // vadd of 1000 f32, a at 0 and b at 4096: each lane group reads 64 bytes of each, the same 4 banks, so with one
  // read port it takes 2 cycles: pipeline 4 + 63 groups x 2 = 130, after li, li → ends at 132; + 2 → 134 cycles.
  const std::vector<runtime::CommandRecord> records =
      run_kernels(config, {"li r2, 1000\n li r3, 4096\n vadd.f32 r0, r0, r3, r2\n fence\n halt\n",
                           "li r2, 1000\n li r3, 4160\n vadd.f32 r0, r0, r3, r2\n fence\n halt\n"});
  EXPECT_EQ(records[0].kernel_cycles, 134u);
  EXPECT_EQ(records[0].stats.bank_conflict_cycles, 63u);
  EXPECT_EQ(records[0].stats.scratchpad_bytes, 3u * 1000 * 4);  // two operands read, one result written
  // b one lane group (64 bytes) further lies in the next 4 banks: 4 + 63 = 67, ending at 69; + 2 → 71 cycles.
  EXPECT_EQ(records[1].kernel_cycles, 71u);
  EXPECT_EQ(records[1].stats.bank_conflict_cycles, 0u);
}

}  // namespace
}  // namespace npusim
