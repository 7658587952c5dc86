// The tile loop fused optimizer kernels share: each core takes tiles c, c + n, c + 2n, ... of a flat float32
// tensor list (r8 elements, the last tile ragged), loads each tensor's tile into its scratchpad buffer, runs the
// update on r11 elements and stores the tensors it changed.
//
// Registers: r8 element count (set by the caller); r9 tile index, r10 step across cores, r11 elements in the tile,
// r12 its first element, r13 scratch, r14 the tile's byte offset, r15 DRAM pointer.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "npusim/emitter/assembly_writer.h"

namespace npusim::emitter {

// (register holding a tensor's DRAM address, register holding its tile's scratchpad address)
using TileOperand = std::pair<int, int>;

void emit_optimizer_tiles(AssemblyWriter& w, int64_t tile_elements, const std::vector<TileOperand>& loads,
                          const std::vector<TileOperand>& stores, const std::function<void()>& update);

}  // namespace npusim::emitter
