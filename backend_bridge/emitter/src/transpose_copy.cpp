// The transposing copy. Dimension a is the destination's contiguous one, b the source's. A tile is q elements along
// a by p along b: the DMA reads q source rows of p contiguous elements (rows S[a] bytes apart) into the scratchpad,
// vtr turns the q x p tile into p x q, and the DMA writes p destination rows of q contiguous elements (D[b] apart).
// Tiles are numbered with a fastest, then b, then the other dimensions inner to outer; core c takes tiles c, c + n,
// c + 2n, ... and a tile's pointers and edge sizes come from its number by division, so any shape and any number
// of cores share one loop.
//
// Pipelining, per core, with a slot of each buffer kind (A loaded, B transposed) toggled after every tile:
//   DMA:    load(k+1) -> A'   post loaded           wait transposed   store(k) <- B   post stored
//   vector: wait stored (B free: store(k-2) done)   wait loaded (load(k) done)   vtr B <- A   post transposed
// so the transpose of tile k runs while the DMA engine loads tile k+1 and stores tile k-1. The builder cannot tell
// which slot a toggled register points to, so the buffers are unordered tiles and these semaphores order them.
#include "npusim/emitter/transpose_copy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>

#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {
namespace {

using isa::ElementType;

bool fits_immediate(int64_t value) { return value >= INT32_MIN && value <= INT32_MAX; }

// vtr moves bits, so any type of the element's width serves.
ElementType type_of_width(int bytes) {
  switch (bytes) {
    case 1: return ElementType::U8;
    case 2: return ElementType::F16;
    case 4: return ElementType::I32;
    default: return ElementType::I64;
  }
}

// The next tile's DRAM pointers and edge sizes, located from its number.
struct NextTile {
  Reg source, destination, p, q;
};

class TransposeCopyEmitter {
 public:
  TransposeCopyEmitter(const StridedCopy& copy, int a, int b, const config::ChipConfig& config)
      : copy_(copy), a_(a), b_(b), k_("transpose", config) {
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

  Kernel emit() {
    k_.describe(fmt::format("transpose: sizes [{}], byte strides [{}] [{}], tiles of {} x {}",
                            fmt::join(copy_.sizes, ", "), fmt::join(copy_.destination_strides, ", "),
                            fmt::join(copy_.source_strides, ", "), q_, p_));
    // Slot 0 of A, slot 0 of B, slot 1 of A, slot 1 of B: one tile, so the slots keep their places.
    const Tile buffers = k_.tile(Space::Scratchpad, 4 * buffer_bytes_, "transpose buffers", /*ordered=*/false);
    const int loaded = k_.semaphore(), transposed = k_.semaphore(), stored = k_.semaphore();
    destination_base_ = k_.reg("destination");
    source_base_ = k_.reg("source");
    k_.Ld(destination_base_, kArgumentBlock, 0);
    k_.Ld(source_base_, kArgumentBlock, 8);
    Reg tile = k_.reg("tile"), tile_count = k_.reg("tile count"), next_tile = k_.reg("next tile");
    k_.Csrr(tile, isa::Csr::CoreId);
    k_.li(tile_count, tiles_);
    // xor with a slot's address xor the other's swaps them.
    Reg load_buffer = k_.reg("load buffer"), transpose_buffer = k_.reg("transpose buffer");
    Reg next_load_buffer = k_.reg("next load buffer"), toggle_load = k_.reg("load slot toggle"),
        toggle_transpose = k_.reg("transpose slot toggle");
    k_.point(load_buffer, buffers);
    k_.point(transpose_buffer, buffers, buffer_bytes_);
    k_.li(toggle_load, 2 * buffer_bytes_);
    k_.li(toggle_transpose, buffer_bytes_ ^ (3 * buffer_bytes_));
    k_.SemPostVector(stored);  // both B slots start free
    k_.SemPostVector(stored);
    NextTile next{k_.reg("next source"), k_.reg("next destination"), k_.reg("next p"), k_.reg("next q")};
    locate_tile(tile, next);
    load(load_buffer, next, loaded);
    Reg destination = k_.reg("destination pointer"), p = k_.reg("p"), q = k_.reg("q");
    const Label loop = k_.label(), last = k_.label();
    k_.bind(loop);
    k_.move(destination, next.destination);
    k_.move(p, next.p);
    k_.move(q, next.q);
    k_.SemWaitVector(stored);
    k_.SemWaitVector(loaded);
    k_.Vtr(type_of_width(copy_.element_bytes), transpose_buffer, load_buffer, q, p);
    k_.SemPostVector(transposed);
    k_.Addi(next_tile, tile, cores_);
    k_.Bgeu(next_tile, tile_count, last);
    locate_tile(next_tile, next);
    k_.Xor(next_load_buffer, load_buffer, toggle_load);
    k_.bind(next_load_buffer, buffers);
    load(next_load_buffer, next, loaded);
    k_.bind(last);
    k_.SemWaitDma(transposed);
    store(destination, transpose_buffer, q, p);
    k_.SemPostDma(stored);
    k_.Xor(load_buffer, load_buffer, toggle_load);
    k_.Xor(transpose_buffer, transpose_buffer, toggle_transpose);
    k_.bind(load_buffer, buffers);
    k_.bind(transpose_buffer, buffers);
    k_.move(tile, next_tile);
    k_.Bltu(tile, tile_count, loop);
    k_.Halt();
    return k_.finish(cores_);
  }

 private:
  // The tile's pointers and edge sizes from its number, digit by digit: a, b, then the others.
  void locate_tile(R tile, const NextTile& next) {
    Reg index = k_.reg("tile number left"), digit = k_.reg("tile digit");
    k_.move(index, tile);
    k_.move(next.source, source_base_);
    k_.move(next.destination, destination_base_);
    take_digit(index, digit, tiles_a_);
    tile_edge(digit, a_, q_, next.q, next);
    take_digit(index, digit, tiles_b_);
    tile_edge(digit, b_, p_, next.p, next);
    for (int dim = static_cast<int>(copy_.sizes.size()) - 1; dim >= 0; --dim) {
      if (dim == a_ || dim == b_) continue;
      take_digit(index, digit, copy_.sizes[dim]);
      advance_pointers(digit, dim, next);
    }
  }

  // digit = index mod base; index /= base.
  void take_digit(R index, R digit, int64_t base) {
    Reg divisor = k_.reg("digit base");
    k_.li(divisor, base);
    k_.Remu(digit, index, divisor);
    k_.Divu(index, index, divisor);
  }

  // The tile starts at element digit x tile of `dim`; it takes min(tile, size - start) elements into `size`.
  void tile_edge(R digit, int dim, int64_t tile, R size, const NextTile& next) {
    const Label whole = k_.label();
    Reg tile_size = k_.reg("tile size");
    k_.li(tile_size, tile);
    k_.Mul(digit, digit, tile_size);
    advance_pointers(digit, dim, next);
    k_.li(size, copy_.sizes[dim]);
    k_.Sub(size, size, digit);
    k_.Bltu(size, tile_size, whole);
    k_.move(size, tile_size);
    k_.bind(whole);
  }

  // The tile's pointers move `digit` elements along `dim`.
  void advance_pointers(R digit, int dim, const NextTile& next) {
    Reg offset = k_.reg("pointer offset");
    for (const auto& [pointer, stride] : {std::pair<R, int64_t>{next.source, copy_.source_strides[dim]},
                                          {next.destination, copy_.destination_strides[dim]}}) {
      k_.li(offset, stride);
      k_.Mul(offset, offset, digit);
      k_.Add(pointer, pointer, offset);
    }
  }

  // Loads the located tile (q rows of p source elements) into `buffer` and tells the vector engine.
  void load(R buffer, const NextTile& next, int loaded) {
    const int64_t stride = copy_.source_strides[a_];
    switch (copy_.element_bytes) {
      case 1: k_.DmaLoad2d8(buffer, next.source, next.p, next.q, stride); break;
      case 2: k_.DmaLoad2d16(buffer, next.source, next.p, next.q, stride); break;
      case 4: k_.DmaLoad2d32(buffer, next.source, next.p, next.q, stride); break;
      default: k_.DmaLoad2d64(buffer, next.source, next.p, next.q, stride); break;
    }
    k_.SemPostDma(loaded);
  }

  // Stores p destination rows of q elements from the transposed `buffer`.
  void store(R destination, R buffer, R q, R p) {
    const int64_t stride = copy_.destination_strides[b_];
    switch (copy_.element_bytes) {
      case 1: k_.DmaStore2d8(destination, buffer, q, p, stride); break;
      case 2: k_.DmaStore2d16(destination, buffer, q, p, stride); break;
      case 4: k_.DmaStore2d32(destination, buffer, q, p, stride); break;
      default: k_.DmaStore2d64(destination, buffer, q, p, stride); break;
    }
  }

  StridedCopy copy_;
  int a_, b_;
  int64_t p_ = 1, q_ = 1, tiles_a_ = 1, tiles_b_ = 1, tiles_ = 1, cores_ = 1, buffer_bytes_ = 0;
  KernelBuilder k_;
  Reg destination_base_, source_base_;
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
  return TransposeCopyEmitter(copy, a, b, config).emit();
}

}  // namespace npusim::emitter
