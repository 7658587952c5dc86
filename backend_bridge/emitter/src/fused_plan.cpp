// Planning a fused kernel's program into steps over slots (fused_plan.h).
//
// Each live value gets a slot, a full tile (rows x row length) or a per-row tile (rows), which is reused once the value
// is dead. An operation mixing a per-row value into full rows broadcasts it (mode 3); constants sit in a scalar tile
// filled at kernel start and are read with mode 1; f16/bf16 constants are rounded through f32 by vcvt, as the
// device's own conversions round. Arguments are read with mode 1 too, from an argument tile that the plan's first
// steps load on every tile (a multi-tensor kernel's tiles belong to different segments, each with its own values).
#include "fused_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "fused_spec.h"

namespace npusim::emitter::fused {
namespace {

using isa::ElementType;
using isa::Opcode;
using Op = FusedOpcode;

Opcode vector_opcode(Op op) {
  switch (op) {
    case Op::Neg: return Opcode::Vneg;
    case Op::Abs: return Opcode::Vabs;
    case Op::Exp: return Opcode::Vexp;
    case Op::Log: return Opcode::Vlog;
    case Op::Tanh: return Opcode::Vtanh;
    case Op::Sigmoid: return Opcode::Vsigmoid;
    case Op::Erf: return Opcode::Verf;
    case Op::Sqrt: return Opcode::Vsqrt;
    case Op::Rsqrt: return Opcode::Vrsqrt;
    case Op::Reciprocal: return Opcode::Vrecip;
    case Op::Sin: return Opcode::Vsin;
    case Op::Cos: return Opcode::Vcos;
    case Op::Log1p: return Opcode::Vlog1p;
    case Op::Expm1: return Opcode::Vexpm1;
    case Op::Floor: return Opcode::Vfloor;
    case Op::Ceil: return Opcode::Vceil;
    case Op::Round: return Opcode::Vround;
    case Op::Trunc: return Opcode::Vtrunc;
    case Op::Not: return Opcode::Vxor;
    case Op::Add: return Opcode::Vadd;
    case Op::Sub: return Opcode::Vsub;
    case Op::Mul: return Opcode::Vmul;
    case Op::Div: return Opcode::Vdiv;
    case Op::Fmod: return Opcode::Vrem;
    case Op::Maximum: return Opcode::Vmax;
    case Op::Minimum: return Opcode::Vmin;
    case Op::And: return Opcode::Vand;
    case Op::Or: return Opcode::Vor;
    case Op::Xor: return Opcode::Vxor;
    case Op::Eq: return Opcode::Vceq;
    case Op::Ne: return Opcode::Vcne;
    case Op::Lt:
    case Op::Gt: return Opcode::Vclt;  // a > b is b < a
    case Op::Le:
    case Op::Ge: return Opcode::Vcle;
    case Op::ReduceSum: return Opcode::Vrsum;
    case Op::ReduceMax: return Opcode::Vrmax;
    case Op::ReduceMin: return Opcode::Vrmin;
    case Op::ReduceArgMax: return Opcode::Vargmax;
    case Op::ReduceArgMin: return Opcode::Vargmin;
    default: throw std::logic_error(fmt::format("fused node {} has no vector instruction", op_name(op)));
  }
}

// Bools are bytes holding 0 or 1: the byte instructions give the same bits for the logical operations, max, min and
// compares (and the vector engine has no bool arithmetic). Arithmetic on bools is not PyTorch's (True + True is
// True), so only those keep the bool type and are refused.
ElementType instruction_type(Op op, ElementType type) {
  const bool bytewise = op == Op::And || op == Op::Or || op == Op::Xor || op == Op::Maximum || op == Op::Minimum ||
                        op == Op::ReduceMax || op == Op::ReduceMin || op == Op::Not || is_compare(op);
  return type == ElementType::Bool && bytewise ? ElementType::U8 : type;
}

// The bits vfill writes for a constant, when its immediate can hold them: f32 and the integers within 32 bits (f16
// and bf16 constants are converted on the device instead, wide i64 ones written in halves).
std::optional<int64_t> fill_immediate(ElementType type, double value) {
  switch (type) {
    case ElementType::F32: return static_cast<int32_t>(std::bit_cast<uint32_t>(static_cast<float>(value)));
    case ElementType::F16:
    case ElementType::BF16: return std::nullopt;
    case ElementType::Bool: return value != 0 ? 1 : 0;
    case ElementType::I64: {
      const auto integer = static_cast<int64_t>(value);
      if (integer < INT32_MIN || integer > INT32_MAX) return std::nullopt;
      return integer;
    }
    default: return static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(value)));
  }
}

// x + identity == x for every x: -0 for floats (so that -0 stays -0), 0 for integers.
int64_t additive_identity(ElementType type) {
  switch (type) {
    case ElementType::F32: return INT32_MIN;  // 0x80000000
    case ElementType::F16:
    case ElementType::BF16: return 0x8000;
    default: return 0;
  }
}

}  // namespace

Plan::Plan(const FusedSpec& spec, int64_t row_length, const std::vector<char>& store_varies_along_rows,
           bool looped_rows)
    : spec_(spec),
      row_length_(row_length),
      looped_rows_(looped_rows),
      per_row_(per_row_flags(spec)),
      same_every_row_(same_in_every_row()),
      uniform_(uniform_values()),
      store_varies_along_rows_(store_varies_along_rows) {
  plan();
}

// Whether each node's value does not vary over the dimensions [first, last) of the space (the one dimension of the
// segments, with segments): a load whose strides there are 0 (or whose dimensions there have one element), a
// constant, an argument, and pointwise operations of those only.
std::vector<char> Plan::invariant_over(size_t first, size_t last) const {
  std::vector<char> invariant;
  for (const FusedNode& node : spec_.nodes) {
    bool result = false;
    if (node.op == Op::Load) {
      const FusedAccess& access = spec_.loads[node.access];
      result = true;
      for (size_t d = first; d < last && result; ++d)
        result = access.strides[d] == 0 || (spec_.segments.empty() && spec_.sizes[d] == 1);
    } else if (node.op == Op::Constant || node.op == Op::Argument) {
      result = true;
    } else if (is_unary(node.op) || is_arithmetic(node.op) || is_compare(node.op) || node.op == Op::Where ||
               node.op == Op::MulAdd) {
      const int operands[] = {node.a, node.b, node.c};
      result = true;
      for (int k = 0; k < operand_count(node.op); ++k) result = result && invariant[operands[k]];
    }
    invariant.push_back(result);
  }
  return invariant;
}

// The same in every row: invariant over the outer dimensions.
std::vector<char> Plan::same_in_every_row() const {
  if (!spec_.segments.empty()) return std::vector<char>(spec_.nodes.size(), 0);  // rows of one element
  return invariant_over(0, spec_.sizes.size() - static_cast<size_t>(spec_.reduced_dims));
}

// The same at every point: invariant over every dimension. (Not in a GEMM epilogue, whose slots are all
// block-shaped.)
std::vector<char> Plan::uniform_values() const {
  if (spec_.matmul) return std::vector<char>(spec_.nodes.size(), 0);
  return invariant_over(0, spec_.segments.empty() ? spec_.sizes.size() : 1);
}

int64_t Plan::slot_bytes(const Slot& slot, int64_t rows) const {
  const int64_t elements = slot.shape == Shape::Full      ? rows * row_length_
                           : slot.shape == Shape::Pattern ? row_length_
                           : slot.shape == Shape::One     ? 1
                                                          : rows;
  return (elements * slot.element_bytes + 63) / 64 * 64;
}

// One kScalarBytes slot per constant; f16/bf16 constants are rounded from f32 by vcvt (through the last slot), wide
// i64 ones written as two i32 halves.
void Plan::fill_scalars(KernelBuilder& b, const Tile& scalar_tile, R one, R first, R second) const {
  const int64_t staging = kScalarBytes * static_cast<int64_t>(scalars_.size());
  for (size_t k = 0; k < scalars_.size(); ++k) {
    const auto [type, constant] = scalars_[k];
    const int64_t offset = kScalarBytes * static_cast<int64_t>(k);
    b.point(first, scalar_tile, offset);
    if (const auto immediate = fill_immediate(type, constant)) {
      b.Vfill(type, first, one, *immediate);
    } else if (isa::is_float(type)) {
      b.point(second, scalar_tile, staging);
      b.Vfill(ElementType::F32, second, one, *fill_immediate(ElementType::F32, constant));
      b.Vcvt(type, ElementType::F32, first, second, one);
    } else {
      const auto bits = static_cast<uint64_t>(static_cast<int64_t>(constant));
      b.Vfill(ElementType::I32, first, one, static_cast<int32_t>(static_cast<uint32_t>(bits)));
      b.point(first, scalar_tile, offset + 4);
      b.Vfill(ElementType::I32, first, one, static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)));
    }
  }
}

// The operand's Ref as a step's second source, with the broadcast mode it needs in a step of `shape`.
std::pair<Ref, int64_t> Plan::second_source(int node, Shape shape) const {
  if (scalar_node(node)) return {scalar(node), 1};
  if (shape_of(node) == shape) return {value(node), 0};
  return {value(node), broadcast_mode(node)};
}

void Plan::unsupported(const std::string& what) const {
  throw Unsupported(
      fmt::format("fused kernel {}: node {} ({}): {}", spec_.name, node_, op_name(spec_.nodes[node_].op), what));
}
void Plan::check_type(Opcode opcode, ElementType type) const {
  if (!(isa::allowed_types(isa::info(opcode).types) & isa::type_bit(type)))
    unsupported(fmt::format("the vector engine has no {} for {}", isa::info(opcode).mnemonic, isa::type_name(type)));
}

void Plan::vector(Opcode opcode, ElementType type, Ref destination, Ref first, Ref second, Shape shape,
                  int64_t immediate) {
  check_type(opcode, type);
  Step s;
  s.opcode = opcode;
  s.type = type;
  s.destination = destination;
  s.first = first;
  s.second = second;
  s.shape = shape;
  s.immediate = immediate;
  steps_.push_back(s);
}
void Plan::convert(ElementType to, ElementType from, Ref destination, Ref source, Shape shape) {
  check_type(Opcode::Vcvt, from);
  vector(Opcode::Vcvt, to, destination, source, {}, shape);
  steps_.back().source = from;
}
void Plan::dma(int access, Ref slot, Shape shape, Ref index) {
  Step s;
  s.index = index;
  s.type = access < static_cast<int>(spec_.loads.size()) ? spec_.loads[access].type
                                                         : spec_.stores[access - spec_.loads.size()].type;
  s.first = slot;
  s.shape = shape;
  s.access = access;
  steps_.push_back(s);
}

Ref Plan::allocate(Shape shape, ElementType type, bool kept) {
  size_t k = 0;
  while (!kept && k < slots_.size() && (slots_[k].busy || slots_[k].shape != shape)) ++k;
  if (kept) k = slots_.size();  // a slot no earlier value used either: a looped pass may still compute those
  if (k == slots_.size()) slots_.push_back({shape});
  slots_[k].busy = true;
  slots_[k].kept = kept;
  slots_[k].element_bytes = std::max<int64_t>(slots_[k].element_bytes, isa::element_bytes(type));
  return {Ref::Kind::Slot, static_cast<int>(k)};
}
Ref Plan::temporary(Shape shape, ElementType type) {
  temporaries_.push_back(allocate(shape, type));
  return temporaries_.back();
}
void Plan::release(Ref ref) {
  if (ref.kind == Ref::Kind::Slot && !slots_[ref.index].kept) slots_[ref.index].busy = false;
}

// Fills `destination` with a constant node's value.
void Plan::fill(Ref destination, Shape shape, int node) {
  const ElementType type = type_of(node);
  const auto immediate = constant(node) ? fill_immediate(type, spec_.nodes[node].constant) : std::nullopt;
  if (immediate) {
    vector(Opcode::Vfill, type, destination, {}, {}, shape, *immediate);
    return;
  }
  if (!constant(node) && shape == Shape::One) {  // an Argument as one value: copied from the argument tile
    vector(Opcode::Vmov, type, destination, scalar(node), {}, shape);
    return;
  }
  if (!constant(node)) {  // an Argument: its entry of the argument block, repeated by a DMA with stride 0
    Step s;
    s.type = type;
    s.first = destination;
    s.shape = shape;
    s.argument = spec_.nodes[node].argument;
    steps_.push_back(s);
    return;
  }
  vector(Opcode::Vfill, type, destination, {}, {}, shape, additive_identity(type));
  vector(Opcode::Vadd, type, destination, destination, scalar(node), shape, 1);
}
// Repeats a value into a larger shape (a per-row value over its row, a pattern over every row, one value everywhere):
// identity + value, which is exact for every value (-0 included). Two-byte values are selected instead, which moves
// their bits: a copy moves bf16 and int16 elements as f16 ones, and an addition would turn those whose bits read as
// an f16 NaN (bf16 infinities, int16 -1) into the canonical NaN.
void Plan::broadcast(Ref destination, Shape shape, int node) {
  // A loaded value the same everywhere (a fill: a copy of a 0-d tensor, its strides all 0) is loaded again by a DMA
  // of the larger shape, which repeats it, rather than added to zeros on the vector engine: a fill of 148k floats
  // (torch.zeros of a convolution's padded input) 19,836 -> 7,324 cycles on the default chip.
  if (spec_.nodes[node].op == Op::Load && shape_of(node) == Shape::One) {
    dma(spec_.nodes[node].access, destination, shape);
    return;
  }
  ElementType type = moved_type(type_of(node));  // the bits, added to zeros or selected
  if (type == ElementType::Bool) type = ElementType::U8;
  if (isa::element_bytes(type) == 2) {
    const Ref everywhere = temporary(shape, ElementType::Bool);
    vector(Opcode::Vfill, ElementType::Bool, everywhere, {}, {}, shape, 1);
    vector(Opcode::Vsel, type, destination, everywhere, value(node), shape, broadcast_mode(node));
    return;
  }
  vector(Opcode::Vfill, type, destination, {}, {}, shape, additive_identity(type));
  vector(Opcode::Vadd, type, destination, destination, value(node), shape, broadcast_mode(node));
}
// How a step of a larger shape reads the node's value: one element (mode 1), one per row (3), a repeating row (2).
int64_t Plan::broadcast_mode(int node) const {
  switch (shape_of(node)) {
    case Shape::One: return 1;
    case Shape::Row: return per_row_broadcast();
    default: return repeating_row_broadcast();
  }
}
// A slot holding the node's value in `shape`: its own, or `into` (a new temporary if none) filled or broadcast.
Ref Plan::tile(int node, Shape shape, Ref into) {
  if (!scalar_node(node) && shape_of(node) == shape) return value(node);
  if (!scalar_node(node) && (shape == Shape::One || (shape == Shape::Row && shape_of(node) != Shape::One) ||
                             (shape == Shape::Pattern && shape_of(node) == Shape::Full)))
    throw std::logic_error("a value that varies where a per-row value, a pattern or one value is needed");
  if (into.kind == Ref::Kind::None) into = temporary(shape, type_of(node));
  if (scalar_node(node)) {
    fill(into, shape, node);
  } else {
    broadcast(into, shape, node);
  }
  return into;
}

void Plan::plan() {
  // Live nodes: the stores and what they read; each value's last reader frees its slot.
  const int count = static_cast<int>(spec_.nodes.size());
  std::vector<char> live(count);
  std::vector<int> last_use(count, -1);
  for (int i = count - 1; i >= 0; --i) {
    const FusedNode& node = spec_.nodes[i];
    if (node.op == Op::Store || node.op == Op::ScatterAdd) live[i] = true;
    if (!live[i] || is_random(node.op)) continue;  // a random number's operands are read by the scalar core
    const int operands[] = {node.a, node.b, node.c};
    for (int k = 0; k < operand_count(node.op); ++k) {
      live[operands[k]] = true;
      last_use[operands[k]] = std::max(last_use[operands[k]], i);
    }
  }
  values_.assign(count, {});
  for (int i = 0; i < count; ++i)
    if (live[i] && constant(i)) {
      scalar_index_[i] = static_cast<int>(scalars_.size());
      scalars_.push_back({type_of(i), spec_.nodes[i].constant});
    }
  // Each live argument's value, loaded into its slot of the argument tile first.
  for (int i = 0; i < count; ++i)
    if (live[i] && spec_.nodes[i].op == Op::Argument) {
      argument_index_[i] = static_cast<int>(arguments_++);
      Step s;
      s.type = type_of(i);
      s.first = scalar(i);
      s.argument = spec_.nodes[i].argument;
      steps_.push_back(s);
    }
  for (node_ = 0; node_ < count; ++node_) {
    if (!live[node_]) continue;
    const size_t first_step = steps_.size();
    plan_node(node_);
    for (size_t k = first_step; k < steps_.size(); ++k) steps_[k].node = node_;
    for (Ref ref : temporaries_) release(ref);
    temporaries_.clear();
    const FusedNode& node = spec_.nodes[node_];
    const int operands[] = {node.a, node.b, node.c};
    for (int k = 0; k < operand_count(node.op); ++k)
      if (last_use[operands[k]] == node_) release(values_[operands[k]]);
    if (last_use[node_] < 0) release(values_[node_]);
  }
  // An argument whose every use was a fill (a DMA of its own) needs no load into the argument tile.
  std::vector<char> read(static_cast<size_t>(arguments_), 0);
  for (const Step& s : steps_)
    for (const Ref& ref : {s.destination, s.second, s.argument < 0 ? s.first : Ref{}})
      if (ref.kind == Ref::Kind::Argument) read[ref.index] = 1;
  std::erase_if(steps_, [&](const Step& s) {
    return s.argument >= 0 && s.first.kind == Ref::Kind::Argument && !read[s.first.index];
  });
  load_arguments_together();
}

// Arguments loaded one DMA each cost a DRAM latency each on every tile; those of nearby entries (an optimizer's
// hyperparameters) are loaded by one DMA of whole 64-bit entries instead, each into the slot of its entry (whose low
// bytes hold the value).
void Plan::load_arguments_together() {
  constexpr int64_t kMostEntries = 64;
  std::map<int, int> entry_of_slot;
  for (const Step& s : steps_)
    if (s.argument >= 0 && s.first.kind == Ref::Kind::Argument) entry_of_slot[s.first.index] = s.argument;
  if (entry_of_slot.size() < 2) return;
  int first = INT32_MAX, last = 0;
  for (const auto& [slot, entry] : entry_of_slot) {
    first = std::min(first, entry);
    last = std::max(last, entry);
  }
  const int64_t span = int64_t{last} - first + 1;
  if (span > kMostEntries || span > 4 * static_cast<int64_t>(entry_of_slot.size())) return;
  std::erase_if(steps_, [](const Step& s) { return s.argument >= 0 && s.first.kind == Ref::Kind::Argument; });
  for (Step& s : steps_)
    for (Ref* ref : {&s.destination, &s.first, &s.second})
      if (ref->kind == Ref::Kind::Argument) ref->index = entry_of_slot.at(ref->index) - first;
  for (auto& [node, slot] : argument_index_)
    if (entry_of_slot.contains(slot)) slot = entry_of_slot.at(slot) - first;
  arguments_ = span;
  Step load;
  load.type = ElementType::I64;
  load.first = {Ref::Kind::Argument, 0};
  load.argument = first;
  load.immediate = span;
  steps_.insert(steps_.begin(), load);
}

void Plan::plan_node(int i) {
  const FusedNode& node = spec_.nodes[i];
  const ElementType type = node.type;
  if (node.op == Op::Load) {
    values_[i] = allocate(shape_of(i), type);
    dma(node.access, values_[i], shape_of(i));
  } else if (node.op == Op::Constant || node.op == Op::Argument) {
    values_[i] = scalar(i);
  } else if (node.op == Op::Product) {
    values_[i] = {Ref::Kind::Product};
    if (type != ElementType::F32) {
      values_[i] = allocate(Shape::Row, type);
      convert(type, ElementType::F32, values_[i], {Ref::Kind::Product}, Shape::Row);
    }
  } else if (node.op == Op::Convert) {
    const ElementType source = type_of(node.a);
    const Shape shape = shape_of(i);
    const Ref input = tile(node.a, shape);
    values_[i] = allocate(shape, type);
    if (source == type) {
      vector(Opcode::Vmov, moved_type(type), values_[i], input, {}, shape);
    } else {
      convert(type, source, values_[i], input, shape);
    }
  } else if (is_unary(node.op)) {
    const Shape shape = shape_of(i);
    values_[i] = allocate(shape, type);
    const Ref input = tile(node.a, shape, values_[i]);
    const ElementType computed = instruction_type(node.op, type);
    if (node.op == Op::Not) {
      vector(Opcode::Vxor, computed, values_[i], input, not_one(), shape, 1);
    } else {
      vector(vector_opcode(node.op), computed, values_[i], input, {}, shape);
    }
  } else if (is_arithmetic(node.op) || is_compare(node.op)) {
    plan_binary(i);
  } else if (node.op == Op::Where) {
    const Shape shape = shape_of(i);
    values_[i] = allocate(shape, type);
    if (scalar_node(node.c)) {
      fill(values_[i], shape, node.c);
    } else if (shape_of(node.c) == shape) {
      vector(Opcode::Vmov, type, values_[i], value(node.c), {}, shape);
    } else {
      broadcast(values_[i], shape, node.c);
    }
    const Ref condition = tile(node.a, shape);
    const auto [second, mode] = second_source(node.b, shape);
    // vsel merges b into the destination where the condition holds.
    vector(Opcode::Vsel, type, values_[i], condition, second, shape, mode);
  } else if (node.op == Op::MulAdd) {
    plan_multiply_add(i);
  } else if (is_reduction(node.op)) {
    const Ref input = tile(node.a, row_length_ > 1 ? Shape::Full : Shape::Row);
    if (looped_rows_) {
      plan_looped_reduction(i, input);
      return;
    }
    values_[i] = allocate(Shape::Row, type);
    // An index's instruction has the type of the row it searches.
    vector(vector_opcode(node.op), instruction_type(node.op, type_of(node.a)), values_[i], input, {}, Shape::Row);
  } else if (node.op == Op::Gather) {
    const Shape shape = shape_of(i);
    values_[i] = allocate(shape, type);
    const auto run = static_cast<int64_t>(node.constant);
    if (run > 1 && shape == Shape::Full) {
      // The first index of each run, gathered to the front by a transpose of the indices as runs x r.
      const Ref firsts = temporary(shape, ElementType::I64);
      vector(Opcode::Vtr, ElementType::I64, firsts, tile(node.a, shape), {}, shape, run);
      dma(node.access, values_[i], shape, firsts);
      steps_.back().immediate = run;
    } else {
      dma(node.access, values_[i], shape, tile(node.a, shape));
    }
  } else if (node.op == Op::ScatterAdd) {
    check_type(Opcode::DmaStoreAddIndexed, type);
    const auto varies_along_rows = [&](int operand) {
      return shape_of(operand) == Shape::Full || shape_of(operand) == Shape::Pattern;
    };
    const Shape shape = varies_along_rows(node.a) || varies_along_rows(node.b) ? Shape::Full : Shape::Row;
    const Ref indices = tile(node.b, shape);
    const Ref values = tile(node.a, shape);
    dma(static_cast<int>(spec_.loads.size()) + node.access, values, shape, indices);
  } else if (is_random(node.op)) {
    const Shape shape = shape_of(i);
    values_[i] = allocate(shape, type);
    vector(node.op == Op::RandomUniform ? Opcode::Vrand : Opcode::Vrandn, type, values_[i], {}, {}, shape);
    steps_.back().random = i;
  } else if (node.op == Op::CheckIndex) {
    // vcheck reads the indices; the copy after it is what a DMA reading them waits for.
    const Shape shape = shape_of(i);
    const Ref input = tile(node.a, shape);
    vector(Opcode::Vcheck, type, {}, input, {}, shape, static_cast<int64_t>(spec_.nodes[i].constant));
    values_[i] = allocate(shape, type);
    vector(Opcode::Vmov, type, values_[i], input, {}, shape);
  } else if (node.op == Op::Store) {
    const int access = static_cast<int>(spec_.loads.size()) + node.access;
    const Shape shape = row_length_ > 1 && store_varies_along_rows_[node.access] ? Shape::Full : Shape::Row;
    Ref input = tile(node.a, shape);
    const ElementType stored = spec_.stores[node.access].type;
    if (stored != type) {
      const Ref converted = temporary(shape, stored);
      convert(stored, type, converted, input, shape);
      input = converted;
    }
    dma(access, input, shape);
  }
}

// The u8 1 that Not xors with, in the scalar tile.
Ref Plan::not_one() {
  if (!not_one_) {
    not_one_ = static_cast<int>(scalars_.size());
    scalars_.push_back({ElementType::U8, 1});
  }
  return {Ref::Kind::Scalar, *not_one_};
}

// a op b. A commutative op takes a constant or a per-row operand as its second source (swapped); a > b and a >= b
// are b < a and b <= a. A constant or per-row first source of a full result is filled or broadcast first: into the
// result's slot when it has the operand's type, else into a temporary.
void Plan::plan_binary(int i) {
  const FusedNode& node = spec_.nodes[i];
  const bool commutative = node.op == Op::Add || node.op == Op::Mul || node.op == Op::Maximum ||
                           node.op == Op::Minimum || node.op == Op::And || node.op == Op::Or || node.op == Op::Xor ||
                           node.op == Op::Eq || node.op == Op::Ne;
  int x = node.a, y = node.b;
  if (node.op == Op::Gt || node.op == Op::Ge) std::swap(x, y);
  const Shape shape = shape_of(i);
  if (commutative && !scalar_node(y) && (scalar_node(x) || shape_of(x) != shape)) std::swap(x, y);
  const ElementType computed = instruction_type(node.op, type_of(x));
  values_[i] = allocate(shape, node.type);
  const Ref first = tile(x, shape, is_compare(node.op) ? Ref{} : values_[i]);
  const auto [second, mode] = second_source(y, shape);
  vector(vector_opcode(node.op), computed, values_[i], first, second, shape, mode);
}

}  // namespace npusim::emitter::fused

namespace npusim::emitter::fused {

// A reduction over a chunk of a looped row, into a temporary that the row's carry then combines: a sum adds, an
// extremum keeps the larger or smaller (NaN-propagating, as the reductions are). The carry starts each row as the
// identity: 0 for sums (+0, where vrsum starts too, so that a row sums to what one vrsum would give it, and a row of
// no elements to +0), the infinities for float extrema, the extreme i32 values for i32 ones; other types' extrema are
// refused. The index of an extremum carries more (plan_looped_index).
void Plan::plan_looped_reduction(int i, Ref input) {
  const FusedNode& node = spec_.nodes[i];
  const ElementType type = node.type;
  if (node.op == Op::ReduceArgMax || node.op == Op::ReduceArgMin) {
    plan_looped_index(i, input);
    return;
  }
  const Ref partial = temporary(Shape::Row, type);
  vector(vector_opcode(node.op), instruction_type(node.op, type_of(node.a)), partial, input, {}, Shape::Row);
  Carry carry{.node = i, .slot = allocate(Shape::Row, type, /*kept=*/true), .type = type};
  const bool sum = node.op == Op::ReduceSum, maximum = node.op == Op::ReduceMax;
  if (sum && type != ElementType::Bool) {
    carry.identity = 0;
  } else if ((maximum || node.op == Op::ReduceMin) && type == ElementType::F32) {
    carry.combine = maximum ? Opcode::Vmax : Opcode::Vmin;
    carry.identity = static_cast<int32_t>(std::bit_cast<uint32_t>(maximum ? -INFINITY : INFINITY));
  } else if ((maximum || node.op == Op::ReduceMin) && type == ElementType::I32) {
    carry.combine = maximum ? Opcode::Vmax : Opcode::Vmin;
    carry.identity = maximum ? INT32_MIN : INT32_MAX;
  } else {
    unsupported(fmt::format("a row too long for the scratchpad is reduced in chunks, which {} of {} cannot be",
                            op_name(node.op), isa::type_name(type)));
  }
  values_[i] = carry.slot;
  vector(carry.combine, type, carry.slot, carry.slot, partial, Shape::Row);
  carries_.push_back(carry);
}

// The first index of the maximum (minimum) of a looped row of f32: each chunk's extremum and its first index (a NaN
// counting as the extremum, as vrmax and vargmax take it) replace the carried ones when the chunk's is strictly
// greater (less), or is a NaN where the carried one is not; so the first of equal extrema, and the first NaN, win.
// The chunk's index is offset by its first element's, which the carry counts up by the chunk's length (every chunk
// but the last is whole). The walker requires one reduced dimension, so that a chunk's elements are consecutive.
void Plan::plan_looped_index(int i, Ref input) {
  const FusedNode& node = spec_.nodes[i];
  if (type_of(node.a) != ElementType::F32)
    unsupported(
        fmt::format("the index of an extremum of a row too long for the scratchpad is found in chunks of "
                    "f32 only, not of {}",
                    isa::type_name(type_of(node.a))));
  const bool maximum = node.op == Op::ReduceArgMax;
  const Ref partial_index = temporary(Shape::Row, ElementType::I64);
  const Ref partial = temporary(Shape::Row, ElementType::F32);
  vector(vector_opcode(node.op), ElementType::F32, partial_index, input, {}, Shape::Row);
  vector(maximum ? Opcode::Vrmax : Opcode::Vrmin, ElementType::F32, partial, input, {}, Shape::Row);
  Carry carry{.node = i,
              .slot = allocate(Shape::Row, ElementType::F32, /*kept=*/true),
              .type = ElementType::F32,
              .combine = Opcode::Vsel,
              .identity = static_cast<int32_t>(std::bit_cast<uint32_t>(maximum ? -INFINITY : INFINITY)),
              .index = allocate(Shape::Row, ElementType::I64, /*kept=*/true),
              .offset = allocate(Shape::Row, ElementType::I64, /*kept=*/true)};
  const Ref better = temporary(Shape::Row, ElementType::Bool), nan = temporary(Shape::Row, ElementType::Bool);
  const Ref carried_nan = temporary(Shape::Row, ElementType::Bool);
  vector(Opcode::Vclt, ElementType::F32, better, maximum ? carry.slot : partial, maximum ? partial : carry.slot,
         Shape::Row);
  vector(Opcode::Vcne, ElementType::F32, nan, partial, partial, Shape::Row);
  vector(Opcode::Vcne, ElementType::F32, carried_nan, carry.slot, carry.slot, Shape::Row);
  vector(Opcode::Vxor, ElementType::U8, carried_nan, carried_nan, not_one(), Shape::Row, 1);
  vector(Opcode::Vand, ElementType::U8, nan, nan, carried_nan, Shape::Row);
  vector(Opcode::Vor, ElementType::U8, better, better, nan, Shape::Row);
  vector(Opcode::Vadd, ElementType::I64, partial_index, partial_index, carry.offset, Shape::Row);
  vector(Opcode::Vsel, ElementType::F32, carry.slot, better, partial, Shape::Row);
  vector(Opcode::Vsel, ElementType::I64, carry.index, better, partial_index, Shape::Row);
  const int chunk = static_cast<int>(scalars_.size());
  scalars_.push_back({ElementType::I64, static_cast<double>(row_length_)});
  vector(Opcode::Vadd, ElementType::I64, carry.offset, carry.offset, {Ref::Kind::Scalar, chunk}, Shape::Row, 1);
  values_[i] = carry.index;
  carries_.push_back(carry);
}

// a * b + c: c goes into the result's slot first (filled or broadcast when it is a scalar or per-row), and vfma
// accumulates a * b into it. a and b commute: a scalar or per-row one becomes the second source.
void Plan::plan_multiply_add(int i) {
  const FusedNode& node = spec_.nodes[i];
  const Shape shape = shape_of(i);
  int x = node.a, y = node.b;
  if (!scalar_node(y) && (scalar_node(x) || shape_of(x) != shape)) std::swap(x, y);
  values_[i] = allocate(shape, node.type);
  if (scalar_node(node.c)) {
    fill(values_[i], shape, node.c);
  } else if (shape_of(node.c) == shape) {
    vector(Opcode::Vmov, node.type, values_[i], value(node.c), {}, shape);
  } else {
    broadcast(values_[i], shape, node.c);
  }
  const Ref first = tile(x, shape);
  const auto [second, mode] = second_source(y, shape);
  vector(Opcode::Vfma, node.type, values_[i], first, second, shape, mode);
}

}  // namespace npusim::emitter::fused
