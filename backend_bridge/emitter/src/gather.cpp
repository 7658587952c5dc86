// The row gather. Core c handles indices c, c + n, c + 2n, ...: it loads the index with a scalar load, checks it
// against the table (unsigned, so negative indices fail too), then moves the row through the scratchpad. The load
// and the store of a row are on the one DMA engine, whose queue keeps them in order.
//
// Registers: r1 arguments; r2 output, r3 table, r4 indices; r5 i, r6 step across cores, r7 the index, r8 scratch,
// r9 DRAM pointer, r10 row length in elements of 8 bytes or less, r11 index count, r12 table rows.
#include "npusim/emitter/gather.h"

#include <fmt/format.h>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/emitter/index_loads.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {

Kernel emit_gather(const GatherSpec& spec, const config::ChipConfig& config) {
  if (spec.table_rows < 1 || spec.row_bytes < 1 || spec.indices < 1)
    throw std::invalid_argument("a gather needs a non-empty table and at least one index");
  if (spec.index_bytes != 8 && spec.index_bytes != 4) throw Unsupported("indices must be int64 or int32");
  if (static_cast<uint64_t>(spec.row_bytes) > config.scratchpad_bytes())
    throw Unsupported(fmt::format("a row of {} bytes does not fit the scratchpad", spec.row_bytes));
  // The widest DMA element that divides the row.
  int element = 8;
  while (spec.row_bytes % element != 0) element /= 2;
  AssemblyWriter w;
  w.comment(fmt::format("gather_rows: {} rows of {} bytes from a table of {}", spec.indices, spec.row_bytes,
                        spec.table_rows));
  w.line("ld r2, 0(r1)");
  w.line("ld r3, 8(r1)");
  w.line("ld r4, 16(r1)");
  w.line("csrr r5, coreid");
  w.line("csrr r6, ncores");
  w.load_constant(10, spec.row_bytes / element);
  w.load_constant(11, spec.indices);
  w.load_constant(12, spec.table_rows);
  w.line("bgeu r5, r11, done");
  w.label("next");
  load_index(w, spec.index_bytes, 4, 5, 7, 9);
  w.line("bltu r7, r12, in_range");
  w.line("trap {}", kIndexOutOfRangeTrap);
  w.label("in_range");
  w.load_constant(8, spec.row_bytes);
  w.line("mul r9, r7, r8");
  w.line("add r9, r3, r9");
  w.line("dma.ld.b{} r0, r9, r10, {}", element * 8, element);
  w.line("mul r9, r5, r8");
  w.line("add r9, r2, r9");
  w.line("dma.st.b{} r9, r0, r10, {}", element * 8, element);
  w.line("add r5, r5, r6");
  w.line("bltu r5, r11, next");
  w.label("done");
  w.line("halt");
  Kernel kernel;
  kernel.name = "gather_rows";
  kernel.words = isa::assemble(w.text(), "gather_rows.s");
  kernel.cores = std::min<int64_t>(spec.indices, config.chip_cores);
  return kernel;
}

}  // namespace npusim::emitter
