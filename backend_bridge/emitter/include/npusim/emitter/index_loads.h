// Emits the scalar code that reads one index of an index tensor, for the kernels that move rows by index.
#pragma once

#include "npusim/emitter/assembly_writer.h"
#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {

// r`out` = indices[r`position`], an int64 or (sign-extended) int32 element of the tensor at r`indices`; clobbers
// r`scratch`.
void load_index(AssemblyWriter& w, int index_bytes, int indices, int position, int out, int scratch);

// The same for a kernel built with the builder: out = indices[position]. (The text form above stays for the emitters
// not yet on the builder, gather and scatter_add_rows.)
void load_index(KernelBuilder& b, int index_bytes, R indices, R position, R out);

}  // namespace npusim::emitter
