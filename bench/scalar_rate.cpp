// npusim-bench-scalar: emulated instructions per host second on scalar-heavy code (a counted loop of arithmetic),
// on the functional chip without firmware. Issue 4's goal: at least 100 million per second.
// Usage: npusim-bench-scalar [iterations]   (default 10000000; CI's smoke runs 100000)
// The loop's sum and the retired instruction count are checked against their closed forms before a rate is printed.
#include <fmt/format.h>

#include <chrono>
#include <string>

#include "npusim/emulator/functional_chip.h"
#include "npusim/isa/assembler.h"

int main(int argc, char** argv) {
  const uint64_t iterations = argc > 1 ? std::stoull(argv[1]) : 10'000'000;
  if (iterations == 0) {
    fmt::print(stderr, "npusim-bench-scalar: a loop of 0 iterations measures nothing\n");
    return 2;
  }
  npusim::config::ChipConfig config;
  config.dram_capacity_mib = 64;
  config.runtime_watchdog_instructions = 1'000'000'000'000;
  npusim::emulator::FunctionalChip chip(config);
  const auto words = npusim::isa::assemble(
      fmt::format("li r2, {}\n li r3, 0\nloop: add r3, r3, r2\n xori r4, r3, 7\n slli r5, r4, 3\n addi r2, r2, -1\n"
                  " bne r2, r0, loop\n halt\n",
                  iterations),
      "scalar.s");
  chip.memory().write(0x10000, words.data(), words.size() * 8);
  const auto started = std::chrono::steady_clock::now();
  if (auto fault = chip.run_kernel(0, 0x10000, 0)) {
    fmt::print("fault: {}\n", fault->describe());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const uint64_t instructions = chip.core_state(0).instructions_retired;
  // Closed forms: r3 sums iterations down to 1; the loop body is 5 instructions, the rest of the program runs once.
  const uint64_t sum = chip.core_registers(0)[3], expected_sum = iterations * (iterations + 1) / 2;
  const uint64_t expected_instructions = 5 * iterations + words.size() - 5;
  if (sum != expected_sum || instructions != expected_instructions) {
    fmt::print(stderr, "npusim-bench-scalar: the loop left r3 = {} (expected {}) after {} instructions (expected {})\n",
               sum, expected_sum, instructions, expected_instructions);
    return 1;
  }
  fmt::print("scalar-heavy loop: {} instructions in {:.3f} s = {:.1f} million instructions per second (goal >= 100)\n",
             instructions, seconds, instructions / seconds / 1e6);
  return 0;
}
