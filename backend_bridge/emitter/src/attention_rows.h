// What the fused attention kernels (attention.cpp, attention_backward.cpp) share: a [heads][length][dim] tensor's
// blocks of rows held as chunks of columns in the scratchpad, moved between DRAM and the chunks, and the causal
// triangles their masks are windows of.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "npusim/emitter/attention.h"
#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter::attention_rows {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t padded(int64_t bytes) { return ceil_div(bytes, 64) * 64; }  // tiles start on 64-byte boundaries

// A [heads][length][dim] tensor's block of rows as chunks of `chunk` columns, each an f32 tile (and, for half
// precision, the tile its 2-byte elements are staged in), and where the tensor's rows are in DRAM.
struct ChunkedRows {
  int64_t length, dim, chunk, block;  // block: the rows of one block of this tensor
  AttentionLayout layout;             // resolved (never all zeros)
  int64_t heads_per_batch;
  std::vector<Tile> tiles, staged;
  int64_t width(size_t c) const { return std::min(chunk, dim - static_cast<int64_t>(c) * chunk); }
};

// The f32 chunk tiles of blocks of `block` rows (no staging) of a tensor laid out as `layout` says.
ChunkedRows chunked_rows(KernelBuilder& b, int64_t length, int64_t dim, int64_t chunk, int64_t block,
                         const AttentionLayout& layout, int64_t heads_per_batch, std::string_view what);

// first = block x block_rows and rows = min(block_rows, length - first): where block `block` of a tensor of `length`
// rows starts, and how many rows it has (the last one may be ragged).
void block_rows(KernelBuilder& b, R first, R rows, R block, int64_t block_rows, int64_t length);

// The f32 constants every attention kernel uses, at the start of `tile`: the scale, then minus infinity (what
// a masked score becomes).
void fill_scale_and_minus_infinity(KernelBuilder& b, const Tile& tile, float scale);

// pointer = the DRAM address of the first row of block `block` of head `head` of the tensor at `base`.
void block_address(KernelBuilder& b, R pointer, R base, R head, const ChunkedRows& tensor, R block,
                   int64_t element_bytes);

// Moves `rows` rows of block `block` of head `head` of the tensor at `base` between DRAM and its chunks (with 2-byte
// elements, their staging tiles), either way.
void move_rows(KernelBuilder& b, bool load, R base, R head, const ChunkedRows& tensor, R block, R rows,
               int64_t element_bytes);

// Causal masking of a block of scores (`n` elements in `rows` rows of `columns`): the window of a mask in .data at
// `window` (rows `row_bytes` apart) is loaded into `mask_tile`, and the scores it hides become minus infinity (the
// second constant of `constants`, fill_scale_and_minus_infinity's).
void hide_masked_scores(KernelBuilder& b, R scores, R window, R rows, int64_t columns, int64_t row_bytes,
                        const Tile& mask_tile, const Tile& constants, R n);

// A mask of bytes, `rows` x `columns`, rows padded to `row_bytes` (a multiple of 8), little-endian in words (for a
// kernel's .data): element [i][j] is 1 where hidden(i, j), else 0. Causal masks are windows of such triangles.
std::vector<uint64_t> mask_words(int64_t rows, int64_t columns, int64_t row_bytes,
                                 const std::function<bool(int64_t, int64_t)>& hidden);

}  // namespace npusim::emitter::attention_rows
