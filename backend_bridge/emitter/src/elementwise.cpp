// Elementwise kernels as one-op fused kernels: the op's body (elementwise_table.h) between loads of the inputs and a
// store of the result, emitted by the fused kernels' pointwise loop (fused.h), which orders and collapses the
// dimensions, tiles them, splits the tiles among the cores and double-buffers the DMA. A float op computes in f32;
// its f16 and bf16 operands are converted after loading, and the result rounded once when stored. A copy that
// transposes goes to transpose_copy.h.
#include "npusim/emitter/elementwise.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "elementwise_table.h"
#include "fused_layout.h"
#include "npusim/emitter/transpose_copy.h"

namespace npusim::emitter {
namespace {

using elementwise_table::definition;
using elementwise_table::OpDefinition;
using isa::ElementType;

int operand_count(const ElementwiseSpec& spec) {
  if (spec.op == ElementwiseOp::Copy || spec.op == ElementwiseOp::Convert) return 2;
  return 1 + static_cast<int>(definition(spec.op).inputs.size());
}

// Whether the op computes in f32, so that its f32 operands may be held as f16 or bf16 (ElementwiseSpec::float_types).
bool computes_in_f32(const OpDefinition& op) {
  return !op.inputs.empty() &&
         std::all_of(op.inputs.begin(), op.inputs.end(), [](ElementType type) { return type == ElementType::F32; });
}

// The type operand k (0: the output) computes in, and the type it holds in memory.
ElementType computed_type(const ElementwiseSpec& spec, size_t k) {
  if (spec.op == ElementwiseOp::Copy) {
    switch (spec.element_bytes) {  // the bits are moved, whatever they mean
      case 1: return ElementType::U8;
      case 2: return ElementType::F16;
      case 8: return ElementType::I64;
      default: return ElementType::I32;
    }
  }
  if (spec.op == ElementwiseOp::Convert) return k == 0 ? spec.convert_to : spec.convert_from;
  const OpDefinition& op = definition(spec.op);
  return k == 0 ? op.result : op.inputs[k - 1];
}
ElementType held_type(const ElementwiseSpec& spec, size_t k) {
  const ElementType computed = computed_type(spec, k);
  if (computed != ElementType::F32 || !computes_in_f32(definition(spec.op)) || k >= spec.float_types.size())
    return computed;
  return spec.float_types[k];
}

bool value_in_arguments(const ElementwiseSpec& spec, size_t k) {
  return k < spec.values_in_arguments.size() && spec.values_in_arguments[k];
}

void validate(const ElementwiseSpec& spec) {
  const std::string& name = definition(spec.op).name;
  const auto operands = static_cast<size_t>(operand_count(spec));
  if (spec.strides.size() != operands)
    throw std::invalid_argument(fmt::format("{} takes {} operands, {} given", name, operands, spec.strides.size()));
  for (const auto& strides : spec.strides)
    if (strides.size() != spec.sizes.size())
      throw std::invalid_argument("every operand needs one stride per dimension");
  for (int64_t size : spec.sizes)
    if (size < 0) throw std::invalid_argument(fmt::format("negative size {} in an elementwise kernel", size));
  const auto held_bytes = static_cast<int>(isa::element_bytes(held_type(spec, 0)));
  if (spec.op != ElementwiseOp::Copy && spec.element_bytes != held_bytes)
    throw std::invalid_argument(fmt::format("{} takes {}-byte elements, not {}", name, held_bytes, spec.element_bytes));
  if (spec.op == ElementwiseOp::Copy && !std::has_single_bit(static_cast<unsigned>(spec.element_bytes)))
    throw std::invalid_argument(fmt::format("a copy of {}-byte elements", spec.element_bytes));
  for (size_t k = 0; k < operands; ++k)
    if (value_in_arguments(spec, k) &&
        (k == 0 || std::any_of(spec.strides[k].begin(), spec.strides[k].end(), [](int64_t s) { return s != 0; })))
      throw std::invalid_argument(fmt::format("operand {} of {} cannot be a value in the argument block", k, name));
  for (ElementType type : spec.float_types)
    if (!isa::is_float(type))
      throw std::invalid_argument(
          fmt::format("{} holds float operands as f32, f16 or bf16, not {}", name, isa::type_name(type)));
}

// The kernel's name: the op's, a conversion's types, and for a half-precision float op its tensors' type (add_bf16,
// not add_f32).
std::string kernel_name(const ElementwiseSpec& spec) {
  if (spec.op == ElementwiseOp::Convert)
    return fmt::format("convert_{}_{}", isa::type_name(spec.convert_to), isa::type_name(spec.convert_from));
  const std::string name = definition(spec.op).name;
  for (size_t k = 0; k < spec.strides.size(); ++k)
    if (held_type(spec, k) != computed_type(spec, k) && name.ends_with("_f32"))
      return fmt::format("{}_{}", name.substr(0, name.size() - 4), isa::type_name(held_type(spec, k)));
  return name;
}

// The op as a fused kernel's spec: argument k is operand k (the output first); each input is loaded (or read from
// the argument block) and converted to the type the op computes in, the body computes the result, and the store
// rounds it to the output's type.
FusedSpec as_fused(const ElementwiseSpec& spec) {
  FusedSpec fused;
  fused.name = kernel_name(spec);
  const bool scalar = spec.sizes.empty();  // a 0-dimensional tensor: one element, in a space of one
  fused.sizes = scalar ? std::vector<int64_t>{1} : spec.sizes;
  fused.arguments = operand_count(spec);
  const auto strides = [&](size_t k) { return scalar ? std::vector<int64_t>{0} : spec.strides[k]; };
  elementwise_table::Graph graph(fused, spec.parameters, spec.convert_to);
  std::vector<int> inputs;
  for (size_t k = 1; k < static_cast<size_t>(fused.arguments); ++k) {
    const ElementType held = held_type(spec, k), computed = computed_type(spec, k);
    const int argument = static_cast<int>(k);
    if (value_in_arguments(spec, k)) {
      fused.nodes.push_back({.op = FusedOpcode::Argument, .type = held, .argument = argument});
    } else {
      fused.loads.push_back({argument, held, 0, strides(k)});
      fused.nodes.push_back(
          {.op = FusedOpcode::Load, .type = held, .access = static_cast<int>(fused.loads.size()) - 1});
    }
    const int loaded = static_cast<int>(fused.nodes.size()) - 1;
    inputs.push_back(held == computed ? loaded : graph.convert(loaded, computed));
  }
  const int result = definition(spec.op).body(graph, inputs);
  fused.stores.push_back({0, held_type(spec, 0), 0, strides(0)});
  fused.nodes.push_back({.op = FusedOpcode::Store, .type = fused.nodes[result].type, .a = result, .access = 0});
  return fused;
}

}  // namespace

std::string op_name(ElementwiseOp op) { return definition(op).name; }
std::optional<std::string> pytorch_function(ElementwiseOp op) {
  const char* function = definition(op).function;
  return function ? std::optional<std::string>(function) : std::nullopt;
}
std::vector<ElementwiseOp> unary_pytorch_functions() {
  std::vector<ElementwiseOp> ops;
  for (const elementwise_table::OpDefinition& row : elementwise_table::definitions())
    if (row.function && row.inputs.size() == 1) ops.push_back(row.op);
  return ops;
}
int input_count(ElementwiseOp op) {
  return op == ElementwiseOp::Copy || op == ElementwiseOp::Convert ? 1 : static_cast<int>(definition(op).inputs.size());
}
int element_bytes(ElementwiseOp op) {
  const OpDefinition& definition = elementwise_table::definition(op);
  return definition.inputs.empty() ? 0 : static_cast<int>(isa::element_bytes(definition.result));
}

Kernel emit_elementwise(const ElementwiseSpec& spec, const config::ChipConfig& config) {
  validate(spec);
  if (std::find(spec.sizes.begin(), spec.sizes.end(), 0) != spec.sizes.end()) {
    KernelBuilder b(kernel_name(spec), config);
    b.describe("no elements");
    b.Halt();
    return b.finish(1);
  }
  const FusedSpec fused = as_fused(spec);
  if (spec.op == ElementwiseOp::Copy) {  // a transpose moves tiles, not single elements
    const fused::Layout layout = fused::collapse(fused);
    if (auto transpose = emit_transpose_copy(
            {spec.element_bytes, layout.outer, layout.outer_strides[1], layout.outer_strides[0]}, config))
      return *transpose;
  }
  return emit_fused(fused, config);
}

}  // namespace npusim::emitter
