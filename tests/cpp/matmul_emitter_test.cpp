// Emitted matmul kernels on the emulator against a reference with the matrix engine's numerics: each output
// accumulates its products in k order by fused multiply-adds, across K tiles as within one.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <regex>
#include <string>

#include "npusim/emitter/matmul.h"
#include "npusim/runtime/device.h"

namespace npusim {
namespace {

config::ChipConfig small_config() {
  config::ChipConfig config;
  config.dram_capacity_mib = 128;
  config.core_systolic_rows = 8;
  config.core_systolic_cols = 4;
  config.core_scratchpad_kib = 4;  // small M tiles too, so every loop runs with edges
  config.core_accumulator_kib = 1;
  return config;
}

// With room in the scratchpad for loads of several K steps (gemm_loop.cpp's choose_steps) beside the blocks.
config::ChipConfig roomy_config() {
  config::ChipConfig config = small_config();
  config.core_scratchpad_kib = 16;
  return config;
}

struct MatmulCase {
  const char* name;
  emitter::MatmulSpec spec;
};

void PrintTo(const MatmulCase& c, std::ostream* out) { *out << c.name; }

class EmittedMatmul : public ::testing::TestWithParam<MatmulCase> {};

// `spec` with A's columns in runs (an implicit GEMM, gemm_loop.h).
emitter::MatmulSpec in_runs(emitter::MatmulSpec spec, int64_t run, int64_t run_stride) {
  spec.a_run = run;
  spec.a_run_stride = run_stride;
  return spec;
}

// Where column k of A is, from A's row (gemm_loop.h): in its run when the columns come in runs.
int64_t a_column(const emitter::MatmulSpec& s, int64_t k) {
  return s.a_run > 0 ? k / s.a_run * s.a_run_stride + k % s.a_run * s.a_col : k * s.a_col;
}

// Runs the kernel for `s` on all cores of `config` and checks it against the tiled reference.
void expect_matches_reference(const emitter::MatmulSpec& s, const config::ChipConfig& config) {
  runtime::Device device(config, runtime::Mode::Functional);
  std::mt19937 random(11);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const size_t span = 1 << 14;
  std::vector<float> a(span), b(span), c(span, 0.0f);
  for (auto& x : a) x = value(random);
  for (auto& x : b) x = value(random);
  const uint64_t da = device.allocate(span * 4), db = device.allocate(span * 4), dc = device.allocate(span * 4);
  device.copy_host_to_device(da, a.data(), span * 4);
  device.copy_host_to_device(db, b.data(), span * 4);
  device.copy_host_to_device(dc, c.data(), span * 4);

  const emitter::Kernel kernel = emitter::emit_matmul(s, config);
  const uint64_t arguments[] = {dc, da, db};
  const uint64_t all_cores = (uint64_t{1} << config.chip_cores) - 1;
  device.launch(kernel.name, device.load_program(kernel.words), arguments, all_cores);
  std::vector<float> actual(span);
  device.copy_device_to_host(actual.data(), dc, span * 4);

  for (int64_t e = 0; e < s.batch; ++e) {
    for (int64_t m = 0; m < s.m; ++m) {
      for (int64_t n = 0; n < s.n; ++n) {
        float accumulator = 0.0f;
        for (int64_t k = 0; k < s.k; ++k)
          accumulator = std::fma(a[e * s.a_batch + m * s.a_row + a_column(s, k)],
                                 b[e * s.b_batch + k * s.b_row + n * s.b_col], accumulator);
        c[e * s.c_batch + m * s.c_row + n * s.c_col] = accumulator;
      }
    }
  }
  EXPECT_EQ(actual, c) << kernel.assembly();
}

TEST_P(EmittedMatmul, MatchesTiledReference) { expect_matches_reference(GetParam().spec, small_config()); }

TEST_P(EmittedMatmul, MatchesTiledReferenceWhenCoresShareTheTiles) {
  config::ChipConfig config = small_config();
  config.chip_cores = 3;
  expect_matches_reference(GetParam().spec, config);
}

TEST_P(EmittedMatmul, MatchesTiledReferenceLoadingSeveralKStepsAtOnce) {
  config::ChipConfig config = roomy_config();
  config.chip_cores = 2;
  expect_matches_reference(GetParam().spec, config);
}

const MatmulCase kShapes[] = {
    MatmulCase{"OneTile", {4, 8, 4, 8, 1, 4, 1, 4, 1}},
    MatmulCase{"RaggedEdgesEverywhere", {37, 21, 11, 21, 1, 11, 1, 11, 1}},
    MatmulCase{"TransposedWeightsLikeLinear", {9, 19, 7, 19, 1, 1, 19, 7, 1}},
    MatmulCase{"TransposedInputAndStridedOutput", {6, 5, 9, 1, 6, 9, 1, 20, 2}},
    MatmulCase{"SingleElement", {1, 1, 1, 1, 1, 1, 1, 1, 1}},
    // 16-column blocks: three full ones and one of two columns
    MatmulCase{"ManyBlocksAndANarrowLastOne", {70, 9, 50, 9, 1, 50, 1, 50, 1}},
    MatmulCase{"TransposedWeightsAcrossBlocks", {40, 12, 30, 12, 1, 1, 12, 30, 1}},
    // X^T @ dY, a weight gradient: A read in columns and transposed in the
    // kernel, over many blocks and K steps with ragged edges
    MatmulCase{"TransposedInputAcrossBlocksAndKSteps", {45, 27, 19, 1, 45, 19, 1, 19, 1}},
    MatmulCase{"TransposedInputAndTransposedWeights", {45, 27, 19, 1, 45, 1, 27, 19, 1}},
    MatmulCase{"BatchOfTransposedInputs",
               {13, 9, 11, 1, 13, 11, 1, 11, 1, isa::ElementType::F32, std::nullopt, 3, 13 * 9, 9 * 11, 13 * 11}},
    // bmm: 5 entries of 13 x 9 @ 9 x 11, ragged blocks in every entry
    MatmulCase{"BatchOfProducts",
               {13, 9, 11, 9, 1, 11, 1, 11, 1, isa::ElementType::F32, std::nullopt, 5, 13 * 9, 9 * 11, 13 * 11}},
    // one A (a 1 x 1 convolution's weights) against a batch of B
    MatmulCase{"BatchSharingItsFirstOperand",
               {6, 10, 21, 10, 1, 21, 1, 21, 1, isa::ElementType::F32, std::nullopt, 4, 0, 10 * 21, 6 * 21}},
    // An implicit GEMM: a 3 x 3 convolution of 8 channels-last channels over 2 padded images of 7 x 9 pixels,
    // output rows as wide as the padded image (5 x 9, the last two columns of each discarded by the caller):
    // A[m][(i, j, c)] at image + m * 8 + i * 9 * 8 + j * 8 + c, runs of 3 x 8 (three K steps each) 72 apart.
    MatmulCase{"ImplicitConvolution", in_runs({5 * 9, 72, 6, 8, 1, 6, 1, 6, 1, isa::ElementType::F32, std::nullopt, 2,
                                               7 * 9 * 8, 0, 5 * 9 * 6},
                                              24, 9 * 8)},
    // A weight gradient's product for one kernel row, patches^T @ dY: A [(j, c)][(image, position)] read in
    // columns (a transposed A), K in runs of an image's positions: 2 images of 48 positions, the positions 8
    // channels apart, the images 512 elements apart.
    MatmulCase{"ImplicitConvolutionWeightGradient", in_runs({24, 96, 6, 1, 8, 6, 1, 6, 1}, 48, 512)},
    // K a multiple of the K step (8): loads of several K steps (ThinProductsLoadSeveralKStepsAtOnce), the last
    // one shorter, with ragged blocks, transposed operands and a batch.
    MatmulCase{"KStepsLoadedTogether", {10, 40, 6, 40, 1, 6, 1, 6, 1}},
    MatmulCase{"TransposedInputInKStepsLoadedTogether", {12, 48, 7, 1, 12, 7, 1, 7, 1}},
    MatmulCase{"TransposedWeightsInKStepsLoadedTogether", {9, 56, 10, 56, 1, 1, 56, 10, 1}},
    MatmulCase{"BothTransposedInKStepsLoadedTogether", {11, 40, 5, 1, 11, 1, 40, 5, 1}},
    MatmulCase{"BatchInKStepsLoadedTogether",
               {5, 32, 6, 32, 1, 6, 1, 6, 1, isa::ElementType::F32, std::nullopt, 3, 5 * 32, 32 * 6, 5 * 6}}};
INSTANTIATE_TEST_SUITE_P(Shapes, EmittedMatmul, ::testing::ValuesIn(kShapes),
                         [](const ::testing::TestParamInfo<MatmulCase>& info) { return std::string(info.param.name); });

// How many K steps each load of the kernel brings, from its description (gemm_loop.cpp).
int64_t k_steps_per_load(const emitter::Kernel& kernel) {
  std::smatch found;
  EXPECT_TRUE(std::regex_search(kernel.description, found, std::regex(R"(\((\d+) a load\))"))) << kernel.description;
  return found.empty() ? 0 : std::stoll(found[1]);
}

// A product whose K steps' loads would take longer than their products (few rows or columns: here every one, on a
// small array with the DRAM's latency) loads several K steps at once where the scratchpad has room, never across a
// run of A's columns; one whose K is not a whole number of steps loads one at a time.
TEST(EmittedMatmul, ThinProductsLoadSeveralKStepsAtOnce) {
  const config::ChipConfig config = roomy_config();
  for (const MatmulCase& c : kShapes) {
    const std::string name = c.name;
    const int64_t steps = k_steps_per_load(emitter::emit_matmul(c.spec, config));
    if (name.find("LoadedTogether") != std::string::npos) EXPECT_GT(steps, 1) << name;
    if (name == "ImplicitConvolution") EXPECT_EQ(steps, 3) << name;  // its runs: 24 of K, 3 steps
    if (name == "ImplicitConvolutionWeightGradient") EXPECT_TRUE(steps == 2 || steps == 3 || steps == 6) << name;
    if (c.spec.k % config.core_systolic_rows != 0) EXPECT_EQ(steps, 1) << name;  // a ragged K step: one at a time
  }
}

// Loads of several K steps keep every operand form's registers within the register file, with the epilogue's too
// (a scaled bias, a batch): each of these builds, grouping its K steps.
TEST(EmittedMatmul, LoadsOfSeveralKStepsBuildForEveryOperandFormAndEpilogue) {
  const config::ChipConfig config = roomy_config();
  for (const bool a_transposed : {false, true})
    for (const bool b_transposed : {false, true})
      for (const int64_t batch : {1, 3}) {
        const int64_t m = 9, k = 48, n = 7;
        emitter::MatmulSpec s{m,
                              k,
                              n,
                              a_transposed ? 1 : k,
                              a_transposed ? m : 1,
                              b_transposed ? 1 : n,
                              b_transposed ? k : 1,
                              n,
                              1,
                              isa::ElementType::F32,
                              std::nullopt,
                              batch,
                              m * k,
                              k * n,
                              m * n};
        s.epilogue = {.alpha = 0.5f, .bias = true, .beta = 2.0f, .bias_row = n, .bias_col = 1, .bias_batch = m * n};
        const std::string name =
            fmt::format("A{} B{} batch {}", a_transposed ? "^T" : "", b_transposed ? "^T" : "", batch);
        emitter::Kernel kernel;
        ASSERT_NO_THROW(kernel = emitter::emit_matmul(s, config)) << name;
        EXPECT_GT(k_steps_per_load(kernel), 1) << name;
      }
}

// bfloat16 as the upper half of a float32, rounded to nearest-even (no NaNs here).
uint16_t to_bfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}
float from_bfloat16(uint16_t value) { return std::bit_cast<float>(static_cast<uint32_t>(value) << 16); }

// bf16 operands, on three cores with ragged edges and transposed weights: each output is the products, exact in
// f32, summed by fused multiply-adds in k order and rounded once to bf16.
TEST(EmittedMatmulInBFloat16, AccumulatesInFloat32AndRoundsOnce) {
  config::ChipConfig config = small_config();
  config.chip_cores = 3;
  for (emitter::MatmulSpec s : {emitter::MatmulSpec{37, 21, 11, 21, 1, 11, 1, 11, 1, isa::ElementType::BF16},
                                emitter::MatmulSpec{9, 19, 7, 19, 1, 1, 19, 7, 1, isa::ElementType::BF16}}) {
    runtime::Device device(config, runtime::Mode::Functional);
    std::mt19937 random(12);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    const size_t span = 1 << 12;
    std::vector<uint16_t> a(span), b(span), c(span, 0);
    for (auto& x : a) x = to_bfloat16(value(random));
    for (auto& x : b) x = to_bfloat16(value(random));
    const uint64_t da = device.allocate(span * 2), db = device.allocate(span * 2), dc = device.allocate(span * 2);
    device.copy_host_to_device(da, a.data(), span * 2);
    device.copy_host_to_device(db, b.data(), span * 2);
    device.copy_host_to_device(dc, c.data(), span * 2);
    const emitter::Kernel kernel = emitter::emit_matmul(s, config);
    EXPECT_EQ(kernel.name, "matmul_bf16");
    const uint64_t arguments[] = {dc, da, db};
    device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << config.chip_cores) - 1);
    std::vector<uint16_t> actual(span);
    device.copy_device_to_host(actual.data(), dc, span * 2);
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t n = 0; n < s.n; ++n) {
        float accumulator = 0.0f;
        for (int64_t k = 0; k < s.k; ++k)
          accumulator = std::fma(from_bfloat16(a[m * s.a_row + k * s.a_col]),
                                 from_bfloat16(b[k * s.b_row + n * s.b_col]), accumulator);
        c[m * s.c_row + n * s.c_col] = to_bfloat16(accumulator);
      }
    EXPECT_EQ(actual, c) << kernel.assembly();
  }
}

// The epilogue of addmm, linear and baddbmm on three cores with ragged blocks: each output is alpha * (its fused
// multiply-add sum in k order) + beta * bias, in f32, rounded once to C's type; bf16 with a row-vector bias (linear's)
// on transposed weights, f32 with a bias matrix per batch entry (baddbmm's).
TEST(EmittedMatmulEpilogue, ScalesAddsTheBiasInFloat32AndRoundsOnce) {
  config::ChipConfig config = small_config();
  config.chip_cores = 3;
  emitter::MatmulSpec linear{9, 19, 23, 19, 1, 1, 19, 23, 1, isa::ElementType::BF16};
  linear.epilogue = {.alpha = 0.5f, .bias = true, .beta = 2.0f, .bias_row = 0, .bias_col = 1};
  emitter::MatmulSpec baddbmm{13,           9, 11,     9,      1,      11, 1, 11, 1, isa::ElementType::F32,
                              std::nullopt, 3, 13 * 9, 9 * 11, 13 * 11};
  baddbmm.epilogue = {.alpha = 1.0f, .bias = true, .beta = 1.0f, .bias_row = 11, .bias_col = 1, .bias_batch = 13 * 11};
  for (const emitter::MatmulSpec& s : {linear, baddbmm}) {
    const bool bf16 = s.type == isa::ElementType::BF16;
    const size_t bytes = bf16 ? 2 : 4, span = 1 << 12;
    // Values as the device holds them (bf16 ones rounded), and their bits.
    const auto stored = [&](float value) { return bf16 ? from_bfloat16(to_bfloat16(value)) : value; };
    const auto bits = [&](const std::vector<float>& values) {
      std::vector<uint8_t> out(values.size() * bytes);
      for (size_t k = 0; k < values.size(); ++k) {
        if (bf16) {
          const uint16_t b = to_bfloat16(values[k]);
          std::memcpy(&out[k * 2], &b, 2);
        } else {
          std::memcpy(&out[k * 4], &values[k], 4);
        }
      }
      return out;
    };
    std::mt19937 random(13);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> a(span), b(span), bias(span), c(span, 0.0f);
    for (auto* values : {&a, &b, &bias})
      for (auto& x : *values) x = stored(value(random));
    runtime::Device device(config, runtime::Mode::Functional);
    std::vector<uint64_t> arguments;
    for (const auto* values : {&c, &a, &b, &bias}) {
      const std::vector<uint8_t> data = bits(*values);
      arguments.push_back(device.allocate(data.size()));
      device.copy_host_to_device(arguments.back(), data.data(), data.size());
    }
    const emitter::Kernel kernel = emitter::emit_matmul(s, config);
    EXPECT_EQ(kernel.name, bf16 ? "matmul_bf16+scale+scaled_bias" : "matmul_f32+bias");
    device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << config.chip_cores) - 1);
    std::vector<uint8_t> actual(span * bytes);
    device.copy_device_to_host(actual.data(), arguments[0], actual.size());
    for (int64_t e = 0; e < s.batch; ++e)
      for (int64_t m = 0; m < s.m; ++m)
        for (int64_t n = 0; n < s.n; ++n) {
          float accumulator = 0.0f;
          for (int64_t k = 0; k < s.k; ++k)
            accumulator = std::fma(a[e * s.a_batch + m * s.a_row + a_column(s, k)],
                                   b[e * s.b_batch + k * s.b_row + n * s.b_col], accumulator);
          const float bias_value = bias[e * s.epilogue.bias_batch + m * s.epilogue.bias_row + n * s.epilogue.bias_col];
          const float scaled = accumulator * s.epilogue.alpha, scaled_bias = bias_value * s.epilogue.beta;
          c[e * s.c_batch + m * s.c_row + n * s.c_col] = scaled + scaled_bias;
        }
    EXPECT_EQ(actual, bits(c)) << kernel.assembly();
  }
}

// i8 operands into i32 on two cores, odd shapes, a transposed A: the integer sums, exactly.
TEST(EmittedMatmulInInt8, SumsExactlyInInt32) {
  config::ChipConfig config = small_config();
  config.chip_cores = 2;
  const emitter::MatmulSpec s{13, 300, 10, 1, 13, 10, 1, 10, 1, isa::ElementType::I8, isa::ElementType::I32};
  runtime::Device device(config, runtime::Mode::Functional);
  std::mt19937 random(5);
  std::uniform_int_distribution<int> value(-128, 127);
  std::vector<int8_t> a(13 * 300), b(300 * 10);
  for (auto& x : a) x = static_cast<int8_t>(value(random));
  for (auto& x : b) x = static_cast<int8_t>(value(random));
  const uint64_t da = device.allocate(a.size()), db = device.allocate(b.size()), dc = device.allocate(13 * 10 * 4);
  device.copy_host_to_device(da, a.data(), a.size());
  device.copy_host_to_device(db, b.data(), b.size());
  const emitter::Kernel kernel = emitter::emit_matmul(s, config);
  EXPECT_EQ(kernel.name, "matmul_i8");
  const uint64_t arguments[] = {dc, da, db};
  device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << config.chip_cores) - 1);
  std::vector<int32_t> actual(13 * 10), expected(13 * 10, 0);
  device.copy_device_to_host(actual.data(), dc, actual.size() * 4);
  for (int64_t m = 0; m < s.m; ++m)
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t k = 0; k < s.k; ++k) expected[m * 10 + n] += a[m * s.a_row + k * s.a_col] * b[k * 10 + n];
  EXPECT_EQ(actual, expected);
}

}  // namespace
}  // namespace npusim
