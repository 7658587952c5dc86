#include "npusim/emitter/index_loads.h"

namespace npusim::emitter {

void load_index(AssemblyWriter& w, int index_bytes, int indices, int position, int out, int scratch) {
  w.line("slli r{}, r{}, {}", scratch, position, index_bytes == 8 ? 3 : 2);
  w.line("add r{0}, r{1}, r{0}", scratch, indices);
  if (index_bytes == 8) {
    w.line("ld r{}, 0(r{})", out, scratch);
  } else {  // sign-extend the int32 index
    w.line("lw r{}, 0(r{})", out, scratch);
    w.line("slli r{0}, r{0}, 32", out);
    w.line("srai r{0}, r{0}, 32", out);
  }
}

void load_index(KernelBuilder& b, int index_bytes, R indices, R position, R out) {
  Reg address = b.reg("index address");
  b.Slli(address, position, index_bytes == 8 ? 3 : 2);
  b.Add(address, indices, address);
  if (index_bytes == 8) {
    b.Ld(out, address, 0);
  } else {  // sign-extend the int32 index
    b.Lw(out, address, 0);
    b.Slli(out, out, 32);
    b.Srai(out, out, 32);
  }
}

}  // namespace npusim::emitter
