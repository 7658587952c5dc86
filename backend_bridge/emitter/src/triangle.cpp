// The triangle-zeroing kernel: the vector engine fills one row of zero bytes once, then the scalar unit walks the
// rows and has the DMA engine store the row's zeroed span from it.
#include "npusim/emitter/triangle.h"

#include <fmt/format.h>

#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {

Kernel emit_zero_triangle(const TriangleSpec& spec, const config::ChipConfig& config) {
  if (spec.matrices < 1 || spec.rows < 1 || spec.cols < 1)
    throw std::invalid_argument("zeroing a triangle needs at least one non-empty matrix");
  const int64_t row_bytes = spec.cols * spec.element_bytes;
  if (static_cast<uint64_t>(row_bytes) > config.scratchpad_bytes())
    throw Unsupported(fmt::format("a row of {} bytes does not fit the scratchpad", row_bytes));
  KernelBuilder b(spec.keep_lower ? "tril_zero" : "triu_zero", config);
  b.describe(fmt::format(
      "zero_triangle: {} matrices of {} x {}, {}-byte elements, keeping the {} triangle of diagonal {}", spec.matrices,
      spec.rows, spec.cols, spec.element_bytes, spec.keep_lower ? "lower" : "upper", spec.diagonal));
  const Tile zero_row = b.tile(Space::Scratchpad, row_bytes, "zero row");
  Reg matrix = b.reg("matrix"), matrices_left = b.reg("matrices left"), row = b.reg("row"), rows = b.reg("rows");
  Reg cols = b.reg("cols"), diagonal = b.reg("diagonal"), bytes_per_row = b.reg("row bytes");
  Reg element = b.reg("element bytes"), zeros = b.reg("zero row");
  Reg start = b.reg("span start"), end = b.reg("span end"), span = b.reg("span bytes"), dram = b.reg("DRAM address");
  b.Ld(matrix, kArgumentBlock, 0);
  b.li(rows, spec.rows);
  b.li(cols, spec.cols);
  b.li(diagonal, spec.diagonal);
  b.li(bytes_per_row, row_bytes);
  b.li(element, spec.element_bytes);
  b.point(zeros, zero_row);
  b.Vfill(isa::ElementType::U8, zeros, bytes_per_row, 0);
  // Orders the stores after the fill once: the builder would derive the same order, but at the first store, inside
  // the row loop, where it would run on every row (and once more at the loop's back edge, for the rows that store
  // nothing).
  b.Fence();
  b.li(matrices_left, spec.matrices);
  const Label next_matrix = b.label();
  b.bind(next_matrix);
  b.li(row, 0);
  const Label next_row = b.label(), row_done = b.label();
  b.bind(next_row);
  // The zeroed span [start, end) of this row, clamped to [0, cols].
  if (spec.keep_lower) {  // columns above row + diagonal
    const Label start_clamped = b.label();
    b.Add(start, row, diagonal);
    b.Addi(start, start, 1);
    b.Bge(start, kZero, start_clamped);
    b.li(start, 0);
    b.bind(start_clamped);
    b.move(end, cols);
    b.Bge(start, end, row_done);
  } else {  // columns below row + diagonal
    const Label end_clamped = b.label();
    b.li(start, 0);
    b.Add(end, row, diagonal);
    b.Bge(kZero, end, row_done);
    b.Blt(end, cols, end_clamped);
    b.move(end, cols);
    b.bind(end_clamped);
  }
  b.Sub(span, end, start);
  b.Mul(span, span, element);
  b.Mul(dram, row, bytes_per_row);  // this row's first byte, then the span's
  b.Add(dram, matrix, dram);
  {
    Reg offset = b.reg("span offset");
    b.Mul(offset, start, element);
    b.Add(dram, dram, offset);
  }
  b.DmaStore8(dram, zeros, span, 1);
  b.bind(row_done);
  b.Addi(row, row, 1);
  b.Bltu(row, rows, next_row);
  {
    Reg matrix_bytes = b.reg("matrix bytes");
    b.Mul(matrix_bytes, rows, bytes_per_row);  // the next matrix
    b.Add(matrix, matrix, matrix_bytes);
  }
  b.Addi(matrices_left, matrices_left, -1);
  b.Bne(matrices_left, kZero, next_matrix);
  b.Halt();
  return b.finish(1);
}

}  // namespace npusim::emitter
