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
#include "npusim/emitter/segment_program.h"

namespace npusim::bridge::foreach {

// A foreach operator's program over one segment (emitter/segment_program.h).
using Program = emitter::SegmentProgram;

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

// ---- the operators' side: a foreach call's lists as segments, and PyTorch's slow path for the rest

using Positions = std::vector<size_t>;

template <typename T>
std::vector<T> pick(at::ArrayRef<T> list, const Positions& positions) {
  std::vector<T> picked;
  for (const size_t i : positions) picked.push_back(list[i]);
  return picked;
}

// A foreach call's operands: per segment i, tensors self[i] and others[k][i], then `shared` (the same tensor in every
// segment: a .Tensor overload's one-element operand), and its scalars.
struct Operands {
  at::TensorList self;
  std::vector<at::TensorList> others = {};
  std::vector<at::Tensor> shared = {};
  std::function<std::vector<float>(size_t)> scalars = [](size_t) { return std::vector<float>{}; };
};

// An operator over the operands' tensors: the written one (tensor 0), self (1), the others, then the shared ones
// (one element each).
Operator make(std::string name, const Operands& operands, std::function<void(Program&)> program, int scalars = 0);

// In place: the kernel over what it can walk, `slow(positions)` (PyTorch's per-tensor kernel) over the rest.
void in_place(const Operator& op, const Operands& operands, const std::function<void(const Positions&)>& slow);
// Out of place, into results shaped and strided like self.
std::vector<at::Tensor> out_of_place(const Operator& op, const Operands& operands,
                                     const std::function<std::vector<at::Tensor>(const Positions&)>& slow);

// Scalars as the CPU kernels take them (opmath f32). A wrapped scalar operand (self + 2, self * lr) is cast, as the
// kernels read a CPU scalar; a value, alpha or weight is converted with PyTorch's overflow check (value.to<float>()).
inline float operand_value(const at::Scalar& scalar) { return static_cast<float>(scalar.toDouble()); }
inline float checked_value(const at::Scalar& scalar) { return scalar.to<float>(); }
inline bool any_complex(at::ArrayRef<at::Scalar> scalars) {
  for (const at::Scalar& scalar : scalars)
    if (scalar.isComplex()) return true;
  return false;
}

}  // namespace npusim::bridge::foreach
