// The fixture of the per-instruction semantics tests (tests/cpp/semantics/*_test.cpp, one binary): a two-core
// functional chip, helpers that run a program and read results, and one fixture class per row of the instruction
// table, so that each suite carries its instruction's name. coverage_test.cpp fails when a row has no suite.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "npusim/emulator/functional_chip.h"
#include "npusim/isa/assembler.h"
#include "npusim/runtime/device.h"

namespace npusim::emulator::semantics_test {

using Half = Eigen::half;
using BFloat16 = Eigen::bfloat16;
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

constexpr uint64_t kProgram = 0x10000;
constexpr uint64_t kData = 0x20000;  // r1 at kernel start
// Tile tests use four 4 KiB scratchpad slots: inputs a, b, c and the output, loaded from kData + slot address.
constexpr uint64_t kSlotBytes = 0x1000;

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());  // an empty vector's data() may be null
  return bytes;
}
template <typename T>
std::vector<T> values_of(const std::vector<std::byte>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}
inline uint32_t bits(float value) { return std::bit_cast<uint32_t>(value); }

class Semantics : public ::testing::Test {
 public:
  static config::ChipConfig config() {
    config::ChipConfig config;
    config.chip_cores = 2;
    config.dram_capacity_mib = 64;
    config.core_scratchpad_kib = 64;
    config.core_accumulator_kib = 16;
    config.core_systolic_rows = 4;
    config.core_systolic_cols = 4;
    config.runtime_watchdog_instructions = 100000;
    return config;
  }

 protected:
  Semantics() : chip_(config()) {}

  std::optional<KernelFault> run(const std::string& source, int core = 0) {
    const auto words = isa::assemble(source, "test.s");
    chip_.memory().write(kProgram, words.data(), words.size() * 8);
    return chip_.run_kernel(core, kProgram, kData);
  }
  uint64_t reg(int index, int core = 0) const { return chip_.core_state(core).registers[index]; }
  // r3 after running `body`, for scalar instructions.
  uint64_t r3(const std::string& body) {
    const auto fault = run(body + "\n halt\n");
    EXPECT_FALSE(fault) << fault->describe();
    return reg(3);
  }
  std::string trap_of(const std::string& source) {
    const auto fault = run(source);
    EXPECT_TRUE(fault) << source;
    return fault ? fault->cause : "";
  }

  // Puts a, b, c and the output's initial bytes in scratchpad slots 0..3 (r10..r13 hold their addresses), sets
  // r14 = count and r15 = rows, runs `op`, and returns the first `out_bytes` of the output slot.
  std::vector<std::byte> tile(const std::string& op, uint64_t count, uint64_t out_bytes,
                              const std::vector<std::vector<std::byte>>& inputs, uint64_t rows = 0) {
    std::vector<std::byte> image(4 * kSlotBytes);
    for (const auto& input : inputs) EXPECT_LE(input.size(), kSlotBytes) << "an input larger than its slot";
    for (size_t slot = 0; slot < inputs.size(); ++slot)
      if (!inputs[slot].empty())
        std::memcpy(image.data() + slot * kSlotBytes, inputs[slot].data(), inputs[slot].size());
    chip_.memory().write(kData, image.data(), image.size());
    const auto fault = run(fmt::format(
        "li r10, 0\n li r11, 4096\n li r12, 8192\n li r13, 12288\n li r14, {}\n li r15, {}\n li r20, 16384\n"
        " dma.ld.b8 r0, r1, r20, 1\n fence\n {}\n fence\n addi r21, r1, 16384\n li r20, 4096\n"
        " dma.st.b8 r21, r13, r20, 1\n halt\n",
        count, rows, op));
    EXPECT_FALSE(fault) << op << ": " << (fault ? fault->describe() : "");
    std::vector<std::byte> out(out_bytes);
    chip_.memory().read(kData + 4 * kSlotBytes, out.data(), out.size());
    return out;
  }

 public:
  // A vector instruction over a (and b, c) of element type T, giving Out elements, one per input element.
  template <typename T, typename Out = T>
  std::vector<Out> vector_op(const std::string& op, const std::vector<T>& a, const std::vector<T>& b = {},
                             const std::vector<std::byte>& c = {}, const std::vector<Out>& initial_out = {}) {
    return values_of<Out>(
        tile(op, a.size(), a.size() * sizeof(Out), {bytes_of(a), bytes_of(b), c, bytes_of(initial_out)}));
  }

 protected:
  FunctionalChip chip_;
};

// A fixture class per instruction, so each suite carries the instruction's name.
#define NPUSIM_INSTRUCTION(Name, mnemonic, code, operands, timing, types, doc) \
  class Name : public Semantics {};
#include "npusim/isa/instructions.def"
#undef NPUSIM_INSTRUCTION
}  // namespace npusim::emulator::semantics_test
