// Elementwise kernels, built as a pointwise loop: order and collapse dimensions, nest scalar loops over the outer
// ones, tile the innermost one (elements, whole rows, or whole planes or cubes of the two or three innermost), and run
// the op's steps over each tile. Each of the kernel's cores (Kernel::cores, which the launch must match) takes its
// share of the tiles. The builder orders the engines: a tile's loads before its steps, its steps before its store.
//
// Operands may have different element sizes (where's bool condition); every tile holds a tile of the widest, f32 for
// ops computing in f32, whose f16 and bf16 operands pass through staging tiles of their own.
#include "npusim/emitter/elementwise.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <numeric>
#include <optional>

#include "elementwise_table.h"
#include "npusim/emitter/transpose_copy.h"

namespace npusim::emitter {
namespace {

constexpr int kMaxOuterDims = 4;
using elementwise_table::definition;
using elementwise_table::OpDefinition;
using elementwise_table::Step;
using elementwise_table::Value;
using isa::ElementType;

int operand_count(ElementwiseOp op) { return 1 + definition(op).inputs; }

// Whether the op computes in f32 (so its 4-byte operands may hold f16 or bf16, see ElementwiseSpec::float_types):
// all but the copy, the conversion, the byte-moving where and integer arithmetic.
bool computes_in_f32(ElementwiseOp op) {
  using enum ElementwiseOp;
  switch (op) {
    case Copy:
    case Convert:
    case WhereB8:
    case WhereB32:
    case WhereB64:
    case AndB8:
    case OrB8:
    case XorB8:
    case NotBool:
    case AddI32:
    case SubI32:
    case AddI64:
    case SubI64:
    case MulI32:
    case MulI64:
    case RemainderI32:
    case RemainderI64:
    case FloorDivideI32:
    case FloorDivideI64:
    case FmodI32:
    case FmodI64:
    case EqI32:
    case NeI32:
    case LtI32:
    case LeI32:
    case GtI32:
    case GeI32:
    case EqI64:
    case NeI64:
    case LtI64:
    case LeI64:
    case GtI64:
    case GeI64: return false;
    default: return true;
  }
}

// The type operand k holds in memory when it is a float operand held narrower than f32; F32 otherwise.
ElementType narrow_type(const ElementwiseSpec& spec, size_t k) {
  const OpDefinition& op = definition(spec.op);
  const int defined_bytes = k == 0 || k > op.input_bytes.size() ? op.element_bytes : op.input_bytes[k - 1];
  if (!computes_in_f32(spec.op) || defined_bytes != 4 || k >= spec.float_types.size()) return ElementType::F32;
  return spec.float_types[k];
}

// Bytes per element of each operand in memory, output first.
std::vector<int> operand_bytes(const ElementwiseSpec& spec) {
  const OpDefinition& op = definition(spec.op);
  std::vector<int> bytes(1 + op.inputs, op.element_bytes == 0 ? spec.element_bytes : op.element_bytes);
  for (size_t k = 0; k < op.input_bytes.size(); ++k) bytes[1 + k] = op.input_bytes[k];
  if (spec.op == ElementwiseOp::Convert) {
    bytes[0] = spec.element_bytes;
    bytes[1] = static_cast<int>(isa::element_bytes(spec.convert_from));
  }
  for (size_t k = 0; k < bytes.size(); ++k)
    if (narrow_type(spec, k) != ElementType::F32) bytes[k] = static_cast<int>(isa::element_bytes(narrow_type(spec, k)));
  return bytes;
}

// Orders the dimensions by the output's strides, largest first (an elementwise result may be computed in any
// order; a transposed result is walked in its memory order), drops size-1 dimensions and merges neighbours that are
// contiguous in every operand. Strides become bytes.
ElementwiseSpec collapse(const ElementwiseSpec& spec) {
  const std::vector<int> bytes = operand_bytes(spec);
  std::vector<size_t> order(spec.sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return std::abs(spec.strides[0][x]) > std::abs(spec.strides[0][y]); });
  ElementwiseSpec out = spec;
  out.sizes.clear();
  out.strides.assign(spec.strides.size(), {});
  for (size_t dim : order) {
    if (spec.sizes[dim] == 1) continue;
    bool mergeable = !out.sizes.empty();
    for (size_t k = 0; k < spec.strides.size() && mergeable; ++k)
      mergeable = out.strides[k].back() == spec.strides[k][dim] * bytes[k] * spec.sizes[dim];
    if (mergeable) {
      out.sizes.back() *= spec.sizes[dim];
      for (size_t k = 0; k < spec.strides.size(); ++k) out.strides[k].back() = spec.strides[k][dim] * bytes[k];
    } else {
      out.sizes.push_back(spec.sizes[dim]);
      for (size_t k = 0; k < spec.strides.size(); ++k) out.strides[k].push_back(spec.strides[k][dim] * bytes[k]);
    }
  }
  if (out.sizes.empty()) {  // a single element
    out.sizes.push_back(1);
    for (size_t k = 0; k < out.strides.size(); ++k) out.strides[k].push_back(bytes[k]);
  }
  return out;
}

// What one tile of the innermost loops covers: elements of the innermost dimension, whole rows of it, or whole planes
// or cubes of the two or three innermost dimensions (moved by 4-D DMA).
enum class TileShape { Elements, Rows, Planes, Cubes };
bool moved_in_4d(TileShape shape) { return shape == TileShape::Planes || shape == TileShape::Cubes; }

isa::Opcode dma_opcode(bool load, int element_bytes, TileShape shape, bool two_dimensional) {
  using enum isa::Opcode;
  const int size = std::countr_zero(static_cast<unsigned>(element_bytes));  // 0..3 for 1..8 bytes
  if (moved_in_4d(shape)) {
    static constexpr isa::Opcode load4[] = {DmaLoad4d8, DmaLoad4d16, DmaLoad4d32, DmaLoad4d64};
    static constexpr isa::Opcode store4[] = {DmaStore4d8, DmaStore4d16, DmaStore4d32, DmaStore4d64};
    return load ? load4[size] : store4[size];
  }
  if (two_dimensional) {
    static constexpr isa::Opcode load2[] = {DmaLoad2d8, DmaLoad2d16, DmaLoad2d32, DmaLoad2d64};
    static constexpr isa::Opcode store2[] = {DmaStore2d8, DmaStore2d16, DmaStore2d32, DmaStore2d64};
    return load ? load2[size] : store2[size];
  }
  static constexpr isa::Opcode load1[] = {DmaLoad8, DmaLoad16, DmaLoad32, DmaLoad64};
  static constexpr isa::Opcode store1[] = {DmaStore8, DmaStore16, DmaStore32, DmaStore64};
  return load ? load1[size] : store1[size];
}

class ElementwiseKernel {
 public:
  ElementwiseKernel(const ElementwiseSpec& spec, const config::ChipConfig& config, std::string name)
      : spec_(collapse(spec)),
        operands_(operand_count(spec.op)),
        bytes_(operand_bytes(spec)),
        steps_(elementwise_table::steps(spec.op, spec.convert_to, spec.convert_from)),
        b_(std::move(name), config) {
    // The scalars, in the order the steps first name them; a step broadcasts only its second source.
    for (const Step& step : steps_) {
      if (elementwise_table::is_scalar(step.destination) || elementwise_table::is_scalar(step.first))
        throw std::logic_error(fmt::format("{}: a scalar can only be a step's second source", op_name(spec.op)));
      if (elementwise_table::is_scalar(step.second) &&
          std::find(scalars_.begin(), scalars_.end(), step.second) == scalars_.end())
        scalars_.push_back(step.second);
    }
    // Tiles hold f32 for narrow operands, which arrive in (and leave from) staging tiles of their own.
    widest_ = *std::max_element(bytes_.begin(), bytes_.end());
    int64_t staging_bytes_per_element = 0;
    for (int k = 0; k < operands_; ++k)
      if (narrow(k)) {
        widest_ = std::max(widest_, 4);
        staging_bytes_per_element += bytes_[k];
      }
    const int tiles = tile_count();
    // Tiles of a multiple of 64 elements keep to the allocator's 64-byte alignment; the scalars take 64 bytes.
    const int64_t usable = static_cast<int64_t>(config.scratchpad_bytes()) - (scalars_.empty() ? 0 : 64);
    const int64_t elements = usable / (tiles * widest_ + staging_bytes_per_element);
    tile_elements_ = std::max<int64_t>(1, elements / 64 * 64);
    // More cores than tiles would only add idle cores to the launch.
    int64_t total = 1;
    for (int64_t size : spec_.sizes) total *= size;
    cores_ = std::clamp<int64_t>((total + tile_elements_ - 1) / tile_elements_, 1, config.chip_cores);
    if (static_cast<int>(spec_.sizes.size()) - 1 > kMaxOuterDims)
      throw Unsupported(fmt::format("{} dimensions remain after collapsing; the elementwise emitter handles {}",
                                    spec_.sizes.size(), kMaxOuterDims + 1));
    for (const auto& strides : spec_.strides)
      for (int64_t stride : strides)
        if (stride > INT32_MAX || stride < INT32_MIN)
          throw Unsupported(fmt::format("stride of {} bytes does not fit a DMA immediate", stride));
  }

  Kernel build() {
    b_.describe(fmt::format("{}: sizes [{}], byte strides {}", op_name(spec_.op), fmt::join(spec_.sizes, ", "),
                            fmt::join(spec_.strides, " ")));
    for (int k = 0; k < tile_count(); ++k)
      tiles_.push_back(b_.tile(Space::Scratchpad, tile_elements_ * widest_, fmt::format("{}", "ABCDE"[k])));
    for (int k = 0; k < operands_; ++k)
      staging_.push_back(narrow(k) ? std::optional(b_.tile(Space::Scratchpad, tile_elements_ * bytes_[k],
                                                           fmt::format("staging {}", k)))
                                   : std::nullopt);
    if (!scalars_.empty()) {
      scalar_tile_ = b_.tile(Space::Scratchpad, 4 * static_cast<int64_t>(scalars_.size()), "scalars");
      fill_scalars();
    }
    for (int k = 0; k < operands_; ++k) {
      pointers_.push_back(b_.reg(fmt::format("operand {}", k)));
      const bool value = static_cast<size_t>(k) < spec_.values_in_arguments.size() && spec_.values_in_arguments[k];
      if (value)  // the operand's "tensor" is its entry of the argument block
        b_.Addi(pointers_[k], kArgumentBlock, 8 * k);
      else
        b_.Ld(pointers_[k], kArgumentBlock, 8 * k);
    }
    emit_dimension(0);
    b_.Halt();
    return b_.finish(cores_);
  }

 private:
  int last_dim() const { return static_cast<int>(spec_.sizes.size()) - 1; }
  bool narrow(int operand) const { return narrow_type(spec_, operand) != ElementType::F32; }
  // A tile per input (A, B, C), and up to E those the steps use besides; two at least but for a copy, so that an
  // op's tiles (and its split among the cores) do not grow past what was measured best.
  int tile_count() const {
    int tiles = spec_.op == ElementwiseOp::Copy ? 1 : std::max(2, operands_ - 1);
    for (const Step& step : steps_)
      for (Value value : {step.destination, step.first, step.second})
        if (elementwise_table::is_tile(value))
          tiles = std::max(tiles, 1 + static_cast<int>(value) - static_cast<int>(Value::A));
    return tiles;
  }

  // The scalars sit in a tile of their own; the vector engine fills them before any step reads them (one queue).
  void fill_scalars() {
    Reg count = b_.reg("one"), address = b_.reg("scalar");
    b_.li(count, 1);
    for (size_t k = 0; k < scalars_.size(); ++k) {
      const Value value = scalars_[k];
      const uint32_t bits =
          elementwise_table::is_parameter(value)
              ? std::bit_cast<uint32_t>(spec_.parameters[static_cast<int>(value) - static_cast<int>(Value::P0)])
              : elementwise_table::constant_bits(value);
      b_.point(address, *scalar_tile_, 4 * static_cast<int64_t>(k));
      // The immediate is signed: a pattern with the top bit set is written as the negative number with its bits.
      b_.Vfill(ElementType::F32, address, count, static_cast<int32_t>(bits));
    }
  }

  void advance_pointers(int dim, int64_t times) {
    for (int k = 0; k < operands_; ++k) b_.add_constant(pointers_[k], spec_.strides[k][dim] * times);
  }

  void emit_dimension(int dim) {
    if (dim == last_dim()) {
      emit_tiles(last_dim(), tile_elements_, TileShape::Elements);
      return;
    }
    if (dim == last_dim() - 3 && blocks_fit_in_tiles(3)) {
      emit_block_tiles(dim, TileShape::Cubes);
      return;
    }
    if (dim == last_dim() - 2 && blocks_fit_in_tiles(2)) {
      emit_block_tiles(dim, TileShape::Planes);
      return;
    }
    if (dim == last_dim() - 1 && rows_fit_in_tiles()) {
      emit_row_tiles(dim);
      return;
    }
    Reg counter = b_.reg(fmt::format("dimension {} counter", dim));
    const Label loop = b_.label();
    b_.li(counter, spec_.sizes[dim]);
    b_.bind(loop);
    emit_dimension(dim + 1);
    advance_pointers(dim, 1);
    b_.Addi(counter, counter, -1);
    b_.Bne(counter, kZero, loop);
    advance_pointers(dim, -spec_.sizes[dim]);
  }

  // Whole rows of the innermost dimension fit a tile several times, and every operand's rows are contiguous or
  // one element repeated: tiles of several rows, each moved by one 2-D DMA (a zero row stride repeats a broadcast
  // row), or, for an input whose rows repeat one element (a per-row broadcast), a 4-D DMA with a zero inner stride
  // whose repeated reads the DMA engine serves from its buffer.
  bool rows_fit_in_tiles() const {
    for (size_t k = 0; k < spec_.strides.size(); ++k)
      if (spec_.strides[k][last_dim()] != bytes_[k] && !repeats_within_rows(k)) return false;
    return spec_.sizes[last_dim()] * 2 <= tile_elements_;
  }
  bool repeats_within_rows(size_t operand) const { return operand > 0 && spec_.strides[operand][last_dim()] == 0; }

  // Whole planes (cubes) of the two (three) innermost dimensions fit a tile several times, rows as above: tiles of
  // several of them, each operand moved by one 4-D DMA, so that small feature maps and im2col patches move in large
  // tiles.
  bool blocks_fit_in_tiles(int inner_dims) const {
    return rows_fit_in_tiles() && block_elements(last_dim() - inner_dims) * 2 <= tile_elements_;
  }
  int64_t block_elements(int dim) const {  // of the dimensions inside `dim`
    int64_t elements = 1;
    for (int inner = dim + 1; inner <= last_dim(); ++inner) elements *= spec_.sizes[inner];
    return elements;
  }

  void emit_block_tiles(int dim, TileShape shape) {
    if (shape == TileShape::Planes) {  // 4-D loads of planes leave dimension 3 at one
      Reg one = b_.reg("one");
      b_.li(one, 1);
      b_.DmaDim(3, one, kZero);
    }
    emit_tiles(dim, tile_elements_ / block_elements(dim), shape);
  }

  void emit_row_tiles(int dim) {
    for (int k = 0; k < operands_; ++k)
      if (repeats_within_rows(k)) {  // 4-D loads use dimension 1 only
        Reg one = b_.reg("one");
        b_.li(one, 1);
        b_.DmaDim(2, one, kZero);
        b_.DmaDim(3, one, kZero);
        break;
      }
    emit_tiles(dim, tile_elements_ / spec_.sizes[last_dim()], TileShape::Rows);
  }

  // What one tile's moves need besides the operand pointers.
  struct TileSize {
    R elements;    // in the tile
    R rows;        // of a row, plane or cube tile
    R row_length;  // the innermost dimension's size
  };

  // The tiles along `dim`, `per_tile` units each (elements, or rows of the innermost dimension), shared among the
  // cores: core c takes tiles c, c + n, c + 2n, ... and the partial last tile goes to core (full tiles mod n).
  // Pointers are saved and restored around it, so the enclosing loops see them unchanged.
  void emit_tiles(int dim, int64_t per_tile, TileShape shape) {
    const int64_t full_tiles = spec_.sizes[dim] / per_tile, remainder = spec_.sizes[dim] % per_tile;
    const int64_t unit_elements = block_elements(dim);  // an element, a row, a plane or a cube
    Reg elements = b_.reg("tile elements"), rows = b_.reg("tile rows"), row_length = b_.reg("row length");
    Reg core = b_.reg("core"), scratch = b_.reg("scratch");
    if (shape != TileShape::Elements) b_.li(row_length, spec_.sizes[last_dim()]);
    const TileSize size{elements, rows, row_length};
    const auto set_tile_size = [&](int64_t units) {
      if (shape != TileShape::Elements) b_.li(rows, units);
      b_.li(elements, units * unit_elements);
    };
    std::vector<Reg> saved;
    for (int k = 0; k < operands_; ++k) {
      saved.push_back(b_.reg(fmt::format("saved operand {}", k)));
      b_.move(saved[k], pointers_[k]);
    }
    b_.Csrr(core, isa::Csr::CoreId);
    if (full_tiles > 0) {
      Reg tile = b_.reg("tile");
      const Label loop = b_.label(), done = b_.label();
      b_.li(scratch, full_tiles);
      b_.Bgeu(core, scratch, done);
      for (int k = 0; k < operands_; ++k) {  // to this core's first tile
        b_.li(scratch, spec_.strides[k][dim] * per_tile);
        b_.Mul(scratch, scratch, core);
        b_.Add(pointers_[k], pointers_[k], scratch);
      }
      b_.move(tile, core);
      set_tile_size(per_tile);
      b_.bind(loop);
      emit_tile(dim, shape, size);
      advance_pointers(dim, per_tile * cores_);
      b_.Addi(tile, tile, cores_);
      b_.li(scratch, full_tiles);
      b_.Bltu(tile, scratch, loop);
      b_.bind(done);
    }
    if (remainder > 0) {
      const Label skip = b_.label();
      b_.li(scratch, full_tiles % cores_);
      b_.Bne(core, scratch, skip);
      restore_pointers(saved);
      advance_pointers(dim, full_tiles * per_tile);
      set_tile_size(remainder);
      emit_tile(dim, shape, size);
      b_.bind(skip);
    }
    restore_pointers(saved);
  }

  void restore_pointers(const std::vector<Reg>& saved) {
    for (int k = 0; k < operands_; ++k) b_.move(pointers_[k], saved[k]);
  }

  // The 4-D DMA shape of operand k's tile: dimension 1 the rows of a plane, then the tile's planes; or the rows of a
  // plane, the planes of a cube, and the tile's cubes.
  void set_block_shape(int operand, TileShape shape, const TileSize& size) {
    const std::vector<int64_t>& strides = spec_.strides[operand];
    const int outer = shape == TileShape::Cubes ? 3 : 2;
    Reg count = b_.reg("dma count"), stride = b_.reg("dma stride");
    for (int inner = 1; inner < outer; ++inner) {
      b_.li(count, spec_.sizes[last_dim() - inner]);
      b_.li(stride, strides[last_dim() - inner]);
      b_.DmaDim(inner, count, stride);
    }
    b_.li(stride, strides[last_dim() - outer]);
    b_.DmaDim(outer, size.rows, stride);
  }

  // Moves one operand's tile: 1-D along `dim`, 2-D with rows along `dim`, or planes or cubes along `dim` (by 4-D DMA,
  // its shape set by set_block_shape).
  void move(bool load, int operand, R buffer, int dim, TileShape shape, const TileSize& size) {
    const R pointer = pointers_[operand];
    const int64_t stride = spec_.strides[operand][dim];
    const bool rows = shape == TileShape::Rows;
    const R spad_first = load ? buffer : pointer, dram_first = load ? pointer : buffer;
    if (moved_in_4d(shape)) {
      set_block_shape(operand, shape, size);
      b_.emit(dma_opcode(load, bytes_[operand], shape, false),
              {spad_first, dram_first, size.row_length, spec_.strides[operand][last_dim()]});
    } else if (rows && load && repeats_within_rows(operand)) {
      Reg row_stride = b_.reg("row stride");
      b_.li(row_stride, stride);
      b_.DmaDim(1, size.rows, row_stride);
      b_.emit(dma_opcode(true, bytes_[operand], TileShape::Planes, false), {buffer, pointer, size.row_length, 0});
    } else if (rows) {
      b_.emit(dma_opcode(load, bytes_[operand], shape, true),
              {spad_first, dram_first, size.row_length, size.rows, stride});
    } else {
      b_.emit(dma_opcode(load, bytes_[operand], shape, false), {spad_first, dram_first, size.elements, stride});
    }
  }

  // One tile: load the inputs (narrow ones into their staging tiles, then widened), run the steps, store (a narrow
  // result rounded into its staging tile first).
  void emit_tile(int dim, TileShape shape, const TileSize& size) {
    std::vector<Reg> tile_registers;
    for (int k = 0; k < tile_count(); ++k) {
      tile_registers.push_back(b_.reg(fmt::format("tile {}", "ABCDE"[k])));
      b_.point(tile_registers[k], tiles_[k]);
    }
    Reg staging = b_.reg("staging");
    for (int input = 1; input < operands_; ++input) {
      // Input k goes to tile k - 1 (a copy's one input to its one tile).
      const R destination = tile_registers[input - 1];
      if (narrow(input)) b_.point(staging, *staging_[input]);
      move(true, input, narrow(input) ? R(staging) : destination, dim, shape, size);
      if (narrow(input)) b_.Vcvt(ElementType::F32, narrow_type(spec_, input), destination, staging, size.elements);
    }
    run_steps(tile_registers, size.elements);
    R result = tile_registers[0];
    if (narrow(0)) {
      b_.point(staging, *staging_[0]);
      b_.Vcvt(narrow_type(spec_, 0), ElementType::F32, staging, tile_registers[0], size.elements);
      result = staging;
    }
    move(false, 0, result, dim, shape, size);
  }

  void run_steps(const std::vector<Reg>& tile_registers, R elements) {
    Reg scalar = b_.reg("scalar");
    const auto operand = [&](Value value) -> R {
      if (elementwise_table::is_tile(value))
        return tile_registers[static_cast<int>(value) - static_cast<int>(Value::A)];
      const auto index = std::find(scalars_.begin(), scalars_.end(), value) - scalars_.begin();
      b_.point(scalar, *scalar_tile_, 4 * index);
      return scalar;
    };
    for (const Step& step : steps_) {
      const R destination = operand(step.destination), first = operand(step.first);
      if (step.opcode == isa::Opcode::Vcvt) {
        b_.Vcvt(step.type, step.source, destination, first, elements);
      } else if (step.second == Value::None) {
        b_.emit(step.opcode, {step.type, destination, first, elements});
      } else {
        const R second = operand(step.second);
        const int64_t broadcast = elementwise_table::is_scalar(step.second) ? 1 : 0;
        b_.emit(step.opcode, {step.type, destination, first, second, elements, broadcast});
      }
    }
  }

  ElementwiseSpec spec_;
  int operands_;
  std::vector<int> bytes_;  // per operand, output first
  std::vector<Step> steps_;
  std::vector<Value> scalars_;  // the parameters and constants the steps name, in the scalar tile's order
  int widest_ = 4;
  int64_t cores_ = 1;
  int64_t tile_elements_ = 0;
  KernelBuilder b_;
  std::vector<Tile> tiles_;
  std::vector<std::optional<Tile>> staging_;  // per operand, for narrow operands
  std::optional<Tile> scalar_tile_;
  std::vector<Reg> pointers_;
};

}  // namespace

std::string op_name(ElementwiseOp op) { return definition(op).name; }
int input_count(ElementwiseOp op) { return definition(op).inputs; }
int element_bytes(ElementwiseOp op) { return definition(op).element_bytes; }

Kernel emit_elementwise(const ElementwiseSpec& spec, const config::ChipConfig& config) {
  if (static_cast<int>(spec.strides.size()) != operand_count(spec.op))
    throw std::invalid_argument(
        fmt::format("{} takes {} operands, {} given", op_name(spec.op), operand_count(spec.op), spec.strides.size()));
  for (const auto& strides : spec.strides)
    if (strides.size() != spec.sizes.size())
      throw std::invalid_argument("every operand needs one stride per dimension");
  for (int64_t size : spec.sizes)
    if (size < 0) throw std::invalid_argument(fmt::format("negative size {} in an elementwise kernel", size));
  if (spec.op == ElementwiseOp::Convert && spec.element_bytes != static_cast<int>(isa::element_bytes(spec.convert_to)))
    throw std::invalid_argument("a conversion's element_bytes must be its result type's");
  if (definition(spec.op).element_bytes != 0 && spec.element_bytes != operand_bytes(spec)[0])
    throw std::invalid_argument(
        fmt::format("{} takes {}-byte elements, not {}", op_name(spec.op), operand_bytes(spec)[0], spec.element_bytes));
  for (size_t k = 0; k < spec.values_in_arguments.size() && k < spec.strides.size(); ++k)
    if (spec.values_in_arguments[k] &&
        (k == 0 || std::any_of(spec.strides[k].begin(), spec.strides[k].end(), [](int64_t s) { return s != 0; })))
      throw std::invalid_argument(
          fmt::format("operand {} of {} cannot be a value in the argument block", k, op_name(spec.op)));
  for (ElementType type : spec.float_types)
    if (!isa::is_float(type))
      throw std::invalid_argument(
          fmt::format("{} holds float operands as f32, f16 or bf16, not {}", op_name(spec.op), isa::type_name(type)));
  std::string name = spec.op == ElementwiseOp::Convert ? fmt::format("convert_{}_{}", isa::type_name(spec.convert_to),
                                                                     isa::type_name(spec.convert_from))
                                                       : op_name(spec.op);
  // A half-precision kernel is named for its tensors' type: add_bf16, not add_f32.
  for (size_t k = 0; k < operand_bytes(spec).size(); ++k)
    if (narrow_type(spec, k) != ElementType::F32 && name.ends_with("_f32")) {
      name = fmt::format("{}_{}", name.substr(0, name.size() - 4), isa::type_name(narrow_type(spec, k)));
      break;
    }
  const bool empty = std::find(spec.sizes.begin(), spec.sizes.end(), 0) != spec.sizes.end();
  if (spec.op == ElementwiseOp::Copy && !empty) {  // a transpose moves tiles, not single elements
    const ElementwiseSpec collapsed = collapse(spec);
    if (auto transpose = emit_transpose_copy(
            {spec.element_bytes, collapsed.sizes, collapsed.strides[0], collapsed.strides[1]}, config))
      return *transpose;
  }
  if (empty) {
    KernelBuilder b(name, config);
    b.describe("no elements");
    b.Halt();
    return b.finish(1);
  }
  return ElementwiseKernel(spec, config, name).build();
}

}  // namespace npusim::emitter
