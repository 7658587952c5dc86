// The elementwise operations' definitions: each op's vector instructions over its tiles, as typed steps, and the
// scalar constants they name. elementwise.cpp turns a definition into a kernel; a fused kernel chains definitions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "npusim/emitter/elementwise.h"
#include "npusim/isa/isa.h"

namespace npusim::emitter::elementwise_table {

// What a step reads or writes: one of the kernel's tiles (A: the first input, and the result; B, C: the second and
// third inputs, or scratch; D, E: scratch), one of the spec's parameters, or a constant. Parameters and constants are
// scalars, broadcast to every element (the step's broadcast mode 1); each lives in one f32 of the scratchpad.
enum class Value : uint8_t {
  None,
  A,
  B,
  C,
  D,
  E,
  P0,
  P1,
  P2,
  kOne,
  kHalf,
  kInvSqrt2,
  kSqrt2OverPi,
  kGeluCubic,
  kZero,
  kInvSqrt2pi,
  kThree,
  kNegThree,
  kSix,
  kByteOne,
  kThreeGeluCubic,
};
inline bool is_tile(Value value) { return value >= Value::A && value <= Value::E; }
inline bool is_parameter(Value value) { return value >= Value::P0 && value <= Value::P2; }
inline bool is_scalar(Value value) { return value >= Value::P0; }
// The f32 bit pattern of a constant (kByteOne is read as a byte: 1).
uint32_t constant_bits(Value constant);

// One vector instruction: destination, first source, and for binary instructions a second source. A conversion
// (Vcvt) converts from `source` to `type`.
struct Step {
  isa::Opcode opcode;
  isa::ElementType type;
  Value destination, first, second = Value::None;
  isa::ElementType source = isa::ElementType::F32;
};

struct OpDefinition {
  ElementwiseOp op;
  const char* name;
  int inputs;
  std::vector<Step> steps;
  int element_bytes = 4;         // of the output and, unless input_bytes says otherwise, the inputs; 0: any (a copy)
  std::vector<int> input_bytes;  // per input, where they differ
};
const OpDefinition& definition(ElementwiseOp op);

// The steps of `op` for a spec: the definition's, except a conversion's, whose types the spec names.
std::vector<Step> steps(ElementwiseOp op, isa::ElementType convert_to, isa::ElementType convert_from);

}  // namespace npusim::emitter::elementwise_table
