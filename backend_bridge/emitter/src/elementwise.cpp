// Elementwise kernels: order and collapse dimensions, nest scalar loops over the outer ones, tile the innermost one
// (elements, whole rows, or whole planes or cubes of the two or three innermost).
//
// Register use: r1 argument block, r2..r5 operand pointers (one per operand), r6..r9 outer loop counters,
// r10 tile index, r11 elements in the current tile, r12 scratch, r13/r14 row length and rows of a 2-D tile,
// r15 core id, r16..r18 scratchpad buffers (the third for a third input or for scratch), r19 a fourth (scratch),
// r20..r23 saved operand pointers, r24 a row stride for dma.dim, r25..r31 addresses of the scratchpad constants the op
// uses (one f32 each, after the buffers). Operands may have different element sizes (where's bool condition); every
// buffer holds a tile of the widest, f32 for ops computing in f32, whose f16 and bf16 operands pass through staging
// tiles after the constants. Each of the kernel's cores (Kernel::cores, which the launch must match) takes its share of
// the tiles.
#include "npusim/emitter/elementwise.h"

#include <fmt/format.h>

#include <fmt/args.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <bit>
#include <numeric>

#include "elementwise_table.h"
#include "npusim/emitter/assembly_writer.h"
#include "npusim/emitter/transpose_copy.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

constexpr int kFirstPointer = 2;
constexpr int kFirstOuterCounter = 6;
constexpr int kMaxOuterDims = 4;
constexpr int kTileCounter = 10;
constexpr int kTileElements = 11;
constexpr int kScratch = 12;
constexpr int kRowLength = 13;
constexpr int kTileRows = 14;
constexpr int kCore = 15;
constexpr int kBufferA = 16;
constexpr int kBufferB = 17;
constexpr int kBufferC = 18;
constexpr int kBufferD = 19;
constexpr int kFirstSavedPointer = 20;

constexpr int kRowStride = 24;  // a broadcast row operand's row stride, for dma.dim

constexpr int kFirstConstant = 25;

constexpr int kMaxConstants = 32 - kFirstConstant;  // each constant's address takes a register, r25 upward
constexpr int kParameters = 3;                      // {p0}, {p1}, {p2}: ElementwiseSpec::parameters
using elementwise_table::Constant;
using elementwise_table::definition;
using elementwise_table::OpDefinition;

int operand_count(ElementwiseOp op) { return 1 + definition(op).inputs; }

bool uses(ElementwiseOp op, std::string_view name) {
  for (const char* step : definition(op).steps)
    if (std::string_view(step).find(fmt::format("{{{}}}", name)) != std::string_view::npos) return true;
  return false;
}
// The constants the op's steps name, the spec's parameters among them, in the order their registers take.
std::vector<Constant> constants_of(const ElementwiseSpec& spec) {
  std::vector<Constant> used;
  for (const Constant& constant : elementwise_table::constants())
    if (uses(spec.op, constant.name)) used.push_back(constant);
  for (int k = 0; k < kParameters; ++k)
    if (const std::string name = fmt::format("p{}", k); uses(spec.op, name))
      used.push_back({name, std::bit_cast<uint32_t>(spec.parameters[k])});
  if (static_cast<int>(used.size()) > kMaxConstants)
    throw std::logic_error(fmt::format("{} names more than {} constants", definition(spec.op).name, kMaxConstants));
  return used;
}
// Scratchpad tiles: the copy's one, the inputs' two, a third for a third input or the scratch tile {c}, and a
// fourth for the scratch tile {d}.
int buffer_count(ElementwiseOp op) { return op == ElementwiseOp::Copy ? 1 : uses(op, "d") ? 4 : uses(op, "c") ? 3 : 2; }

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
isa::ElementType narrow_type(const ElementwiseSpec& spec, size_t k) {
  const OpDefinition& op = definition(spec.op);
  const int defined_bytes = k == 0 || k > op.input_bytes.size() ? op.element_bytes : op.input_bytes[k - 1];
  if (!computes_in_f32(spec.op) || defined_bytes != 4 || k >= spec.float_types.size()) return isa::ElementType::F32;
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
    if (narrow_type(spec, k) != isa::ElementType::F32)
      bytes[k] = static_cast<int>(isa::element_bytes(narrow_type(spec, k)));
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

class ElementwiseEmitter {
 public:
  ElementwiseEmitter(const ElementwiseSpec& spec, const config::ChipConfig& config)
      : spec_(collapse(spec)),
        operands_(operand_count(spec.op)),
        bytes_(operand_bytes(spec)),
        constants_(constants_of(spec)) {
    // Buffers hold f32 for narrow operands, which arrive in (and leave from) staging tiles after the constants.
    widest_ = *std::max_element(bytes_.begin(), bytes_.end());
    int64_t staging_bytes_per_element = 0;
    for (int k = 0; k < operands_; ++k)
      if (narrow_type(spec_, k) != isa::ElementType::F32) {
        widest_ = std::max(widest_, 4);
        staging_bytes_per_element += bytes_[k];
      }
    const int buffers = buffer_count(spec_.op);
    const int64_t constant_bytes = static_cast<int64_t>(constants_.size()) * 4;
    const int64_t elements = (static_cast<int64_t>(config.scratchpad_bytes()) - constant_bytes) /
                             (buffers * widest_ + staging_bytes_per_element);
    tile_elements_ = std::max<int64_t>(1, elements / 64 * 64);
    int64_t staging = buffers * tile_elements_ * widest_ + constant_bytes;
    for (int k = 0; k < operands_; ++k) {
      staging_.push_back(staging);
      if (narrow_type(spec_, k) != isa::ElementType::F32) staging += tile_elements_ * bytes_[k];
    }
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

  int64_t cores() const { return cores_; }

  std::string emit() {
    writer_.comment(fmt::format("{}: sizes [{}], byte strides {}", op_name(spec_.op), fmt::join(spec_.sizes, ", "),
                                fmt::join(spec_.strides, " ")));
    for (int k = 0; k < operands_; ++k) {
      const bool value = static_cast<size_t>(k) < spec_.values_in_arguments.size() && spec_.values_in_arguments[k];
      if (value)  // the operand's "tensor" is its entry of the argument block
        writer_.line("addi r{}, r1, {}", kFirstPointer + k, 8 * k);
      else
        writer_.line("ld r{}, {}(r1)", kFirstPointer + k, 8 * k);
    }
    writer_.line("li r{}, 0", kBufferA);
    writer_.line("li r{}, {}", kBufferB, tile_elements_ * widest_);
    if (buffer_count(spec_.op) >= 3) writer_.line("li r{}, {}", kBufferC, 2 * tile_elements_ * widest_);
    if (buffer_count(spec_.op) >= 4) writer_.line("li r{}, {}", kBufferD, 3 * tile_elements_ * widest_);
    if (!constants_.empty()) emit_constants();
    emit_dimension(0);
    writer_.line("halt");
    return writer_.text();
  }

 private:
  int last_dim() const { return static_cast<int>(spec_.sizes.size()) - 1; }

  // The constants sit after the buffers; the vector engine fills them before any tile reaches it (one queue).
  void emit_constants() {
    writer_.line("li r{}, 1", kScratch);
    for (size_t k = 0; k < constants_.size(); ++k) {
      const int reg = kFirstConstant + static_cast<int>(k);
      writer_.load_constant(reg, buffer_count(spec_.op) * tile_elements_ * widest_ + 4 * static_cast<int64_t>(k));
      // The immediate is signed: a pattern with the top bit set is written as the negative number with its bits.
      writer_.line("vfill.f32 r{}, r{}, {}", reg, kScratch, static_cast<int32_t>(constants_[k].bits));
    }
  }

  void emit_compute() {
    const std::string a = fmt::format("r{}", kBufferA), b = fmt::format("r{}", kBufferB),
                      c = fmt::format("r{}", kBufferC), d = fmt::format("r{}", kBufferD),
                      n = fmt::format("r{}", kTileElements);
    std::vector<std::string> constants;
    for (size_t k = 0; k < constants_.size(); ++k) constants.push_back(fmt::format("r{}", kFirstConstant + k));
    fmt::dynamic_format_arg_store<fmt::format_context> names;
    names.push_back(fmt::arg("a", a));
    names.push_back(fmt::arg("b", b));
    names.push_back(fmt::arg("c", c));
    names.push_back(fmt::arg("d", d));
    names.push_back(fmt::arg("n", n));
    const std::string to(isa::type_name(spec_.convert_to)), from(isa::type_name(spec_.convert_from));
    names.push_back(fmt::arg("to", to));
    names.push_back(fmt::arg("from", from));
    for (size_t k = 0; k < constants_.size(); ++k) names.push_back(fmt::arg(constants_[k].name.c_str(), constants[k]));
    for (const char* step : definition(spec_.op).steps) writer_.line("{}", fmt::vformat(step, names));
  }

  void advance_pointers(int dim, int64_t times) {
    for (int k = 0; k < operands_; ++k)
      writer_.add_constant(kFirstPointer + k, spec_.strides[k][dim] * times, kScratch);
  }

  void emit_dimension(int dim) {
    if (dim == last_dim()) {
      emit_innermost();
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
    const int counter = kFirstOuterCounter + dim;
    const std::string loop = writer_.new_label(fmt::format("dim{}", dim));
    writer_.load_constant(counter, spec_.sizes[dim]);
    writer_.label(loop);
    emit_dimension(dim + 1);
    advance_pointers(dim, 1);
    writer_.line("addi r{0}, r{0}, -1", counter);
    writer_.line("bne r{}, r0, {}", counter, loop);
    advance_pointers(dim, -spec_.sizes[dim]);
  }

  void emit_innermost() { emit_tiles(last_dim(), tile_elements_, TileShape::Elements); }

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
    writer_.load_constant(kRowLength, spec_.sizes[last_dim()]);
    if (shape == TileShape::Planes) {  // 4-D loads of planes leave dimension 3 at one
      writer_.line("li r{}, 1", kRowStride);
      writer_.line("dma.dim 3, r{}, r0", kRowStride);
    }
    emit_tiles(dim, tile_elements_ / block_elements(dim), shape);
  }

  // The 4-D DMA shape of operand k's tile: dimension 1 the rows of a plane, then the tile's planes (kTileRows of
  // them); or the rows of a plane, the planes of a cube, and the tile's cubes.
  void set_block_shape(int operand, TileShape shape) {
    const std::vector<int64_t>& strides = spec_.strides[operand];
    const int outer = shape == TileShape::Cubes ? 3 : 2;
    for (int inner = 1; inner < outer; ++inner) {
      writer_.load_constant(kScratch, spec_.sizes[last_dim() - inner]);
      writer_.load_constant(kRowStride, strides[last_dim() - inner]);
      writer_.line("dma.dim {}, r{}, r{}", inner, kScratch, kRowStride);
    }
    writer_.load_constant(kRowStride, strides[last_dim() - outer]);
    writer_.line("dma.dim {}, r{}, r{}", outer, kTileRows, kRowStride);
  }

  void emit_row_tiles(int dim) {
    writer_.load_constant(kRowLength, spec_.sizes[last_dim()]);
    for (int k = 0; k < operands_; ++k)
      if (repeats_within_rows(k)) {  // 4-D loads use dimension 1 only
        writer_.line("li r{}, 1", kRowStride);
        writer_.line("dma.dim 2, r{}, r0", kRowStride);
        writer_.line("dma.dim 3, r{}, r0", kRowStride);
        break;
      }
    emit_tiles(dim, tile_elements_ / spec_.sizes[last_dim()], TileShape::Rows);
  }

  // The tiles along `dim`, `per_tile` units each (elements, or rows of the innermost dimension), shared among the
  // cores: core c takes tiles c, c + n, c + 2n, ... and the partial last tile goes to core (full tiles mod n).
  // Pointers are saved and restored around it, so the enclosing loops see them unchanged.
  void emit_tiles(int dim, int64_t per_tile, TileShape shape) {
    const int64_t full_tiles = spec_.sizes[dim] / per_tile, remainder = spec_.sizes[dim] % per_tile;
    const int64_t unit_elements = block_elements(dim);  // an element, a row, a plane or a cube
    const auto set_tile_size = [&](int64_t units) {
      if (shape != TileShape::Elements) writer_.load_constant(kTileRows, units);
      writer_.load_constant(kTileElements, units * unit_elements);
    };
    for (int k = 0; k < operands_; ++k) writer_.line("addi r{}, r{}, 0", kFirstSavedPointer + k, kFirstPointer + k);
    writer_.line("csrr r{}, coreid", kCore);
    if (full_tiles > 0) {
      const std::string loop = writer_.new_label("tiles"), done = writer_.new_label("tiles_done");
      writer_.load_constant(kScratch, full_tiles);
      writer_.line("bgeu r{}, r{}, {}", kCore, kScratch, done);
      for (int k = 0; k < operands_; ++k) {  // to this core's first tile
        writer_.load_constant(kScratch, spec_.strides[k][dim] * per_tile);
        writer_.line("mul r{0}, r{0}, r{1}", kScratch, kCore);
        writer_.line("add r{0}, r{0}, r{1}", kFirstPointer + k, kScratch);
      }
      writer_.line("addi r{}, r{}, 0", kTileCounter, kCore);
      set_tile_size(per_tile);
      writer_.label(loop);
      emit_tile(dim, shape);
      advance_pointers(dim, per_tile * cores_);
      writer_.line("addi r{0}, r{0}, {1}", kTileCounter, cores_);
      writer_.load_constant(kScratch, full_tiles);
      writer_.line("bltu r{}, r{}, {}", kTileCounter, kScratch, loop);
      writer_.label(done);
    }
    if (remainder > 0) {
      const std::string skip = writer_.new_label("remainder_done");
      writer_.load_constant(kScratch, full_tiles % cores_);
      writer_.line("bne r{}, r{}, {}", kCore, kScratch, skip);
      restore_pointers();
      advance_pointers(dim, full_tiles * per_tile);
      set_tile_size(remainder);
      emit_tile(dim, shape);
      writer_.label(skip);
    }
    restore_pointers();
  }

  void restore_pointers() {
    for (int k = 0; k < operands_; ++k) writer_.line("addi r{}, r{}, 0", kFirstPointer + k, kFirstSavedPointer + k);
  }

  // Moves one operand's tile: 1-D along `dim`, 2-D with rows along `dim` (kTileRows rows of kRowLength), or
  // planes or cubes along `dim` (by 4-D DMA, its shape set by set_block_shape).
  void move(bool load, int operand, int buffer, int dim, TileShape shape) {
    const int bits = bytes_[operand] * 8;
    const int pointer = kFirstPointer + operand;
    const int64_t stride = spec_.strides[operand][dim];
    const bool rows = shape == TileShape::Rows;
    if (moved_in_4d(shape))
      writer_.line("dma.{}4.b{} r{}, r{}, r{}, {}", load ? "ld" : "st", bits, load ? buffer : pointer,
                   load ? pointer : buffer, kRowLength, spec_.strides[operand][last_dim()]);
    else if (rows && load && repeats_within_rows(operand)) {
      writer_.load_constant(kRowStride, stride);
      writer_.line("dma.dim 1, r{}, r{}", kTileRows, kRowStride);
      writer_.line("dma.ld4.b{} r{}, r{}, r{}, 0", bits, buffer, pointer, kRowLength);
    } else if (rows && load)
      writer_.line("dma.ld2.b{} r{}, r{}, r{}, r{}, {}", bits, buffer, pointer, kRowLength, kTileRows, stride);
    else if (rows)
      writer_.line("dma.st2.b{} r{}, r{}, r{}, r{}, {}", bits, pointer, buffer, kRowLength, kTileRows, stride);
    else if (load)
      writer_.line("dma.ld.b{} r{}, r{}, r{}, {}", bits, buffer, pointer, kTileElements, stride);
    else
      writer_.line("dma.st.b{} r{}, r{}, r{}, {}", bits, pointer, buffer, kTileElements, stride);
  }

  bool narrow(int operand) const { return narrow_type(spec_, operand) != isa::ElementType::F32; }
  std::string_view narrow_name(int operand) const { return isa::type_name(narrow_type(spec_, operand)); }

  // One tile: load the inputs (narrow ones into their staging tiles, then widened), compute, store (a narrow result
  // rounded into its staging tile first); fences order the engines because each step reads the previous one's
  // scratchpad results.
  void emit_tile(int dim, TileShape shape) {
    const int buffers[] = {kBufferA, kBufferB, kBufferC};
    for (int input = 1; input < operands_; ++input) {
      if (moved_in_4d(shape)) set_block_shape(input, shape);
      if (narrow(input)) writer_.load_constant(kScratch, staging_[input]);
      move(true, input, narrow(input) ? kScratch : buffers[input - 1], dim, shape);
    }
    if (!definition(spec_.op).steps.empty()) {
      writer_.line("fence");
      for (int input = 1; input < operands_; ++input)
        if (narrow(input)) {
          writer_.load_constant(kScratch, staging_[input]);
          writer_.line("vcvt.f32.{} r{}, r{}, r{}", narrow_name(input), buffers[input - 1], kScratch, kTileElements);
        }
      emit_compute();
    }
    int result = kBufferA;
    if (moved_in_4d(shape)) set_block_shape(0, shape);
    if (narrow(0)) {
      writer_.load_constant(kScratch, staging_[0]);
      writer_.line("vcvt.{}.f32 r{}, r{}, r{}", narrow_name(0), kScratch, kBufferA, kTileElements);
      result = kScratch;
    }
    writer_.line("fence");
    move(false, 0, result, dim, shape);
    writer_.line("fence");
  }

  ElementwiseSpec spec_;
  int operands_;
  std::vector<int> bytes_;  // per operand, output first
  std::vector<Constant> constants_;
  std::vector<int64_t> staging_;  // per operand, the scratchpad address of its staging tile (narrow operands)
  int widest_ = 4;
  int64_t cores_ = 1;
  int64_t tile_elements_ = 0;
  AssemblyWriter writer_;
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
  for (isa::ElementType type : spec.float_types)
    if (!isa::is_float(type))
      throw std::invalid_argument(
          fmt::format("{} holds float operands as f32, f16 or bf16, not {}", op_name(spec.op), isa::type_name(type)));
  Kernel kernel;
  kernel.name = spec.op == ElementwiseOp::Convert
                    ? fmt::format("convert_{}_{}", isa::type_name(spec.convert_to), isa::type_name(spec.convert_from))
                    : op_name(spec.op);
  // A half-precision kernel is named for its tensors' type: add_bf16, not add_f32.
  for (size_t k = 0; k < operand_bytes(spec).size(); ++k)
    if (narrow_type(spec, k) != isa::ElementType::F32 && kernel.name.ends_with("_f32")) {
      kernel.name =
          fmt::format("{}_{}", kernel.name.substr(0, kernel.name.size() - 4), isa::type_name(narrow_type(spec, k)));
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
    kernel.words = isa::assemble("    halt\n", kernel.name + ".s");
  } else {
    ElementwiseEmitter emitter(spec, config);
    kernel.words = isa::assemble(emitter.emit(), kernel.name + ".s");
    kernel.cores = emitter.cores();
  }
  return kernel;
}

}  // namespace npusim::emitter
