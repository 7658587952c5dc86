// The tile loop fused optimizer kernels share: each core takes tiles c, c + n, c + 2n, ... of a flat float32
// tensor list (`elements` elements, the last tile ragged), loads each tensor's tile into its scratchpad buffer, runs
// the update on the tile's elements and stores the tensors it changed; the builder orders the engines on the tiles.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {

// A tensor the loop moves: the register holding its DRAM address and the one bound to its scratchpad tile.
struct TileOperand {
  R dram, tile;
};

// Emits the loop, then halts. `update(count)` emits the update of the tiles, `count` holding their element count.
void emit_optimizer_tiles(KernelBuilder& b, R elements, int64_t tile_elements, const std::vector<TileOperand>& loads,
                          const std::vector<TileOperand>& stores, const std::function<void(R count)>& update);

}  // namespace npusim::emitter
