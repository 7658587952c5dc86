#include "npusim/emitter/index_loads.h"

namespace npusim::emitter {

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
