// The elementwise operations' definitions, all in one table: each op's name, the types it computes on, and its body,
// the nodes of a fused kernel's dataflow program (fused.h) that compute the result from the inputs' values.
// elementwise.cpp wraps a body in loads and a store and emits it as a fused kernel, so an eager op is a small graph on
// the same pointwise loop as torch.compile's fused kernels; adding an op is an enumerator and a row here (and, for a
// PyTorch function of one tensor, the row's function name is all the glue needs).
#pragma once

#include <array>
#include <span>
#include <vector>

#include "npusim/emitter/elementwise.h"
#include "npusim/emitter/fused.h"
#include "npusim/isa/isa.h"

namespace npusim::emitter::elementwise_table {

// Adds nodes to a fused kernel's spec: the vocabulary of the op bodies. Every operation's result has its first
// operand's type (a comparison's is bool); scalars are f32 constants broadcast to every element.
class Graph {
 public:
  Graph(FusedSpec& spec, const std::array<float, 3>& parameters, isa::ElementType convert_to)
      : spec_(spec), parameters_(parameters), convert_to_(convert_to) {}

  int node(FusedOpcode op, int a, int b = -1, int c = -1);
  int constant(float value);                                 // an f32 constant
  int parameter(int k) { return constant(parameters_[k]); }  // the spec's scalar parameter p<k>
  int convert(int a, isa::ElementType type);
  isa::ElementType convert_to() const { return convert_to_; }  // a conversion's result type

  int add(int a, int b) { return node(FusedOpcode::Add, a, b); }
  int sub(int a, int b) { return node(FusedOpcode::Sub, a, b); }
  int mul(int a, int b) { return node(FusedOpcode::Mul, a, b); }
  int div(int a, int b) { return node(FusedOpcode::Div, a, b); }
  int neg(int a) { return node(FusedOpcode::Neg, a); }
  int lt(int a, int b) { return node(FusedOpcode::Lt, a, b); }
  int le(int a, int b) { return node(FusedOpcode::Le, a, b); }
  int where(int condition, int if_true, int if_false) { return node(FusedOpcode::Where, condition, if_true, if_false); }

 private:
  FusedSpec& spec_;
  const std::array<float, 3>& parameters_;
  isa::ElementType convert_to_;
};

// Adds the op's nodes over its inputs' values (in the definition's types) and returns the result's node.
using Body = int (*)(Graph& g, std::span<const int> inputs);

struct OpDefinition {
  ElementwiseOp op;
  const char* name;
  // The types the op computes its inputs and result in. Empty for the copy and the conversion, whose types the spec
  // names. An op whose inputs are all f32 computes in f32: its float tensors may be held as f16 or bf16
  // (ElementwiseSpec::float_types), widened after loading and rounded once when stored.
  std::vector<isa::ElementType> inputs;
  isa::ElementType result;
  Body body;
  // The PyTorch function the op is (aten::sinh), or none. The glue registers a one-input function with its in-place
  // and out= variants from this row alone, and names the op's CPU fallback by it.
  const char* function = nullptr;
};
// Every row, in table order.
const std::vector<OpDefinition>& definitions();
const OpDefinition& definition(ElementwiseOp op);

}  // namespace npusim::emitter::elementwise_table
