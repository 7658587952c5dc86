// Timed-mode cycles of fused kernels whose engines should overlap: a GEMM with a gelu epilogue against the product
// alone and the gelu alone, a pointwise chain over 1M elements, and a softmax over [1024, 512], on the default chip.
// Each result's checksum is printed too, so that two builds can be compared bit for bit, and each engine's busy cycles:
// a kernel whose engines overlap takes little more than its busiest engine's. Every result is checked against the same
// arithmetic on the host, and a kernel that left no record or took no cycles stops the run (exit 1) without a figure.
// Usage: npusim-bench-fused-overlap [smoke]   (smoke: the same kernels at a tiny size, CI's check that it still works)
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "npusim/emitter/fused.h"
#include "npusim/runtime/device.h"

using namespace npusim;
using emitter::FusedAccess;
using emitter::FusedNode;
using emitter::FusedOpcode;
using emitter::FusedSpec;
using isa::ElementType;
using Op = FusedOpcode;
using Bytes = std::vector<std::byte>;

namespace {

constexpr ElementType F32 = ElementType::F32;

struct Builder {
  FusedSpec spec;
  Builder(std::string name, std::vector<int64_t> sizes, int reduced_dims, int arguments) {
    spec.name = std::move(name);
    spec.sizes = std::move(sizes);
    spec.reduced_dims = reduced_dims;
    spec.arguments = arguments;
  }
  int node(FusedNode node) {
    spec.nodes.push_back(node);
    return static_cast<int>(spec.nodes.size()) - 1;
  }
  int load(int argument, std::vector<int64_t> strides) {
    spec.loads.push_back({argument, F32, 0, std::move(strides)});
    return node({.op = Op::Load, .type = F32, .access = static_cast<int>(spec.loads.size()) - 1});
  }
  int constant(double value) { return node({.op = Op::Constant, .type = F32, .constant = value}); }
  int op(Op op, int a, int b = -1) { return node({.op = op, .type = F32, .a = a, .b = b}); }
  void store(int value, int argument, std::vector<int64_t> strides) {
    spec.stores.push_back({argument, F32, 0, std::move(strides)});
    node({.op = Op::Store, .type = F32, .a = value, .access = static_cast<int>(spec.stores.size()) - 1});
  }
};

Bytes random_f32(int64_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(-1, 1);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(generator);
  Bytes bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> floats(const Bytes& bytes) {
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

uint64_t checksum(const Bytes& bytes) {
  uint64_t hash = 1469598103934665603ull;
  for (std::byte value : bytes) hash = (hash ^ static_cast<uint64_t>(value)) * 1099511628211ull;
  return hash;
}

// Exits with a message: a figure from a run that computed something else, or nothing, would be no figure at all.
[[noreturn]] void refuse(const std::string& why) {
  fmt::print(stderr, "npusim-bench-fused-overlap: {}: no figure\n", why);
  std::exit(1);
}

// Runs the spec's kernel in timed mode; checks the last argument against `expected(i)`, its i-th element computed on
// the host; prints its cycles and the checksum of the last argument.
uint64_t run(runtime::Device& device, const config::ChipConfig& config, const FusedSpec& spec,
             const std::vector<Bytes>& buffers, const std::function<double(int64_t)>& expected) {
  const emitter::Kernel kernel = emitter::emit_fused(spec, config);
  std::vector<uint64_t> addresses;
  for (const Bytes& buffer : buffers) {
    addresses.push_back(device.allocate(buffer.size()));
    device.copy_host_to_device(addresses.back(), buffer.data(), buffer.size());
  }
  device.launch(kernel.name, device.load_program(kernel.words), addresses, (uint64_t{1} << kernel.cores) - 1);
  Bytes out(buffers.back().size());
  device.copy_device_to_host(out.data(), addresses.back(), out.size());
  for (uint64_t address : addresses) device.free(address);
  runtime::CommandRecord kernel_record;
  for (const runtime::CommandRecord& record : device.take_records())
    if (record.name == kernel.name) kernel_record = record;
  const uint64_t cycles = kernel_record.kernel_cycles;
  if (kernel_record.name != kernel.name || cycles == 0)
    refuse(fmt::format("{} left no record or took {} cycles", kernel.name, cycles));
  const std::vector<float> result = floats(out);
  for (int64_t i = 0; i < static_cast<int64_t>(result.size()); ++i) {
    const double wanted = expected(i);
    if (!(std::abs(result[i] - wanted) <= 1e-4 + 1e-3 * std::abs(wanted)))
      refuse(fmt::format("{}: element {} is {}, the host computes {}", kernel.name, i, result[i], wanted));
  }
  const emulator::KernelStats& stats = kernel_record.stats;
  fmt::print("{:<12} {:>7} cycles (busy: DMA {}, vector {}, matrix {}), hazards {}, checksum {:016x}\n  {}\n",
             kernel.name, cycles, stats.busy_cycles_dma, stats.busy_cycles_vector, stats.busy_cycles_matrix,
             stats.hazards, checksum(out), kernel.description.substr(0, kernel.description.find('\n')));
  return cycles;
}

// gelu(y) = 0.5 * y * (1 + erf(y / sqrt 2)) of node y.
int gelu(Builder& s, int y) {
  const int erf = s.op(Op::Erf, s.op(Op::Mul, y, s.constant(0.7071067811865476)));
  return s.op(Op::Mul, s.op(Op::Mul, y, s.constant(0.5)), s.op(Op::Add, erf, s.constant(1)));
}

double host_gelu(double y) { return 0.5 * y * (1 + std::erf(y / std::sqrt(2.0))); }

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::string(argv[1]) == "smoke";
  if (argc > 1 && !smoke) {
    fmt::print(stderr, "usage: npusim-bench-fused-overlap [smoke]\n");
    return 2;
  }
  config::ChipConfig config;
  config.dram_capacity_mib = 256;
  runtime::Device device(config, runtime::Mode::Timed);
  const int64_t m = smoke ? 32 : 256, n = smoke ? 64 : 512, k = smoke ? 16 : 128;
  emitter::FusedMatmul product;
  product.a_argument = 0;
  product.b_argument = 1;
  product.m = m;
  product.n = n;
  product.k = k;
  product.a_row = k;
  product.a_col = 1;
  product.b_row = 1;  // linear's weight [n, k]
  product.b_col = k;
  const std::vector<Bytes> operands = {random_f32(m * k, 1), random_f32(n * k, 2), random_f32(n, 3)};
  const std::vector<float> a = floats(operands[0]), weight = floats(operands[1]), bias = floats(operands[2]);
  const auto host_product = [&](int64_t i) {  // element i of a @ weight^T, [m, n]
    double sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) sum += static_cast<double>(a[i / n * k + kk]) * weight[i % n * k + kk];
    return sum;
  };

  Builder plain("mm", {m, n}, 0, 3);
  plain.spec.matmul = product;
  plain.store(plain.node({.op = Op::Product, .type = F32}), 2, {n, 1});
  const uint64_t mm = run(device, config, plain.spec, {operands[0], operands[1], Bytes(m * n * 4)}, host_product);

  Builder epilogue("gelu", {m, n}, 0, 3);
  epilogue.store(gelu(epilogue, epilogue.op(Op::Add, epilogue.load(0, {n, 1}), epilogue.load(1, {0, 1}))), 2, {n, 1});
  const Bytes gelu_input = random_f32(m * n, 4);
  const std::vector<float> gelu_in = floats(gelu_input);
  const uint64_t alone = run(device, config, epilogue.spec, {gelu_input, operands[2], Bytes(m * n * 4)},
                             [&](int64_t i) { return host_gelu(static_cast<double>(gelu_in[i]) + bias[i % n]); });

  Builder fused("linear_gelu", {m, n}, 0, 4);
  fused.spec.matmul = product;
  fused.store(gelu(fused, fused.op(Op::Add, fused.node({.op = Op::Product, .type = F32}), fused.load(2, {0, 1}))), 3,
              {n, 1});
  const uint64_t gemm = run(device, config, fused.spec, {operands[0], operands[1], operands[2], Bytes(m * n * 4)},
                            [&](int64_t i) { return host_gelu(host_product(i) + bias[i % n]); });
  fmt::print("linear_gelu / max(mm, gelu) = {:.3f}, / (mm + gelu) = {:.3f}\n",
             static_cast<double>(gemm) / std::max(mm, alone), static_cast<double>(gemm) / (mm + alone));

  const int64_t elements = int64_t{1} << (smoke ? 12 : 20);
  Builder chain("chain5", {elements}, 0, 3);
  const int x = chain.load(0, {1}), y = chain.load(1, {1});
  const int sum = chain.op(Op::Add, x, y), scaled = chain.op(Op::Mul, sum, chain.constant(0.5));
  const int e = chain.op(Op::Exp, scaled), difference = chain.op(Op::Sub, e, x);
  chain.store(chain.op(Op::Maximum, difference, chain.constant(0)), 2, {1});
  const Bytes chain_x = random_f32(elements, 5), chain_y = random_f32(elements, 6);
  const std::vector<float> xs = floats(chain_x), ys = floats(chain_y);
  run(device, config, chain.spec, {chain_x, chain_y, Bytes(elements * 4)},
      [&](int64_t i) { return std::max(std::exp((static_cast<double>(xs[i]) + ys[i]) * 0.5) - xs[i], 0.0); });

  const int64_t rows = smoke ? 16 : 1024, cols = smoke ? 64 : 512;
  Builder softmax("softmax", {rows, cols}, 1, 2);
  const int in = softmax.load(0, {cols, 1});
  const int shifted = softmax.op(Op::Sub, in, softmax.op(Op::ReduceMax, in));
  const int exp = softmax.op(Op::Exp, shifted);
  softmax.store(softmax.op(Op::Div, exp, softmax.op(Op::ReduceSum, exp)), 1, {cols, 1});
  const Bytes logits = random_f32(rows * cols, 7);
  const std::vector<float> z = floats(logits);
  std::vector<double> probabilities(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = z.data() + r * cols;
    const double largest = *std::max_element(row, row + cols);
    double total = 0;
    for (int64_t j = 0; j < cols; ++j) total += probabilities[r * cols + j] = std::exp(row[j] - largest);
    for (int64_t j = 0; j < cols; ++j) probabilities[r * cols + j] /= total;
  }
  run(device, config, softmax.spec, {logits, Bytes(rows * cols * 4)}, [&](int64_t i) { return probabilities[i]; });
  return 0;
}
