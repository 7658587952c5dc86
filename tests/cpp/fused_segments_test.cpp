// Multi-tensor fused kernels (FusedSpec::segments) and launch-time scalars (Argument nodes) against the reference
// interpreter, segment by segment, in both modes: the same bits in the functional and the timed model, no hazard, and
// the reference's values bit for bit. An optimizer-like step runs over segments of many sizes (empty, one element,
// partial tiles, many tiles) on three cores with double-buffered tiles.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "fused_kernels_support.h"

namespace npusim {
namespace {

using namespace fused_test;  // NOLINT(google-build-using-namespace): the tests' shared vocabulary
using emitter::FusedSegment;

// One entry of a multi-tensor kernel's argument block: a buffer (the entry is its address) or a value (its bits).
struct Entry {
  std::optional<Bytes> buffer;
  uint64_t value = 0;
};
Entry value_of(float value) { return {std::nullopt, std::bit_cast<uint32_t>(value)}; }

// Runs the kernel on a device over the entries, and returns every buffer afterwards (a value's entry stays empty).
std::vector<Bytes> launch(runtime::Device& device, const emitter::Kernel& kernel, const std::vector<Entry>& entries) {
  std::vector<uint64_t> block, allocated;
  for (const Entry& entry : entries) {
    if (!entry.buffer) {
      block.push_back(entry.value);
      continue;
    }
    allocated.push_back(device.allocate(std::max<size_t>(entry.buffer->size(), 8)));
    if (!entry.buffer->empty())
      device.copy_host_to_device(allocated.back(), entry.buffer->data(), entry.buffer->size());
    block.push_back(allocated.back());
  }
  device.launch(kernel.name, device.load_program(kernel.words), block, (uint64_t{1} << kernel.cores) - 1);
  std::vector<Bytes> result;
  for (size_t k = 0, next = 0; k < entries.size(); ++k) {
    result.emplace_back(entries[k].buffer ? entries[k].buffer->size() : 0);
    if (entries[k].buffer) {
      if (!result.back().empty())
        device.copy_device_to_host(result.back().data(), allocated[next], result.back().size());
      ++next;
    }
  }
  for (uint64_t address : allocated) device.free(address);
  return result;
}

// Segment k's program as a spec of its own: its one dimension, its argument entries from 0, its Arguments'
// values as constants (f32 bits in the entries).
FusedSpec segment_spec(const FusedSpec& spec, const FusedSegment& segment, const std::vector<Entry>& entries) {
  FusedSpec one = spec;
  one.segments.clear();
  one.sizes = {segment.elements};
  for (FusedNode& node : one.nodes)
    if (node.op == Op::Argument) {
      node.op = Op::Constant;
      node.constant =
          std::bit_cast<float>(static_cast<uint32_t>(entries[segment.first_argument + node.argument].value));
    }
  return one;
}

// A functional and a timed device of one chip (SystemC builds one design per process): run_and_compare builds the
// kernel, runs it in both modes (same bits, no hazard) and compares every segment's buffers with the reference, bit
// for bit; it returns the kernel.
class BothModes {
 public:
  explicit BothModes(const config::ChipConfig& config)
      : config_(config), functional_(config, runtime::Mode::Functional), timed_(config, runtime::Mode::Timed) {}

  emitter::Kernel run_and_compare(const FusedSpec& spec, const std::vector<Entry>& entries,
                                  const std::vector<ElementType>& types, double relative = 0) {
    const emitter::Kernel kernel = emitter::emit_fused(spec, config_);
    const std::vector<Bytes> actual = launch(functional_, kernel, entries);
    EXPECT_EQ(actual, launch(timed_, kernel, entries)) << kernel.name;
    record_ = kernel_record(timed_.take_records(), kernel.name);
    const runtime::CommandRecord& record = record_;
    EXPECT_EQ(record.stats.hazards, 0u) << kernel.name << ": " << record.first_hazard;
    std::printf("[ cycles ] %s: %llu cycles, %zu words, %lld cores\n", kernel.name.c_str(),
                static_cast<unsigned long long>(record.kernel_cycles), kernel.words.size(),
                static_cast<long long>(kernel.cores));
    for (const FusedSegment& segment : spec.segments) {
      std::vector<Bytes> inputs, outputs;
      for (int k = 0; k < spec.arguments; ++k) {
        const Entry& entry = entries[segment.first_argument + k];
        inputs.push_back(entry.buffer.value_or(Bytes{}));
        outputs.push_back(actual[segment.first_argument + k]);
      }
      const std::vector<Bytes> expected = reference(segment_spec(spec, segment, entries), inputs);
      for (int k = 0; k < spec.arguments; ++k)
        if (entries[segment.first_argument + k].buffer)
          expect_matches(outputs, expected, k, types[k], relative,
                         fmt::format("{} segment of {} elements", spec.name, segment.elements));
    }
    return kernel;
  }
  const runtime::CommandRecord& last_record() const { return record_; }  // the timed run's, of the last kernel

 private:
  config::ChipConfig config_;
  runtime::Device functional_, timed_;
  runtime::CommandRecord record_;
};

emitter::Kernel run_and_compare_segments(const FusedSpec& spec, const config::ChipConfig& config,
                                         const std::vector<Entry>& entries, const std::vector<ElementType>& types,
                                         double relative = 0) {
  return BothModes(config).run_and_compare(spec, entries, types, relative);
}

// An AdamW-like step per segment over p, g, m, v (f32) with the bias corrections as arguments:
//   m = lerp(m, g, 1 - beta1)        as fma(w, g - m, m)
//   v = v * beta2 + (1 - beta2) g g  as fma((1 - beta2) g, g, v * beta2)
//   p = p * decay + step m / (sqrt(v) / bc2 + eps)
// Arguments 4..6 per segment: step (-lr / bc1), bc2 = sqrt(1 - beta2^t), decay; beta1, beta2 and eps are constants.
FusedSpec adam_like(std::vector<int64_t> sizes) {
  SpecBuilder s("foreach_adam_like", {}, 0, 7);
  int first = 0;
  for (int64_t elements : sizes) {
    s.spec.segments.push_back({elements, first});
    first += 7;
  }
  const auto argument = [&](int entry) { return s.node({.op = Op::Argument, .type = F32, .argument = entry}); };
  const int p = s.load(0, F32, {1}), g = s.load(1, F32, {1}), m = s.load(2, F32, {1}), v = s.load(3, F32, {1});
  const int m1 = s.op(Op::MulAdd, F32, s.constant(F32, 0.1), s.op(Op::Sub, F32, g, m), m);
  const int scaled = s.op(Op::Mul, F32, v, s.constant(F32, 0.999));
  const int v1 = s.op(Op::MulAdd, F32, s.op(Op::Mul, F32, s.constant(F32, 0.001), g), g, scaled);
  const int denominator =
      s.op(Op::Add, F32, s.op(Op::Div, F32, s.op(Op::Sqrt, F32, v1), argument(5)), s.constant(F32, 1e-8));
  const int update = s.op(Op::Div, F32, s.op(Op::Mul, F32, argument(4), m1), denominator);
  s.store(s.op(Op::Add, F32, s.op(Op::Mul, F32, p, argument(6)), update), 0, F32, {1});
  s.store(m1, 2, F32, {1});
  s.store(v1, 3, F32, {1});
  return s.spec;
}

std::vector<Entry> adam_entries(const FusedSpec& spec, uint32_t seed, float step) {
  std::vector<Entry> entries;
  uint32_t k = 0;
  for (const FusedSegment& segment : spec.segments) {
    const int64_t n = segment.elements;
    for (int tensor = 0; tensor < 4; ++tensor)
      entries.push_back({tensor == 3 ? random_buffer(F32, n, seed + k++, 0, 2) : random_buffer(F32, n, seed + k++)});
    entries.push_back(value_of(step * static_cast<float>(1 + k % 5)));  // a different value per segment
    entries.push_back(value_of(0.0316f + 0.001f * static_cast<float>(k % 3)));
    entries.push_back(value_of(0.99995f));
  }
  return entries;
}

const std::vector<ElementType> kAdamTypes = {F32, F32, F32, F32, F32, F32, F32};

// Segments reduced whole (reduced_dims 1): a foreach norm, sqrt(sum x^2) per tensor, with max |x| per tensor, one
// kernel over segments of many sizes, the long ones walked in chunks (fused_looped.h). The reference sums each
// segment in order, the kernel chunk by chunk: hence the tolerance.
FusedSpec norms_over(const std::vector<int64_t>& sizes, bool with_maximum) {
  SpecBuilder s(with_maximum ? "foreach_norms_and_maxima" : "foreach_norms", {}, 1, 3);
  int first = 0;
  for (const int64_t elements : sizes) {
    s.spec.segments.push_back({elements, first});
    first += 3;
  }
  const int x = s.load(0, F32, {1});
  s.store(s.op(Op::Sqrt, F32, s.op(Op::ReduceSum, F32, s.op(Op::Mul, F32, x, x))), 1, F32, {0});
  if (with_maximum) s.store(s.op(Op::ReduceMax, F32, s.op(Op::Abs, F32, x)), 2, F32, {0});
  return s.spec;
}
std::vector<Entry> norm_entries(const std::vector<int64_t>& sizes) {
  std::vector<Entry> entries;
  uint32_t seed = 40;
  for (const int64_t elements : sizes) {
    entries.push_back({random_buffer(F32, elements, seed++)});
    entries.push_back({Bytes(4)});
    entries.push_back({Bytes(4)});
  }
  return entries;
}

TEST(FusedSegments, SegmentsReducedWholeGiveOneValueEach) {
  const std::vector<int64_t> sizes = {2500, 1, 7, 1300, 64};
  const emitter::Kernel kernel =
      run_and_compare_segments(norms_over(sizes, true), small_chip(), norm_entries(sizes), {F32, F32, F32}, 1e-6);
  EXPECT_EQ(kernel.cores, 3);
  EXPECT_NE(kernel.assembly().find("looped rows: 5 rows"), std::string::npos);
}

// On a 32 KiB scratchpad the chunks are long enough for two sets of slots: each segment's next chunk loads while this
// one is reduced, the number of chunks taken from the segment's length in its table entry.
TEST(FusedSegments, LongSegmentsDoubleBufferTheirChunks) {
  const std::vector<int64_t> sizes = {20000, 1, 7, 10400, 64};
  const emitter::Kernel kernel =
      run_and_compare_segments(norms_over(sizes, true), small_chip(32), norm_entries(sizes), {F32, F32, F32}, 1e-6);
  EXPECT_NE(kernel.assembly().find("looped rows: 5 rows"), std::string::npos);
  EXPECT_NE(kernel.assembly().find("slots, 2 sets"), std::string::npos) << kernel.assembly();
}

// A segment of no elements has no chunks: its sum is 0, as vrsum's of no elements (its extrema would be the carry's
// identity, the infinities). With one set of slots, and with two.
void segments_of_no_elements(int scratchpad_kib) {
  const std::vector<int64_t> sizes = {0, 625 * scratchpad_kib, 0};  // one long enough to be walked in chunks
  const emitter::Kernel kernel = run_and_compare_segments(norms_over(sizes, false), small_chip(scratchpad_kib),
                                                          norm_entries(sizes), {F32, F32, F32}, 1e-6);
  EXPECT_NE(kernel.assembly().find(scratchpad_kib == 4 ? "slots, 1 set" : "slots, 2 sets"), std::string::npos);
}
TEST(FusedSegments, ASegmentOfNoElementsSumsToZero) { segments_of_no_elements(4); }
TEST(FusedSegments, ASegmentOfNoElementsSumsToZeroWithTwoSetsOfSlots) { segments_of_no_elements(32); }

TEST(FusedSegments, AnOptimizerStepOverSegmentsOfManySizesIsOneKernel) {
  const config::ChipConfig config = small_chip();
  const FusedSpec spec = adam_like({0, 1, 63, 64, 1000, 4097, 3000, 5});
  const emitter::Kernel kernel = run_and_compare_segments(spec, config, adam_entries(spec, 100, -1e-3f), kAdamTypes);
  EXPECT_EQ(kernel.cores, 3);
  EXPECT_NE(kernel.description.find("2 sets"), std::string::npos) << kernel.description;
  EXPECT_NE(kernel.assembly().find("vfma.f32"), std::string::npos);
}

TEST(FusedSegments, AValueOfOneElementIsComputedOncePerTile) {
  // out = x * (exp(t ln 0.9) / (1 - exp(t ln 0.999))) per segment, t the segment's step counter (one element, stride
  // 0): the factor, the same at every point, is computed on one element per tile (its two exps and its division), and
  // only the product runs over the tile.
  SpecBuilder s("foreach_bias_correction", {}, 0, 3);
  const std::vector<int64_t> sizes = {3000, 1, 700, 4100};
  for (size_t k = 0; k < sizes.size(); ++k) s.spec.segments.push_back({sizes[k], static_cast<int>(3 * k)});
  const int t = s.load(1, F32, {0});
  const auto power = [&](double log_base) {
    return s.op(Op::Exp, F32, s.op(Op::Mul, F32, t, s.constant(F32, log_base)));
  };
  const int factor =
      s.op(Op::Div, F32, power(std::log(0.9)), s.op(Op::Sub, F32, s.constant(F32, 1), power(std::log(0.999))));
  s.store(s.op(Op::Mul, F32, s.load(0, F32, {1}), factor), 2, F32, {1});
  std::vector<Entry> entries;
  for (size_t k = 0; k < sizes.size(); ++k) {
    entries.push_back({random_buffer(F32, sizes[k], 400 + k)});
    entries.push_back({buffer_of(F32, 1, [&](int64_t) { return double(3 + 7 * k); })});
    entries.push_back({Bytes(sizes[k] * 4)});
  }
  BothModes modes(small_chip());
  const emitter::Kernel kernel = modes.run_and_compare(s.spec, entries, {F32, F32, F32});
  const size_t at = kernel.description.find(" tiles on ");
  ASSERT_NE(at, std::string::npos) << kernel.description;
  const int64_t tiles = std::stoll(kernel.description.substr(kernel.description.rfind(' ', at - 1) + 1));
  EXPECT_GT(tiles, 4);
  EXPECT_EQ(modes.last_record().stats.vector_special_elements, static_cast<uint64_t>(3 * tiles));
}

TEST(FusedSegments, NewArgumentValuesNeedNoNewKernel) {
  // The same kernel, launched with other step sizes: the results follow the values in the argument block.
  BothModes modes(small_chip());
  const FusedSpec spec = adam_like({300, 2000});
  const std::vector<Entry> first = adam_entries(spec, 200, -1e-3f), second = adam_entries(spec, 200, -5e-2f);
  ASSERT_EQ(first[0].buffer, second[0].buffer);  // the same tensors, other step sizes
  ASSERT_NE(first[4].value, second[4].value);
  modes.run_and_compare(spec, first, kAdamTypes);
  modes.run_and_compare(spec, second, kAdamTypes);
}

TEST(FusedSegments, Bf16SegmentsComputeInF32AndRoundOnce) {
  // out = bf16(f32(x) * s + f32(y)) per segment, s an argument: one rounding, as PyTorch's opmath.
  const ElementType BF16 = ElementType::BF16;
  SpecBuilder s("foreach_bf16_axpy", {}, 0, 4);
  const std::vector<int64_t> sizes = {5000, 17, 130};
  for (size_t k = 0; k < sizes.size(); ++k) s.spec.segments.push_back({sizes[k], static_cast<int>(4 * k)});
  const int x = s.op(Op::Convert, F32, s.load(0, BF16, {1})), y = s.op(Op::Convert, F32, s.load(1, BF16, {1}));
  const int scale = s.node({.op = Op::Argument, .type = F32, .argument = 3});
  s.store(s.op(Op::MulAdd, F32, x, scale, y), 2, BF16, {1});
  std::vector<Entry> entries;
  for (size_t k = 0; k < sizes.size(); ++k) {
    entries.push_back({random_buffer(BF16, sizes[k], 300 + k)});
    entries.push_back({random_buffer(BF16, sizes[k], 310 + k)});
    entries.push_back({Bytes(sizes[k] * 2)});
    entries.push_back(value_of(0.3f + static_cast<float>(k)));
  }
  run_and_compare_segments(s.spec, small_chip(), entries, {BF16, BF16, BF16, F32});
}

TEST(FusedSegments, AnElementRepeatedOverItsSegmentAndAStridedView) {
  // out = x[2i] * c[0] + 1 per segment: c is one element (stride 0), x every other element of its buffer.
  SpecBuilder s("foreach_broadcast_strided", {}, 0, 3);
  const std::vector<int64_t> sizes = {700, 3, 2500};
  for (size_t k = 0; k < sizes.size(); ++k) s.spec.segments.push_back({sizes[k], static_cast<int>(3 * k)});
  const int x = s.load(0, F32, {2}), c = s.load(1, F32, {0});
  s.store(s.op(Op::Add, F32, s.op(Op::Mul, F32, x, c), s.constant(F32, 1)), 2, F32, {1});
  std::vector<Entry> entries;
  for (size_t k = 0; k < sizes.size(); ++k) {
    entries.push_back({random_buffer(F32, 2 * sizes[k], 400 + k)});
    entries.push_back({random_buffer(F32, 1, 410 + k)});
    entries.push_back({Bytes(sizes[k] * 4)});
  }
  run_and_compare_segments(s.spec, small_chip(), entries, {F32, F32, F32});
}

TEST(FusedSegments, TheCoresShareTheTilesOfEverySegment) {
  // Eight cores and segments of one tile or less each: the tiles of all segments go to every core.
  config::ChipConfig config = small_chip(16);
  config.chip_cores = 8;
  const FusedSpec spec = adam_like({900, 1000, 1100, 1200, 40, 1300, 1400, 1500, 1600, 1700});
  const emitter::Kernel kernel = run_and_compare_segments(spec, config, adam_entries(spec, 500, -2e-3f), kAdamTypes);
  EXPECT_EQ(kernel.cores, 8);
}

TEST(FusedSegments, AnArgumentWithoutSegmentsIsReadFromItsEntry) {
  // A plain fused kernel: out = max(x, a) * a with a = entry 2 of the argument block, a constant first operand too.
  SpecBuilder s("fused_argument", {50, 30}, 0, 3);
  const int x = s.load(0, F32, {30, 1}), a = s.node({.op = Op::Argument, .type = F32, .argument = 2});
  s.store(s.op(Op::Mul, F32, s.op(Op::Maximum, F32, x, a), s.op(Op::Sub, F32, a, x)), 1, F32, {30, 1});
  const config::ChipConfig config = small_chip();
  const emitter::Kernel kernel = emitter::emit_fused(s.spec, config);
  EXPECT_NE(kernel.description.find("2 sets"), std::string::npos) << kernel.description;
  const std::vector<Entry> entries = {{random_buffer(F32, 1500, 600)}, {Bytes(1500 * 4)}, value_of(0.25f)};
  runtime::Device functional(config, runtime::Mode::Functional), timed(config, runtime::Mode::Timed);
  const std::vector<Bytes> actual = launch(functional, kernel, entries);
  EXPECT_EQ(actual, launch(timed, kernel, entries));
  EXPECT_EQ(kernel_record(timed.take_records(), kernel.name).stats.hazards, 0u);
  FusedSpec constant = s.spec;
  constant.nodes[1] = {.op = Op::Constant, .type = F32, .constant = 0.25};
  const std::vector<Bytes> expected = reference(constant, {*entries[0].buffer, *entries[1].buffer, Bytes{}});
  expect_matches(actual, expected, 1, F32, 0, "fused_argument");
}

TEST(FusedSegments, EmptySegmentsOnlyHalt) {
  FusedSpec spec = adam_like({0, 0});
  const emitter::Kernel kernel = emitter::emit_fused(spec, small_chip());
  EXPECT_EQ(kernel.cores, 1);
  EXPECT_EQ(kernel.words.size(), 1u);
}

TEST(FusedSegments, AMalformedSegmentedSpecIsAnInvalidArgument) {
  const FusedSpec good = adam_like({10, 20});
  const auto expect_invalid = [&](const FusedSpec& spec, const std::string& words) {
    try {
      emitter::emit_fused(spec, small_chip());
      ADD_FAILURE() << "expected invalid_argument: " << words;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
  };
  FusedSpec spec = good;
  spec.sizes = {30};
  expect_invalid(spec, "segments: the space is [30]");
  spec = good;
  spec.segments[1].elements = -1;
  expect_invalid(spec, "segment 1 has -1 elements");
  spec = good;
  spec.loads[0].strides = {1, 1};
  expect_invalid(spec, "load 0 has 2 strides for 1 dimensions");
  spec = good;
  for (FusedNode& node : spec.nodes)
    if (node.op == Op::Argument) node.argument = 7;
  expect_invalid(spec, "(Argument): argument 7 of 7");
  spec = good;
  for (FusedNode& node : spec.nodes)
    if (node.op == Op::MulAdd) node.type = ElementType::I32;
  expect_invalid(spec, "(MulAdd): a fused multiply-add of i32");
}

}  // namespace
}  // namespace npusim
