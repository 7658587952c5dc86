// Fused pointwise and reduction kernels (fused.h), the kernels torch.compile's Inductor backend generates.
//
// The spec's dataflow program is planned once into steps over scratchpad slots: each live value gets a slot, a full
// tile (rows x row length) or a per-row tile (rows), which is reused once the value is dead. An operation mixing a
// per-row value into full rows broadcasts it (mode 3); constants sit in a scalar tile filled at kernel start and are
// read with mode 1. The kernel then walks the tiles of the outer space, core c taking tiles c, c + n, ..., and runs
// the steps on each tile; the builder orders the engines by the slots each step touches.
//
// Layout (fused_layout.h): the outer dimensions are ordered by the first store's strides and, like the reduced ones,
// collapsed over every access. A tile is a chunk of one outer dimension, times whole blocks of the small outer
// dimensions inside it, times the whole reduced space, so every access of a tile is one DMA of at most four
// dimensions. Choices the header leaves open: a per-row value stored to a view that varies along the row is broadcast
// over it; f16/bf16 constants are rounded through f32 by vcvt, as the device's own conversions round.
#include "npusim/emitter/fused.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>

#include "fused_layout.h"
#include "fused_spec.h"

namespace npusim::emitter {
namespace {

using isa::ElementType;
using isa::Opcode;
using Op = FusedOpcode;
using fused::is_arithmetic;
using fused::is_compare;
using fused::is_reduction;
using fused::is_unary;
using fused::Layout;
using fused::op_name;
using fused::operand_count;

constexpr int kPointerRegisters = 6;  // arguments whose addresses stay in registers; the others are loaded per use
constexpr int64_t kScalarBytes = 8;   // a slot of the scalar tile holds any element type

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

// A value's place: a slot of the plan, or a slot of the scalar tile.
struct Ref {
  enum class Kind : uint8_t { None, Slot, Scalar } kind = Kind::None;
  int index = -1;
};

enum class Shape : uint8_t { Row, Full };  // a step's count: rows (per-row values), or rows x row length

// One step of a tile: a vector instruction over slots, or (access >= 0) a DMA of an access to or from a slot.
struct Step {
  Opcode opcode{};
  ElementType type = ElementType::F32, source = ElementType::F32;  // source: vcvt's
  Ref destination, first, second;
  Shape shape = Shape::Row;
  int64_t immediate = 0;  // a binary instruction's broadcast mode, vfill's value
  int access = -1;        // loads, then stores
};

struct Slot {
  Shape shape = Shape::Row;
  int64_t element_bytes = 1;
  bool busy = false;
};

class FusedEmitter {
 public:
  FusedEmitter(const FusedSpec& spec, const config::ChipConfig& config, std::string name)
      : spec_(spec),
        config_(config),
        layout_(fused::collapse(spec)),
        per_row_(fused::per_row_flags(spec)),
        b_(std::move(name), config) {
    for (const FusedAccess& access : spec.loads) accesses_.push_back(&access);
    for (const FusedAccess& access : spec.stores) accesses_.push_back(&access);
    plan();
    choose_tiles();
  }

  Kernel build() {
    describe();
    for (size_t k = 0; k < slots_.size(); ++k)
      slot_tiles_.push_back(b_.tile(Space::Scratchpad, slot_bytes(slots_[k], tile_rows_),
                                    fmt::format("{} {}", slots_[k].shape == Shape::Full ? "full" : "per-row", k)));
    if (!scalars_.empty()) scalar_tile_ = b_.tile(Space::Scratchpad, scalar_tile_bytes(), "constants");
    allocate_registers();
    fill_scalars();
    b_.li(cols_, layout_.row_length);
    const Label loop = b_.label(), done = b_.label();
    b_.Csrr(tile_, isa::Csr::CoreId);
    b_.li(scratch_, tiles_);
    b_.Bgeu(tile_, scratch_, done);
    b_.bind(loop);
    emit_tile_position();
    for (const Step& step : steps_) emit(step);
    b_.add_constant(tile_, cores_);
    b_.li(scratch_, tiles_);
    b_.Bltu(tile_, scratch_, loop);
    b_.bind(done);
    b_.Halt();
    return b_.finish(cores_);
  }

 private:
  // ---- planning: the steps of one tile, and the slots they use

  bool constant(int node) const { return spec_.nodes[node].op == Op::Constant; }
  Shape shape_of(int node) const { return layout_.row_length > 1 && !per_row_[node] ? Shape::Full : Shape::Row; }
  ElementType type_of(int node) const { return spec_.nodes[node].type; }
  int64_t per_row_broadcast() const { return 3 + (layout_.row_length << 2); }
  Ref scalar(int node) const { return {Ref::Kind::Scalar, scalar_index_.at(node)}; }
  Ref value(int node) const { return values_[node]; }
  // The operand's Ref as a step's second source, with the broadcast mode it needs in a step of `shape`.
  std::pair<Ref, int64_t> second_source(int node, Shape shape) const {
    if (constant(node)) return {scalar(node), 1};
    return {value(node), shape_of(node) == shape ? 0 : per_row_broadcast()};
  }

  [[noreturn]] void unsupported(const std::string& what) const {
    throw Unsupported(
        fmt::format("fused kernel {}: node {} ({}): {}", spec_.name, node_, op_name(spec_.nodes[node_].op), what));
  }
  void check_type(Opcode opcode, ElementType type) const {
    if (!(isa::allowed_types(isa::info(opcode).types) & isa::type_bit(type)))
      unsupported(fmt::format("the vector engine has no {} for {}", isa::info(opcode).mnemonic, isa::type_name(type)));
  }

  void vector(Opcode opcode, ElementType type, Ref destination, Ref first, Ref second, Shape shape,
              int64_t immediate = 0) {
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
  void convert(ElementType to, ElementType from, Ref destination, Ref source, Shape shape) {
    check_type(Opcode::Vcvt, from);
    vector(Opcode::Vcvt, to, destination, source, {}, shape);
    steps_.back().source = from;
  }
  void dma(int access, Ref slot, Shape shape) {
    Step s;
    s.type = accesses_[access]->type;
    s.first = slot;
    s.shape = shape;
    s.access = access;
    steps_.push_back(s);
  }

  Ref allocate(Shape shape, ElementType type) {
    size_t k = 0;
    while (k < slots_.size() && (slots_[k].busy || slots_[k].shape != shape)) ++k;
    if (k == slots_.size()) slots_.push_back({shape});
    slots_[k].busy = true;
    slots_[k].element_bytes = std::max<int64_t>(slots_[k].element_bytes, isa::element_bytes(type));
    return {Ref::Kind::Slot, static_cast<int>(k)};
  }
  Ref temporary(Shape shape, ElementType type) {
    temporaries_.push_back(allocate(shape, type));
    return temporaries_.back();
  }
  void release(Ref ref) {
    if (ref.kind == Ref::Kind::Slot) slots_[ref.index].busy = false;
  }

  // Fills `destination` with a constant node's value.
  void fill(Ref destination, Shape shape, int node) {
    const ElementType type = type_of(node);
    if (const auto immediate = fill_immediate(type, spec_.nodes[node].constant)) {
      vector(Opcode::Vfill, type, destination, {}, {}, shape, *immediate);
      return;
    }
    vector(Opcode::Vfill, type, destination, {}, {}, shape, additive_identity(type));
    vector(Opcode::Vadd, type, destination, destination, scalar(node), shape, 1);
  }
  // Repeats a per-row value over its row: identity + value, which is exact for every value (-0 included).
  void broadcast(Ref destination, Ref per_row, ElementType type) {
    if (type == ElementType::Bool) type = ElementType::U8;
    vector(Opcode::Vfill, type, destination, {}, {}, Shape::Full, additive_identity(type));
    vector(Opcode::Vadd, type, destination, destination, per_row, Shape::Full, per_row_broadcast());
  }
  // A slot holding the node's value in `shape`: its own, or `into` (a new temporary if none) filled or broadcast.
  Ref tile(int node, Shape shape, Ref into = {}) {
    if (!constant(node) && shape_of(node) == shape) return value(node);
    if (!constant(node) && shape == Shape::Row) throw std::logic_error("a full row where a per-row value is needed");
    if (into.kind == Ref::Kind::None) into = temporary(shape, type_of(node));
    if (constant(node)) {
      fill(into, shape, node);
    } else {
      broadcast(into, value(node), type_of(node));
    }
    return into;
  }

  void plan() {
    // Live nodes: the stores and what they read; each value's last reader frees its slot.
    const int count = static_cast<int>(spec_.nodes.size());
    std::vector<char> live(count);
    std::vector<int> last_use(count, -1);
    for (int i = count - 1; i >= 0; --i) {
      const FusedNode& node = spec_.nodes[i];
      if (node.op == Op::Store) live[i] = true;
      if (!live[i]) continue;
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
    for (node_ = 0; node_ < count; ++node_) {
      if (!live[node_]) continue;
      plan_node(node_);
      for (Ref ref : temporaries_) release(ref);
      temporaries_.clear();
      const FusedNode& node = spec_.nodes[node_];
      const int operands[] = {node.a, node.b, node.c};
      for (int k = 0; k < operand_count(node.op); ++k)
        if (last_use[operands[k]] == node_) release(values_[operands[k]]);
      if (last_use[node_] < 0) release(values_[node_]);
    }
  }

  void plan_node(int i) {
    const FusedNode& node = spec_.nodes[i];
    const ElementType type = node.type;
    if (node.op == Op::Load) {
      values_[i] = allocate(shape_of(i), type);
      dma(node.access, values_[i], shape_of(i));
    } else if (node.op == Op::Constant) {
      values_[i] = scalar(i);
    } else if (node.op == Op::Convert) {
      const ElementType source = type_of(node.a);
      const Shape shape = shape_of(node.a);
      const Ref input = tile(node.a, shape);
      values_[i] = allocate(shape, type);
      if (source == type) {
        vector(Opcode::Vmov, type, values_[i], input, {}, shape);
      } else {
        convert(type, source, values_[i], input, shape);
      }
    } else if (is_unary(node.op)) {
      const Shape shape = shape_of(node.a);
      values_[i] = allocate(shape, type);
      const Ref input = tile(node.a, shape, values_[i]);
      const ElementType computed = instruction_type(node.op, type);
      if (node.op == Op::Not) {
        if (!not_one_) {
          not_one_ = static_cast<int>(scalars_.size());
          scalars_.push_back({ElementType::U8, 1});
        }
        vector(Opcode::Vxor, computed, values_[i], input, {Ref::Kind::Scalar, *not_one_}, shape, 1);
      } else {
        vector(vector_opcode(node.op), computed, values_[i], input, {}, shape);
      }
    } else if (is_arithmetic(node.op) || is_compare(node.op)) {
      plan_binary(i);
    } else if (node.op == Op::Where) {
      const Shape shape = shape_of(i);
      values_[i] = allocate(shape, type);
      if (constant(node.c)) {
        fill(values_[i], shape, node.c);
      } else if (shape_of(node.c) == shape) {
        vector(Opcode::Vmov, type, values_[i], value(node.c), {}, shape);
      } else {
        broadcast(values_[i], value(node.c), type);
      }
      const Ref condition = tile(node.a, shape);
      const auto [second, mode] = second_source(node.b, shape);
      // vsel merges b into the destination where the condition holds.
      vector(Opcode::Vsel, type, values_[i], condition, second, shape, mode);
    } else if (is_reduction(node.op)) {
      const Ref input = tile(node.a, layout_.row_length > 1 ? Shape::Full : Shape::Row);
      values_[i] = allocate(Shape::Row, type);
      vector(vector_opcode(node.op), instruction_type(node.op, type), values_[i], input, {}, Shape::Row);
    } else if (node.op == Op::Store) {
      const int access = static_cast<int>(spec_.loads.size()) + node.access;
      const Shape shape = layout_.row_length > 1 && layout_.varies_along_rows(access) ? Shape::Full : Shape::Row;
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

  // a op b. A commutative op takes a constant or a per-row operand as its second source (swapped); a > b and a >= b
  // are b < a and b <= a. A constant or per-row first source of a full result is filled or broadcast first: into the
  // result's slot when it has the operand's type, else into a temporary.
  void plan_binary(int i) {
    const FusedNode& node = spec_.nodes[i];
    const bool commutative = node.op == Op::Add || node.op == Op::Mul || node.op == Op::Maximum ||
                             node.op == Op::Minimum || node.op == Op::And || node.op == Op::Or || node.op == Op::Xor ||
                             node.op == Op::Eq || node.op == Op::Ne;
    int x = node.a, y = node.b;
    if (node.op == Op::Gt || node.op == Op::Ge) std::swap(x, y);
    const Shape shape = shape_of(x) == Shape::Full || shape_of(y) == Shape::Full ? Shape::Full : Shape::Row;
    if (commutative && !constant(y) && (constant(x) || shape_of(x) != shape)) std::swap(x, y);
    const ElementType computed = instruction_type(node.op, type_of(x));
    values_[i] = allocate(shape, node.type);
    const Ref first = tile(x, shape, is_compare(node.op) ? Ref{} : values_[i]);
    const auto [second, mode] = second_source(y, shape);
    vector(vector_opcode(node.op), computed, values_[i], first, second, shape, mode);
  }

  // ---- tiles and cores

  static int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }
  int64_t slot_bytes(const Slot& slot, int64_t rows) const {
    const int64_t elements = slot.shape == Shape::Full ? rows * layout_.row_length : rows;
    return round_up(elements * slot.element_bytes, 64);
  }
  int64_t scalar_tile_bytes() const { return kScalarBytes * (static_cast<int64_t>(scalars_.size()) + 1); }
  bool rows_fit(int64_t rows, int64_t bytes) const {
    for (const Slot& slot : slots_) bytes -= slot_bytes(slot, rows);
    return bytes >= 0;
  }

  // The most rows whose slots fit the scratchpad; then the tile: a chunk of one outer dimension times whole blocks
  // of the small outer dimensions inside it (each block fitting twice, so that several travel in one tile), within
  // the DMA's four dimensions. The tiles are spread over the cores.
  void choose_tiles() {
    const int64_t usable =
        static_cast<int64_t>(config_.scratchpad_bytes()) - (scalars_.empty() ? 0 : round_up(scalar_tile_bytes(), 64));
    int64_t per_row_bytes = 0;
    for (const Slot& slot : slots_)
      per_row_bytes += slot.element_bytes * (slot.shape == Shape::Full ? layout_.row_length : 1);
    int64_t rows = std::max<int64_t>(0, (usable - 64 * static_cast<int64_t>(slots_.size())) / per_row_bytes);
    while (rows_fit(rows + 1, usable) && rows < (int64_t{1} << 40)) ++rows;
    if (rows < 1)
      throw Unsupported(
          fmt::format("fused kernel {}: a row of {} elements does not fit the {}-byte scratchpad with "
                      "its {} tiles",
                      spec_.name, layout_.row_length, config_.scratchpad_bytes(), slots_.size()));
    const std::vector<int64_t>& outer = layout_.outer;
    const int reduced = static_cast<int>(layout_.reduced.size());
    chunk_dim_ = static_cast<int>(outer.size()) - 1;
    block_rows_ = 1;
    while (chunk_dim_ > 0 && reduced + static_cast<int>(outer.size()) - chunk_dim_ + 1 <= fused::kDmaDims &&
           outer[chunk_dim_] * block_rows_ * 2 <= rows) {
      block_rows_ *= outer[chunk_dim_];
      --chunk_dim_;
    }
    if (chunk_dim_ > fused::kMaxLoopDims)
      throw Unsupported(
          fmt::format("fused kernel {}: {} outer dimensions remain after collapsing", spec_.name, outer.size()));
    const int64_t chunk_size = outer[chunk_dim_];
    chunk_ = std::min(chunk_size, rows / block_rows_);
    if (chunk_ < chunk_size && block_rows_ == 1 && chunk_ >= 64) chunk_ = chunk_ / 64 * 64;
    int64_t loop_tiles = 1;
    for (int d = 0; d < chunk_dim_; ++d) loop_tiles *= outer[d];
    // Too few tiles for the cores: smaller chunks, while a tile still has a few thousand elements.
    constexpr int64_t kMinTileElements = 4096;
    const auto tile_count = [&] { return loop_tiles * ((chunk_size + chunk_ - 1) / chunk_); };
    if (tile_count() < config_.chip_cores) {
      const int64_t chunks_wanted = (config_.chip_cores + loop_tiles - 1) / loop_tiles;
      const int64_t smallest =
          (kMinTileElements + block_rows_ * layout_.row_length - 1) / (block_rows_ * layout_.row_length);
      chunk_ = std::min(chunk_, std::max((chunk_size + chunks_wanted - 1) / chunks_wanted, smallest));
    }
    chunks_ = (chunk_size + chunk_ - 1) / chunk_;
    tiles_ = tile_count();
    tile_rows_ = chunk_ * block_rows_;
    cores_ = std::clamp<int64_t>(tiles_, 1, config_.chip_cores);
    if (layout_.row_length > (INT32_MAX >> 2))
      throw Unsupported(fmt::format("fused kernel {}: rows of {} elements exceed a broadcast period", spec_.name,
                                    layout_.row_length));
  }

  void describe() {
    b_.describe(fmt::format("{}: sizes [{}], {} reduced; collapsed outer [{}], reduced [{}]", spec_.name,
                            fmt::join(spec_.sizes, ", "), spec_.reduced_dims, fmt::join(layout_.outer, ", "),
                            fmt::join(layout_.reduced, ", ")));
    b_.describe(fmt::format("tiles: {} rows ({} of outer dimension {} x {}) x {}; {} tiles on {} cores, {} slots",
                            tile_rows_, chunk_, chunk_dim_, block_rows_, layout_.row_length, tiles_, cores_,
                            slots_.size()));
    for (size_t k = 0; k < accesses_.size(); ++k) {
      const bool load = k < spec_.loads.size();
      b_.describe(fmt::format("{} {}: argument {}, {}, offset {}, byte strides outer [{}] reduced [{}]",
                              load ? "load" : "store", load ? k : k - spec_.loads.size(), accesses_[k]->argument,
                              isa::type_name(accesses_[k]->type), accesses_[k]->offset,
                              fmt::join(layout_.outer_strides[k], ", "), fmt::join(layout_.reduced_strides[k], ", ")));
    }
  }

  // ---- emission

  void allocate_registers() {
    tile_ = b_.reg("tile");
    chunk_start_ = b_.reg("chunk start");
    chunk_rows_ = b_.reg("chunk rows");
    rows_ = b_.reg("rows");
    elements_ = b_.reg("elements");
    cols_ = b_.reg("row length");
    for (int d = 0; d < chunk_dim_; ++d) loop_index_.push_back(b_.reg(fmt::format("outer index {}", d)));
    destination_ = b_.reg("destination");
    first_ = b_.reg("first source");
    second_ = b_.reg("second source");
    address_ = b_.reg("DRAM address");
    scratch_ = b_.reg("scratch");
    count_ = b_.reg("DMA count");
    stride_ = b_.reg("DMA stride");
    for (const FusedAccess* access : accesses_)
      if (!pointers_.contains(access->argument) && static_cast<int>(pointers_.size()) < kPointerRegisters) {
        Reg pointer = b_.reg(fmt::format("argument {}", access->argument));
        b_.Ld(pointer, kArgumentBlock, 8 * access->argument);
        pointers_.emplace(access->argument, std::move(pointer));
      }
  }

  // The scalar tile: one 8-byte slot per constant; f16/bf16 constants are rounded from f32 by vcvt (through the last
  // slot), wide i64 ones written as two i32 halves.
  void fill_scalars() {
    if (scalars_.empty()) return;
    Reg one = b_.reg("one");
    b_.li(one, 1);
    const int64_t staging = kScalarBytes * static_cast<int64_t>(scalars_.size());
    for (size_t k = 0; k < scalars_.size(); ++k) {
      const auto [type, constant] = scalars_[k];
      const int64_t offset = kScalarBytes * static_cast<int64_t>(k);
      b_.point(first_, *scalar_tile_, offset);
      if (const auto immediate = fill_immediate(type, constant)) {
        b_.Vfill(type, first_, one, *immediate);
      } else if (isa::is_float(type)) {
        b_.point(second_, *scalar_tile_, staging);
        b_.Vfill(ElementType::F32, second_, one, *fill_immediate(ElementType::F32, constant));
        b_.Vcvt(type, ElementType::F32, first_, second_, one);
      } else {
        const auto bits = static_cast<uint64_t>(static_cast<int64_t>(constant));
        b_.Vfill(ElementType::I32, first_, one, static_cast<int32_t>(static_cast<uint32_t>(bits)));
        b_.point(first_, *scalar_tile_, offset + 4);
        b_.Vfill(ElementType::I32, first_, one, static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)));
      }
    }
  }

  // Where tile `tile_` lies: the index of each outer dimension outside the chunk dimension, the chunk's first row,
  // and the counts (the last chunk may be short).
  void emit_tile_position() {
    const std::vector<int64_t>& outer = layout_.outer;
    if (chunks_ > 1) {
      b_.li(scratch_, chunks_);
      b_.Remu(chunk_start_, tile_, scratch_);
      b_.Divu(address_, tile_, scratch_);
      b_.mul_constant(chunk_start_, chunk_);
    } else {
      b_.move(address_, tile_);
    }
    for (int d = chunk_dim_ - 1; d >= 0; --d) {
      if (d == 0) {
        b_.move(loop_index_[0], address_);
        break;
      }
      b_.li(scratch_, outer[d]);
      b_.Remu(loop_index_[d], address_, scratch_);
      b_.Divu(address_, address_, scratch_);
    }
    if (outer[chunk_dim_] % chunk_ == 0) {
      b_.li(chunk_rows_, chunk_);
    } else {  // min(chunk, size - chunk start)
      const Label sized = b_.label();
      b_.li(chunk_rows_, outer[chunk_dim_]);
      b_.Sub(chunk_rows_, chunk_rows_, chunk_start_);
      b_.li(scratch_, chunk_);
      b_.Bltu(chunk_rows_, scratch_, sized);
      b_.move(chunk_rows_, scratch_);
      b_.bind(sized);
    }
    b_.move(rows_, chunk_rows_);
    b_.mul_constant(rows_, block_rows_);
    b_.move(elements_, rows_);
    b_.mul_constant(elements_, layout_.row_length);
  }

  R point(Reg& reg, Ref ref) {
    if (ref.kind == Ref::Kind::Slot) b_.point(reg, slot_tiles_[ref.index]);
    if (ref.kind == Ref::Kind::Scalar) b_.point(reg, *scalar_tile_, kScalarBytes * ref.index);
    return reg;
  }

  void emit(const Step& s) {
    if (s.access >= 0) {
      emit_dma(s);
      return;
    }
    const R count = s.shape == Shape::Full ? elements_ : rows_;
    const R destination = point(destination_, s.destination);
    const std::string_view form = isa::info(s.opcode).operands;
    if (s.opcode == Opcode::Vfill) {
      b_.Vfill(s.type, destination, count, s.immediate);
    } else if (s.opcode == Opcode::Vcvt) {
      b_.Vcvt(s.type, s.source, destination, point(first_, s.first), count);
    } else if (form == "d,s,t,u") {  // a row reduction: rows x row length
      b_.emit(s.opcode, {s.type, destination, point(first_, s.first), rows_, cols_});
    } else if (form == "d,s,u") {
      b_.emit(s.opcode, {s.type, destination, point(first_, s.first), count});
    } else {
      b_.emit(s.opcode, {s.type, destination, point(first_, s.first), point(second_, s.second), count, s.immediate});
    }
  }

  // One access of the tile. The tile's dimensions, innermost first: the reduced ones (full rows only), the block,
  // then the chunk; neighbours contiguous in this access merge, and what remains is a 1-D, 2-D or 4-D move (or a 2-D
  // load of the transposed tile and a vtr, when only the chunk is contiguous).
  void emit_dma(const Step& s) {
    const FusedAccess& access = *accesses_[s.access];
    const bool load = s.access < static_cast<int>(spec_.loads.size());
    const int64_t bytes = static_cast<int64_t>(isa::element_bytes(access.type));
    const std::vector<int64_t>& outer = layout_.outer;
    const std::vector<int64_t>& outer_strides = layout_.outer_strides[s.access];
    // The address of the tile's first element.
    if (const auto pointer = pointers_.find(access.argument); pointer != pointers_.end()) {
      b_.move(address_, pointer->second);
    } else {
      b_.Ld(address_, kArgumentBlock, 8 * access.argument);
    }
    b_.add_constant(address_, access.offset * bytes);
    const auto add_index = [&](R index, int64_t stride) {
      if (stride == 0) return;
      b_.li(scratch_, stride);
      b_.Mul(scratch_, scratch_, index);
      b_.Add(address_, address_, scratch_);
    };
    for (int d = 0; d < chunk_dim_; ++d) add_index(loop_index_[d], outer_strides[d]);
    if (chunks_ > 1) add_index(chunk_start_, outer_strides[chunk_dim_]);

    struct Dim {
      int64_t count, stride;  // count 0: the chunk's, in chunk_rows_
    };
    std::vector<Dim> dims;
    const auto push = [&](int64_t count, int64_t stride) {
      if (!dims.empty() && dims.back().count != 0 && stride == dims.back().count * dims.back().stride) {
        dims.back().count *= count;
      } else {
        dims.push_back({count, stride});
      }
    };
    if (s.shape == Shape::Full)
      for (int d = static_cast<int>(layout_.reduced.size()) - 1; d >= 0; --d)
        push(layout_.reduced[d], layout_.reduced_strides[s.access][d]);
    for (int d = static_cast<int>(outer.size()) - 1; d > chunk_dim_; --d) push(outer[d], outer_strides[d]);
    dims.push_back({0, outer_strides[chunk_dim_]});
    if (dims.size() == 2 && dims[1].stride == dims[0].count * dims[0].stride)
      dims = {{0, dims[0].stride}};  // one run: all of the tile's count

    const R spad = point(first_, s.first);
    // One dimension left holds the whole tile (a lone chunk dimension is the whole tile too: any block or reduced
    // dimension would be another dimension).
    const R count = dims.size() > 1 ? R(count_) : s.shape == Shape::Full ? R(elements_) : R(rows_);
    const auto immediate = [&](int64_t stride) {
      if (stride < INT32_MIN || stride > INT32_MAX)
        throw Unsupported(
            fmt::format("fused kernel {}: a stride of {} bytes does not fit a DMA immediate", spec_.name, stride));
      return stride;
    };
    const int size = std::countr_zero(static_cast<unsigned>(bytes));
    using enum Opcode;
    if (dims.size() == 1) {
      static constexpr Opcode loads[] = {DmaLoad8, DmaLoad16, DmaLoad32, DmaLoad64};
      static constexpr Opcode stores[] = {DmaStore8, DmaStore16, DmaStore32, DmaStore64};
      if (load) {
        b_.emit(loads[size], {spad, address_, count, immediate(dims[0].stride)});
      } else {
        b_.emit(stores[size], {address_, spad, count, immediate(dims[0].stride)});
      }
    } else if (load && dims.size() == 2 && dims[1].stride == bytes && dims[0].stride != 0) {
      // Contiguous along the chunk, strided within a row (a transposed operand, a sum over an outer dimension): runs
      // of the chunk's elements, one per element of the row, then transposed in place into rows.
      static constexpr Opcode loads[] = {DmaLoad2d8, DmaLoad2d16, DmaLoad2d32, DmaLoad2d64};
      b_.li(count_, dims[0].count);
      b_.emit(loads[size], {spad, address_, chunk_rows_, count_, immediate(dims[0].stride)});
      b_.Vtr(access.type, spad, spad, count_, chunk_rows_);
    } else if (dims.size() == 2 && dims[0].stride == bytes) {
      static constexpr Opcode loads[] = {DmaLoad2d8, DmaLoad2d16, DmaLoad2d32, DmaLoad2d64};
      static constexpr Opcode stores[] = {DmaStore2d8, DmaStore2d16, DmaStore2d32, DmaStore2d64};
      b_.li(count_, dims[0].count);
      if (load) {
        b_.emit(loads[size], {spad, address_, count_, chunk_rows_, immediate(dims[1].stride)});
      } else {
        b_.emit(stores[size], {address_, spad, count_, chunk_rows_, immediate(dims[1].stride)});
      }
    } else {
      if (dims.size() > fused::kDmaDims) throw std::logic_error("a fused tile of more than four DMA dimensions");
      for (int d = 1; d < fused::kDmaDims; ++d) {
        const Dim dim = d < static_cast<int>(dims.size()) ? dims[d] : Dim{1, 0};
        if (dim.count != 0) b_.li(count_, dim.count);
        b_.li(stride_, dim.stride);
        b_.DmaDim(d, dim.count == 0 ? R(chunk_rows_) : R(count_), stride_);
      }
      b_.li(count_, dims[0].count);
      static constexpr Opcode loads[] = {DmaLoad4d8, DmaLoad4d16, DmaLoad4d32, DmaLoad4d64};
      static constexpr Opcode stores[] = {DmaStore4d8, DmaStore4d16, DmaStore4d32, DmaStore4d64};
      if (load) {
        b_.emit(loads[size], {spad, address_, count_, immediate(dims[0].stride)});
      } else {
        b_.emit(stores[size], {address_, spad, count_, immediate(dims[0].stride)});
      }
    }
  }

  const FusedSpec& spec_;
  config::ChipConfig config_;
  Layout layout_;
  std::vector<char> per_row_;
  std::vector<const FusedAccess*> accesses_;  // loads, then stores

  // The plan.
  int node_ = 0;  // the node being planned, for errors
  std::vector<Step> steps_;
  std::vector<Slot> slots_;
  std::vector<Ref> values_, temporaries_;
  std::map<int, int> scalar_index_;                      // constant node -> scalar slot
  std::vector<std::pair<ElementType, double>> scalars_;  // the scalar tile's constants
  std::optional<int> not_one_;                           // the u8 1 that Not xors with

  // The tiles.
  int chunk_dim_ = 0;
  int64_t block_rows_ = 1, chunk_ = 1, chunks_ = 1, tiles_ = 1, tile_rows_ = 1, cores_ = 1;

  KernelBuilder b_;  // before the registers, which it must outlive
  std::vector<Tile> slot_tiles_;
  std::optional<Tile> scalar_tile_;
  Reg tile_, chunk_start_, chunk_rows_, rows_, elements_, cols_;
  std::vector<Reg> loop_index_;
  Reg destination_, first_, second_, address_, scratch_, count_, stride_;
  std::map<int, Reg> pointers_;
};

}  // namespace

Kernel emit_fused(const FusedSpec& spec, const config::ChipConfig& config) {
  if (spec.matmul ||
      std::any_of(spec.nodes.begin(), spec.nodes.end(), [](const FusedNode& node) { return node.op == Op::Product; }))
    throw Unsupported(fmt::format("fused kernel {}: a matrix product's epilogue is not emitted yet", spec.name));
  fused::validate(spec);
  const std::string name = spec.name.empty() ? "fused" : spec.name;
  const bool empty = std::find(spec.sizes.begin(), spec.sizes.end(), 0) != spec.sizes.end();
  const bool stores =
      std::any_of(spec.nodes.begin(), spec.nodes.end(), [](const FusedNode& node) { return node.op == Op::Store; });
  if (empty || !stores) {
    KernelBuilder b(name, config);
    b.describe(empty ? fmt::format("{}: no elements (sizes [{}])", name, fmt::join(spec.sizes, ", "))
                     : fmt::format("{}: no stores", name));
    b.Halt();
    return b.finish(1);
  }
  return FusedEmitter(spec, config, name).build();
}

}  // namespace npusim::emitter
