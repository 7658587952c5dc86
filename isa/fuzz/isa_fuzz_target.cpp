// Fuzz target for the decoder and the assembler: any input must give a result or a clear error, never a crash, a
// hang or an inconsistent round trip. Built for libFuzzer with clang (-DNPUSIM_LIBFUZZER=ON); otherwise
// smoke_driver.cpp feeds it a bounded, deterministic set of inputs in CI.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "npusim/isa/assembler.h"
#include "npusim/isa/disassembler.h"
#include "npusim/isa/encoding.h"

namespace {

[[noreturn]] void inconsistent(const char* what, uint64_t word) {
  std::fprintf(stderr, "fuzz: %s for word 0x%016llx\n", what, static_cast<unsigned long long>(word));
  std::abort();
}

// Every 8 bytes as an instruction word: illegal, or decoded to something that re-encodes and reassembles to it.
void check_words(const uint8_t* data, size_t size) {
  for (size_t offset = 0; offset + 8 <= size; offset += 8) {
    uint64_t word = 0;
    std::memcpy(&word, data + offset, 8);
    npusim::isa::Instruction instruction;
    try {
      instruction = npusim::isa::decode(word);
    } catch (const npusim::isa::IllegalInstruction&) {
      continue;
    }
    if (npusim::isa::encode(instruction) != word) inconsistent("decode/encode mismatch", word);
    const auto words = npusim::isa::assemble(npusim::isa::disassemble(instruction, 0), "fuzz.s");
    if (words.size() != 1 || words[0] != word) inconsistent("disassembly does not reassemble", word);
  }
}

// The bytes as assembly source: assembled, or rejected with an AssemblyError.
void check_source(const uint8_t* data, size_t size) {
  try {
    npusim::isa::assemble(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.s");
  } catch (const npusim::isa::AssemblyError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_words(data, size);
  check_source(data, size);
  return 0;
}
