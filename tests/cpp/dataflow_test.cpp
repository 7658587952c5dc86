// The matrix engine's dataflows and weight buffering (core.dataflow, core.weight_buffers, core.weight_load_rows,
// core.accumulator_write_cycles): closed-form timings of hand-written matrix programs, emitted GEMMs on a
// SCALE-Sim-compatible chip against SCALE-Sim's fold schedule, and results that do not depend on the dataflow.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <random>
#include <tuple>

#include "npusim/emitter/matmul.h"
#include "npusim/isa/assembler.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim {
namespace {

// The kernel's record: its cycles and statistics (array_cycles among them).
runtime::CommandRecord timed_run(const config::ChipConfig& config, const std::string& source) {
  runtime::Device timed(config, runtime::Mode::Timed);
  const uint64_t arguments[] = {0};
  timed.launch("closed_form", timed.load_program(isa::assemble(source, "closed_form.s")), arguments);
  return timed.take_records().back();
}

config::ChipConfig single_buffered() {
  config::ChipConfig config = test_config();
  config.core_weight_buffers = 1;
  return config;
}

config::ChipConfig output_stationary() {
  config::ChipConfig config = test_config();
  config.core_dataflow = "output_stationary";
  return config;
}

// Three weight loads and products of 4 rows on the 16 x 16 array (R + C - 2 = 30, + 1 accumulator write).
const std::string kThreeProducts =
    "li r2, 16\n li r3, 4\n mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 0\n mx.ldw.f32 r0, r2, r2\n"
    " mx.mac.f32 r0, r0, r3, 1\n mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 1\n fence\n halt\n";

TEST(Dataflow, SingleBufferedWeightLoadWaitsForTheProductToLeaveTheArray) {
  // li, li: 2 cycles; mx.ldw 2..18; mx.mac streams 18..22, its last partial sum leaves the array at 22 + 30 = 52 and
  // reaches the accumulator at 53. The one weight set is free at 52: the second mx.ldw loads 52..68, its mx.mac streams
  // 68..72 (out at 102); the third mx.ldw 102..118, mx.mac 118..122, drained at 153. Fence +1, halt +1 → 155 cycles
  // (106 with two weight sets: WeightLoadWaitsForItsSetToDrain in sim_test.cpp).
  const runtime::CommandRecord record = timed_run(single_buffered(), kThreeProducts);
  EXPECT_EQ(record.kernel_cycles, 155u);
  // The array works from the first load at 2 to the last drain at 153 without a gap.
  EXPECT_EQ(record.stats.array_cycles, 151u);
}

TEST(Dataflow, DoubleBufferedArrayCyclesCountOverlapsOnce) {
  // As WeightLoadWaitsForItsSetToDrain: loads 2..18, 18..34 and 53..69 overlap the products 18..53, 34..69 and
  // 69..104; the array works 2..104 without a gap: 102 cycles, though loads and products add up to more.
  const runtime::CommandRecord record = timed_run(test_config(), kThreeProducts);
  EXPECT_EQ(record.kernel_cycles, 106u);
  EXPECT_EQ(record.stats.array_cycles, 102u);
}

TEST(Dataflow, WeightLoadThroughEveryRowTakesTheArraysHeight) {
  // K = 5 rows of weights on the 16-row array. li x3: 3 cycles. Shifting through every row: mx.ldw 3..19 (16, not
  // 5); mx.mac streams 4 rows 19..23, out of the array at 53 (one weight set), in the accumulator at 54; the second
  // mx.ldw 53..69, mx.mac 69..73, drained 73 + 31 = 104. Fence +1, halt +1 → 106 cycles.
  config::ChipConfig config = single_buffered();
  config.core_weight_load_rows = "all";
  const std::string program =
      "li r2, 5\n li r5, 16\n li r3, 4\n mx.ldw.f32 r0, r2, r5\n mx.mac.f32 r0, r0, r3, 0\n mx.ldw.f32 r0, r2, r5\n"
      " mx.mac.f32 r0, r0, r3, 1\n fence\n halt\n";
  EXPECT_EQ(timed_run(config, program).kernel_cycles, 106u);
}

TEST(Dataflow, AccumulatorWriteCyclesLengthenTheDrain) {
  // As MatrixOpsMatchClosedForm (sim_test.cpp) with 4 accumulator write cycles instead of 1: mx.ldw 2..18, mx.mac
  // 18..118, drained at 118 + 30 + 4 = 152; mx.st reads 100 rows 152..252; fence +1, halt +1 → 254 cycles.
  config::ChipConfig config = test_config();
  config.core_accumulator_write_cycles = 4;
  EXPECT_EQ(timed_run(config,
                      "li r2, 16\n li r3, 100\n mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 0\n li r4, 1600\n"
                      " mx.st.f32 r0, r0, r4\n fence\n halt\n")
                .kernel_cycles,
            254u);
}

TEST(Dataflow, OutputStationaryKStepsOfOneTileDrainOnce) {
  // li, li: 2 cycles. mx.ldw only names the weights (0 cycles at 2). The first mx.mac, issued at 3, holds a 16 x 16
  // tile of outputs in the PEs and streams its K = 16 operand pairs 3..19; the second, accumulating into the same
  // tile, streams its 16 at once, 19..35, and the tile drains once: 35 + 30 + 1 = 66. Fence +1, halt +1 → 68 cycles.
  // The array works 3..66: K + R + C - 2 + 1 = 32 + 31 = 63 cycles, SCALE-Sim's output-stationary fold for K = 32.
  const runtime::CommandRecord record =
      timed_run(output_stationary(),
                "li r2, 16\n li r3, 16\n mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 0\n mx.ldw.f32 r0, r2, r2\n"
                " mx.mac.f32 r0, r0, r3, 1\n fence\n halt\n");
  EXPECT_EQ(record.kernel_cycles, 68u);
  EXPECT_EQ(record.stats.array_cycles, 63u);
}

TEST(Dataflow, OutputStationaryTileWaitsForTheHeldTileToDrain) {
  // li x3: 3 cycles; mx.ldw at 3 (0 cycles). The first mx.mac, issued at 4, streams 4..20, drained at 20 + 31 = 51.
  // The second accumulates into another tile (accumulator byte 4096), so the PEs must shed the first one's outputs:
  // it streams 51..67, drained at 98. Fence +1, halt +1 → 100 cycles.
  EXPECT_EQ(timed_run(output_stationary(),
                      "li r2, 16\n li r3, 16\n li r4, 4096\n mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 0\n"
                      " mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r4, r0, r3, 1\n fence\n halt\n")
                .kernel_cycles,
            100u);
}

TEST(Dataflow, OutputStationaryProductTallerThanTheArrayTakesTilesInTurn) {
  // M = 40 rows on 16 PE rows: ceil(40 / 16) = 3 tiles of outputs, each streaming K = 16 pairs, the first two
  // draining (31 cycles each) before the next starts: 3 x 16 + 2 x 31 = 110 cycles from the mx.mac's issue at 3
  // (li, li, then mx.ldw naming the weights in no time), 3..113; the last tile drains at 144. Fence +1, halt +1 → 146
  // cycles.
  EXPECT_EQ(timed_run(output_stationary(),
                      "li r2, 16\n li r3, 40\n mx.ldw.f32 r0, r2, r2\n mx.mac.f32 r0, r0, r3, 0\n"
                      " fence\n halt\n")
                .kernel_cycles,
            146u);
}

// --- Emitted GEMMs on the SCALE-Sim-compatible chip (bench/scalesim_compatible.yaml) ---

config::ChipConfig scalesim_chip(int64_t rows, int64_t cols, const std::string& dataflow) {
  config::ChipConfig config =
      config::load_config_file(config::source_config_dir().parent_path() / "bench" / "scalesim_compatible.yaml");
  config.core_systolic_rows = rows;
  config.core_systolic_cols = cols;
  config.core_dataflow = dataflow;
  config.dram_capacity_mib = 256;
  return config;
}

emitter::MatmulSpec row_major(int64_t m, int64_t k, int64_t n) { return {m, k, n, k, 1, n, 1, n, 1}; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// SCALE-Sim's compute cycles ("Total Cycles" in its COMPUTE_REPORT.csv, the 0-based cycle of the last output, + 1):
// systolic_compute_ws.py folds K over R and N over C, each fold loading R weight rows, streaming M input rows skewed
// over R rows and draining over C columns: R + M + R + C - 2 cycles; systolic_compute_os.py folds M over R and N
// over C, each fold streaming K operand pairs skewed over R + C - 2.
int64_t scalesim_cycles(const std::string& dataflow, int64_t m, int64_t k, int64_t n, int64_t rows, int64_t cols) {
  if (dataflow == "weight_stationary") return ceil_div(k, rows) * ceil_div(n, cols) * (2 * rows + cols + m - 2);
  return ceil_div(m, rows) * ceil_div(n, cols) * (k + rows + cols - 2);
}

class ScaleSimSchedule : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(ScaleSimSchedule, EmittedGemmArrayCyclesMatchTheFoldSchedule) {
  const auto& [dataflow, size] = GetParam();
  const config::ChipConfig config = scalesim_chip(size, size, dataflow);
  runtime::Device device(config, runtime::Mode::Timed);
  // M = 1, ragged edges in every dimension, several folds.
  for (const auto& [m, k, n] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 8, 8}, {1, 100, 40}, {20, 20, 5}, {37, 45, 21}, {64, 64, 64}}) {
    const uint64_t a = device.allocate(m * k * 4), b = device.allocate(k * n * 4), c = device.allocate(m * n * 4);
    const emitter::Kernel kernel = emitter::emit_matmul(row_major(m, k, n), config);
    const uint64_t arguments[] = {c, a, b};
    device.launch(kernel.name, device.load_program(kernel.words), arguments);
    const runtime::CommandRecord record = device.take_records().back();
    EXPECT_EQ(static_cast<int64_t>(record.stats.array_cycles), scalesim_cycles(dataflow, m, k, n, size, size))
        << fmt::format("{} x {} x {} on {} x {}, {}", m, k, n, size, size, kernel.description);
  }
}

INSTANTIATE_TEST_SUITE_P(Arrays, ScaleSimSchedule,
                         ::testing::Combine(::testing::Values("weight_stationary", "output_stationary"),
                                            ::testing::Values(8, 16)),
                         [](const auto& info) {
                           return fmt::format("{}{}", std::get<0>(info.param) == "weight_stationary" ? "Ws" : "Os",
                                              std::get<1>(info.param));
                         });

// --- Results do not depend on the dataflow ---

// An emitted GEMM timed on a chip with `dataflow` (whose emitter blocks differ: output-stationary blocks are one tile
// of the array) leaves the same bytes as the functional emulator running the default chip's kernel.
void expect_same_product(const std::string& dataflow, int64_t buffers) {
  const int64_t m = 37, k = 45, n = 21;
  std::mt19937 random(5);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> a(m * k), b(k * n);
  for (auto& x : a) x = value(random);
  for (auto& x : b) x = value(random);
  const auto product = [&](const config::ChipConfig& config, runtime::Mode mode) {
    runtime::Device device(config, mode);
    const uint64_t da = device.allocate(a.size() * 4), db = device.allocate(b.size() * 4),
                   dc = device.allocate(m * n * 4);
    device.copy_host_to_device(da, a.data(), a.size() * 4);
    device.copy_host_to_device(db, b.data(), b.size() * 4);
    const emitter::Kernel kernel = emitter::emit_matmul(row_major(m, k, n), config);
    const uint64_t arguments[] = {dc, da, db};
    device.launch(kernel.name, device.load_program(kernel.words), arguments);
    std::vector<float> c(m * n);
    device.copy_device_to_host(c.data(), dc, c.size() * 4);
    EXPECT_EQ(device.take_records().back().stats.hazards, 0u) << kernel.assembly();
    return bytes_of(c);
  };
  config::ChipConfig timed = test_config();
  timed.core_dataflow = dataflow;
  timed.core_weight_buffers = buffers;
  EXPECT_EQ(product(timed, runtime::Mode::Timed), product(test_config(), runtime::Mode::Functional));
}

TEST(Dataflow, OutputStationaryGemmMatchesTheDefaultBitForBit) { expect_same_product("output_stationary", 2); }
TEST(Dataflow, SingleBufferedGemmMatchesTheDefaultBitForBit) { expect_same_product("weight_stationary", 1); }

}  // namespace
}  // namespace npusim
