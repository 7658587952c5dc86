// Decoded instructions by address, so a loop decodes each of its instructions once. An entry is valid while the
// device memory's code is unchanged (DeviceMemory::code_version), so rewritten programs are decoded again.
#pragma once

#include <cstdint>
#include <vector>

#include "npusim/emulator/device_memory.h"
#include "npusim/isa/isa.h"

namespace npusim::emulator {

struct DecodedInstruction {
  isa::Instruction instruction;
  isa::TimingClass timing;
};

class DecodeCache {
 public:
  explicit DecodeCache(DeviceMemory& memory) : memory_(memory), entries_(kEntries) {}

  // The instruction at `pc`; raises Trap for a misaligned pc, one outside DRAM, or an illegal word. The reference
  // stays valid until the next fetch.
  const DecodedInstruction& fetch(uint64_t pc) {
    Entry& entry = entries_[(pc / isa::kInstructionBytes) % kEntries];
    if (entry.pc != pc || entry.version != memory_.code_version()) refill(entry, pc);
    return entry.decoded;
  }

 private:
  static constexpr uint64_t kEntries = 8192;  // direct-mapped: 64 KiB of code without conflicts
  struct Entry {
    uint64_t pc = ~uint64_t{0};
    uint64_t version = 0;
    DecodedInstruction decoded{};
  };
  void refill(Entry& entry, uint64_t pc);

  DeviceMemory& memory_;
  std::vector<Entry> entries_;
};

}  // namespace npusim::emulator
