#include "npusim/emulator/decode_cache.h"

#include "npusim/emulator/semantics.h"

namespace npusim::emulator {

void DecodeCache::refill(Entry& entry, uint64_t pc) {
  check_pc_alignment(pc);
  const uint64_t word = memory_.fetch_word(pc);
  const isa::Instruction instruction = decode_word(word);
  entry = {pc, memory_.code_version(), {instruction, isa::info(instruction.opcode).timing}};
}

}  // namespace npusim::emulator
