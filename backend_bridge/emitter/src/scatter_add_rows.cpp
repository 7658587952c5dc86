// The row scatter-add. For each index in order: load the index with a scalar load, check it (unsigned, so negative
// indices fail too), move the table row and the source row into the scratchpad, add them on the vector engine and
// store the sum back. Fences order the engines, and the next index's load comes after this store on the one DMA
// queue, so a repeated index sees the previous sum.
//
// Registers: r1 arguments; r2 table, r3 rows, r4 indices; r5 i, r6 the index, r7 scratch, r8 DRAM pointer,
// r9 row length, r10 index count, r11 table rows, r12 skip index, r13 row bytes (also where the scratchpad's second
// row starts).
#include "npusim/emitter/scatter_add_rows.h"

#include <fmt/format.h>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/emitter/index_loads.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {

Kernel emit_scatter_add_rows(const ScatterAddRowsSpec& spec, const config::ChipConfig& config) {
  if (spec.table_rows < 1 || spec.row_length < 1 || spec.indices < 1)
    throw std::invalid_argument("a row scatter-add needs a non-empty table and at least one index");
  if (spec.index_bytes != 8 && spec.index_bytes != 4) throw Unsupported("indices must be int64 or int32");
  const int64_t row_bytes = spec.row_length * 4;
  if (static_cast<uint64_t>(2 * row_bytes) > config.scratchpad_bytes())
    throw Unsupported(fmt::format("two rows of {} bytes do not fit the scratchpad", row_bytes));
  AssemblyWriter w;
  w.comment(fmt::format("scatter_add_rows_f32: {} rows of {} into a table of {}, skipping index {}", spec.indices,
                        spec.row_length, spec.table_rows, spec.skip_index));
  w.line("ld r2, 0(r1)");
  w.line("ld r3, 8(r1)");
  w.line("ld r4, 16(r1)");
  w.load_constant(9, spec.row_length);
  w.load_constant(10, spec.indices);
  w.load_constant(11, spec.table_rows);
  w.load_constant(12, spec.skip_index);
  w.load_constant(13, row_bytes);
  w.line("li r5, 0");
  w.label("next");
  load_index(w, spec.index_bytes, 4, 5, 6, 8);
  w.line("beq r6, r12, added");
  w.line("bltu r6, r11, in_range");
  w.line("trap {}", kIndexOutOfRangeTrap);
  w.label("in_range");
  w.line("mul r7, r5, r13");  // this source row
  w.line("add r8, r3, r7");
  w.line("dma.ld.b32 r13, r8, r9, 4");
  w.line("mul r7, r6, r13");  // the table row
  w.line("add r8, r2, r7");
  w.line("dma.ld.b32 r0, r8, r9, 4");
  w.line("fence");
  w.line("vadd.f32 r0, r0, r13, r9");
  w.line("fence");
  w.line("dma.st.b32 r8, r0, r9, 4");
  w.label("added");
  w.line("addi r5, r5, 1");
  w.line("bltu r5, r10, next");
  w.line("fence");
  w.line("halt");
  Kernel kernel;
  kernel.name = "scatter_add_rows_f32";
  kernel.words = isa::assemble(w.text(), kernel.name + ".s");
  return kernel;  // one core: repeated indices must accumulate in order
}

}  // namespace npusim::emitter
