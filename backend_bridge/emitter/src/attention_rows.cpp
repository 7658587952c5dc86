#include "attention_rows.h"

#include <fmt/format.h>

namespace npusim::emitter::attention_rows {

ChunkedRows chunked_rows(KernelBuilder& b, int64_t length, int64_t dim, int64_t chunk, int64_t block,
                         std::string_view what) {
  ChunkedRows rows{length, dim, chunk, block, {}, {}};
  for (int64_t c = 0; c < ceil_div(dim, chunk); ++c)
    rows.tiles.push_back(b.tile(Space::Scratchpad, block * chunk * 4, fmt::format("{} {}", what, c)));
  return rows;
}

void move_rows(KernelBuilder& b, bool load, R base, R head, const ChunkedRows& tensor, R block, R rows,
               int64_t element_bytes) {
  const bool staged = element_bytes == 2;
  Reg pointer = b.reg("DRAM rows"), scratch = b.reg("DRAM offset"), width = b.reg("chunk width"),
      at = b.reg("chunk tile");
  b.li(scratch, tensor.length * tensor.dim * element_bytes);
  b.Mul(pointer, head, scratch);
  b.li(scratch, tensor.block * tensor.dim * element_bytes);
  b.Mul(scratch, block, scratch);
  b.Add(pointer, pointer, scratch);
  b.Add(pointer, pointer, base);
  for (size_t c = 0; c < tensor.tiles.size(); ++c) {
    b.Addi(scratch, pointer, static_cast<int64_t>(c) * tensor.chunk * element_bytes);
    b.li(width, tensor.width(c));
    b.point(at, staged ? tensor.staged[c] : tensor.tiles[c]);
    const int64_t stride = tensor.dim * element_bytes;
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

}  // namespace npusim::emitter::attention_rows
