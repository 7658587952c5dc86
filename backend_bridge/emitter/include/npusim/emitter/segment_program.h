// Building a multi-tensor fused kernel's program (FusedSpec::segments): the nodes that load, compute on and store one
// segment's tensors and scalars, as the foreach operators (the bridge's foreach_launch.h) and the fused optimizer
// steps (adam.h, sgd.h) write them.
#pragma once

#include <cstdint>

#include "npusim/emitter/fused.h"

namespace npusim::emitter {

// A multi-tensor kernel's program over one segment (fused.h, FusedSpec::segments), computed in f32 (PyTorch's opmath
// type for float32, float16 and bfloat16): a tensor is converted to f32 when loaded and rounded once to its type when
// stored.
class SegmentProgram {
 public:
  SegmentProgram(FusedSpec& spec, isa::ElementType storage, int tensors);

  int load(int tensor);                                   // the segment's tensor `tensor`, element by element
  int load_element(int tensor);                           // its one element, the same at every point
  int load_stored(int tensor);                            // the tensor in its own type (a copy keeps every bit)
  int scalar(int k);                                      // the segment's scalar k: an f32 given at launch
  int constant(double value);                             // an f32 constant
  int op(FusedOpcode op, int a, int b = -1, int c = -1);  // an f32 result (a comparison's: bool)
  void store(int value, int tensor);
  // Zeros in the tensors' own type, whatever it is (zero_ of integer or bool tensors).
  void store_zero(int tensor);

 private:
  int node(FusedNode node);
  int load_with_stride(int tensor, int64_t stride);
  int widened(int loaded);  // converted to f32 from the tensors' type
  FusedSpec& spec_;
  isa::ElementType storage_;
  int tensors_;
};

}  // namespace npusim::emitter
