// The transposing copy. Dimension a is the destination's contiguous one, b the source's. A tile is q elements along
// a by p along b: the DMA reads q source rows of p contiguous elements (rows S[a] bytes apart) into the scratchpad,
// vtr turns the q x p tile into p x q, and the DMA writes p destination rows of q contiguous elements (D[b] apart).
// Tiles are numbered with a fastest, then b, then the other dimensions inner to outer; core c takes tiles c, c + n,
// c + 2n, ... and a tile's pointers and edge sizes come from its number by division, so any shape and any number
// of cores share one loop.
//
// Pipelining, per core, with buffer pairs (A, B) and (A', B') swapped after every tile:
//   DMA:    load(k+1) -> A'   post 0           wait 1   store(k) <- B   post 2
//   vector: wait 2 (B free: store(k-2) done)   wait 0 (load(k) done)   vtr B <- A   post 1
// so the transpose of tile k runs while the DMA engine loads tile k+1 and stores tile k-1.
//
// Registers: r2/r3 destination and source bases, r4 this tile's number, r5 the tile count, r6 the next tile's
// number, r7 this tile's destination pointer, r8/r9 its p and q, r10/r11 buffers A and B, r12..r15 the next tile's
// source pointer, destination pointer, p and q, r16/r17 buffers A' and B', r18..r21 scratch.
#include "npusim/emitter/transpose_copy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

constexpr int kDestinationBase = 2, kSourceBase = 3, kTile = 4, kTileCount = 5, kNextTile = 6;
constexpr int kDestination = 7, kP = 8, kQ = 9, kBufferA = 10, kBufferB = 11;
constexpr int kNextSource = 12, kNextDestination = 13, kNextP = 14, kNextQ = 15, kOtherA = 16, kOtherB = 17;
constexpr int kIndex = 18, kDigit = 19, kScratch = 20, kProduct = 21;
// Semaphores: the load of a tile is done; its transpose is done; the store of a B buffer is done (it is free).
constexpr int kLoaded = 0, kTransposed = 1, kStored = 2;

bool fits_immediate(int64_t value) { return value >= INT32_MIN && value <= INT32_MAX; }

// vtr moves bits, so any type of the element's width serves.
std::string_view type_of_width(int bytes) {
  switch (bytes) {
    case 1: return "u8";
    case 2: return "f16";
    case 4: return "i32";
    default: return "i64";
  }
}

class TransposeCopyEmitter {
 public:
  TransposeCopyEmitter(const StridedCopy& copy, int a, int b, const config::ChipConfig& config)
      : copy_(copy), a_(a), b_(b) {
    // Four buffers of p x q elements; tiles as square as the shape allows, a short dimension taken whole.
    const int64_t budget = static_cast<int64_t>(config.scratchpad_bytes()) / (4 * copy.element_bytes);
    int64_t side = 1;
    while (4 * side * side <= budget) side *= 2;
    const int64_t size_a = copy.sizes[a], size_b = copy.sizes[b];
    if (size_a <= side && size_b <= side) {
      q_ = size_a, p_ = size_b;
    } else if (size_a < side) {
      q_ = size_a, p_ = std::min(size_b, budget / q_);
    } else if (size_b < side) {
      p_ = size_b, q_ = std::min(size_a, budget / p_);
    } else {
      p_ = q_ = side;
    }
    tiles_a_ = (size_a + q_ - 1) / q_;
    tiles_b_ = (size_b + p_ - 1) / p_;
    tiles_ = tiles_a_ * tiles_b_;
    for (size_t dim = 0; dim < copy.sizes.size(); ++dim)
      if (static_cast<int>(dim) != a && static_cast<int>(dim) != b) tiles_ *= copy.sizes[dim];
    cores_ = std::clamp<int64_t>(tiles_, 1, config.chip_cores);
    buffer_bytes_ = p_ * q_ * copy.element_bytes;
  }

  int64_t cores() const { return cores_; }

  std::string emit() {
    const int bits = copy_.element_bytes * 8;
    writer_.comment(fmt::format("transpose: sizes [{}], byte strides [{}] [{}], tiles of {} x {}",
                                fmt::join(copy_.sizes, ", "), fmt::join(copy_.destination_strides, ", "),
                                fmt::join(copy_.source_strides, ", "), q_, p_));
    writer_.line("ld r{}, 0(r1)", kDestinationBase);
    writer_.line("ld r{}, 8(r1)", kSourceBase);
    writer_.line("csrr r{}, coreid", kTile);
    writer_.load_constant(kTileCount, tiles_);
    for (const auto& [reg, index] : {std::pair{kBufferA, 0}, {kBufferB, 1}, {kOtherA, 2}, {kOtherB, 3}})
      writer_.load_constant(reg, index * buffer_bytes_);
    writer_.line("sem.post.vec {}", kStored);  // both B buffers start free
    writer_.line("sem.post.vec {}", kStored);
    locate_tile(kTile);
    load_next(kBufferA);
    const std::string loop = writer_.new_label("tile"), last = writer_.new_label("no_next_tile");
    writer_.label(loop);
    for (const auto& [to, from] : {std::pair{kDestination, kNextDestination}, {kP, kNextP}, {kQ, kNextQ}})
      writer_.line("addi r{}, r{}, 0", to, from);
    writer_.line("sem.wait.vec {}", kStored);
    writer_.line("sem.wait.vec {}", kLoaded);
    writer_.line("vtr.{} r{}, r{}, r{}, r{}", type_of_width(copy_.element_bytes), kBufferB, kBufferA, kQ, kP);
    writer_.line("sem.post.vec {}", kTransposed);
    writer_.line("addi r{}, r{}, {}", kNextTile, kTile, cores_);
    writer_.line("bgeu r{}, r{}, {}", kNextTile, kTileCount, last);
    locate_tile(kNextTile);
    load_next(kOtherA);
    writer_.label(last);
    writer_.line("sem.wait.dma {}", kTransposed);
    writer_.line("dma.st2.b{} r{}, r{}, r{}, r{}, {}", bits, kDestination, kBufferB, kQ, kP,
                 copy_.destination_strides[b_]);
    writer_.line("sem.post.dma {}", kStored);
    for (const auto& [x, y] : {std::pair{kBufferA, kOtherA}, {kBufferB, kOtherB}}) {
      writer_.line("addi r{}, r{}, 0", kScratch, x);
      writer_.line("addi r{}, r{}, 0", x, y);
      writer_.line("addi r{}, r{}, 0", y, kScratch);
    }
    writer_.line("addi r{}, r{}, 0", kTile, kNextTile);
    writer_.line("bltu r{}, r{}, {}", kTile, kTileCount, loop);
    writer_.line("fence");
    writer_.line("halt");
    return writer_.text();
  }

 private:
  // The next tile's pointers and edge sizes from the tile number in `tile`, digit by digit: a, b, then the others.
  void locate_tile(int tile) {
    writer_.line("addi r{}, r{}, 0", kIndex, tile);
    writer_.line("addi r{}, r{}, 0", kNextSource, kSourceBase);
    writer_.line("addi r{}, r{}, 0", kNextDestination, kDestinationBase);
    take_digit(tiles_a_);
    tile_edge(a_, q_, kNextQ);
    take_digit(tiles_b_);
    tile_edge(b_, p_, kNextP);
    for (int dim = static_cast<int>(copy_.sizes.size()) - 1; dim >= 0; --dim) {
      if (dim == a_ || dim == b_) continue;
      take_digit(copy_.sizes[dim]);
      advance_pointers(dim);
    }
  }

  // kDigit = kIndex mod base; kIndex /= base.
  void take_digit(int64_t base) {
    writer_.load_constant(kScratch, base);
    writer_.line("remu r{}, r{}, r{}", kDigit, kIndex, kScratch);
    writer_.line("divu r{}, r{}, r{}", kIndex, kIndex, kScratch);
  }

  // The tile starts at element kDigit x tile of `dim`; it takes min(tile, size - start) elements into `size_reg`.
  void tile_edge(int dim, int64_t tile, int size_reg) {
    const std::string whole = writer_.new_label("whole");
    writer_.load_constant(kScratch, tile);
    writer_.line("mul r{}, r{}, r{}", kDigit, kDigit, kScratch);
    advance_pointers(dim);
    writer_.load_constant(size_reg, copy_.sizes[dim]);
    writer_.line("sub r{}, r{}, r{}", size_reg, size_reg, kDigit);
    writer_.line("bltu r{}, r{}, {}", size_reg, kScratch, whole);
    writer_.line("addi r{}, r{}, 0", size_reg, kScratch);
    writer_.label(whole);
  }

  // The next tile's pointers move kDigit elements along `dim`.
  void advance_pointers(int dim) {
    for (const auto& [pointer, stride] :
         {std::pair{kNextSource, copy_.source_strides[dim]}, {kNextDestination, copy_.destination_strides[dim]}}) {
      writer_.load_constant(kProduct, stride);
      writer_.line("mul r{}, r{}, r{}", kProduct, kProduct, kDigit);
      writer_.line("add r{}, r{}, r{}", pointer, pointer, kProduct);
    }
  }

  // Loads the located tile (q rows of p source elements) into `buffer` and tells the vector engine.
  void load_next(int buffer) {
    writer_.line("dma.ld2.b{} r{}, r{}, r{}, r{}, {}", copy_.element_bytes * 8, buffer, kNextSource, kNextP, kNextQ,
                 copy_.source_strides[a_]);
    writer_.line("sem.post.dma {}", kLoaded);
  }

  StridedCopy copy_;
  int a_, b_;
  int64_t p_ = 1, q_ = 1, tiles_a_ = 1, tiles_b_ = 1, tiles_ = 1, cores_ = 1, buffer_bytes_ = 0;
  AssemblyWriter writer_;
};

// The dimension along which `strides` is contiguous (its stride is one element), or -1.
int contiguous_dimension(const std::vector<int64_t>& strides, int element_bytes) {
  const auto found = std::find(strides.begin(), strides.end(), element_bytes);
  return found == strides.end() ? -1 : static_cast<int>(found - strides.begin());
}

}  // namespace

std::optional<Kernel> emit_transpose_copy(const StridedCopy& copy, const config::ChipConfig& config) {
  const int a = contiguous_dimension(copy.destination_strides, copy.element_bytes);
  const int b = contiguous_dimension(copy.source_strides, copy.element_bytes);
  if (a < 0 || b < 0 || a == b || copy.source_strides[a] == copy.element_bytes) return std::nullopt;
  if (!fits_immediate(copy.source_strides[a]) || !fits_immediate(copy.destination_strides[b])) return std::nullopt;
  TransposeCopyEmitter emitter(copy, a, b, config);
  Kernel kernel;
  kernel.name = "transpose";
  kernel.words = isa::assemble(emitter.emit(), kernel.name + ".s");
  kernel.cores = emitter.cores();
  return kernel;
}

}  // namespace npusim::emitter
