// Fuzz target for program execution on the timed SystemC model: any kernel with random buffers (the same inputs as
// emulator/fuzz) must end in a result or a clean trap within the watchdog, and, where the two fidelities must agree
// (one core, no hazard, no read of the cycle counter), exactly as on the functional emulator: the same trap or none,
// and bit-identical buffers and registers.
//
// SystemC elaborates one design per process, so the target builds its timed chip once and runs every input through
// it, as the runtime runs every kernel of a process on one device; the runner clears the chip's DRAM and boots the
// firmware again before each run, so runs do not depend on each other. No fork per input is needed.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "fuzz_program.h"
#include "npusim/emulator/functional_chip.h"
#include "npusim/isa/encoding.h"
#include "npusim/sim/timed_chip.h"

namespace {

using npusim::fuzz::FuzzProgram;
using npusim::fuzz::Outcome;

// Reading the cycle counter is the one thing a kernel may see differently in the two modes (zero on the emulator).
bool may_read_cycle_counter(const FuzzProgram& program, const Outcome& outcome) {
  // Most buffer words are no instruction, and decoding one throws: a word whose opcode byte is not csrr's is skipped
  // before it is decoded (the exceptions took a fifth of the target's time).
  const auto reads_cycle = [](uint64_t word) {
    if ((word & 0xff) != static_cast<uint64_t>(npusim::isa::Opcode::Csrr)) return false;  // Opcode values are codes
    try {
      const npusim::isa::Instruction instruction = npusim::isa::decode(word);
      return instruction.opcode == npusim::isa::Opcode::Csrr &&
             instruction.imm == static_cast<int32_t>(npusim::isa::Csr::Cycle);
    } catch (const npusim::isa::IllegalInstruction&) {
      return false;
    }
  };
  for (uint64_t word : program.words)
    if (reads_cycle(word)) return true;
  for (size_t offset = 0; offset + 8 <= outcome.buffers.size(); offset += 8) {  // a kernel may jump into its data
    uint64_t word = 0;
    std::memcpy(&word, outcome.buffers.data() + offset, 8);
    if (reads_cycle(word)) return true;
  }
  return false;
}

void check_same(const FuzzProgram& program, const Outcome& timed, const Outcome& functional) {
  const auto fail = [&](const char* what) {
    std::fprintf(stderr, "fuzz: the timed model and the emulator disagree: %s\n  timed: %s\n  emulator: %s\n", what,
                 timed.fault ? timed.fault->describe().c_str() : "no trap",
                 functional.fault ? functional.fault->describe().c_str() : "no trap");
    npusim::fuzz::print_program(program);
    std::abort();
  };
  // A hazard makes the result depend on timing; a firmware fault means the kernel wrote over the firmware. Two cores
  // may race for the same bytes without a barrier between them (the emulator runs them on parallel host threads):
  // only single-core kernels must agree.
  if (!timed.hazard.empty() || timed.firmware_fault || functional.firmware_fault) return;
  if (std::popcount(program.core_mask) != 1) return;
  if (may_read_cycle_counter(program, timed)) return;
  if (timed.fault.has_value() != functional.fault.has_value()) fail("one trapped, the other did not");
  if (timed.fault) return;  // where an engine's trap stops the other engines differs between the two
  if (timed.buffers != functional.buffers) fail("the buffers differ");
  for (size_t core = 0; core < timed.registers.size(); ++core)
    if ((program.core_mask >> core & 1) && timed.registers[core] != functional.registers[core])
      fail("the registers differ");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<npusim::emulator::Chip> timed_chip =
      std::move(npusim::sim::make_timed_chips(npusim::fuzz::fuzz_chip_config(), 1).front());
  static npusim::emulator::FunctionalChip functional_chip(npusim::fuzz::fuzz_chip_config());
  static npusim::fuzz::ProgramRunner timed_runner(*timed_chip), functional_runner(functional_chip);
  const std::optional<FuzzProgram> program = npusim::fuzz::read_program(data, size);
  if (!program) return 0;
  const Outcome timed = timed_runner.run(*program);
  npusim::fuzz::check_outcome(*program, timed, "timed model");
  check_same(*program, timed, functional_runner.run(*program));
  return 0;
}
