// The fused attention kernel against attention computed in double precision on the host: non-causal and causal,
// with ragged query and key blocks, head and value dimensions split into chunks, several heads over several cores.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "npusim/emitter/attention.h"
#include "npusim/runtime/device.h"

namespace npusim {
namespace {

// A 4 x 4 systolic array: blocks of 4 queries and keys, a head dimension of 6 in chunks of 4 + 2 and a value
// dimension of 5 in chunks of 4 + 1.
config::ChipConfig tiny_config() {
  config::ChipConfig config;
  config.chip_cores = 3;
  config.dram_capacity_mib = 64;
  config.core_systolic_rows = 4;
  config.core_systolic_cols = 4;
  config.core_scratchpad_kib = 16;
  config.core_accumulator_kib = 1;
  return config;
}

struct Reference {
  std::vector<float> out, lse;
};

Reference attention(const emitter::AttentionSpec& s, const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v) {
  Reference r{std::vector<float>(s.heads * s.q_len * s.value_dim), std::vector<float>(s.heads * s.q_len)};
  for (int64_t h = 0; h < s.heads; ++h)
    for (int64_t i = 0; i < s.q_len; ++i) {
      std::vector<double> scores(s.k_len, -std::numeric_limits<double>::infinity());
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s.k_len && (!s.causal || j <= i); ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.head_dim; ++d)
          dot += double{q[(h * s.q_len + i) * s.head_dim + d]} * k[(h * s.k_len + j) * s.head_dim + d];
        scores[j] = dot * s.scale;
        max = std::max(max, scores[j]);
      }
      double sum = 0;
      for (double& score : scores) sum += score = std::exp(score - max);
      for (int64_t e = 0; e < s.value_dim; ++e) {
        double value = 0;
        for (int64_t j = 0; j < s.k_len; ++j) value += scores[j] * v[(h * s.k_len + j) * s.value_dim + e];
        r.out[(h * s.q_len + i) * s.value_dim + e] = static_cast<float>(value / sum);
      }
      r.lse[h * s.q_len + i] = static_cast<float>(max + std::log(sum));
    }
  return r;
}

void expect_matches_reference(const emitter::AttentionSpec& s) {
  const config::ChipConfig config = tiny_config();
  runtime::Device device(config, runtime::Mode::Functional);
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto fill = [&](int64_t n) {
    std::vector<float> values(n);
    for (float& x : values) x = normal(random);
    return values;
  };
  const auto q = fill(s.heads * s.q_len * s.head_dim), k = fill(s.heads * s.k_len * s.head_dim),
             v = fill(s.heads * s.k_len * s.value_dim);
  const auto upload = [&](const std::vector<float>& values) {
    const uint64_t address = device.allocate(values.size() * 4);
    device.copy_host_to_device(address, values.data(), values.size() * 4);
    return address;
  };
  const uint64_t out = device.allocate(s.heads * s.q_len * s.value_dim * 4),
                 lse = device.allocate(s.heads * s.q_len * 4);
  const uint64_t arguments[] = {out, lse, upload(q), upload(k), upload(v)};
  const emitter::Kernel kernel = emitter::emit_attention(s, config);
  device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << kernel.cores) - 1);
  Reference actual{std::vector<float>(s.heads * s.q_len * s.value_dim), std::vector<float>(s.heads * s.q_len)};
  device.copy_device_to_host(actual.out.data(), out, actual.out.size() * 4);
  device.copy_device_to_host(actual.lse.data(), lse, actual.lse.size() * 4);
  const Reference expected = attention(s, q, k, v);
  // float32 sums of a few terms against double: a few units in the last place.
  for (size_t n = 0; n < expected.out.size(); ++n) EXPECT_NEAR(actual.out[n], expected.out[n], 2e-6) << n;
  for (size_t n = 0; n < expected.lse.size(); ++n) EXPECT_NEAR(actual.lse[n], expected.lse[n], 4e-6) << n;
}

TEST(EmittedAttention, MatchesDoublePrecisionAttention) { expect_matches_reference({2, 11, 9, 6, 5, false, 0.4f}); }

TEST(EmittedAttention, CausalMatchesDoublePrecisionAttention) {
  expect_matches_reference({3, 10, 10, 6, 5, true, 0.4f});
  expect_matches_reference({2, 13, 6, 4, 3, true, 1.0f});  // more queries than keys: the last rows see every key
}

// Query blocks of several key blocks' rows: the causal mask's window moves across the triangle, key blocks right of a
// query block's last row are skipped, a ragged last key block is masked or skipped, in every alignment.
TEST(EmittedAttention, TallQueryBlocksSpanSeveralKeyBlocks) {
  const emitter::Kernel kernel = emitter::emit_attention({1, 37, 45, 6, 5, true, 0.3f}, tiny_config());
  EXPECT_NE(kernel.description.find("blocks of 16 queries and 4 keys"), std::string::npos) << kernel.description;
  for (bool causal : {false, true}) {
    expect_matches_reference({1, 37, 45, 6, 5, causal, 0.3f});  // more keys than queries
    expect_matches_reference({2, 30, 23, 6, 5, causal, 0.7f});  // fewer keys than queries, a ragged key block
  }
}

// Up to 32 key blocks, with room for query blocks of at least two key blocks' rows, every key block is held at once
// and the softmax is exact (the row maximum over all keys first); otherwise, the online softmax. Both against the
// reference, causal or not, with ragged blocks.
TEST(EmittedAttention, ShortKeysHoldEveryKeyBlockAndLongOnesGoOnline) {
  const auto held = [](const emitter::AttentionSpec& s, const config::ChipConfig& config) {
    return emitter::emit_attention(s, config).description.find("every key block held (exact softmax)") !=
           std::string::npos;
  };
  config::ChipConfig roomy = tiny_config();
  roomy.core_scratchpad_kib = 256;
  EXPECT_TRUE(held({2, 11, 9, 6, 5, false, 0.4f}, tiny_config()));
  EXPECT_TRUE(held({1, 40, 128, 6, 5, true, 0.4f}, roomy));   // 32 key blocks
  EXPECT_FALSE(held({1, 40, 129, 6, 5, true, 0.4f}, roomy));  // 33: online
  config::ChipConfig cramped = tiny_config();
  cramped.core_scratchpad_kib = 8;
  EXPECT_TRUE(held({1, 40, 80, 6, 5, false, 0.4f}, tiny_config()));
  EXPECT_FALSE(held({1, 40, 80, 6, 5, false, 0.4f}, cramped));  // room for query blocks of one key block's rows only
  for (bool causal : {false, true}) {
    expect_matches_reference({2, 40, 80, 6, 5, causal, 0.4f});
    expect_matches_reference({3, 21, 30, 6, 5, causal, 0.9f});  // a ragged key block and a ragged query block
  }
  emitter::AttentionSpec half{2, 11, 9, 6, 5, false, 0.4f};
  half.type = isa::ElementType::F16;  // half precision stages its tiles: the online kernel
  EXPECT_FALSE(held(half, tiny_config()));
}

// Every alignment of short keys against the 4-key blocks and the query blocks, one key to eight blocks, causal or not:
// the held blocks' passes (a ragged last block, a causal query block that skips blocks) against the reference.
TEST(EmittedAttention, HeldKeyBlocksInEveryAlignment) {
  for (int64_t k_len : {1, 3, 4, 5, 8, 15, 17, 29, 32})
    for (int64_t q_len : {1, 4, 7, 30})
      for (bool causal : {false, true}) {
        SCOPED_TRACE(testing::Message() << q_len << " queries, " << k_len << " keys, causal " << causal);
        expect_matches_reference({2, q_len, k_len, 6, 5, causal, 0.5f});
      }
}

TEST(EmittedAttention, RefusesBlocksThatDoNotFit) {
  config::ChipConfig config = tiny_config();
  config.core_scratchpad_kib = 1;
  EXPECT_FALSE(emitter::attention_fits({1, 64, 64, 512, 512, false, 1.0f}, config));
  EXPECT_THROW(emitter::emit_attention({1, 64, 64, 512, 512, false, 1.0f}, config), emitter::Unsupported);
  EXPECT_TRUE(emitter::attention_fits({1, 64, 64, 6, 5, false, 1.0f}, tiny_config()));
}

}  // namespace
}  // namespace npusim
