// Fuzz target for program execution on the functional emulator: any kernel (random or mutated instruction words, or
// assembly text) with random buffers, launched on one or both cores, must end in a result or a clean trap naming the
// core, PC, instruction and cause, within the watchdog. Seeds: emulator/fuzz/corpus; docs/robustness.md.
#include <cstddef>
#include <cstdint>

#include "fuzz_program.h"
#include "npusim/emulator/functional_chip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One chip for the whole process, as a device keeps its chip: the runner clears it between inputs.
  static npusim::emulator::FunctionalChip chip(npusim::fuzz::fuzz_chip_config());
  static npusim::fuzz::ProgramRunner runner(chip);
  const std::optional<npusim::fuzz::FuzzProgram> program = npusim::fuzz::read_program(data, size);
  if (!program) return 0;
  npusim::fuzz::check_outcome(*program, runner.run(*program), "emulator");
  return 0;
}
