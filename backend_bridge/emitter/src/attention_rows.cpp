#include "attention_rows.h"

#include <fmt/format.h>

#include <bit>
#include <limits>

namespace npusim::emitter {

AttentionLayout resolved(const AttentionLayout& layout, int64_t heads_per_batch, int64_t length, int64_t dim) {
  if (layout.batch != 0 || layout.head != 0 || layout.row != 0) return layout;
  return {heads_per_batch * length * dim, length * dim, dim};
}

namespace attention_rows {

ChunkedRows chunked_rows(KernelBuilder& b, int64_t length, int64_t dim, int64_t chunk, int64_t block,
                         const AttentionLayout& layout, int64_t heads_per_batch, std::string_view what) {
  ChunkedRows rows{length, dim, chunk, block, resolved(layout, heads_per_batch, length, dim), heads_per_batch, {}, {}};
  for (int64_t c = 0; c < ceil_div(dim, chunk); ++c)
    rows.tiles.push_back(b.tile(Space::Scratchpad, block * chunk * 4, fmt::format("{} {}", what, c)));
  return rows;
}

void block_rows(KernelBuilder& b, R first, R rows, R block, int64_t block_rows, int64_t length) {
  Reg size = b.reg("block size");
  const Label short_block = b.label();
  b.li(size, block_rows);
  b.Mul(first, block, size);
  b.li(rows, length);
  b.Sub(rows, rows, first);
  b.Bltu(rows, size, short_block);
  b.move(rows, size);
  b.bind(short_block);
}

void fill_scale_and_minus_infinity(KernelBuilder& b, const Tile& tile, float scale) {
  Reg one = b.reg("one"), constant = b.reg("constant");
  b.li(one, 1);
  b.point(constant, tile);
  b.Vfill(isa::ElementType::F32, constant, one, std::bit_cast<int32_t>(scale));
  b.point(constant, tile, 4);
  b.Vfill(isa::ElementType::F32, constant, one, std::bit_cast<int32_t>(-std::numeric_limits<float>::infinity()));
}

void block_address(KernelBuilder& b, R pointer, R base, R head, const ChunkedRows& tensor, R block,
                   int64_t element_bytes) {
  Reg scratch = b.reg("DRAM offset"), index = b.reg("batch entry or head");
  b.li(scratch, tensor.heads_per_batch);
  b.Divu(index, head, scratch);
  b.li(pointer, tensor.layout.batch * element_bytes);
  b.Mul(pointer, index, pointer);
  b.Remu(index, head, scratch);
  b.li(scratch, tensor.layout.head * element_bytes);
  b.Mul(scratch, index, scratch);
  b.Add(pointer, pointer, scratch);
  b.li(scratch, tensor.block * tensor.layout.row * element_bytes);
  b.Mul(scratch, block, scratch);
  b.Add(pointer, pointer, scratch);
  b.Add(pointer, pointer, base);
}

void move_rows(KernelBuilder& b, bool load, R base, R head, const ChunkedRows& tensor, R block, R rows,
               int64_t element_bytes) {
  const bool staged = element_bytes == 2;
  Reg pointer = b.reg("DRAM rows"), scratch = b.reg("DRAM offset"), width = b.reg("chunk width"),
      at = b.reg("chunk tile");
  block_address(b, pointer, base, head, tensor, block, element_bytes);
  const int64_t stride = tensor.layout.row * element_bytes;
  for (size_t c = 0; c < tensor.tiles.size(); ++c) {
    b.Addi(scratch, pointer, static_cast<int64_t>(c) * tensor.chunk * element_bytes);
    b.li(width, tensor.width(c));
    b.point(at, staged ? tensor.staged[c] : tensor.tiles[c]);
    if (load && staged)
      b.DmaLoad2d16(at, scratch, width, rows, stride);
    else if (load)
      b.DmaLoad2d32(at, scratch, width, rows, stride);
    else if (staged)
      b.DmaStore2d16(scratch, at, width, rows, stride);
    else
      b.DmaStore2d32(scratch, at, width, rows, stride);
  }
}

void hide_masked_scores(KernelBuilder& b, R scores, R window, R rows, int64_t columns, int64_t row_bytes,
                        const Tile& mask_tile, const Tile& constants, R n) {
  Reg mask = b.reg("mask tile"), width = b.reg("mask columns"), minus_infinity = b.reg("minus infinity");
  b.li(width, columns);
  b.point(mask, mask_tile);
  b.DmaLoad2d8(mask, window, width, rows, row_bytes);
  b.point(minus_infinity, constants, 4);
  b.Vsel(isa::ElementType::F32, scores, mask, minus_infinity, n, 1);
}

std::vector<uint64_t> mask_words(int64_t rows, int64_t columns, int64_t row_bytes,
                                 const std::function<bool(int64_t, int64_t)>& hidden) {
  std::vector<uint64_t> words(rows * row_bytes / 8);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j)
      if (hidden(i, j)) {
        const int64_t byte = i * row_bytes + j;
        words[byte / 8] |= uint64_t{1} << (8 * (byte % 8));
      }
  return words;
}

}  // namespace attention_rows
}  // namespace npusim::emitter
