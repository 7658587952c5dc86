// Emits the scalar code that reads one index of an index tensor, for the kernels that move rows by index.
#pragma once

#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {

// out = indices[position], an int64 or (sign-extended) int32 element of the tensor at DRAM address `indices`.
void load_index(KernelBuilder& b, int index_bytes, R indices, R position, R out);

}  // namespace npusim::emitter
