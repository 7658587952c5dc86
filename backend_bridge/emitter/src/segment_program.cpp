// A segment's program (segment_program.h).
#include "npusim/emitter/segment_program.h"

namespace npusim::emitter {

using isa::ElementType;

SegmentProgram::SegmentProgram(FusedSpec& spec, ElementType storage, int tensors)
    : spec_(spec), storage_(storage), tensors_(tensors) {}

int SegmentProgram::node(FusedNode node) {
  spec_.nodes.push_back(node);
  return static_cast<int>(spec_.nodes.size()) - 1;
}

// A load of the tensor in its own type, walking it with `stride` (0 repeats its one element).
int SegmentProgram::load_with_stride(int tensor, int64_t stride) {
  spec_.loads.push_back({tensor, storage_, 0, {stride}});
  return node({.op = FusedOpcode::Load, .type = storage_, .access = static_cast<int>(spec_.loads.size()) - 1});
}
int SegmentProgram::widened(int loaded) {
  return storage_ == ElementType::F32 ? loaded
                                      : node({.op = FusedOpcode::Convert, .type = ElementType::F32, .a = loaded});
}

int SegmentProgram::load(int tensor) { return widened(load_with_stride(tensor, 1)); }
int SegmentProgram::load_element(int tensor) { return widened(load_with_stride(tensor, 0)); }
int SegmentProgram::load_stored(int tensor) { return load_with_stride(tensor, 1); }

int SegmentProgram::scalar(int k) {
  return node({.op = FusedOpcode::Argument, .type = ElementType::F32, .argument = tensors_ + k});
}

int SegmentProgram::constant(double value) {
  return node({.op = FusedOpcode::Constant, .type = ElementType::F32, .constant = value});
}

int SegmentProgram::op(FusedOpcode opcode, int a, int b, int c) {
  const bool compare = opcode >= FusedOpcode::Eq && opcode <= FusedOpcode::Ge;
  return node({.op = opcode, .type = compare ? ElementType::Bool : ElementType::F32, .a = a, .b = b, .c = c});
}

void SegmentProgram::store(int value, int tensor) {
  spec_.stores.push_back({tensor, storage_, 0, {1}});
  node({.op = FusedOpcode::Store,
        .type = spec_.nodes[value].type,
        .a = value,
        .access = static_cast<int>(spec_.stores.size()) - 1});
}

void SegmentProgram::store_zero(int tensor) {
  const int zero = node({.op = FusedOpcode::Constant, .type = storage_, .constant = 0});
  store(zero, tensor);
}

}  // namespace npusim::emitter
