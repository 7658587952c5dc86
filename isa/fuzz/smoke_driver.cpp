// A bounded, deterministic stand-in for libFuzzer: feeds the fuzz target random words, random text, and valid
// assembly lines with random bytes changed. Usage: npusim-isa-fuzz-smoke [iterations] [seed]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "npusim/isa/disassembler.h"
#include "npusim/isa/isa.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 20000;
  std::mt19937_64 random(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1);
  // Seeds that reach deep into the assembler: one valid line per instruction, plus directives.
  std::vector<std::string> seeds = {".equ A, 3 * (2 + 1)\n", ".data\nx: .float 1.5, 2\n.text\n la r1, x\n",
                                    "top: addi r1, r1, -1\n bne r1, r0, top\n halt\n", ".include \"missing.s\"\n"};
  for (const auto& row : npusim::isa::kInstructionTable) {
    npusim::isa::Instruction instruction{row.opcode};
    instruction.rd = 1;
    seeds.push_back(npusim::isa::disassemble(instruction, 0) + "\n");
  }
  const std::string alphabet = "r0123456789,.()+-*/%<>&|^~: \n\tabcdefghijklmnopqrstuvwxyz_\"#;";
  for (long k = 0; k < iterations; ++k) {
    std::string input;
    switch (k % 3) {
      case 0:  // random words
        for (int w = 0; w < 4; ++w) {
          const uint64_t word = random();
          input.append(reinterpret_cast<const char*>(&word), 8);
        }
        break;
      case 1:  // random text from the assembly alphabet
        for (uint64_t n = random() % 64; n > 0; --n) input += alphabet[random() % alphabet.size()];
        break;
      default:  // a valid line with a few characters replaced, inserted or removed
        input = seeds[random() % seeds.size()];
        for (uint64_t n = 1 + random() % 3; n > 0 && !input.empty(); --n) {
          const size_t at = random() % input.size();
          switch (random() % 3) {
            case 0: input[at] = alphabet[random() % alphabet.size()]; break;
            case 1: input.insert(at, 1, static_cast<char>(random() % 256)); break;
            default: input.erase(at, 1); break;
          }
        }
        break;
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
  std::printf("%ld fuzz inputs: no crash, no inconsistency\n", iterations);
  return 0;
}
