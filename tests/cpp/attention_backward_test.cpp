// The fused attention backward's two kernels (attention.h) against the gradients computed in double precision on the
// host, in both modes: non-causal and causal, more or fewer keys than queries, ragged short and tall blocks, head and
// value dimensions in chunks, several heads over several cores. Both modes must give the same bits, and the timed
// model must see no engine racing another.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "npusim/emitter/attention.h"
#include "npusim/runtime/device.h"
#include "timed_model_support.h"

namespace npusim {
namespace {

constexpr runtime::Mode kModes[] = {runtime::Mode::Functional, runtime::Mode::Timed};

// A 4 x 4 array: short blocks of 4 rows, tall blocks of up to 16 (the 1 KiB accumulator holds two 16 x 4 matrices
// and a 16 x 4 product), head dimension 6 in chunks of 4 + 2, value dimension 5 in chunks of 4 + 1.
config::ChipConfig tiny_config() {
  config::ChipConfig config = test_config();
  config.chip_cores = 3;
  config.core_systolic_rows = config.core_systolic_cols = 4;
  config.core_scratchpad_kib = 16;
  config.core_accumulator_kib = 1;
  return config;
}

// SystemC elaborates one design per process: one device per mode for every test.
runtime::Device* devices() {
  static runtime::Device both[] = {runtime::Device(tiny_config(), kModes[0]),
                                   runtime::Device(tiny_config(), kModes[1])};
  return both;
}

using Floats = std::vector<float>;

struct Inputs {
  Floats q, k, v, grad_out, out, lse;
};

struct Gradients {
  std::vector<double> q, k, v;
};

// P = softmax(scale Q K^T, causal) in double precision; O = P V and the log-sum-exp rounded to float, as the
// forward kernel leaves them.
std::vector<double> probabilities(const emitter::AttentionSpec& s, const Inputs& in, int64_t h) {
  std::vector<double> p(s.q_len * s.k_len, 0.0);
  for (int64_t i = 0; i < s.q_len; ++i)
    for (int64_t j = 0; j < s.k_len; ++j) {
      if (s.causal && j > i) continue;
      double dot = 0;
      for (int64_t d = 0; d < s.head_dim; ++d)
        dot += double{in.q[(h * s.q_len + i) * s.head_dim + d]} * in.k[(h * s.k_len + j) * s.head_dim + d];
      p[i * s.k_len + j] = std::exp(dot * s.scale - in.lse[h * s.q_len + i]);
    }
  return p;
}

void forward(const emitter::AttentionSpec& s, Inputs& in) {
  in.out.assign(s.heads * s.q_len * s.value_dim, 0.0f);
  in.lse.assign(s.heads * s.q_len, 0.0f);
  for (int64_t h = 0; h < s.heads; ++h)
    for (int64_t i = 0; i < s.q_len; ++i) {
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      std::vector<double> scores(s.k_len, -std::numeric_limits<double>::infinity());
      for (int64_t j = 0; j < s.k_len && (!s.causal || j <= i); ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.head_dim; ++d)
          dot += double{in.q[(h * s.q_len + i) * s.head_dim + d]} * in.k[(h * s.k_len + j) * s.head_dim + d];
        max = std::max(max, scores[j] = dot * s.scale);
      }
      for (double& score : scores) sum += score = std::exp(score - max);
      for (int64_t e = 0; e < s.value_dim; ++e) {
        double value = 0;
        for (int64_t j = 0; j < s.k_len; ++j) value += scores[j] * in.v[(h * s.k_len + j) * s.value_dim + e];
        in.out[(h * s.q_len + i) * s.value_dim + e] = static_cast<float>(value / sum);
      }
      in.lse[h * s.q_len + i] = static_cast<float>(max + std::log(sum));
    }
}

// dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ = scale dS K, dK = scale dS^T Q.
Gradients backward(const emitter::AttentionSpec& s, const Inputs& in) {
  Gradients g{std::vector<double>(in.q.size()), std::vector<double>(in.k.size()), std::vector<double>(in.v.size())};
  for (int64_t h = 0; h < s.heads; ++h) {
    const std::vector<double> p = probabilities(s, in, h);
    const auto grad_out = [&](int64_t i, int64_t e) {
      return double{in.grad_out[(h * s.q_len + i) * s.value_dim + e]};
    };
    for (int64_t i = 0; i < s.q_len; ++i) {
      double row_dot = 0;
      for (int64_t e = 0; e < s.value_dim; ++e) row_dot += grad_out(i, e) * in.out[(h * s.q_len + i) * s.value_dim + e];
      for (int64_t j = 0; j < s.k_len; ++j) {
        double dp = 0;
        for (int64_t e = 0; e < s.value_dim; ++e) dp += grad_out(i, e) * in.v[(h * s.k_len + j) * s.value_dim + e];
        const double pij = p[i * s.k_len + j], ds = pij * (dp - row_dot);
        for (int64_t e = 0; e < s.value_dim; ++e) g.v[(h * s.k_len + j) * s.value_dim + e] += pij * grad_out(i, e);
        for (int64_t d = 0; d < s.head_dim; ++d) {
          g.q[(h * s.q_len + i) * s.head_dim + d] += s.scale * ds * in.k[(h * s.k_len + j) * s.head_dim + d];
          g.k[(h * s.k_len + j) * s.head_dim + d] += s.scale * ds * in.q[(h * s.q_len + i) * s.head_dim + d];
        }
      }
    }
  }
  return g;
}

std::vector<std::byte> bytes(const Floats& values) {
  std::vector<std::byte> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

Floats floats(const std::vector<std::byte>& data) {
  Floats out(data.size() / 4);
  std::memcpy(out.data(), data.data(), data.size());
  return out;
}

// Launches `kernel` over `buffers` (uploaded first, read back after); expects no hazard in timed mode.
void launch(runtime::Device& device, const emitter::Kernel& kernel, std::vector<std::vector<std::byte>>& buffers) {
  std::vector<uint64_t> arguments;
  for (const std::vector<std::byte>& buffer : buffers) {
    arguments.push_back(device.allocate(buffer.size()));
    device.copy_host_to_device(arguments.back(), buffer.data(), buffer.size());
  }
  device.launch(kernel.name, device.load_program(kernel.words), arguments, (uint64_t{1} << kernel.cores) - 1);
  for (size_t b = 0; b < buffers.size(); ++b) {
    device.copy_device_to_host(buffers[b].data(), arguments[b], buffers[b].size());
    device.free(arguments[b]);
  }
  for (const runtime::CommandRecord& record : device.take_records())
    EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << ": " << record.first_hazard;
}

void expect_near(const Floats& actual, const std::vector<double>& expected, const char* what) {
  ASSERT_EQ(actual.size(), expected.size());
  // float32 sums of a few dozen terms against double
  for (size_t n = 0; n < expected.size(); ++n)
    EXPECT_NEAR(actual[n], expected[n], 2e-5 * (1 + std::abs(expected[n]))) << what << " " << n;
}

// The kernels built for a scratchpad of `scratchpad_kib` (no larger than the devices'), run on the devices.
void expect_gradients(const emitter::AttentionSpec& s, int64_t scratchpad_kib = 16) {
  SCOPED_TRACE(testing::Message() << s.heads << " heads, " << s.q_len << " queries, " << s.k_len << " keys"
                                  << (s.causal ? ", causal" : "") << ", " << scratchpad_kib << " KiB");
  config::ChipConfig config = tiny_config();
  config.core_scratchpad_kib = scratchpad_kib;
  std::mt19937 random(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto fill = [&](int64_t n) {
    Floats values(n);
    for (float& x : values) x = normal(random);
    return values;
  };
  Inputs in{fill(s.heads * s.q_len * s.head_dim),
            fill(s.heads * s.k_len * s.head_dim),
            fill(s.heads * s.k_len * s.value_dim),
            fill(s.heads * s.q_len * s.value_dim),
            {},
            {}};
  forward(s, in);
  const Gradients expected = backward(s, in);
  const emitter::Kernel query = emitter::emit_attention_gradient({s, emitter::AttentionGradient::Query}, config);
  const emitter::Kernel key_value = emitter::emit_attention_gradient({s, emitter::AttentionGradient::KeyValue}, config);
  std::vector<std::vector<std::byte>> results[2];
  for (int m = 0; m < 2; ++m) {
    runtime::Device& device = devices()[m];
    std::vector<std::vector<std::byte>> first = {std::vector<std::byte>(in.q.size() * 4),
                                                 std::vector<std::byte>(in.lse.size() * 4),
                                                 bytes(in.q),
                                                 bytes(in.k),
                                                 bytes(in.v),
                                                 bytes(in.grad_out),
                                                 bytes(in.out),
                                                 bytes(in.lse)};
    launch(device, query, first);
    std::vector<std::vector<std::byte>> second = {std::vector<std::byte>(in.k.size() * 4),
                                                  std::vector<std::byte>(in.v.size() * 4),
                                                  bytes(in.q),
                                                  bytes(in.k),
                                                  bytes(in.v),
                                                  bytes(in.grad_out),
                                                  bytes(in.lse),
                                                  first[1]};
    launch(device, key_value, second);
    results[m] = {first[0], second[0], second[1]};
  }
  EXPECT_EQ(results[0], results[1]) << "functional and timed modes differ";
  expect_near(floats(results[1][0]), expected.q, "dQ");
  expect_near(floats(results[1][1]), expected.k, "dK");
  expect_near(floats(results[1][2]), expected.v, "dV");
}

TEST(AttentionGradient, MatchesDoublePrecisionInBothModes) {
  for (bool causal : {false, true}) {
    expect_gradients({2, 11, 9, 6, 5, causal, 0.4f});   // ragged blocks, dimensions in chunks, three cores
    expect_gradients({1, 37, 45, 6, 5, causal, 0.3f});  // more keys than queries, tall blocks over many short ones
    expect_gradients({2, 30, 23, 6, 5, causal, 0.7f});  // fewer keys than queries: causal rows that see every key
  }
  expect_gradients({3, 10, 10, 6, 5, true, 0.4f});  // the causal square: diagonal blocks masked in both kernels
}

TEST(AttentionGradient, HoldsGroupsOfShortBlocksAndReloadsThem) {
  // 45 keys in 12 blocks of 4 (and 37 queries in 10): with 16 KiB each kernel holds all the short blocks at once;
  // with 4 KiB, groups of a few, loaded in turn.
  const emitter::AttentionSpec s{1, 37, 45, 6, 5, true, 0.3f};
  config::ChipConfig config = tiny_config();
  for (auto part : {emitter::AttentionGradient::Query, emitter::AttentionGradient::KeyValue}) {
    const auto held = [&] {
      const std::string text = emitter::emit_attention_gradient({s, part}, config).description;
      return std::stoi(text.substr(text.find("held ") + 5));
    };
    config.core_scratchpad_kib = 16;
    EXPECT_EQ(held(), part == emitter::AttentionGradient::Query ? 12 : 10);
    config.core_scratchpad_kib = 4;
    EXPECT_GT(held(), 1);
    EXPECT_LT(held(), 10);
  }
  for (bool causal : {false, true}) expect_gradients({1, 37, 45, 6, 5, causal, 0.3f}, 4);
}

TEST(AttentionGradient, RefusesBlocksThatDoNotFitAndOtherTypes) {
  config::ChipConfig config = tiny_config();
  emitter::AttentionSpec s{1, 8, 8, 6, 5, false, 1.0f};
  config.core_accumulator_kib = 0;  // no room for a product
  EXPECT_FALSE(emitter::attention_gradient_fits(s, config));
  EXPECT_THROW(emitter::emit_attention_gradient({s, emitter::AttentionGradient::Query}, config), emitter::Unsupported);
  s.type = isa::ElementType::F16;
  EXPECT_THROW(emitter::emit_attention_gradient({s, emitter::AttentionGradient::KeyValue}, tiny_config()),
               std::invalid_argument);
}

}  // namespace
}  // namespace npusim
