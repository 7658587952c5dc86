// Elementwise kernels: collapse dimensions, nest scalar loops over the outer ones, tile the innermost one.
//
// Register use: r1 argument block, r2.. operand pointers (one per operand), r5..r8 outer loop counters,
// r9 tile index, r10 elements in the current tile, r11 scratch, r12/r13 row length and rows of a 2-D tile,
// r14 core id, r20/r21 scratchpad buffers, r22.. saved operand pointers. Each of the kernel's cores (Kernel::cores,
// which the launch must match) takes its share of the tiles.
#include "npusim/emitter/elementwise.h"

#include <fmt/format.h>

#include <fmt/ranges.h>
#include <algorithm>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

constexpr int kFirstPointer = 2;
constexpr int kFirstOuterCounter = 5;
constexpr int kMaxOuterDims = 4;
constexpr int kTileCounter = 9;
constexpr int kTileElements = 10;
constexpr int kScratch = 11;
constexpr int kRowLength = 12;
constexpr int kTileRows = 13;
constexpr int kCore = 14;
constexpr int kFirstSavedPointer = 22;
constexpr int kBufferA = 20;
constexpr int kBufferB = 21;

int operand_count(ElementwiseOp op) { return op == ElementwiseOp::Copy ? 2 : 3; }

const char* vector_mnemonic(ElementwiseOp op) {
  switch (op) {
    case ElementwiseOp::AddF32: return "vadd.f32";
    case ElementwiseOp::MulF32: return "vmul.f32";
    case ElementwiseOp::MaxF32: return "vmax.f32";
    case ElementwiseOp::MinF32: return "vmin.f32";
    case ElementwiseOp::Copy: break;
  }
  throw std::logic_error("a copy has no vector instruction");
}

// Drops size-1 dimensions and merges neighbours that are contiguous in every operand. Strides become bytes.
ElementwiseSpec collapse(const ElementwiseSpec& spec) {
  ElementwiseSpec out{spec.op, spec.element_bytes, {}, std::vector<std::vector<int64_t>>(spec.strides.size())};
  for (size_t dim = 0; dim < spec.sizes.size(); ++dim) {
    if (spec.sizes[dim] == 1) continue;
    bool mergeable = !out.sizes.empty();
    for (size_t k = 0; k < spec.strides.size() && mergeable; ++k)
      mergeable = out.strides[k].back() == spec.strides[k][dim] * spec.element_bytes * spec.sizes[dim];
    if (mergeable) {
      out.sizes.back() *= spec.sizes[dim];
      for (size_t k = 0; k < spec.strides.size(); ++k)
        out.strides[k].back() = spec.strides[k][dim] * spec.element_bytes;
    } else {
      out.sizes.push_back(spec.sizes[dim]);
      for (size_t k = 0; k < spec.strides.size(); ++k)
        out.strides[k].push_back(spec.strides[k][dim] * spec.element_bytes);
    }
  }
  if (out.sizes.empty()) {  // a single element
    out.sizes.push_back(1);
    for (auto& strides : out.strides) strides.push_back(spec.element_bytes);
  }
  return out;
}

class ElementwiseEmitter {
 public:
  ElementwiseEmitter(const ElementwiseSpec& spec, const config::ChipConfig& config)
      : spec_(collapse(spec)), operands_(operand_count(spec.op)) {
    const int buffers = spec_.op == ElementwiseOp::Copy ? 1 : 2;
    const int64_t elements = static_cast<int64_t>(config.scratchpad_bytes()) / buffers / spec_.element_bytes;
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

  int64_t cores() const { return cores_; }

  std::string emit() {
    writer_.comment(fmt::format("{}: sizes [{}], byte strides {}", op_name(spec_.op), fmt::join(spec_.sizes, ", "),
                                fmt::join(spec_.strides, " ")));
    for (int k = 0; k < operands_; ++k) writer_.line("ld r{}, {}(r1)", kFirstPointer + k, 8 * k);
    writer_.line("li r{}, 0", kBufferA);
    writer_.line("li r{}, {}", kBufferB, tile_elements_ * spec_.element_bytes);
    emit_dimension(0);
    writer_.line("halt");
    return writer_.text();
  }

 private:
  int last_dim() const { return static_cast<int>(spec_.sizes.size()) - 1; }

  void advance_pointers(int dim, int64_t times) {
    for (int k = 0; k < operands_; ++k)
      writer_.add_constant(kFirstPointer + k, spec_.strides[k][dim] * times, kScratch);
  }

  void emit_dimension(int dim) {
    if (dim == last_dim()) {
      emit_innermost();
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

  void emit_innermost() { emit_tiles(last_dim(), tile_elements_, false); }

  // Whole rows of the innermost dimension fit a tile several times, and every operand's rows are contiguous: tiles
  // of several rows, each moved by one 2-D DMA (a zero row stride repeats a broadcast row).
  bool rows_fit_in_tiles() const {
    for (const auto& strides : spec_.strides)
      if (strides[last_dim()] != spec_.element_bytes) return false;
    return spec_.sizes[last_dim()] * 2 <= tile_elements_;
  }

  void emit_row_tiles(int dim) {
    writer_.load_constant(kRowLength, spec_.sizes[last_dim()]);
    emit_tiles(dim, tile_elements_ / spec_.sizes[last_dim()], true);
  }

  // The tiles along `dim`, `per_tile` units each (elements, or rows of the innermost dimension), shared among the
  // cores: core c takes tiles c, c + n, c + 2n, ... and the partial last tile goes to core (full tiles mod n).
  // Pointers are saved and restored around it, so the enclosing loops see them unchanged.
  void emit_tiles(int dim, int64_t per_tile, bool rows) {
    const int64_t full_tiles = spec_.sizes[dim] / per_tile, remainder = spec_.sizes[dim] % per_tile;
    const int64_t row_length = rows ? spec_.sizes[last_dim()] : 1;
    const auto set_tile_size = [&](int64_t units) {
      if (rows) writer_.load_constant(kTileRows, units);
      writer_.load_constant(kTileElements, units * row_length);
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
      emit_tile(dim, rows);
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
      emit_tile(dim, rows);
      writer_.label(skip);
    }
    restore_pointers();
  }

  void restore_pointers() {
    for (int k = 0; k < operands_; ++k) writer_.line("addi r{}, r{}, 0", kFirstPointer + k, kFirstSavedPointer + k);
  }

  // Moves one operand's tile: 1-D along `dim`, or 2-D with rows along `dim` (kTileRows rows of kRowLength).
  void move(bool load, int operand, int buffer, int dim, bool rows) {
    const int bits = spec_.element_bytes * 8;
    const int pointer = kFirstPointer + operand;
    const int64_t stride = spec_.strides[operand][dim];
    if (rows && load)
      writer_.line("dma.ld2.b{} r{}, r{}, r{}, r{}, {}", bits, buffer, pointer, kRowLength, kTileRows, stride);
    else if (rows)
      writer_.line("dma.st2.b{} r{}, r{}, r{}, r{}, {}", bits, pointer, buffer, kRowLength, kTileRows, stride);
    else if (load)
      writer_.line("dma.ld.b{} r{}, r{}, r{}, {}", bits, buffer, pointer, kTileElements, stride);
    else
      writer_.line("dma.st.b{} r{}, r{}, r{}, {}", bits, pointer, buffer, kTileElements, stride);
  }

  // One tile: load the inputs, compute, store; fences order the engines because each step reads the previous one's
  // scratchpad results.
  void emit_tile(int dim, bool rows = false) {
    move(true, 1, kBufferA, dim, rows);
    if (spec_.op != ElementwiseOp::Copy) {
      move(true, 2, kBufferB, dim, rows);
      writer_.line("fence");
      writer_.line("{} r{}, r{}, r{}, r{}", vector_mnemonic(spec_.op), kBufferA, kBufferA, kBufferB, kTileElements);
    }
    writer_.line("fence");
    move(false, 0, kBufferA, dim, rows);
    writer_.line("fence");
  }

  ElementwiseSpec spec_;
  int operands_;
  int64_t cores_ = 1;
  int64_t tile_elements_ = 0;
  AssemblyWriter writer_;
};

}  // namespace

std::string op_name(ElementwiseOp op) {
  switch (op) {
    case ElementwiseOp::Copy: return "copy";
    case ElementwiseOp::AddF32: return "add_f32";
    case ElementwiseOp::MulF32: return "mul_f32";
    case ElementwiseOp::MaxF32: return "max_f32";
    case ElementwiseOp::MinF32: return "min_f32";
  }
  return "?";
}

Kernel emit_elementwise(const ElementwiseSpec& spec, const config::ChipConfig& config) {
  if (static_cast<int>(spec.strides.size()) != operand_count(spec.op))
    throw std::invalid_argument(
        fmt::format("{} takes {} operands, {} given", op_name(spec.op), operand_count(spec.op), spec.strides.size()));
  for (const auto& strides : spec.strides)
    if (strides.size() != spec.sizes.size())
      throw std::invalid_argument("every operand needs one stride per dimension");
  for (int64_t size : spec.sizes)
    if (size < 0) throw std::invalid_argument(fmt::format("negative size {} in an elementwise kernel", size));
  if (spec.op != ElementwiseOp::Copy && spec.element_bytes != 4)
    throw std::invalid_argument("fp32 operations take 4-byte elements");
  Kernel kernel;
  kernel.name = op_name(spec.op);
  const bool empty = std::find(spec.sizes.begin(), spec.sizes.end(), 0) != spec.sizes.end();
  if (empty) {
    kernel.assembly = "; no elements\n    halt\n";
  } else {
    ElementwiseEmitter emitter(spec, config);
    kernel.assembly = emitter.emit();
    kernel.cores = emitter.cores();
  }
  kernel.words = isa::assemble(kernel.assembly, kernel.name + ".s");
  return kernel;
}

}  // namespace npusim::emitter
