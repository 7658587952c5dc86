// Host time to build a kernel (what a cache miss, the first launch of a new shape, costs) with the kernel builder, for
// a spread of kernels, against the baseline of the same run: the time isa::assemble takes for the same programs'
// text, the last step alone of the old path (which generated the text and then assembled it, so cost at least that).
// Each assembled program must have the built one's words: a difference is a disassembler/assembler round-trip bug
// and fails the run. Times are the best of several rounds, per kernel. A kernel still generated as text and assembled
// inside its emitter (matmul until its port to the builder lands) has that assemble in its build time too.
// Usage: npusim-bench-kernel-build [rounds] [builds per kernel and round]   (default 5 50; CI's smoke runs 1 1)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "npusim/emitter/adam.h"
#include "npusim/emitter/attention.h"
#include "npusim/emitter/cumsum.h"
#include "npusim/emitter/elementwise.h"
#include "npusim/emitter/fused.h"
#include "npusim/emitter/gather.h"
#include "npusim/emitter/indexed_elements.h"
#include "npusim/emitter/matmul.h"
#include "npusim/emitter/nll_loss.h"
#include "npusim/emitter/random.h"
#include "npusim/emitter/rows.h"
#include "npusim/emitter/scatter_add_rows.h"
#include "npusim/emitter/sgd.h"
#include "npusim/emitter/transpose_copy.h"
#include "npusim/emitter/triangle.h"
#include "npusim/isa/assembler.h"

using namespace npusim;
using emitter::ElementwiseOp;
using emitter::Kernel;
using isa::ElementType;
using Clock = std::chrono::steady_clock;

namespace {

struct Case {
  std::string family;
  std::string name;
  std::function<Kernel()> build;
};

// Contiguous strides in elements for `sizes`.
std::vector<int64_t> contiguous(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t running = 1;
  for (size_t k = sizes.size(); k-- > 0;) {
    strides[k] = running;
    running *= sizes[k];
  }
  return strides;
}

emitter::ElementwiseSpec elementwise(ElementwiseOp op, std::vector<int64_t> sizes,
                                     std::vector<std::vector<int64_t>> input_strides,
                                     std::vector<ElementType> float_types = {}) {
  emitter::ElementwiseSpec spec;
  spec.op = op;
  // The output's bytes in memory: a narrow float output's own.
  spec.element_bytes = !float_types.empty()              ? static_cast<int>(isa::element_bytes(float_types[0]))
                       : emitter::element_bytes(op) == 0 ? 4
                                                         : emitter::element_bytes(op);
  spec.sizes = sizes;
  spec.strides = {contiguous(sizes)};
  for (auto& strides : input_strides) spec.strides.push_back(strides.empty() ? contiguous(sizes) : strides);
  spec.float_types = std::move(float_types);
  return spec;
}

std::vector<Case> cases(const config::ChipConfig& config) {
  std::vector<Case> all;
  const auto add = [&](std::string family, std::string name, std::function<Kernel()> build) {
    all.push_back({std::move(family), std::move(name), std::move(build)});
  };
  const auto add_elementwise = [&](std::string name, emitter::ElementwiseSpec spec) {
    add("elementwise", std::move(name), [spec, &config] { return emitter::emit_elementwise(spec, config); });
  };
  add_elementwise("add f32 [1048576]", elementwise(ElementwiseOp::AddF32, {1 << 20}, {{}, {}}));
  add_elementwise("mul f32 [64, 128] * [128] (broadcast)", elementwise(ElementwiseOp::MulF32, {64, 128}, {{}, {0, 1}}));
  add_elementwise("add f32 [32, 64, 56, 56] + [64, 1, 1] (broadcast)",
                  elementwise(ElementwiseOp::AddF32, {32, 64, 56, 56}, {{}, {0, 1, 0, 0}}));
  add_elementwise("gelu f32 [8, 512, 3072]", elementwise(ElementwiseOp::GeluF32, {8, 512, 3072}, {{}}));
  add_elementwise("sigmoid f32 [7, 33, 9]", elementwise(ElementwiseOp::SigmoidF32, {7, 33, 9}, {{}}));
  add_elementwise("add bf16 [128, 768]", elementwise(ElementwiseOp::AddF32, {128, 768}, {{}, {}},
                                                     {ElementType::BF16, ElementType::BF16, ElementType::BF16}));
  add_elementwise("silu_backward f16 [4096, 1024]",
                  elementwise(ElementwiseOp::SiluBackwardF32, {4096, 1024}, {{}, {}},
                              {ElementType::F16, ElementType::F16, ElementType::F16}));
  emitter::ElementwiseSpec softplus = elementwise(ElementwiseOp::SoftplusF32, {1000, 10}, {{}});
  softplus.parameters = {1.0f, 20.0f, 0.0f};
  add_elementwise("softplus f32 [1000, 10]", softplus);
  add_elementwise("where f32 [256, 256]", elementwise(ElementwiseOp::WhereB32, {256, 256}, {{}, {}, {}}));
  add_elementwise("lt f32 [3, 4]", elementwise(ElementwiseOp::LtF32, {3, 4}, {{}, {}}));
  emitter::ElementwiseSpec convert = elementwise(ElementwiseOp::Convert, {4096}, {{}});
  convert.element_bytes = 2;
  convert.convert_to = ElementType::F16;
  add_elementwise("convert f32 -> f16 [4096]", convert);

  const auto add_rows = [&](std::string name, emitter::RowSpec spec) {
    add("rows", std::move(name), [spec, &config] { return emitter::emit_rows(spec, config); });
  };
  add_rows("softmax [512, 1000]", {emitter::RowOp::SoftmaxF32, 512, 1000});
  add_rows("log_softmax [64, 32000]", {emitter::RowOp::LogSoftmaxF32, 64, 32000});
  add_rows("layer_norm [256, 768] weight bias", {emitter::RowOp::LayerNormF32, 256, 768, true, true, 1e-5f});
  add_rows("argmax [128, 1000]", {emitter::RowOp::ArgMaxF32, 128, 1000});

  const auto add_matmul = [&](std::string name, emitter::MatmulSpec spec) {
    add("matmul", std::move(name), [spec, &config] { return emitter::emit_matmul(spec, config); });
  };
  const auto matmul = [](int64_t m, int64_t k, int64_t n, bool b_transposed, ElementType type) {
    emitter::MatmulSpec spec;
    spec.m = m;
    spec.k = k;
    spec.n = n;
    spec.a_row = k;
    spec.a_col = 1;
    spec.b_row = b_transposed ? 1 : n;
    spec.b_col = b_transposed ? k : 1;
    spec.c_row = n;
    spec.c_col = 1;
    spec.type = type;
    return spec;
  };
  add_matmul("f32 512 x 512 x 512", matmul(512, 512, 512, false, ElementType::F32));
  add_matmul("bf16 128 x 768 x 3072", matmul(128, 768, 3072, false, ElementType::BF16));
  add_matmul("f32 B^T 64 x 256 x 100", matmul(64, 256, 100, true, ElementType::F32));
  emitter::MatmulSpec bmm = matmul(128, 64, 128, false, ElementType::F16);
  bmm.output_type = ElementType::F32;
  bmm.batch = 12;
  bmm.a_batch = 128 * 64;
  bmm.b_batch = 64 * 128;
  bmm.c_batch = 128 * 128;
  add_matmul("bmm f16 -> f32 12 x 128 x 64 x 128", bmm);

  const auto add_attention = [&](std::string name, emitter::AttentionSpec spec) {
    add("attention", std::move(name), [spec, &config] { return emitter::emit_attention(spec, config); });
  };
  add_attention("f32 8 heads 128 x 128 x 64", {8, 128, 128, 64, 64, false, 0.125f});
  add_attention("f16 causal 4 heads 70 x 70 x 32", {4, 70, 70, 32, 32, true, 0.17677669f, ElementType::F16});

  const auto add_transpose = [&](std::string name, emitter::StridedCopy copy) {
    add("transpose copy", std::move(name), [copy, &config] {
      std::optional<Kernel> kernel = emitter::emit_transpose_copy(copy, config);
      if (!kernel) throw std::logic_error("not a transposing copy");
      return *kernel;
    });
  };
  add_transpose("f32 300 x 500 transposed", {4, {300, 500}, {500 * 4, 4}, {4, 300 * 4}});
  // Collapsed form: dimensions in the destination's order, byte strides.
  add_transpose("f16 [8, 64, 49] -> [8, 49, 64]", {2, {8, 49, 64}, {64 * 49 * 2, 64 * 2, 2}, {64 * 49 * 2, 2, 49 * 2}});

  const auto add_random = [&](std::string name, emitter::RandomSpec spec) {
    add("random", std::move(name), [spec, &config] { return emitter::emit_random(spec, config); });
  };
  add_random("uniform f32 100000", {emitter::RandomOp::Uniform, 100000});
  add_random("normal bf16 4096", {emitter::RandomOp::Normal, 4096, ElementType::BF16});
  add_random("dropout f32 100000", {emitter::RandomOp::Dropout, 100000});

  // An MLP's parameters: weights and biases of three layers.
  static constexpr int64_t kOptimizerTensors[] = {784 * 512, 512, 512 * 512, 512, 512 * 10, 10};
  for (const bool decoupled : {false, true})
    for (const bool amsgrad : {false, true}) {
      const emitter::AdamSpec spec{decoupled, true, amsgrad, false};
      add("adam", fmt::format("{}{}", decoupled ? "adamw" : "adam", amsgrad ? " amsgrad" : ""),
          [spec, &config] { return emitter::emit_fused(emitter::adam_spec(spec, kOptimizerTensors), config); });
    }

  // The other kernels, for the round-trip check as much as for their times.
  add("other", "cumsum f32 [64, 1000]", [&config] { return emitter::emit_cumsum({64, 1000}, config); });
  add("other", "gather 50000 rows of 3072 bytes", [&config] {
    return emitter::emit_gather({50000, 3072, 512}, config);
  });
  add("other", "index_select f32 dim 1 (wrapping)", [&config] {
    emitter::IndexedElementsSpec spec;  // x[:, [0, -1, 2]] of a 3 x 4 x
    spec.outer = 3;
    spec.positions = 3;
    spec.dim_size = 4;
    spec.data = {4, 1, 0};
    spec.index = {0, 1, 0};
    spec.values = {3, 1, 0};
    spec.wrap_negative = true;
    return emitter::emit_indexed_elements(spec, config);
  });
  add("other", "nll_loss mean weighted [64, 1000]", [&config] {
    return emitter::emit_nll_loss({64, 1000, true, emitter::NllReduction::Mean, -100}, config);
  });
  add("other", "nll_loss backward [64, 1000]", [&config] {
    return emitter::emit_nll_loss_backward({64, 1000, false, emitter::NllReduction::Mean, -100}, config);
  });
  add("other", "scatter_add_rows 1000 x 256", [&config] {
    return emitter::emit_scatter_add_rows({1000, 256, 4096, 8, -1}, config);
  });
  add("other", "sgd momentum nesterov", [&config] {
    return emitter::emit_fused(emitter::sgd_spec({true, true, false, true, false}, kOptimizerTensors), config);
  });
  add("other", "tril f32 [4, 100, 100]", [&config] {
    return emitter::emit_zero_triangle({4, 100, 100, 4, 0, true}, config);
  });
  return all;
}

// The mean host time of `repeats` calls of `work`, in microseconds.
template <typename Work>
double mean_us(int repeats, Work&& work) {
  const Clock::time_point start = Clock::now();
  for (int k = 0; k < repeats; ++k) work();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / repeats;
}

struct Measured {
  double build_us = 1e300, assemble_us = 1e300;
  size_t words = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::stoi(argv[1]) : 5;
  const int repeats = argc > 2 ? std::stoi(argv[2]) : 50;
  if (rounds < 1 || repeats < 1) {
    fmt::print("FAIL: {} rounds of {} builds measure nothing\n", rounds, repeats);
    return 1;
  }
  const config::ChipConfig config;
  const std::vector<Case> all = cases(config);

  // The programs and their text, once; then each check that the text assembles back to the built words.
  std::vector<std::string> texts;
  std::vector<Measured> measured(all.size());
  int mismatches = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    const Kernel kernel = all[k].build();
    texts.push_back(kernel.assembly());
    measured[k].words = kernel.words.size();
    const std::vector<uint64_t> assembled = isa::assemble(texts[k], kernel.name + ".s");
    if (assembled != kernel.words) {
      ++mismatches;
      size_t first = 0;
      while (first < std::min(assembled.size(), kernel.words.size()) && assembled[first] == kernel.words[first])
        ++first;
      fmt::print("FAIL {} / {}: {} built words, {} assembled from its text; first difference at word {}\n",
                 all[k].family, all[k].name, kernel.words.size(), assembled.size(), first);
    }
  }

  for (int round = 0; round < rounds; ++round)
    for (size_t k = 0; k < all.size(); ++k) {
      size_t sink = 0;
      const double build = mean_us(repeats, [&] { sink += all[k].build().words.size(); });
      const double assemble = mean_us(repeats, [&] { sink += isa::assemble(texts[k], "bench.s").size(); });
      if (sink == 0) return 2;  // keeps the work observable
      measured[k].build_us = std::min(measured[k].build_us, build);
      measured[k].assemble_us = std::min(measured[k].assemble_us, assemble);
    }

  fmt::print("kernel build time, config '{}' ({} cores): best of {} rounds of {} builds per kernel\n", config.name,
             config.chip_cores, rounds, repeats);
  fmt::print("{:<16} {:<50} {:>7} {:>11} {:>12} {:>9}\n", "family", "kernel", "words", "build us", "assemble us",
             "asm/build");
  std::map<std::string, Measured> families;
  std::map<std::string, int> counts;
  std::vector<std::string> order;
  Measured total{0, 0, 0};
  for (size_t k = 0; k < all.size(); ++k) {
    const Measured& m = measured[k];
    fmt::print("{:<16} {:<50} {:>7} {:>11.1f} {:>12.1f} {:>9.2f}\n", all[k].family, all[k].name, m.words, m.build_us,
               m.assemble_us, m.assemble_us / m.build_us);
    if (!families.contains(all[k].family)) {
      families[all[k].family] = {0, 0, 0};
      order.push_back(all[k].family);
    }
    Measured& f = families[all[k].family];
    f.build_us += m.build_us;
    f.assemble_us += m.assemble_us;
    f.words += m.words;
    ++counts[all[k].family];
    total.build_us += m.build_us;
    total.assemble_us += m.assemble_us;
    total.words += m.words;
  }
  fmt::print("\nper kernel, by family (mean of its kernels' best times)\n");
  fmt::print("{:<16} {:>7} {:>11} {:>11} {:>12} {:>9}\n", "family", "kernels", "words", "build us", "assemble us",
             "asm/build");
  const auto row = [](const std::string& name, int n, const Measured& m) {
    fmt::print("{:<16} {:>7} {:>11.0f} {:>11.1f} {:>12.1f} {:>9.2f}\n", name, n, static_cast<double>(m.words) / n,
               m.build_us / n, m.assemble_us / n, m.assemble_us / m.build_us);
  };
  for (const std::string& family : order) row(family, counts[family], families[family]);
  row("total", static_cast<int>(all.size()), total);

  if (all.empty() || total.words == 0) {
    fmt::print("FAIL: the benchmark built no kernels or no words\n");
    return 1;
  }
  if (mismatches > 0) {
    fmt::print("FAIL: {} of {} kernels do not assemble back to their words from their own assembly text\n", mismatches,
               all.size());
    return 1;
  }
  fmt::print("all {} kernels assemble back to their built words ({} words in all)\n", all.size(), total.words);
  return 0;
}
