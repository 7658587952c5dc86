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

// A [heads][length][dim] tensor stored batch-first, [batch][length][heads_per_batch][dim] with each row padded by
// 3 elements, as the heads of a fused q, k, v projection are views of its output.
struct Interleaved {
  int64_t heads, heads_per_batch, length, dim;
  emitter::AttentionLayout layout() const {
    const int64_t row = heads_per_batch * dim + 3;
    return {length * row, dim, row};
  }
  int64_t elements() const { return heads / heads_per_batch * layout().batch; }
  size_t at(int64_t head, int64_t i, int64_t d) const {
    const emitter::AttentionLayout l = layout();
    return (head / heads_per_batch) * l.batch + (head % heads_per_batch) * l.head + i * l.row + d;
  }
  Floats place(const Floats& values) const {
    Floats out(elements(), -7.0f);  // padding the kernels must neither read into results nor write
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < length; ++i)
        for (int64_t d = 0; d < dim; ++d) out[at(h, i, d)] = values[(h * length + i) * dim + d];
    return out;
  }
  Floats gather(const Floats& stored) const {
    Floats out(heads * length * dim);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < length; ++i)
        for (int64_t d = 0; d < dim; ++d) out[(h * length + i) * dim + d] = stored[at(h, i, d)];
    for (int64_t h = 0; h < heads; ++h)  // the padding after each row is untouched
      for (int64_t i = 0; i < length; ++i)
        if (h % heads_per_batch == heads_per_batch - 1) EXPECT_EQ(stored[at(h, i, dim)], -7.0f);
    return out;
  }
};

void expect_near(const Floats& actual, const std::vector<double>& expected, const char* what) {
  ASSERT_EQ(actual.size(), expected.size());
  // float32 sums of a few dozen terms against double
  for (size_t n = 0; n < expected.size(); ++n)
    EXPECT_NEAR(actual[n], expected[n], 2e-5 * (1 + std::abs(expected[n]))) << what << " " << n;
}

// Runs `kernel` on device `m` over `buffers` of floats (the others' bytes as they are) and returns them.
std::vector<Floats> run(int m, const emitter::Kernel& kernel, const std::vector<Floats>& buffers) {
  std::vector<std::vector<std::byte>> data;
  for (const Floats& buffer : buffers) data.push_back(bytes(buffer));
  launch(devices()[m], kernel, data);
  std::vector<Floats> out;
  for (const auto& buffer : data) out.push_back(floats(buffer));
  return out;
}

// The kernels built for a scratchpad of `scratchpad_kib` (no larger than the devices'), run on the devices. With
// `interleaved`, every tensor but the log-sum-exp and D is stored batch-first with padded rows (Interleaved), the
// spec's heads split into batch entries of 2 heads: the kernels read and write them in place, and the results are
// the same bits as the contiguous ones.
void expect_gradients(emitter::AttentionSpec s, int64_t scratchpad_kib = 16, bool interleaved = false) {
  SCOPED_TRACE(testing::Message() << s.heads << " heads, " << s.q_len << " queries, " << s.k_len << " keys"
                                  << (s.causal ? ", causal" : "") << ", " << scratchpad_kib << " KiB"
                                  << (interleaved ? ", interleaved" : ""));
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
  const auto layout_of = [&](int64_t length, int64_t dim) {
    return Interleaved{s.heads, interleaved ? 2 : 1, length, dim};
  };
  const Interleaved q = layout_of(s.q_len, s.head_dim), k = layout_of(s.k_len, s.head_dim),
                    v = layout_of(s.k_len, s.value_dim), o = layout_of(s.q_len, s.value_dim);
  emitter::AttentionGradientSpec spec{s};
  if (interleaved) {
    spec.attention.heads_per_batch = 2;
    spec.attention.query = spec.grad_query = q.layout();
    spec.attention.key = spec.grad_key = k.layout();
    spec.attention.value = spec.grad_value = v.layout();
    spec.attention.output = spec.grad_output = o.layout();
  }
  const auto place = [&](const Interleaved& layout, const Floats& values) {
    return interleaved ? layout.place(values) : values;
  };
  const auto gather = [&](const Interleaved& layout, const Floats& stored) {
    return interleaved ? layout.gather(stored) : stored;
  };
  spec.part = emitter::AttentionGradient::Query;
  const emitter::Kernel query = emitter::emit_attention_gradient(spec, config);
  spec.part = emitter::AttentionGradient::KeyValue;
  const emitter::Kernel key_value = emitter::emit_attention_gradient(spec, config);
  std::vector<Floats> results[2];
  for (int m = 0; m < 2; ++m) {
    const Floats pq = place(q, in.q), pk = place(k, in.k), pv = place(v, in.v), pd = place(o, in.grad_out),
                 po = place(o, in.out);
    const std::vector<Floats> first =
        run(m, query, {place(q, Floats(in.q.size())), Floats(in.lse.size()), pq, pk, pv, pd, po, in.lse});
    const std::vector<Floats> second = run(
        m, key_value, {place(k, Floats(in.k.size())), place(v, Floats(in.v.size())), pq, pk, pv, pd, in.lse, first[1]});
    results[m] = {gather(q, first[0]), gather(k, second[0]), gather(v, second[1])};
  }
  EXPECT_EQ(results[0], results[1]) << "functional and timed modes differ";
  expect_near(results[1][0], expected.q, "dQ");
  expect_near(results[1][1], expected.k, "dK");
  expect_near(results[1][2], expected.v, "dV");
}

TEST(AttentionGradient, MatchesDoublePrecisionInBothModes) {
  for (bool causal : {false, true}) {
    expect_gradients({2, 11, 9, 6, 5, causal, 0.4f});   // ragged blocks, dimensions in chunks, three cores
    expect_gradients({1, 37, 45, 6, 5, causal, 0.3f});  // more keys than queries, tall blocks over many short ones
    expect_gradients({2, 30, 23, 6, 5, causal, 0.7f});  // fewer keys than queries: causal rows that see every key
  }
  expect_gradients({3, 10, 10, 6, 5, true, 0.4f});  // the causal square: diagonal blocks masked in both kernels
}

TEST(AttentionGradient, ReadsAndWritesInterleavedHeadsInPlace) {
  for (bool causal : {false, true}) {
    expect_gradients({4, 11, 9, 6, 5, causal, 0.4f}, 16, true);
    expect_gradients({2, 37, 45, 6, 5, causal, 0.3f}, 4, true);  // groups of short blocks reloaded
  }
}

TEST(AttentionForward, ReadsAndWritesInterleavedHeadsInPlace) {
  // The forward kernel with the same layouts: the same bits as on contiguous tensors, in both modes.
  for (bool causal : {false, true}) {
    emitter::AttentionSpec s{4, 11, 9, 6, 5, causal, 0.4f};
    std::mt19937 random(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const auto fill = [&](int64_t n) {
      Floats values(n);
      for (float& x : values) x = normal(random);
      return values;
    };
    const Floats q = fill(s.heads * s.q_len * s.head_dim), k = fill(s.heads * s.k_len * s.head_dim),
                 v = fill(s.heads * s.k_len * s.value_dim);
    const Interleaved lq{4, 2, s.q_len, s.head_dim}, lk{4, 2, s.k_len, s.head_dim}, lv{4, 2, s.k_len, s.value_dim},
        lo{4, 2, s.q_len, s.value_dim};
    const emitter::Kernel contiguous = emitter::emit_attention(s, tiny_config());
    s.heads_per_batch = 2;
    s.query = lq.layout();
    s.key = lk.layout();
    s.value = lv.layout();
    s.output = lo.layout();
    const emitter::Kernel strided = emitter::emit_attention(s, tiny_config());
    for (int m = 0; m < 2; ++m) {
      const Floats lse(s.heads * s.q_len);
      const std::vector<Floats> plain = run(m, contiguous, {Floats(s.heads * s.q_len * s.value_dim), lse, q, k, v});
      const std::vector<Floats> placed =
          run(m, strided, {lo.place(Floats(plain[0].size())), lse, lq.place(q), lk.place(k), lv.place(v)});
      EXPECT_EQ(lo.gather(placed[0]), plain[0]) << "output, causal " << causal;
      EXPECT_EQ(placed[1], plain[1]) << "log-sum-exp, causal " << causal;
    }
  }
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
