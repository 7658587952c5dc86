// One kernel for a foreach operator's whole tensor list: the operator's program, written once over one segment's
// tensors and scalars, runs over every tensor group of a device and dtype in a single launch (a multi-tensor fused
// kernel, emitter::FusedSpec::segments), its scalars passed in the argument block so that new values (an optimizer's
// bias corrections, its learning rate) reuse the kernel.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "npusim/emitter/fused.h"

namespace npusim::bridge::foreach {

// A foreach operator's program over one segment, computed in f32 (PyTorch's opmath type for float32, float16 and
// bfloat16): a tensor is converted to f32 when loaded and rounded once to its type when stored.
class Program {
 public:
  Program(emitter::FusedSpec& spec, isa::ElementType storage, int tensors);

  int load(int tensor);          // the segment's tensor `tensor`, element by element
  int load_element(int tensor);  // its one element, the same at every point
  int load_stored(int tensor);   // the tensor in its own type (a copy keeps every bit)
  int scalar(int k);             // the segment's scalar k: an f32 given at launch
  int constant(double value);    // an f32 constant
  int op(emitter::FusedOpcode op, int a, int b = -1, int c = -1);  // an f32 result (a comparison's: bool)
  void store(int value, int tensor);
  // Zeros in the tensors' own type, whatever it is (zero_ of integer or bool tensors).
  void store_zero(int tensor);

 private:
  int node(emitter::FusedNode node);
  emitter::FusedSpec& spec_;
  isa::ElementType storage_;
  int tensors_;
};

// How an operator runs: its kernel's name (without the type, which is added: foreach_addcdiv_f32), the tensors and
// scalars of a segment, and its program. Tensor 0 is the one written (the result, or self in place); every other
// tensor has tensor 0's shape and strides, but those listed in `elements` (one element, repeated over the segment).
struct Operator {
  std::string name;
  int tensors = 1, scalars = 0;
  std::function<void(Program&)> program;
  std::vector<int> elements = {};
  // The dtypes it runs natively; anything else runs per tensor.
  std::vector<at::ScalarType> dtypes = {at::kFloat, at::kHalf, at::kBFloat16};
};

struct Segment {
  std::vector<at::Tensor> tensors;  // in the operator's order
  std::vector<float> scalars;
};

// Runs the operator natively, one kernel per device and dtype, over the segments whose tensors it can walk: all on
// one npusim device, of one of its dtypes, dense, non-overlapping, with the same shape and strides (or one element
// where it says so), the written tensor overlapping no other but completely. Returns the positions of the other
// segments, which the caller runs per tensor (PyTorch's own slow path, whose kernels are npusim's eager ones).
std::vector<size_t> run(const Operator& op, const std::vector<Segment>& segments);

}  // namespace npusim::bridge::foreach
