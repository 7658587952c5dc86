// The triangle-zeroing kernel: the vector engine fills one row of zero bytes once, then the scalar unit walks the
// rows and has the DMA engine store the row's zeroed span from it (a fence keeps the stores after the fill).
//
// Registers: r1 arguments; r2 the tensor, r3 matrix counter, r4 row, r5 span start (column), r6 span end, r7 scratch,
// r8 DRAM pointer, r9 rows, r10 cols, r11 diagonal, r12 row bytes, r13 span bytes, r14 element bytes.
#include "npusim/emitter/triangle.h"

#include <fmt/format.h>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {

Kernel emit_zero_triangle(const TriangleSpec& spec, const config::ChipConfig& config) {
  if (spec.matrices < 1 || spec.rows < 1 || spec.cols < 1)
    throw std::invalid_argument("zeroing a triangle needs at least one non-empty matrix");
  const int64_t row_bytes = spec.cols * spec.element_bytes;
  if (static_cast<uint64_t>(row_bytes) > config.scratchpad_bytes())
    throw Unsupported(fmt::format("a row of {} bytes does not fit the scratchpad", row_bytes));
  AssemblyWriter w;
  w.comment(fmt::format(
      "zero_triangle: {} matrices of {} x {}, {}-byte elements, keeping the {} triangle of diagonal "
      "{}",
      spec.matrices, spec.rows, spec.cols, spec.element_bytes, spec.keep_lower ? "lower" : "upper", spec.diagonal));
  w.line("ld r2, 0(r1)");
  w.load_constant(9, spec.rows);
  w.load_constant(10, spec.cols);
  w.load_constant(11, spec.diagonal);
  w.load_constant(12, row_bytes);
  w.load_constant(14, spec.element_bytes);
  w.line("vfill.u8 r0, r12, 0");
  w.line("fence");
  w.load_constant(3, spec.matrices);
  w.label("matrix");
  w.line("li r4, 0");
  w.label("row");
  // The zeroed span [r5, r6) of this row, clamped to [0, cols].
  if (spec.keep_lower) {  // columns above row + diagonal
    w.line("add r5, r4, r11");
    w.line("addi r5, r5, 1");
    w.line("bge r5, r0, start_clamped");
    w.line("li r5, 0");
    w.label("start_clamped");
    w.line("addi r6, r10, 0");
    w.line("bge r5, r6, next_row");
  } else {  // columns below row + diagonal
    w.line("li r5, 0");
    w.line("add r6, r4, r11");
    w.line("bge r0, r6, next_row");
    w.line("blt r6, r10, end_clamped");
    w.line("addi r6, r10, 0");
    w.label("end_clamped");
  }
  w.line("sub r13, r6, r5");
  w.line("mul r13, r13, r14");
  w.line("mul r8, r4, r12");  // this row's first byte, then the span's
  w.line("add r8, r2, r8");
  w.line("mul r7, r5, r14");
  w.line("add r8, r8, r7");
  w.line("dma.st.b8 r8, r0, r13, 1");
  w.label("next_row");
  w.line("addi r4, r4, 1");
  w.line("bltu r4, r9, row");
  w.line("mul r7, r9, r12");  // the next matrix
  w.line("add r2, r2, r7");
  w.line("addi r3, r3, -1");
  w.line("bne r3, r0, matrix");
  w.line("fence");
  w.line("halt");
  Kernel kernel;
  kernel.name = spec.keep_lower ? "tril_zero" : "triu_zero";
  kernel.words = isa::assemble(w.text(), kernel.name + ".s");
  return kernel;
}

}  // namespace npusim::emitter
