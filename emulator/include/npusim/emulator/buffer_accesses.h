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

// The weights the matrix engine will hold when an mx.mac runs: the K x N of the last mx.ldw issued before it.
struct IssuedWeightsShape {
  uint64_t rows = 0, cols = 0;
};

// Accesses of `instruction` given the registers at issue; updates `weights` for weight loads. Not a tile
// instruction: no accesses.
std::vector<BufferAccess> buffer_accesses(const isa::Instruction& instruction,
                                          const std::array<uint64_t, isa::kRegisterCount>& registers,
                                          IssuedWeightsShape& weights);

bool conflicts(const BufferAccess& a, const BufferAccess& b);
std::string describe(const BufferAccess& access);

}  // namespace npusim::emulator
