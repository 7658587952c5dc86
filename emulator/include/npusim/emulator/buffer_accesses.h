// Which scratchpad and accumulator bytes a tile instruction reads and writes, from its operands. The timed model
// uses it to find hazards: engines running concurrently on overlapping bytes without a fence between them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "npusim/isa/isa.h"

namespace npusim::emulator {

enum class Buffer : uint8_t { Scratchpad, Accumulator };

struct BufferAccess {
  Buffer buffer;
  uint64_t begin, end;  // bytes [begin, end)
  bool write;
};

// Engine state an instruction's footprint depends on, as it will be when the instruction runs: the K x N of the
// last mx.ldw and the outer dimensions of the last dma.dim issued before it.
struct IssuedEngineState {
  uint64_t weight_rows = 0, weight_cols = 0;
  std::array<uint64_t, 3> dma_counts{1, 1, 1};
};

// Accesses of `instruction` given the registers at issue; updates `state` for weight loads and dma.dim. Not a
// tile instruction: no accesses. dma.c2c's write into another core is not tracked (barriers order it).
std::vector<BufferAccess> buffer_accesses(const isa::Instruction& instruction,
                                          const std::array<uint64_t, isa::kRegisterCount>& registers,
                                          IssuedEngineState& state);

bool conflicts(const BufferAccess& a, const BufferAccess& b);
std::string describe(const BufferAccess& access);

}  // namespace npusim::emulator
