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

}  // namespace npusim::emitter
