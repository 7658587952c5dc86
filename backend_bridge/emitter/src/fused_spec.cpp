// Checking a fused kernel's spec, and the shapes of its values (fused_spec.h).
#include "fused_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

namespace npusim::emitter::fused {
namespace {

using isa::ElementType;
using Op = FusedOpcode;

constexpr std::array<std::string_view, static_cast<int>(Op::RandomNormal) + 1> kOpNames = {
    "Load",         "Constant",     "Argument",   "Neg",
    "Abs",          "Exp",          "Log",        "Tanh",
    "Sigmoid",      "Erf",          "Sqrt",       "Rsqrt",
    "Reciprocal",   "Sin",          "Cos",        "Log1p",
    "Expm1",        "Floor",        "Ceil",       "Round",
    "Trunc",        "Not",          "Convert",    "Add",
    "Sub",          "Mul",          "Div",        "Fmod",
    "Maximum",      "Minimum",      "And",        "Or",
    "Xor",          "Eq",           "Ne",         "Lt",
    "Le",           "Gt",           "Ge",         "Where",
    "MulAdd",       "ReduceSum",    "ReduceMax",  "ReduceMin",
    "ReduceArgMax", "ReduceArgMin", "Store",      "Product",
    "Gather",       "ScatterAdd",   "CheckIndex", "RandomUniform",
    "RandomNormal"};

bool between(Op op, Op first, Op last) {
  return static_cast<int>(op) >= static_cast<int>(first) && static_cast<int>(op) <= static_cast<int>(last);
}
bool valid_type(ElementType type) { return static_cast<int>(type) < isa::kElementTypeCount; }

// A multi-tensor kernel's segments: one-dimensional spaces, each with its own arguments.
void validate_segments(const FusedSpec& spec) {
  const auto error = [&](const std::string& what) {
    return std::invalid_argument(fmt::format("fused kernel {}: segments: {}", spec.name, what));
  };
  if (!spec.sizes.empty())
    throw error(fmt::format("the space is [{}], not empty: each segment has its own", fmt::join(spec.sizes, ", ")));
  if (spec.matmul) throw error("a matrix product cannot run over segments");
  for (size_t k = 0; k < spec.segments.size(); ++k) {
    const FusedSegment& segment = spec.segments[k];
    if (segment.elements < 0 || segment.first_argument < 0)
      throw error(
          fmt::format("segment {} has {} elements from argument {}", k, segment.elements, segment.first_argument));
  }
}

// A GEMM template's product: its operands, and the iteration space (batch,) m, n it makes, with nothing reduced.
void validate_matmul(const FusedSpec& spec) {
  const FusedMatmul& product = *spec.matmul;
  const auto error = [&](const std::string& what) {
    return std::invalid_argument(fmt::format("fused kernel {}: matmul: {}", spec.name, what));
  };
  if (product.batch < 0 || product.m < 0 || product.n < 0 || product.k < 0)
    throw error(fmt::format("negative size {} x [{} x {}] @ [{} x {}]", product.batch, product.m, product.k, product.k,
                            product.n));
  std::vector<int64_t> sizes = {product.m, product.n};
  if (product.batch != 1) sizes.insert(sizes.begin(), product.batch);
  if (spec.sizes != sizes || spec.reduced_dims != 0)
    throw error(fmt::format("the space is [{}] with {} reduced, not [{}] with none", fmt::join(spec.sizes, ", "),
                            spec.reduced_dims, fmt::join(sizes, ", ")));
  for (int argument : {product.a_argument, product.b_argument})
    if (argument < 0 || argument >= spec.arguments)
      throw error(fmt::format("an operand is argument {} of {}", argument, spec.arguments));
  if (!valid_type(product.type) || !isa::is_float(product.type))
    throw error(fmt::format("operands of {}, not f32, f16 or bf16",
                            valid_type(product.type) ? isa::type_name(product.type) : "no type"));
}

}  // namespace

std::string_view op_name(Op op) {
  const auto index = static_cast<size_t>(op);
  return index < kOpNames.size() ? kOpNames[index] : "?";
}
bool is_unary(Op op) { return between(op, Op::Neg, Op::Convert); }
bool is_arithmetic(Op op) { return between(op, Op::Add, Op::Xor); }
bool is_compare(Op op) { return between(op, Op::Eq, Op::Ge); }
bool is_reduction(Op op) { return between(op, Op::ReduceSum, Op::ReduceArgMin); }
bool is_random(Op op) { return op == Op::RandomUniform || op == Op::RandomNormal; }
bool read_by_the_scalar_core(const FusedSpec& spec, int node) {
  const FusedNode& value = spec.nodes[node];
  if (value.op == Op::Constant || value.op == Op::Argument) return true;
  if (value.op != Op::Load) return false;
  const auto& strides = spec.loads[value.access].strides;
  return std::all_of(strides.begin(), strides.end(), [](int64_t stride) { return stride == 0; });
}
int operand_count(Op op) {
  if (op == Op::Load || op == Op::Constant || op == Op::Argument || op == Op::Product) return 0;
  if (op == Op::Where || op == Op::MulAdd) return 3;
  if (op == Op::Gather || op == Op::CheckIndex) return 1;
  if (op == Op::ScatterAdd || is_random(op)) return 2;
  return is_arithmetic(op) || is_compare(op) ? 2 : 1;
}

ElementType moved_type(ElementType type) { return type == ElementType::F64 ? ElementType::I64 : type; }

bool node_per_row(const FusedSpec& spec, size_t i, const std::vector<char>& per_row) {
  const FusedNode& node = spec.nodes[i];
  if (node.op == Op::Load) {
    const auto& strides = spec.loads[node.access].strides;
    return std::all_of(strides.end() - spec.reduced_dims, strides.end(), [](int64_t stride) { return stride == 0; });
  }
  if (node.op == Op::Constant || node.op == Op::Argument || node.op == Op::Product || is_reduction(node.op))
    return true;
  if (node.op == Op::ScatterAdd) return false;                                      // a store: no value
  if (is_random(node.op) && !spec.segments.empty()) return spec.reduced_dims == 0;  // (refused with segments)
  if (is_random(node.op))  // a number at every point: per row when a row is one point
    return std::all_of(spec.sizes.end() - spec.reduced_dims, spec.sizes.end(), [](int64_t size) { return size == 1; });
  const int operands[] = {node.a, node.b, node.c};
  for (int k = 0; k < operand_count(node.op); ++k)
    if (!per_row[operands[k]]) return false;
  return true;
}

std::vector<char> per_row_flags(const FusedSpec& spec) {
  std::vector<char> per_row;
  for (size_t i = 0; i < spec.nodes.size(); ++i) per_row.push_back(node_per_row(spec, i, per_row));
  return per_row;
}

void validate(const FusedSpec& spec) {
  const auto error = [&](const std::string& what) {
    return std::invalid_argument(fmt::format("fused kernel {}: {}", spec.name, what));
  };
  const size_t dims = spec.segments.empty() ? spec.sizes.size() : 1;  // a segment is one dimension
  if (spec.reduced_dims < 0 || spec.reduced_dims > static_cast<int>(dims))
    throw error(fmt::format("{} reduced dimensions of {}", spec.reduced_dims, dims));
  for (int64_t size : spec.sizes)
    if (size < 0) throw error(fmt::format("negative size in [{}]", fmt::join(spec.sizes, ", ")));
  if (spec.arguments < 0) throw error(fmt::format("{} arguments", spec.arguments));
  if (!spec.segments.empty()) validate_segments(spec);
  const auto check_access = [&](const FusedAccess& access, const char* kind, size_t k) {
    if (access.strides.size() != dims)
      throw error(fmt::format("{} {} has {} strides for {} dimensions", kind, k, access.strides.size(), dims));
    if (access.argument < 0 || access.argument >= spec.arguments)
      throw error(fmt::format("{} {} uses argument {} of {}", kind, k, access.argument, spec.arguments));
    if (!valid_type(access.type)) throw error(fmt::format("{} {} has no element type", kind, k));
  };
  for (size_t k = 0; k < spec.loads.size(); ++k) check_access(spec.loads[k], "load", k);
  for (size_t k = 0; k < spec.stores.size(); ++k) check_access(spec.stores[k], "store", k);
  if (spec.matmul) validate_matmul(spec);

  const size_t outer = dims - static_cast<size_t>(spec.reduced_dims);
  std::vector<char> per_row;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const FusedNode& node = spec.nodes[i];
    if (static_cast<int>(node.op) > static_cast<int>(Op::RandomNormal))
      throw error(fmt::format("node {} has opcode {}, not a FusedOpcode", i, static_cast<int>(node.op)));
    const auto node_error = [&](const std::string& what) {
      return error(fmt::format("node {} ({}): {}", i, op_name(node.op), what));
    };
    if (!valid_type(node.type)) throw node_error("no element type");
    const int operands[] = {node.a, node.b, node.c};
    for (int k = 0; k < operand_count(node.op); ++k) {
      if (operands[k] < 0 || operands[k] >= static_cast<int>(i))
        throw node_error(fmt::format("operand {} is node {}, not an earlier node", "abc"[k], operands[k]));
      if (spec.nodes[operands[k]].op == Op::Store || spec.nodes[operands[k]].op == Op::ScatterAdd)
        throw node_error(fmt::format("operand {} is node {}, a store, which has no value", "abc"[k], operands[k]));
    }
    const auto type_of = [&](int operand) { return spec.nodes[operand].type; };
    const bool f64 =
        node.type == ElementType::F64 || std::any_of(operands, operands + operand_count(node.op),
                                                     [&](int operand) { return type_of(operand) == ElementType::F64; });
    if (f64 && node.op != Op::Load && node.op != Op::Convert && node.op != Op::Store)
      throw node_error("f64 values are only loaded, converted and stored (nothing computes in f64)");
    // An indexed access: a load or store of the spec whose strides are all 0 (the indices say where each point goes).
    const auto check_indexed = [&](const FusedNode& indexed, const std::vector<FusedAccess>& accesses,
                                   const char* kind) {
      if (indexed.access < 0 || indexed.access >= static_cast<int>(accesses.size()))
        throw node_error(fmt::format("access {} of {} {}", indexed.access, accesses.size(), kind));
      const auto& strides = accesses[indexed.access].strides;
      if (std::any_of(strides.begin(), strides.end(), [](int64_t stride) { return stride != 0; }))
        throw node_error(fmt::format("an indexed access with strides [{}], not all 0", fmt::join(strides, ", ")));
    };
    const auto expect = [&](ElementType actual, ElementType expected, const char* what) {
      if (actual != expected)
        throw node_error(fmt::format("{} is {}, not {}", what, isa::type_name(actual), isa::type_name(expected)));
    };
    switch (node.op) {
      case Op::Load:
        if (node.access < 0 || node.access >= static_cast<int>(spec.loads.size()))
          throw node_error(fmt::format("access {} of {} loads", node.access, spec.loads.size()));
        expect(node.type, spec.loads[node.access].type, "its type");
        break;
      case Op::Constant:
        if (!isa::is_float(node.type) && node.type != ElementType::Bool &&
            (!std::isfinite(node.constant) || std::trunc(node.constant) != node.constant ||
             std::fabs(node.constant) >= 0x1p63))
          throw node_error(fmt::format("{} is not a {} value", node.constant, isa::type_name(node.type)));
        break;
      case Op::Argument:
        if (node.argument < 0 || node.argument >= spec.arguments)
          throw node_error(fmt::format("argument {} of {}", node.argument, spec.arguments));
        break;
      case Op::MulAdd:
        if (!isa::is_float(node.type))
          throw node_error(fmt::format("a fused multiply-add of {}", isa::type_name(node.type)));
        for (int k = 0; k < 3; ++k) expect(type_of(operands[k]), node.type, "an operand");
        break;
      case Op::Not:
        expect(node.type, ElementType::Bool, "its type");
        expect(type_of(node.a), ElementType::Bool, "operand a");
        break;
      case Op::Convert: break;
      case Op::ReduceArgMax:
      case Op::ReduceArgMin:
        expect(node.type, ElementType::I64, "its type");
        if (type_of(node.a) == ElementType::Bool) throw node_error("the index of a bool row's extremum");
        break;
      case Op::Product:
        if (!spec.matmul) throw node_error("the spec has no matrix product");
        if (!isa::is_float(node.type)) throw node_error(fmt::format("a product of {}", isa::type_name(node.type)));
        break;
      case Op::Where:
        expect(type_of(node.a), ElementType::Bool, "the condition");
        expect(type_of(node.b), node.type, "operand b");
        expect(type_of(node.c), node.type, "operand c");
        break;
      case Op::Gather:
        check_indexed(node, spec.loads, "loads");
        expect(node.type, spec.loads[node.access].type, "its type");
        expect(type_of(node.a), ElementType::I64, "operand a (the indices)");
        if (node.constant != 0 && node.constant != 1) {
          const double run_bytes = node.constant * static_cast<double>(isa::element_bytes(node.type));
          if ((node.constant != 2 && node.constant != 4) || (run_bytes != 4 && run_bytes != 8))
            throw node_error(
                fmt::format("runs of {} {} elements, not 4 or 8 bytes", node.constant, isa::type_name(node.type)));
          if (spec.reduced_dims < 1 || spec.sizes.back() % static_cast<int64_t>(node.constant) != 0)
            throw node_error(
                fmt::format("runs of {} along an innermost dimension of {} that is not reduced or "
                            "not a multiple",
                            node.constant, spec.sizes.empty() ? 0 : spec.sizes.back()));
        }
        break;
      case Op::ScatterAdd:
        check_indexed(node, spec.stores, "stores");
        expect(node.type, spec.stores[node.access].type, "its type");
        expect(type_of(node.a), node.type, "operand a");
        expect(type_of(node.b), ElementType::I64, "operand b (the indices)");
        break;
      case Op::CheckIndex:
        expect(node.type, type_of(node.a), "its type");
        if (isa::is_float(node.type) || node.type == ElementType::Bool)
          throw node_error(fmt::format("checks {} values, not integers", isa::type_name(node.type)));
        if (!(node.constant >= 1 && node.constant < 0x1p63 && std::trunc(node.constant) == node.constant))
          throw node_error(fmt::format("a bound of {}", node.constant));
        break;
      case Op::Store: {
        if (node.access < 0 || node.access >= static_cast<int>(spec.stores.size()))
          throw node_error(fmt::format("access {} of {} stores", node.access, spec.stores.size()));
        expect(type_of(node.a), node.type, "operand a");
        if (per_row[node.a]) break;
        // A full row into a view that repeats one element along a reduced dimension: which element lands is
        // undefined.
        const auto& strides = spec.stores[node.access].strides;
        for (size_t d = outer; d < dims; ++d)
          if ((!spec.segments.empty() || spec.sizes[d] > 1) && strides[d] == 0)
            throw node_error(
                fmt::format("stores a full row (node {}) into store {}, whose stride over reduced "
                            "dimension {} is 0",
                            node.a, node.access, d));
        break;
      }
      case Op::RandomUniform:
      case Op::RandomNormal:
        if (!isa::is_float(node.type)) throw node_error(fmt::format("random numbers of {}", isa::type_name(node.type)));
        if (!spec.segments.empty() || spec.matmul) throw node_error("random numbers with segments or a product");
        for (int k = 0; k < 2; ++k) {
          expect(type_of(operands[k]), ElementType::I64, k == 0 ? "the key" : "the first position");
          if (!read_by_the_scalar_core(spec, operands[k]))
            throw node_error(fmt::format("{} is node {}, not a constant, an argument or a load with strides 0",
                                         k == 0 ? "the key" : "the first position", operands[k]));
        }
        break;
      default:
        if (is_compare(node.op)) {
          expect(node.type, ElementType::Bool, "its type");
          expect(type_of(node.b), type_of(node.a), "operand b");
        } else {
          for (int k = 0; k < operand_count(node.op); ++k) expect(type_of(operands[k]), node.type, "an operand");
        }
    }
    per_row.push_back(node_per_row(spec, i, per_row));
  }
}

}  // namespace npusim::emitter::fused

namespace npusim::emitter {

bool is_per_row(const FusedSpec& spec, int node) {
  if (node < 0 || node >= static_cast<int>(spec.nodes.size()))
    throw std::invalid_argument(fmt::format("fused kernel {}: no node {} of {}", spec.name, node, spec.nodes.size()));
  FusedSpec prefix = spec;  // only the nodes up to this one need to be well formed
  prefix.nodes.resize(static_cast<size_t>(node) + 1);
  fused::validate(prefix);
  return fused::per_row_flags(prefix)[node];
}

}  // namespace npusim::emitter
