// The triangle-zeroing kernel: the vector engine fills one row of zero bytes once per core, then the cores share the
// rows of every matrix (units_across_cores.h) and have the DMA engine store each row's zeroed span from it.
#include "npusim/emitter/triangle.h"

#include <fmt/format.h>

#include "npusim/emitter/kernel_builder.h"
#include "units_across_cores.h"

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
  Reg tensor = b.reg("tensor"), unit = b.reg("row of the batch"), row = b.reg("row"), rows = b.reg("rows");
  Reg cols = b.reg("cols"), diagonal = b.reg("diagonal"), bytes_per_row = b.reg("row bytes");
  Reg element = b.reg("element bytes"), zeros = b.reg("zero row");
  Reg start = b.reg("span start"), end = b.reg("span end"), span = b.reg("span bytes"), dram = b.reg("DRAM address");
  b.Ld(tensor, kArgumentBlock, 0);
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
  // The matrices are contiguous, so row u of the batch starts u rows into the tensor; its row within its matrix
  // (u mod rows) places the diagonal.
  const int64_t units = spec.matrices * spec.rows, cores = cores_for_units(units, config);
  for_each_unit_across_cores(b, unit, units, cores, [&] {
    const Label row_done = b.label();
    b.Remu(row, unit, rows);
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
    b.Mul(dram, unit, bytes_per_row);  // this row's first byte, then the span's
    b.Add(dram, tensor, dram);
    {
      Reg offset = b.reg("span offset");
      b.Mul(offset, start, element);
      b.Add(dram, dram, offset);
    }
    b.DmaStore8(dram, zeros, span, 1);
    b.bind(row_done);
  });
  b.Halt();
  return b.finish(cores);
}

}  // namespace npusim::emitter
