// What the program-execution fuzz targets run: a fuzz input read as a kernel (instruction words, or assembly text),
// a core mask and random buffers, launched through the command-processor firmware on a chip as the runtime launches
// kernels; and the check that the run ended in a result or a clean trap.
//
// Input layout: "#M" then assembly text (M = '1' core 0, '2' core 1, '3' both), or an 8-byte header whose first
// byte's low two bits choose the cores the same way, then 64-bit instruction words. The buffers' contents come from a
// hash of the whole input, so an input file reproduces its run exactly.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "npusim/config/chip_config.h"
#include "npusim/emulator/chip.h"

namespace npusim::fuzz {

struct FuzzProgram {
  std::vector<uint64_t> words;  // the kernel
  uint64_t core_mask = 1;
  uint64_t buffer_seed = 0;
};

// nullopt for assembly text that does not assemble (the ISA's own fuzz target covers the assembler).
std::optional<FuzzProgram> read_program(const uint8_t* data, size_t size);

// Two cores, 64 MiB of DRAM, small local memories, and a watchdog of 20000 instructions per core, so that every run
// is short.
config::ChipConfig fuzz_chip_config();

struct Outcome {
  std::optional<emulator::KernelFault> fault;  // the kernel trapped
  std::optional<std::string> firmware_fault;   // the command processor trapped (the kernel wrote over its memory)
  std::string hazard;                          // the first hazard the timed model saw
  std::vector<uint8_t> buffers;                // the buffers after the run
  std::vector<std::array<uint64_t, isa::kRegisterCount>> registers;  // each core's registers after the run
};

// Runs programs on one chip, one after another: before each run the chip's DRAM and the cores' local memories are
// cleared and the firmware booted again, so a run does not depend on the ones before it.
class ProgramRunner {
 public:
  explicit ProgramRunner(emulator::Chip& chip) : chip_(chip) {}
  Outcome run(const FuzzProgram& program);

 private:
  emulator::Chip& chip_;
};

// Aborts, printing the program, unless the outcome is a result or a clean trap that names a launched core, its PC,
// the instruction and the cause.
void check_outcome(const FuzzProgram& program, const Outcome& outcome, const char* chip_name);

// Prints the program as assembly on stderr (for a fuzzer's report).
void print_program(const FuzzProgram& program);

}  // namespace npusim::fuzz
