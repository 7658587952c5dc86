// The elementwise operations' definitions: each op's vector instructions over its tiles, and the scalar constants
// the compositions name. elementwise.cpp turns a definition into a kernel.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "npusim/emitter/elementwise.h"

namespace npusim::emitter::elementwise_table {

// A scalar constant the compositions use; each lives in one f32 of the scratchpad, filled at kernel start.
struct Constant {
  std::string name;
  uint32_t bits;  // f32 bit pattern
};
std::span<const Constant> constants();

// Each operation: its name, inputs, and its vector instructions over the tile in {a} (the first input, and the
// result), {b} (the second input, or scratch), {c} and {d} (scratch, allocated only for ops that use them) with {n}
// elements; {one}, {half}, ... are constants and {p0}.. the spec's parameters, broadcast as scalars (mode 1).
struct OpDefinition {
  ElementwiseOp op;
  const char* name;
  int inputs;
  std::vector<const char*> steps;
  int element_bytes = 4;         // of the output and, unless input_bytes says otherwise, the inputs; 0: any (a copy)
  std::vector<int> input_bytes;  // per input, where they differ
};
const OpDefinition& definition(ElementwiseOp op);

}  // namespace npusim::emitter::elementwise_table
