// Kernels whose engines the builder or their own semaphores order, run in both modes against a plain reference:
// transposing copies, fused attention and random tiles, with ragged tiles and several cores. Both modes must give
// the same bits, the reference's values, and the timed model must see no engine racing another.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "npusim/emitter/attention.h"
#include "npusim/emitter/random.h"
#include "npusim/emitter/transpose_copy.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim {
namespace {

constexpr runtime::Mode kModes[] = {runtime::Mode::Functional, runtime::Mode::Timed};

// Launches `kernel` on its cores over `buffers` (uploaded first, read back after) and `words` after them in the
// argument block; in timed mode, expects no hazard.
void launch(runtime::Device& device, const emitter::Kernel& kernel, std::vector<std::vector<std::byte>>& buffers,
            const std::vector<uint64_t>& words = {}) {
  std::vector<uint64_t> arguments;
  for (const std::vector<std::byte>& buffer : buffers) {
    arguments.push_back(device.allocate(buffer.size()));
    device.copy_host_to_device(arguments.back(), buffer.data(), buffer.size());
  }
  arguments.insert(arguments.end(), words.begin(), words.end());
  device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << kernel.cores) - 1);
  for (size_t b = 0; b < buffers.size(); ++b) {
    device.copy_device_to_host(buffers[b].data(), arguments[b], buffers[b].size());
    device.free(arguments[b]);
  }
  for (const runtime::CommandRecord& record : device.take_records())
    EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << ": " << record.first_hazard;
}

// ---- transposing copies

struct TransposeCase {
  const char* name;
  int element_bytes;
  std::vector<int64_t> sizes, destination_strides, source_strides;  // in elements
  int scratchpad_kib, cores;
};

// dst[i] = src[j] for every multi-index, each side at its own strides.
std::vector<uint8_t> strided_copy(const TransposeCase& c, const std::vector<uint8_t>& source,
                                  size_t destination_bytes) {
  std::vector<uint8_t> destination(destination_bytes);
  std::vector<int64_t> index(c.sizes.size(), 0);
  for (;;) {
    int64_t d = 0, s = 0;
    for (size_t k = 0; k < index.size(); ++k) {
      d += index[k] * c.destination_strides[k];
      s += index[k] * c.source_strides[k];
    }
    std::memcpy(&destination[d * c.element_bytes], &source[s * c.element_bytes], c.element_bytes);
    size_t k = index.size();
    while (k > 0 && ++index[k - 1] == c.sizes[k - 1]) index[--k] = 0;
    if (k == 0) return destination;
  }
}

class TransposeCopy : public testing::TestWithParam<TransposeCase> {};

TEST_P(TransposeCopy, MatchesAStridedLoopInBothModes) {
  const TransposeCase& c = GetParam();
  config::ChipConfig config = test_config();
  config.chip_cores = c.cores;
  config.core_scratchpad_kib = c.scratchpad_kib;
  emitter::StridedCopy copy{c.element_bytes, c.sizes, {}, {}};
  int64_t elements = 1;
  for (size_t k = 0; k < c.sizes.size(); ++k) {
    copy.destination_strides.push_back(c.destination_strides[k] * c.element_bytes);
    copy.source_strides.push_back(c.source_strides[k] * c.element_bytes);
    elements *= c.sizes[k];
  }
  const std::optional<emitter::Kernel> kernel = emitter::emit_transpose_copy(copy, config);
  ASSERT_TRUE(kernel);
  EXPECT_EQ(kernel->cores, c.cores);
  std::vector<uint8_t> source(elements * c.element_bytes);
  for (size_t k = 0; k < source.size(); ++k) source[k] = static_cast<uint8_t>(k * 7 + k / 251);
  const std::vector<uint8_t> expected = strided_copy(c, source, source.size());
  for (runtime::Mode mode : kModes) {
    runtime::Device device(config, mode);
    std::vector<std::vector<std::byte>> buffers = {std::vector<std::byte>(source.size()), bytes_of(source)};
    launch(device, *kernel, buffers);
    EXPECT_EQ(values_of<uint8_t>(buffers[0]), expected) << (mode == runtime::Mode::Timed ? "timed" : "functional");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, TransposeCopy,
                         testing::Values(
                             // square 16 x 16 tiles with ragged edges on two cores (a 4 KiB scratchpad)
                             TransposeCase{"RaggedSquareTiles", 4, {37, 53}, {53, 1}, {1, 37}, 4, 2},
                             // a short dimension taken whole, 2-byte elements, three cores
                             TransposeCase{"ShortDimensionWhole", 2, {300, 7}, {7, 1}, {1, 300}, 4, 3},
                             // a permuted 3-D tensor with a third, outer dimension; 8-byte elements
                             TransposeCase{"PermutedThreeDimensions", 8, {5, 6, 7}, {42, 7, 1}, {6, 1, 30}, 4, 2},
                             // bytes, one core, more tiles than buffers
                             TransposeCase{"BytesOnOneCore", 1, {70, 90}, {1, 70}, {90, 1}, 4, 1}),
                         [](const testing::TestParamInfo<TransposeCase>& info) { return info.param.name; });

// ---- fused attention

// Attention in double precision: softmax(scale Q K^T, causal) V and each row's log-sum-exp.
void attention_reference(const emitter::AttentionSpec& s, const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, std::vector<double>& out, std::vector<double>& lse) {
  out.assign(s.heads * s.q_len * s.value_dim, 0.0);
  lse.assign(s.heads * s.q_len, 0.0);
  for (int64_t h = 0; h < s.heads; ++h)
    for (int64_t i = 0; i < s.q_len; ++i) {
      const int64_t seen = s.causal ? std::min(i + 1, s.k_len) : s.k_len;
      std::vector<double> p(seen);
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < seen; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.head_dim; ++d)
          dot += double{q[(h * s.q_len + i) * s.head_dim + d]} * k[(h * s.k_len + j) * s.head_dim + d];
        max = std::max(max, p[j] = dot * s.scale);
      }
      for (double& x : p) sum += x = std::exp(x - max);
      for (int64_t e = 0; e < s.value_dim; ++e) {
        double value = 0;
        for (int64_t j = 0; j < seen; ++j) value += p[j] * v[(h * s.k_len + j) * s.value_dim + e];
        out[(h * s.q_len + i) * s.value_dim + e] = value / sum;
      }
      lse[h * s.q_len + i] = max + std::log(sum);
    }
}

TEST(AttentionKernel, MatchesDoublePrecisionInBothModes) {
  config::ChipConfig config = test_config();  // a 4 x 4 array: blocks of 4, head dim 6 = 4 + 2, value dim 5 = 4 + 1
  config.chip_cores = 3;
  config.core_systolic_rows = config.core_systolic_cols = 4;
  config.core_scratchpad_kib = 16;
  config.core_accumulator_kib = 1;
  runtime::Device devices[] = {runtime::Device(config, kModes[0]), runtime::Device(config, kModes[1])};
  for (bool causal : {false, true}) {
    const emitter::AttentionSpec s{2, 11, 9, 6, 5, causal, 0.4f};
    std::mt19937 random(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const auto fill = [&](int64_t n) {
      std::vector<float> values(n);
      for (float& x : values) x = normal(random);
      return values;
    };
    const std::vector<float> q = fill(s.heads * s.q_len * s.head_dim), k = fill(s.heads * s.k_len * s.head_dim),
                             v = fill(s.heads * s.k_len * s.value_dim);
    std::vector<double> out, lse;
    attention_reference(s, q, k, v, out, lse);
    const emitter::Kernel kernel = emitter::emit_attention(s, config);
    EXPECT_EQ(kernel.cores, 3);  // 2 heads x 3 query blocks
    std::vector<std::vector<std::byte>> results[2];
    for (int m = 0; m < 2; ++m) {
      results[m] = {std::vector<std::byte>(out.size() * 4), std::vector<std::byte>(lse.size() * 4), bytes_of(q),
                    bytes_of(k), bytes_of(v)};
      launch(devices[m], kernel, results[m]);
    }
    EXPECT_EQ(results[0][0], results[1][0]) << "output, causal " << causal;
    EXPECT_EQ(results[0][1], results[1][1]) << "log-sum-exp, causal " << causal;
    // float32 sums of a few terms against double: a few units in the last place.
    const std::vector<float> actual_out = values_of<float>(results[1][0]), actual_lse = values_of<float>(results[1][1]);
    for (size_t n = 0; n < out.size(); ++n) EXPECT_NEAR(actual_out[n], out[n], 2e-6) << n << " causal " << causal;
    for (size_t n = 0; n < lse.size(); ++n) EXPECT_NEAR(actual_lse[n], lse[n], 4e-6) << n << " causal " << causal;
  }
}

// ---- random tiles

// Dropout and half-precision uniform over many ragged 4 KiB tiles on two cores: the same bits in both modes, and
// dropout's output is its input scaled where the mask keeps it.
TEST(RandomKernel, TilesAgreeInBothModesAndDropoutFollowsItsMask) {
  config::ChipConfig config = test_config();
  config.chip_cores = 2;
  config.core_scratchpad_kib = 4;
  constexpr int64_t kCount = 3000;
  const float keep = 0.7f, scale = 1.0f / 0.7f;
  std::vector<float> input(kCount);
  for (int64_t k = 0; k < kCount; ++k) input[k] = static_cast<float>(k) / 64 - 20;
  runtime::Device devices[] = {runtime::Device(config, kModes[0]), runtime::Device(config, kModes[1])};
  for (const auto& [op, type] : {std::pair{emitter::RandomOp::Dropout, isa::ElementType::F32},
                                 {emitter::RandomOp::Uniform, isa::ElementType::BF16}}) {
    const emitter::Kernel kernel = emitter::emit_random({op, kCount, type}, config);
    EXPECT_EQ(kernel.cores, 2);
    const std::vector<uint64_t> words = {0x9e3779b97f4a7c15ull, 77, std::bit_cast<uint32_t>(keep),
                                         std::bit_cast<uint32_t>(scale)};
    std::vector<std::vector<std::byte>> results[2];
    for (int m = 0; m < 2; ++m) {
      results[m] = {std::vector<std::byte>(kCount * isa::element_bytes(type)), bytes_of(input),
                    std::vector<std::byte>(kCount)};
      launch(devices[m], kernel, results[m], words);
    }
    EXPECT_EQ(results[0][0], results[1][0]) << kernel.name;
    EXPECT_EQ(results[0][2], results[1][2]) << kernel.name;
    if (op != emitter::RandomOp::Dropout) continue;
    const std::vector<float> out = values_of<float>(results[1][0]);
    const std::vector<uint8_t> mask = values_of<uint8_t>(results[1][2]);
    int64_t kept = 0;
    for (int64_t k = 0; k < kCount; ++k) {
      ASSERT_LE(mask[k], 1) << k;
      kept += mask[k];
      EXPECT_EQ(out[k], mask[k] ? input[k] * scale : 0.0f) << k;
    }
    EXPECT_NEAR(static_cast<double>(kept) / kCount, keep, 0.05);
  }
}

}  // namespace
}  // namespace npusim
