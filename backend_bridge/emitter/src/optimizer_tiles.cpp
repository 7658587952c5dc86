#include "npusim/emitter/optimizer_tiles.h"

namespace npusim::emitter {

void emit_optimizer_tiles(KernelBuilder& b, R elements, int64_t tile_elements, const std::vector<TileOperand>& loads,
                          const std::vector<TileOperand>& stores, const std::function<void(R count)>& update) {
  Reg tile = b.reg("tile index"), step = b.reg("step across cores"), capacity = b.reg("tile elements");
  Reg count = b.reg("elements in the tile"), first = b.reg("first element"), offset = b.reg("tile byte offset");
  Reg address = b.reg("DRAM address");
  b.Csrr(tile, isa::Csr::CoreId);
  b.Csrr(step, isa::Csr::CoreCount);
  b.li(capacity, tile_elements);
  const Label next = b.label(), sized = b.label(), done = b.label();
  b.bind(next);
  b.Mul(first, capacity, tile);
  b.Bgeu(first, elements, done);
  b.Sub(count, elements, first);
  b.Bltu(count, capacity, sized);
  b.move(count, capacity);
  b.bind(sized);
  b.Slli(offset, first, 2);
  for (const auto& [dram, buffer] : loads) {
    b.Add(address, dram, offset);
    b.DmaLoad32(buffer, address, count, 4);
  }
  update(count);
  for (const auto& [dram, buffer] : stores) {
    b.Add(address, dram, offset);
    b.DmaStore32(address, buffer, count, 4);
  }
  b.Add(tile, tile, step);
  b.Jal(kZero, next);
  b.bind(done);
  b.Halt();
}

}  // namespace npusim::emitter
