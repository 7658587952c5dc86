#include "npusim/emitter/optimizer_tiles.h"

namespace npusim::emitter {
namespace {

void move(AssemblyWriter& w, bool load, const std::vector<TileOperand>& operands) {
  for (const auto& [pointer, tile] : operands) {
    w.line("add r15, r{}, r14", pointer);
    if (load)
      w.line("dma.ld.b32 r{}, r15, r11, 4", tile);
    else
      w.line("dma.st.b32 r15, r{}, r11, 4", tile);
  }
}

}  // namespace

void emit_optimizer_tiles(AssemblyWriter& w, int64_t tile_elements, const std::vector<TileOperand>& loads,
                          const std::vector<TileOperand>& stores, const std::function<void()>& update) {
  w.line("csrr r9, coreid");
  w.line("csrr r10, ncores");
  w.label("tile");
  w.load_constant(12, tile_elements);
  w.line("mul r12, r12, r9");
  w.line("bgeu r12, r8, done");
  w.line("sub r11, r8, r12");
  w.load_constant(13, tile_elements);
  w.line("bltu r11, r13, sized");
  w.line("addi r11, r13, 0");
  w.label("sized");
  w.line("slli r14, r12, 2");
  move(w, true, loads);
  w.line("fence");
  update();
  w.line("fence");
  move(w, false, stores);
  w.line("add r9, r9, r10");
  w.line("jal r0, tile");
  w.label("done");
  w.line("fence");
  w.line("halt");
}

}  // namespace npusim::emitter
