// The host micro-kernel behind mx.mac: a rows x depth tile times depth x cols weights, into the accumulator.
#pragma once

#include <cstdint>

namespace npusim::emulator::semantics {

// The scratchpad and accumulator are byte buffers and tile operands there need no alignment (docs/isa.md): tiles are
// read and written in place through these types, which may alias the bytes and sit at any address.
typedef float __attribute__((may_alias, aligned(1))) AliasingFloat;
typedef uint32_t __attribute__((may_alias, aligned(1))) AliasingWord;

// acc[m][n] starts from itself (accumulate) or from zero, then takes each product a[m][k] * w[k][n] in k order
// with one rounding per step: a fused multiply-add, as a systolic array's processing element does. All row-major.
// The result is the same on every host: vectorised where the host has FMA, std::fma otherwise.
void multiply_accumulate(const AliasingFloat* a, uint64_t rows, uint64_t depth, const float* w, uint64_t cols,
                         bool accumulate, AliasingFloat* acc);
// i8 inputs as two's-complement 32-bit words: unsigned products and sums wrap exactly like i32.
void multiply_accumulate(const AliasingWord* a, uint64_t rows, uint64_t depth, const uint32_t* w, uint64_t cols,
                         bool accumulate, AliasingWord* acc);

}  // namespace npusim::emulator::semantics
