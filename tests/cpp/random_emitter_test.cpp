// Emitted random kernels on the emulator: the numbers depend only on the key and the stream position, not on the
// chip's cores or tile size, and each op applies its parameters as PyTorch defines them.
#include <gtest/gtest.h>

#include <Eigen/Core>

#include <bit>
#include <cstring>

#include "npusim/emitter/random.h"
#include "npusim/runtime/device.h"

namespace npusim {
namespace {

using emitter::RandomOp;

constexpr uint64_t kKey = 0x0123456789abcdefull, kFirstPosition = (uint64_t{1} << 32) - 100;  // crosses a word

config::ChipConfig chip(int cores, int scratchpad_kib) {
  config::ChipConfig config;
  config.dram_capacity_mib = 64;
  config.chip_cores = cores;
  config.core_scratchpad_kib = scratchpad_kib;
  return config;
}

struct Result {
  std::vector<std::byte> out;
  std::vector<uint8_t> mask;
};

float input_value(int64_t k) { return static_cast<float>(k) / 100 - 5; }

// Element k of a buffer of `type` (f32, f16 or bf16), rounded to nearest even.
void store(std::vector<std::byte>& buffer, int64_t k, isa::ElementType type, float value) {
  if (type == isa::ElementType::F32) {
    std::memcpy(buffer.data() + 4 * k, &value, 4);
  } else {
    const uint16_t bits = type == isa::ElementType::F16 ? std::bit_cast<uint16_t>(Eigen::half(value))
                                                        : std::bit_cast<uint16_t>(Eigen::bfloat16(value));
    std::memcpy(buffer.data() + 2 * k, &bits, 2);
  }
}
float load(const std::vector<std::byte>& buffer, int64_t k, isa::ElementType type) {
  float value;
  if (type == isa::ElementType::F32) {
    std::memcpy(&value, buffer.data() + 4 * k, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, buffer.data() + 2 * k, 2);
  return type == isa::ElementType::F16 ? static_cast<float>(std::bit_cast<Eigen::half>(bits))
                                       : static_cast<float>(std::bit_cast<Eigen::bfloat16>(bits));
}

// Runs the op over `count` elements with parameters (first, second); dropout reads input[k] = k / 100 - 5 (rounded
// to the type).
Result run(const config::ChipConfig& config, RandomOp op, int64_t count, float first, float second,
           isa::ElementType type = isa::ElementType::F32) {
  runtime::Device device(config, runtime::Mode::Functional);
  const uint64_t bytes = count * isa::element_bytes(type);
  const uint64_t out = device.allocate(bytes), input = device.allocate(bytes), mask = device.allocate(count);
  std::vector<std::byte> values(bytes);
  for (int64_t k = 0; k < count; ++k) store(values, k, type, input_value(k));
  device.copy_host_to_device(input, values.data(), bytes);
  const emitter::Kernel kernel = emitter::emit_random({op, count, type}, device.config());
  const uint64_t arguments[] = {
      out, input, mask, kKey, kFirstPosition, std::bit_cast<uint32_t>(first), std::bit_cast<uint32_t>(second)};
  device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << kernel.cores) - 1);
  Result result{std::vector<std::byte>(bytes), std::vector<uint8_t>(count)};
  device.copy_device_to_host(result.out.data(), out, bytes);
  device.copy_device_to_host(result.mask.data(), mask, count);
  return result;
}

std::vector<float> floats(const Result& result) {
  std::vector<float> values(result.out.size() / 4);
  std::memcpy(values.data(), result.out.data(), result.out.size());
  return values;
}

TEST(RandomKernels, DrawTheSameNumbersWhateverTheCoresAndTiles) {
  // 5000 elements: one tile on one 256 KiB core, many partial and full 4 KiB tiles on four cores.
  for (RandomOp op : {RandomOp::Uniform, RandomOp::Normal, RandomOp::Bernoulli, RandomOp::Dropout}) {
    const Result one = run(chip(1, 256), op, 5000, 0.25f, 2.0f), many = run(chip(4, 4), op, 5000, 0.25f, 2.0f);
    EXPECT_EQ(one.out, many.out) << emitter::op_name(op);
    EXPECT_EQ(one.mask, many.mask) << emitter::op_name(op);
  }
  EXPECT_GT(emitter::emit_random({RandomOp::Uniform, 5000}, chip(4, 4)).cores, 1);
}

TEST(RandomKernels, ApplyTheirParameters) {
  const std::vector<float> uniform = floats(run(chip(2, 4), RandomOp::Uniform, 3000, -1.0f, 4.0f));
  for (float value : uniform) {
    EXPECT_GE(value, -1.0f);
    EXPECT_LT(value, 3.0f);  // low + span
  }
  const std::vector<float> unit = floats(run(chip(2, 4), RandomOp::Uniform, 3000, 0.0f, 1.0f));
  const std::vector<float> bernoulli = floats(run(chip(2, 4), RandomOp::Bernoulli, 3000, 0.3f, 0.0f));
  for (size_t k = 0; k < unit.size(); ++k) EXPECT_EQ(bernoulli[k], unit[k] < 0.3f ? 1.0f : 0.0f) << k;
  const std::vector<float> standard = floats(run(chip(2, 4), RandomOp::Normal, 3000, 0.0f, 1.0f));
  const std::vector<float> scaled = floats(run(chip(2, 4), RandomOp::Normal, 3000, 2.0f, 0.5f));
  for (size_t k = 0; k < standard.size(); ++k) EXPECT_EQ(scaled[k], standard[k] * 0.5f + 2.0f) << k;
}

TEST(RandomKernels, DropoutKeepsWhereTheUniformIsBelowTheKeepProbabilityAndScales) {
  const float keep = 0.8f, scale = 1.25f;
  const Result dropout = run(chip(2, 4), RandomOp::Dropout, 3000, keep, scale);
  const std::vector<float> unit = floats(run(chip(2, 4), RandomOp::Uniform, 3000, 0.0f, 1.0f));
  const std::vector<float> out = floats(dropout);
  for (size_t k = 0; k < out.size(); ++k) {
    const bool kept = unit[k] < keep;
    EXPECT_EQ(dropout.mask[k], kept ? 1 : 0) << k;
    EXPECT_EQ(out[k], kept ? (static_cast<float>(k) / 100 - 5) * scale : 0.0f) << k;
  }
}

TEST(RandomKernels, HalfPrecisionUniformStaysBelowOne) {
  for (isa::ElementType type : {isa::ElementType::F16, isa::ElementType::BF16}) {
    const Result result = run(chip(2, 4), RandomOp::Uniform, 3000, 0.0f, 1.0f, type);
    for (size_t k = 0; k < result.out.size(); k += 2) {
      uint16_t bits;
      std::memcpy(&bits, result.out.data() + k, 2);
      const uint16_t one = type == isa::ElementType::F16 ? 0x3c00 : 0x3f80;
      EXPECT_LT(bits, one) << k;  // non-negative floats order like their bits
    }
  }
  EXPECT_THROW(emitter::emit_random({RandomOp::Uniform, 10, isa::ElementType::I32}, chip(1, 4)), std::invalid_argument);
}

// Half-precision dropout keeps the same elements as float32's (the same draws) and scales the input in float32,
// rounding once to its type, as PyTorch's kernels do.
TEST(RandomKernels, HalfPrecisionDropoutScalesInFloat32AndRoundsOnce) {
  const float keep = 0.7f, scale = 1.0f / 0.7f;
  const Result reference = run(chip(2, 4), RandomOp::Dropout, 3000, keep, scale);
  for (isa::ElementType type : {isa::ElementType::F16, isa::ElementType::BF16}) {
    const Result dropout = run(chip(2, 4), RandomOp::Dropout, 3000, keep, scale, type);
    EXPECT_EQ(dropout.mask, reference.mask) << isa::type_name(type);
    std::vector<std::byte> expected(dropout.out.size()), input(dropout.out.size());
    for (int64_t k = 0; k < 3000; ++k) {
      store(input, k, type, input_value(k));
      store(expected, k, type, reference.mask[k] ? load(input, k, type) * scale : 0.0f);
    }
    EXPECT_EQ(dropout.out, expected) << isa::type_name(type);
  }
  EXPECT_THROW(emitter::emit_random({RandomOp::Dropout, 10, isa::ElementType::I32}, chip(1, 4)), std::invalid_argument);
}

}  // namespace
}  // namespace npusim
