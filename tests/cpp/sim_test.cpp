// The SystemC model against the emulator: the same programs, through the same firmware, must leave identical device
// memory; and simple kernels take the time their closed-form derivation says.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "npusim/emitter/cumsum.h"
#include "npusim/emitter/elementwise.h"
#include "npusim/emitter/matmul.h"
#include "npusim/emitter/rows.h"
#include "npusim/emitter/triangle.h"
#include "npusim/isa/assembler.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim {
namespace {

// A 40x12 @ 12x16 product in two K passes of 6 (accumulating), with max against zero (ReLU,
// the zero broadcast from DRAM address 0, which nothing writes) on the result.
const std::string kMatrixProgram =
    "ld r2, 0(r1)\n ld r3, 8(r1)\n li r4, 480\n dma.ld.b32 r0, r3, r4, 4\n li r5, 4096\n li r6, 96\n"
    " addi r7, r3, 2048\n dma.ld.b32 r5, r7, r6, 4\n li r8, 8192\n addi r7, r3, 2432\n dma.ld.b32 r8, r7, r6, 4\n"
    " fence\n li r9, 40\n li r10, 6\n li r11, 16\n li r12, 0\n mx.ldw.f32 r5, r10, r11\n"
    " mx.mac.f32 r12, r0, r9, 0\n mx.ldw.f32 r8, r10, r11\n mx.mac.f32 r12, r0, r9, 1\n li r13, 640\n"
    " li r14, 12288\n mx.st.f32 r14, r12, r13\n li r15, 16384\n li r16, 1\n dma.ld.b32 r15, r0, r16, 0\n"
    " fence\n vmax.f32 r14, r14, r15, r13\n fence\n dma.st.b32 r2, r14, r13, 4\n fence\n halt\n";

// Programs whose results all land in the output buffer (argument 0), so memory alone shows what they computed.
const std::vector<std::pair<std::string, std::string>> kPrograms = {
    {"scalar",
     "ld r2, 0(r1)\n li r3, -7\n li r4, 3\n mul r5, r3, r4\n st r5, 0(r2)\n sra r6, r3, r4\n st r6, 8(r2)\n"
     " xori r7, r3, 0x55\n sw r7, 16(r2)\n csrr r8, coreid\n st r8, 24(r2)\n halt\n"},
    {"loop",
     "ld r2, 0(r1)\n li r3, 100\n li r4, 0\nloop: add r4, r4, r3\n st r4, 0(r2)\n addi r2, r2, 8\n addi r3, r3, -1\n"
     " bne r3, r0, loop\n halt\n"},
    {"dma_vector",
     // out[k] = (in[k] + in[k]) * in[2k], 1000 floats, tiles of 256 with a partial last tile.
     "ld r2, 0(r1)\n ld r3, 8(r1)\n li r9, 1000\n li r20, 0\n li r21, 4096\nloop: li r10, 256\n"
     " bltu r10, r9, full\n addi r10, r9, 0\nfull: dma.ld.b32 r20, r3, r10, 4\n slli r11, r10, 0\n"
     " dma.ld.b32 r21, r3, r10, 8\n fence\n vadd.f32 r20, r20, r20, r10\n vmul.f32 r20, r20, r21, r10\n fence\n"
     " dma.st.b32 r2, r20, r10, 4\n fence\n slli r12, r10, 2\n add r2, r2, r12\n add r3, r3, r12\n"
     " sub r9, r9, r10\n bne r9, r0, loop\n halt\n"},
    {"narrow_dma",
     "ld r2, 0(r1)\n ld r3, 8(r1)\n li r4, 37\n dma.ld.b8 r0, r3, r4, 3\n fence\n dma.st.b8 r2, r0, r4, 1\n"
     " li r4, 9\n dma.ld.b16 r0, r3, r4, 6\n li r5, 512\n dma.ld.b64 r5, r3, r4, 16\n fence\n addi r2, r2, 64\n"
     " dma.st.b16 r2, r0, r4, 2\n addi r2, r2, 64\n dma.st.b64 r2, r5, r4, 8\n fence\n halt\n"},
    {"matrix", kMatrixProgram},
};

std::vector<std::byte> run_program(runtime::Device& device, const std::string& source) {
  const auto words = isa::assemble(source, "program.s");
  const uint64_t program = device.load_program(words);
  const uint64_t output = device.allocate(8192), input = device.allocate(8192);
  std::vector<float> data(2048);
  for (size_t k = 0; k < data.size(); ++k) data[k] = 0.25f * static_cast<float>(k) - 100.0f;
  device.copy_host_to_device(input, data.data(), 8192);
  const uint64_t arguments[] = {output, input, input};  // kernels with two inputs read the same buffer twice
  device.launch("program", program, arguments);
  std::vector<std::byte> result(8192);
  device.copy_device_to_host(result.data(), output, result.size());
  device.free(output);
  device.free(input);
  return result;
}

TEST(TimedModel, LeavesTheSameMemoryAsTheEmulator) {
  runtime::Device functional(test_config(), runtime::Mode::Functional);
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  for (const auto& [name, source] : kPrograms) {
    const auto expected = run_program(functional, source);
    const auto actual = run_program(timed, source);
    EXPECT_EQ(std::memcmp(expected.data(), actual.data(), expected.size()), 0) << name;
    EXPECT_NE(std::count(expected.begin(), expected.end(), std::byte{0}), static_cast<long>(expected.size())) << name;
  }
  EXPECT_GT(timed.elapsed_cycles(), 0u);
  EXPECT_EQ(functional.elapsed_cycles(), 0u);
}

TEST(TimedModel, EmittedKernelsLeaveTheSameMemoryAsTheEmulator) {
  runtime::Device functional(test_config(), runtime::Mode::Functional);
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  config::ChipConfig small_scratchpad = test_config();
  small_scratchpad.core_scratchpad_kib = 4;
  const std::vector<emitter::Kernel> kernels = {
      emitter::emit_matmul({33, 40, 20, 40, 1, 1, 40, 20, 1}, test_config()),
      emitter::emit_matmul({33, 40, 20, 40, 1, 1, 40, 20, 1, isa::ElementType::BF16}, test_config()),
      emitter::emit_elementwise({emitter::ElementwiseOp::AddF32, 4, {30, 50}, {{50, 1}, {1, 30}, {0, 1}}},
                                test_config()),
      emitter::emit_elementwise({emitter::ElementwiseOp::MulF32, 4, {30, 50}, {{50, 1}, {50, 1}, {0, 1}}},
                                test_config()),
      emitter::emit_elementwise({emitter::ElementwiseOp::MulF32, 4, {30, 50}, {{50, 1}, {50, 1}, {1, 0}}},
                                test_config()),
      emitter::emit_elementwise(
          {emitter::ElementwiseOp::Copy, 4, {4, 3, 3, 6, 6}, {{324, 108, 36, 6, 1}, {64, 8, 1, 8, 1}}}, test_config()),
      emitter::emit_elementwise({emitter::ElementwiseOp::GeluTanhF32, 4, {40, 50}, {{50, 1}, {50, 1}}}, test_config()),
      emitter::emit_elementwise({emitter::ElementwiseOp::GeluBackwardF32, 4, {40, 50}, {{50, 1}, {50, 1}, {50, 1}}},
                                test_config()),
      emitter::emit_elementwise({emitter::ElementwiseOp::SubI64, 8, {20, 40}, {{40, 1}, {40, 1}, {0, 1}}},
                                test_config()),
      emitter::emit_rows({emitter::RowOp::SoftmaxF32, 8, 100}, test_config()),
      emitter::emit_rows({emitter::RowOp::SafeSoftmaxF32, 8, 100}, test_config()),
      emitter::emit_zero_triangle({2, 20, 50, 4, 3, true}, test_config()),
      emitter::emit_elementwise({emitter::ElementwiseOp::GtF32, 1, {30, 50}, {{50, 1}, {50, 1}, {1, 30}}},
                                test_config()),
      emitter::emit_elementwise({emitter::ElementwiseOp::Convert,
                                 2,
                                 {30, 50},
                                 {{50, 1}, {50, 1}},
                                 isa::ElementType::F32,
                                 isa::ElementType::BF16},
                                test_config()),
      emitter::emit_rows({emitter::RowOp::LogSoftmaxF32, 30, 50}, test_config()),
      emitter::emit_rows({emitter::RowOp::SumF32, 16, 64}, test_config()),
      emitter::emit_rows({emitter::RowOp::MinF32, 16, 64}, test_config()),
      emitter::emit_cumsum({16, 50, isa::ElementType::F32}, test_config()),
      emitter::emit_elementwise(
          {emitter::ElementwiseOp::HardswishBackwardF32, 4, {40, 50}, {{50, 1}, {50, 1}, {50, 1}}}, test_config()),
      // bf16 tensors widened into f32 tiles and the result rounded back, through staging tiles
      emitter::emit_elementwise({emitter::ElementwiseOp::MulF32,
                                 2,
                                 {30, 50},
                                 {{50, 1}, {50, 1}, {1, 30}},
                                 isa::ElementType::F32,
                                 isa::ElementType::F32,
                                 {},
                                 {isa::ElementType::BF16, isa::ElementType::BF16, isa::ElementType::F16}},
                                test_config()),
      emitter::emit_rows({emitter::RowOp::ArgMaxF32, 16, 64}, test_config()),
      emitter::emit_rows({emitter::RowOp::SoftmaxBackwardF32, 12, 70}, test_config()),
      emitter::emit_rows({emitter::RowOp::LogSoftmaxBackwardF32, 9, 100}, test_config()),
      // a transposing copy in 8 x 8 tiles (emitted for a 4 KiB scratchpad): DMA and vtr pipelined by semaphores, so
      // a missing order would show as a hazard
      emitter::emit_elementwise({emitter::ElementwiseOp::Copy, 4, {30, 60}, {{60, 1}, {1, 30}}}, small_scratchpad),
  };
  for (const emitter::Kernel& kernel : kernels) {
    std::string source;
    for (uint64_t word : kernel.words) source += fmt::format(".dword {}\n", word);
    EXPECT_EQ(run_program(functional, source), run_program(timed, source)) << kernel.name;
    for (const runtime::CommandRecord& record : timed.take_records())
      EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << ": " << record.first_hazard;
  }
}

TEST(TimedModel, MultiCoreMatmulLeavesTheSameMemoryAsTheEmulator) {
  config::ChipConfig config = test_config();
  config.chip_cores = 4;
  runtime::Device functional(config, runtime::Mode::Functional);
  runtime::Device timed(config, runtime::Mode::Timed);
  const emitter::Kernel kernel = emitter::emit_matmul({40, 24, 48, 24, 1, 48, 1, 48, 1}, config);
  config::ChipConfig small_tiles = config;  // small tiles, so that several cores share the add
  small_tiles.core_scratchpad_kib = 4;
  const emitter::Kernel elementwise =
      emitter::emit_elementwise({emitter::ElementwiseOp::AddF32, 4, {1500}, {{1}, {1}, {1}}}, small_tiles);
  const auto run = [&](runtime::Device& device) {
    const uint64_t c = device.allocate(8192), a = device.allocate(8192), b = device.allocate(8192);
    std::vector<float> data(2048);
    for (size_t k = 0; k < data.size(); ++k) data[k] = 0.01f * static_cast<float>(k % 97) - 0.3f;
    device.copy_host_to_device(a, data.data(), 8192);
    device.copy_host_to_device(b, data.data(), 8192);
    const uint64_t arguments[] = {c, a, b};
    device.launch(kernel.name, device.load_program(kernel.words), arguments, 0b1111);
    device.launch(elementwise.name, device.load_program(elementwise.words), arguments,
                  (uint64_t{1} << elementwise.cores) - 1);  // c = a + b
    std::vector<float> result(2048);
    device.copy_device_to_host(result.data(), c, 8192);
    return result;
  };
  EXPECT_EQ(run(functional), run(timed));
  const auto records = timed.take_records();
  const runtime::CommandRecord& launch = records[records.size() - 3];
  ASSERT_EQ(launch.name, "matmul_f32");
  // Four cores each issued their share: the matrix engine work adds up over the cores.
  EXPECT_EQ(launch.stats.instructions_matrix, functional.take_records()[2].stats.instructions_matrix);
  ASSERT_GT(elementwise.cores, 1);
  EXPECT_EQ(records[records.size() - 2].cores, static_cast<uint64_t>(elementwise.cores));
  EXPECT_EQ(records[records.size() - 2].stats.hazards, 0u);
}

TEST(TimedModel, TwoDimensionalDmaMatchesClosedForm) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const auto words = isa::assemble(
      "li r2, 256\n li r3, 4\n ld r4, 0(r1)\n dma.ld2.b32 r0, r4, r2, r3, 2048\n fence\n halt\n", "dma2.s");
  const uint64_t buffer = timed.allocate(8192);
  const uint64_t arguments[] = {buffer};
  timed.launch("dma2", timed.load_program(words), arguments);
  // li, li: 2 cycles; ld of the argument: 1 + 0.64 + 100 = 101.64 ns, so the DMA issues at 103.64 ns. Its four 1 KiB
  // rows start together and share the DRAM: 4096 B / 100 GB/s = 40.96 ns, + 100 ns latency, + setup 16 = 156.96 ns,
  // ending at 260.6 ns; fence +1, halt +1 = 262.6 ns → 263 cycles.
  EXPECT_EQ(timed.take_records().back().kernel_cycles, 263u);
}

TEST(TimedModel, IsDeterministic) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const auto words = isa::assemble(kPrograms[2].second, "program.s");
  const uint64_t program = timed.load_program(words);
  const uint64_t buffers[] = {timed.allocate(8192), timed.allocate(8192)};
  timed.launch("first", program, buffers);
  timed.launch("second", program, buffers);
  const auto records = timed.take_records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].kernel_cycles, records[1].kernel_cycles);
  // The firmware reads the cycle counter at times that need not fall on a cycle boundary (DRAM transfers take
  // fractions of a nanosecond), so a command's two readings may round apart by one cycle.
  EXPECT_NEAR(static_cast<double>(records[0].device_cycles), static_cast<double>(records[1].device_cycles), 1.0);
}

TEST(TimedModel, SingleDmaLoadMatchesClosedForm) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const auto words = isa::assemble("li r2, 1024\n ld r3, 0(r1)\n dma.ld.b32 r0, r3, r2, 4\n fence\n halt\n", "dma.s");
  const uint64_t buffer = timed.allocate(4096);
  const uint64_t arguments[] = {buffer};
  timed.launch("dma", timed.load_program(words), arguments);
  // li: 1 cycle. ld of the argument: 1 cycle + DRAM (one 64-byte burst at 100 GB/s = 0.64 ns, + 100 ns latency)
  // = 101.64 ns. The DMA issues at 102.64 ns and occupies its engine for setup 16 + 4096 B / 100 GB/s = 40.96
  // + latency 100 = 156.96 ns, ending at 259.6 ns; the scalar unit's fence ends then, +1 cycle for the fence,
  // +1 for the halt = 261.6 ns → 262 cycles at 1 GHz.
  const auto records = timed.take_records();
  EXPECT_EQ(records.back().kernel_cycles, 262u);
  EXPECT_EQ(records.back().bytes, 8u + 4096u);
}

TEST(TimedModel, IndexedDmaMatchesClosedForm) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const auto words = isa::assemble(
      "li r2, 4\n ld r3, 0(r1)\n dma.ld.b64 r0, r3, r2, 8\n li r4, 256\n dma.ldx.f32 r4, r3, r0, r2, 4\n fence\n"
      " halt\n",
      "ldx.s");
  const uint64_t buffer = timed.allocate(64);
  const int64_t indices[] = {3, 0, 2, 1};
  timed.copy_host_to_device(buffer, indices, sizeof indices);
  const uint64_t arguments[] = {buffer};
  timed.launch("ldx", timed.load_program(words), arguments);
  // li 1 cycle; ld of the argument 1 cycle + one burst (0.64 ns) + latency 100 ns, ending at 102.64 ns. The index
  // load issues then: setup 16 + one 64-byte burst for its 32 bytes (0.64) + latency 100 = 116.64 ns, ending at
  // 219.28 ns. The gather waits behind it on the DMA queue, then its 4 elements are 4 transactions of a burst each,
  // back to back in the DRAM: 16 + 4 x 0.64 + 100 = 118.56 ns, ending at 337.84 ns; + fence and halt, 1 cycle each
  // = 339.84 ns → 340 cycles at 1 GHz.
  const auto records = timed.take_records();
  EXPECT_EQ(records.back().kernel_cycles, 340u);
  EXPECT_EQ(records.back().bytes, 8u + 32u + 4 * 4u);
}

// Runs `source` alone on a timed device (one per test: one SystemC design per process) and gives its kernel cycles.
uint64_t timed_kernel_cycles(const std::string& source) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const uint64_t arguments[] = {0};
  timed.launch("closed_form", timed.load_program(isa::assemble(source, "closed_form.s")), arguments);
  return timed.take_records().back().kernel_cycles;
}

TEST(TimedModel, VectorOpMatchesClosedForm) {
  // li 1 cycle; vadd issues at 1 and runs pipeline 4 + ceil(1000 / 16 lanes) = 63 → 67 cycles, ending at 68;
  // fence +1, halt +1 → 70 cycles.
  EXPECT_EQ(timed_kernel_cycles("li r2, 1000\n vadd.f32 r0, r0, r0, r2\n fence\n halt\n"), 70u);
}

TEST(TimedModel, TransposeMatchesClosedForm) {
  // 3 li: 3 cycles; vtr issues at 3 and runs as a vector instruction over its 40 x 25 = 1000 elements: pipeline 4 +
  // ceil(1000 / 16 lanes) = 63 → 67 cycles, ending at 70 (a read and a write per bank and step fit the ports);
  // fence +1, halt +1 → 72 cycles.
  EXPECT_EQ(timed_kernel_cycles("li r2, 40\n li r3, 25\n li r4, 8192\n vtr.f32 r4, r0, r2, r3\n fence\n halt\n"), 72u);
}

TEST(TimedModel, MatrixOpsMatchClosedForm) {
  // li, li: 2 cycles. The matrix engine then runs, in its queue's order: mx.ldw 16 cycles (one weight row per
  // cycle), 2..18; mx.mac streams its 100 rows 18..118, its results drained at 118 + 16 + 16 - 1 = 149; mx.st waits
  // for them and reads ceil(1600 / 16 columns) = 100 accumulator rows, 149..249. The scalar unit's fence ends then:
  // +1 for the fence, +1 for the halt = 251 cycles.
  EXPECT_EQ(
      timed_kernel_cycles("li r2, 16\n li r3, 100\n mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 0\n li r4, 1600\n"
                          " mx.st.f32 r0, r0, r4\n fence\n halt\n"),
      251u);
}

TEST(TimedModel, ReportsEnginesRacingOnTheScratchpad) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const uint64_t buffer = timed.allocate(256);
  const uint64_t arguments[] = {buffer};
  // The vector engine reads what the DMA engine is still writing: a missing fence.
  const uint64_t racy = timed.load_program(isa::assemble(
      "li r2, 64\n ld r3, 0(r1)\n dma.ld.b32 r0, r3, r2, 4\n vadd.f32 r0, r0, r0, r2\n halt\n", "racy.s"));
  timed.launch("racy", racy, arguments);
  const runtime::CommandRecord racy_record = timed.take_records().back();
  EXPECT_EQ(racy_record.stats.hazards, 1u);
  EXPECT_EQ(racy_record.first_hazard,
            fmt::format("core 0: pc 0x{:x} (vadd.f32 r0, r0, r0, r2) reads scratchpad bytes [0x0, 0x100) while pc "
                        "0x{:x} (dma.ld.b32 r0, r3, r2, 4) on the dma engine still writes scratchpad bytes [0x0, "
                        "0x100), with no fence between",
                        racy + 24, racy + 16));
  const uint64_t fenced = timed.load_program(isa::assemble(
      "li r2, 64\n ld r3, 0(r1)\n dma.ld.b32 r0, r3, r2, 4\n fence\n vadd.f32 r0, r0, r0, r2\n halt\n", "fenced.s"));
  timed.launch("fenced", fenced, arguments);
  EXPECT_EQ(timed.take_records().back().stats.hazards, 0u);
  setenv("NPUSIM_HAZARDS", "error", 1);
  timed.launch("racy", racy, arguments);
  EXPECT_THROW(timed.synchronize(), runtime::DeviceError);
  unsetenv("NPUSIM_HAZARDS");
}

// Order is transitive: the DMA store waits for the vector engine, which waited for the matrix engine's store into the
// same bytes (64 rows, so it is still running), so the DMA engine cannot read them early; without the vector
// engine's wait it could.
TEST(TimedModel, OrderThroughAChainOfSemaphoresIsNoHazard) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const uint64_t buffer = timed.allocate(256);
  const uint64_t arguments[] = {buffer};
  const auto run = [&](const char* vector_waits_for_matrix) {
    const uint64_t program = timed.load_program(isa::assemble(
        fmt::format("li r2, 16\n li r6, 1024\n li r4, 4096\n li r5, 16384\n ld r3, 0(r1)\n mx.st.f32 r4, r0, r6\n{}"
                    " vadd.f32 r5, r5, r5, r2\n sem.post.vec 1\n sem.wait.dma 1\n dma.st.b32 r3, r4, r2, 4\n halt\n",
                    vector_waits_for_matrix),
        "chain.s"));
    timed.launch("chain", program, arguments);
    return timed.take_records().back().stats.hazards;
  };
  EXPECT_EQ(run(" sem.post.mx 0\n sem.wait.vec 0\n"), 0u);
  EXPECT_EQ(run(""), 1u);
}

TEST(TimedModel, KernelTrapIsReportedAndDeviceStaysUsable) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const uint64_t arguments[] = {0};
  const uint64_t bad = timed.load_program(isa::assemble("li r2, 99999\n dma.ld.b32 r0, r0, r2, 4\n halt\n", "bad.s"));
  timed.launch("bad_kernel", bad, arguments);  // returns at once: the trap surfaces at the next synchronising call
  try {
    timed.synchronize();
    FAIL() << "the trap was not reported";
  } catch (const runtime::DeviceError& error) {
    EXPECT_NE(std::string(error.what()).find("kernel 'bad_kernel' failed: core 0, pc 0x"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("(dma.ld.b32 r0, r0, r2, 4): scratchpad access"), std::string::npos)
        << error.what();
  }
  const uint64_t good = timed.load_program(isa::assemble("halt\n", "good.s"));
  timed.launch("good_kernel", good, arguments);
  EXPECT_NO_THROW(timed.synchronize());
}

// The scalar unit traps while the vector engine waits on a semaphore whose post sits behind a long DMA load: the post
// is never run once the core has faulted, so the waiting engine must give up rather than hang the launch.
TEST(TimedModel, TrapWhileAnEngineWaitsOnASemaphoreIsReported) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const uint64_t buffer = timed.allocate(65536);
  const uint64_t arguments[] = {buffer};
  // The load takes about 750 cycles; the vector engine starts waiting at once; the scalar unit traps after about 300.
  const uint64_t program = timed.load_program(
      isa::assemble("ld r3, 0(r1)\n li r2, 16384\n dma.ld.b32 r0, r3, r2, 4\n sem.post.dma 0\n sem.wait.vec 0\n"
                    " li r4, 100\nspin:\n addi r4, r4, -1\n bne r4, r0, spin\n trap 7\n halt\n",
                    "trap_while_waiting.s"));
  timed.launch("trap_while_waiting", program, arguments);
  try {
    timed.synchronize();
    FAIL() << "the trap was not reported";
  } catch (const runtime::DeviceError& error) {
    EXPECT_NE(std::string(error.what()).find("code 7"), std::string::npos) << error.what();
  }
  timed.launch("good_kernel", timed.load_program(isa::assemble("halt\n", "good.s")), arguments);
  EXPECT_NO_THROW(timed.synchronize());
}

// A random program of typed tile instructions over the scratchpad, each followed by a fence so that the engines
// run one at a time: loads 8 KiB of input bytes (read as every element type: NaNs, infinities and denormals come
// up), applies `count` instructions with random types, shapes, addresses and broadcast modes, and stores the
// scratchpad's first 8 KiB to the output.
std::string random_tile_program(uint32_t seed, int count) {
  std::mt19937 random(seed);
  const auto pick = [&](uint32_t limit) { return static_cast<uint32_t>(random() % limit); };
  const auto type_of = [&](isa::TypeForm form) {
    std::vector<isa::ElementType> types;
    for (int k = 0; k < isa::kElementTypeCount; ++k)
      if (isa::allowed_types(form) >> k & 1) types.push_back(static_cast<isa::ElementType>(k));
    return types[pick(types.size())];
  };
  // Scratchpad addresses below 12 KiB leave room for any operand of up to 512 bytes.
  const auto address = [&] { return 8 * pick(1536); };
  std::string text = "ld r2, 0(r1)\n ld r3, 8(r1)\n li r4, 8192\n dma.ld.b8 r0, r3, r4, 1\n fence\n";
  for (int k = 0; k < count; ++k) {
    text += fmt::format(" li r10, {}\n li r11, {}\n li r12, {}\n li r13, {}\n li r14, {}\n", address(), address(),
                        address(), 1 + pick(64), 1 + pick(8));
    switch (pick(8)) {
      case 0: {  // binary, compare or select with a random broadcast mode
        const char* const ops[] = {"vadd", "vsub", "vmul", "vmax", "vmin", "vceq", "vcne", "vclt", "vcle", "vsel"};
        const std::string op = ops[pick(10)];
        const uint32_t mode = pick(4), imm = mode < 2 ? mode : mode + ((1 + pick(8)) << 2);
        text += fmt::format(" {}.{} r10, r11, r12, r13, {}\n", op,
                            isa::type_name(type_of(op == "vsel" ? isa::TypeForm::Any : isa::TypeForm::Numeric)), imm);
        break;
      }
      case 1: {  // float division and special functions
        const char* const ops[] = {"vexp", "vlog", "vtanh", "vsigmoid", "verf", "vrsqrt", "vrecip", "vsqrt"};
        text += fmt::format(" {}.{} r10, r11, r13\n", ops[pick(8)], isa::type_name(type_of(isa::TypeForm::Float)));
        break;
      }
      case 2:
        text += fmt::format(" vcvt.{}.{} r10, r11, r13\n", isa::type_name(type_of(isa::TypeForm::Conversion)),
                            isa::type_name(type_of(isa::TypeForm::Conversion)));
        break;
      case 3: {  // reductions over r14 rows of at most 64 columns
        const char* const ops[] = {"vrsum", "vrmax", "vrmin", "vargmax", "vargmin"};
        text +=
            fmt::format(" {}.{} r10, r11, r14, r13\n", ops[pick(5)], isa::type_name(type_of(isa::TypeForm::Numeric)));
        break;
      }
      case 4: {  // a matrix product: K x N weights (at most 8 x 8 here), M = r14 rows, stored in the type asked
        const std::string type(isa::type_name(type_of(isa::TypeForm::MatrixInput)));
        const std::string out = type == "i8" ? "i32" : std::string(isa::type_name(type_of(isa::TypeForm::Float)));
        text += fmt::format(
            " li r15, {}\n li r16, {}\n {}.{} r11, r15, r16\n mx.mac.{} r0, r12, r14, 0\n fence\n"
            " mul r17, r14, r16\n mx.st.{} r10, r0, r17\n",
            1 + pick(8), 1 + pick(8), pick(2) ? "mx.ldw" : "mx.ldwt", type, type, out);
        break;
      }
      case 5:  // random numbers, keyed by a random key and stream position
        text += fmt::format(" li r15, {}\n li r16, {}\n {}.{} r10, r15, r16, r13\n", pick(1u << 30), pick(1u << 30),
                            pick(2) ? "vrand" : "vrandn", isa::type_name(type_of(isa::TypeForm::Float)));
        break;
      case 6:  // a transpose of r14 rows by r13 columns
        text += fmt::format(" vtr.{} r10, r11, r14, r13\n", isa::type_name(type_of(isa::TypeForm::Any)));
        break;
      default:
        text += fmt::format(" vneg.{0} r10, r11, r13\n fence\n vabs.{0} r12, r10, r13\n",
                            isa::type_name(type_of(isa::TypeForm::Numeric)));
        break;
    }
    text += " fence\n";
  }
  return text + " li r4, 8192\n dma.st.b8 r2, r0, r4, 1\n fence\n halt\n";
}

TEST(TimedModel, RandomTypedProgramsLeaveTheSameMemoryAsTheEmulator) {
  runtime::Device functional(test_config(), runtime::Mode::Functional);
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const std::string source = random_tile_program(seed, 40);
    EXPECT_EQ(run_program(functional, source), run_program(timed, source)) << "seed " << seed << ":\n" << source;
  }
}

// dma.dim shapes, 4-D DMA, semaphores and a typed pipeline: programs for the new engine features.
const std::vector<std::pair<std::string, std::string>> kFeaturePrograms = {
    {"dma_4d_transpose",
     "ld r2, 0(r1)\n ld r3, 8(r1)\n li r4, 8\n li r5, 32\n dma.dim 1, r4, r5\n li r4, 4\n li r5, 4\n"
     " dma.dim 2, r4, r5\n li r4, 2\n li r5, 128\n dma.dim 3, r4, r5\n li r6, 8\n dma.ld4.b32 r0, r3, r6, 256\n"
     " fence\n li r4, 512\n dma.st.b32 r2, r0, r4, 4\n fence\n halt\n"},
    {"semaphore_pipeline",
     // Four tiles of 256 floats: DMA in, vector exp, DMA out, ordered by semaphores instead of fences.
     "ld r2, 0(r1)\n ld r3, 8(r1)\n li r4, 256\n li r5, 0\n li r6, 4\nloop: slli r7, r5, 10\n add r8, r3, r7\n"
     " dma.ld.b32 r7, r8, r4, 4\n sem.post.dma 0\n sem.wait.vec 0\n vsigmoid.f32 r7, r7, r4\n sem.post.vec 1\n"
     " sem.wait.dma 1\n add r9, r2, r7\n dma.st.b32 r9, r7, r4, 4\n addi r5, r5, 1\n bne r5, r6, loop\n fence\n"
     " halt\n"},
    {"bf16_layer",
     // bf16 inputs through the matrix engine, rounded back to bf16, bias added with a row broadcast, then GELU by erf.
     "ld r2, 0(r1)\n ld r3, 8(r1)\n li r4, 256\n dma.ld.b16 r0, r3, r4, 2\n fence\n li r5, 16\n"
     " mx.ldw.bf16 r0, r5, r5\n li r6, 512\n mx.mac.bf16 r0, r6, r5, 0\n fence\n li r7, 1024\n mx.st.bf16 r7, r0, r4\n"
     " fence\n vadd.bf16 r7, r7, r6, r4, 2 + (16 << 2)\n fence\n li r8, 2048\n vcvt.f32.bf16 r8, r7, r4\n fence\n"
     " li r9, 4096\n vfill.f32 r9, r4, 0x3f3504f3\n fence\n vmul.f32 r9, r8, r9, r4\n fence\n verf.f32 r9, r9, r4\n"
     " fence\n dma.st.b32 r2, r9, r4, 4\n fence\n halt\n"},
};

TEST(TimedModel, FeatureProgramsLeaveTheSameMemoryAsTheEmulatorWithoutHazards) {
  runtime::Device functional(test_config(), runtime::Mode::Functional);
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  for (const auto& [name, source] : kFeaturePrograms) {
    EXPECT_EQ(run_program(functional, source), run_program(timed, source)) << name;
    const runtime::CommandRecord record = kernel_record(timed.take_records());
    EXPECT_EQ(record.stats.hazards, 0u) << name << ": " << record.first_hazard;
  }
}

TEST(TimedModel, MissingSemaphoreIsReportedAsAHazard) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const std::string unordered =
      kFeaturePrograms[1].second.substr(0, kFeaturePrograms[1].second.find(" sem.post.dma 0")) +
      " vsigmoid.f32 r7, r7, r4\n fence\n halt\n";
  run_program(timed, unordered);
  EXPECT_EQ(kernel_record(timed.take_records()).stats.hazards, 1u);
}

TEST(TimedModel, BarrierAndCoreToCoreMovesMatchTheEmulator) {
  config::ChipConfig config = test_config();
  config.chip_cores = 4;
  runtime::Device functional(config, runtime::Mode::Functional);
  runtime::Device timed(config, runtime::Mode::Timed);
  // Each core loads its own 1 KiB, passes it to the next core, meets the others at a barrier, adds what it got to
  // its own, waits until every core has read what it got, passes the sum on again, and after a last barrier
  // stores it.
  const std::string source =
      "ld r2, 0(r1)\n ld r3, 8(r1)\n csrr r4, coreid\n csrr r5, ncores\n addi r6, r4, 1\n bne r6, r5, next\n"
      " li r6, 0\nnext: slli r7, r4, 10\n add r8, r3, r7\n li r9, 256\n dma.ld.b32 r0, r8, r9, 4\n fence\n"
      " li r10, 4096\n li r11, 1024\n dma.c2c r10, r0, r6, r11\n barrier\n vadd.f32 r0, r0, r10, r9\n barrier\n"
      " dma.c2c r10, r0, r6, r11\n barrier\n add r12, r2, r7\n dma.st.b32 r12, r10, r9, 4\n fence\n halt\n";
  const auto words = isa::assemble(source, "ring.s");
  std::vector<std::vector<float>> results;
  for (runtime::Device* device : {&functional, &timed}) {
    const uint64_t out = device->allocate(8192), in = device->allocate(8192);
    std::vector<float> data(2048);
    for (size_t k = 0; k < data.size(); ++k) data[k] = 0.5f * static_cast<float>(k % 41) - 3.0f;
    device->copy_host_to_device(in, data.data(), 8192);
    const uint64_t arguments[] = {out, in};
    device->launch("ring", device->load_program(words), arguments, 0b1111);
    std::vector<float> result(1024);
    device->copy_device_to_host(result.data(), out, 4096);
    results.push_back(result);
    // core c stored the sum of cores c-2 and c-1's data (mod 4).
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 256; ++k)
        EXPECT_EQ(result[c * 256 + k], data[((c + 2) % 4) * 256 + k] + data[((c + 3) % 4) * 256 + k]) << c << " " << k;
  }
  EXPECT_EQ(results[0], results[1]);
  const runtime::CommandRecord record = kernel_record(timed.take_records(), "ring");
  EXPECT_EQ(record.stats.core_to_core_bytes, 4u * 2 * 1024);
  EXPECT_GT(record.stats.stall_cycles_barrier, 0u);
}

TEST(TimedModel, WeightLoadOverlapsThePrecedingProduct) {
  // li, li: 2 cycles. The first mx.ldw runs 2..18 (16 rows); the first mx.mac streams 18..118. The second mx.ldw,
  // issued at 4, shifts into the idle weight set from the product's start: 18..34, inside the product, so it adds
  // nothing; the second mx.mac streams 118..218 while the first one drains, and drains at 218 + 31 = 249. The fence
  // waits for that: +1, halt +1 → 251 cycles (282 if products did not pipeline, 298 if the load waited too).
  EXPECT_EQ(timed_kernel_cycles(
                "li r2, 16\n li r3, 100\n mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 0\n mx.ldw.f32 r0, r2, r2\n"
                " mx.mac.f32 r0, r0, r3, 1\n fence\n halt\n"),
            251u);
}

TEST(TimedModel, WeightLoadWaitsForItsSetToDrain) {
  // Products of 4 rows, shorter than the array's drain. li, li: 2 cycles; mx.ldw 2..18; mx.mac 18..22, drained at
  // 22 + 31 = 53. The second mx.ldw fills the idle set from the product's start, 18..34 (12 cycles past it); the
  // second mx.mac streams 34..38, drained at 69. The third mx.ldw needs the first product's set: free at 53, loaded
  // 53..69; the third mx.mac streams 69..73 and drains at 104. Fence +1, halt +1 → 106 cycles.
  EXPECT_EQ(timed_kernel_cycles("li r2, 16\n li r3, 4\n mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 0\n"
                                " mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 1\n mx.ldw.f32 r0, r2, r2\n"
                                " mx.mac.f32 r0, r0, r3, 1\n fence\n halt\n"),
            106u);
}

TEST(TimedModel, SpecialFunctionMatchesClosedForm) {
  // li 1 cycle; vexp issues at 1 and runs pipeline 4 + ceil(1000 / 16 lanes) = 63 lane groups x 4 special-function
  // cycles = 256 cycles, ending at 257; fence +1, halt +1 → 259 cycles.
  EXPECT_EQ(timed_kernel_cycles("li r2, 1000\n vexp.f32 r0, r0, r2\n fence\n halt\n"), 259u);
}

TEST(TimedModel, SemaphoreWaitMatchesClosedForm) {
  runtime::Device timed(test_config(), runtime::Mode::Timed);
  const auto words = isa::assemble(
      "li r2, 1024\n ld r3, 0(r1)\n dma.ld.b32 r0, r3, r2, 4\n sem.post.dma 0\n sem.wait.vec 0\n"
      " vadd.f32 r0, r0, r0, r2\n fence\n halt\n",
      "semaphore.s");
  const uint64_t buffer = timed.allocate(4096);
  const uint64_t arguments[] = {buffer};
  timed.launch("semaphore", timed.load_program(words), arguments);
  // As in SingleDmaLoadMatchesClosedForm, the DMA issues at 102.64 ns and ends at 259.6 ns; its post follows at
  // once. The vector engine took the wait at 104.64 ns and holds until 259.6 ns (154.96 ns of semaphore stall),
  // then runs vadd: pipeline 4 + 1024 / 16 = 68 cycles, ending at 327.6 ns. The fence ends then: +1 for the fence,
  // +1 for the halt = 329.6 ns → 330 cycles.
  const runtime::CommandRecord record = timed.take_records().back();
  EXPECT_EQ(record.kernel_cycles, 330u);
  EXPECT_EQ(record.stats.semaphore_wait_cycles, 155u);
  EXPECT_EQ(record.stats.hazards, 0u);
}

TEST(TimedModel, DeadlocksAreTrapsNamingTheInstruction) {
  config::ChipConfig config = test_config();
  config.chip_cores = 2;
  runtime::Device timed(config, runtime::Mode::Timed);
  const uint64_t arguments[] = {0};
  const auto expect_error = [&](const std::string& source, uint64_t mask, const std::string& expected) {
    try {
      timed.launch("deadlock", timed.load_program(isa::assemble(source, "deadlock.s")), arguments, mask);
      timed.synchronize();
      ADD_FAILURE() << "no error for " << source;
    } catch (const runtime::DeviceError& error) {
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
    }
  };
  expect_error("sem.wait.mx 2\n halt\n", 1, "core 0, pc 0x");
  expect_error("sem.wait.mx 2\n halt\n", 1, "(sem.wait.mx 2): deadlock: this wait on semaphore 2 can never complete");
  expect_error("csrr r2, coreid\n beq r2, r0, skip\n barrier\nskip: halt\n", 0b11, "core 1, pc 0x");
  expect_error("csrr r2, coreid\n beq r2, r0, skip\n barrier\nskip: halt\n", 0b11,
               "(barrier): deadlock: this barrier can never complete: core 0 halted instead");
  timed.launch("fine", timed.load_program(isa::assemble("barrier\n halt\n", "fine.s")), arguments, 0b11);
  EXPECT_NO_THROW(timed.synchronize());
}

}  // namespace
}  // namespace npusim
