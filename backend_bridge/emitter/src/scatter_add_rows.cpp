// The row scatter-add. For each index in order: load the index with a scalar load, check it (unsigned, so negative
// indices fail too), move the source row and the table row into the scratchpad, add them on the vector engine and
// store the sum back. The builder orders the engines on the two row tiles; the next index's table row load comes
// after this store on the one DMA queue, so a repeated index sees the previous sum.
#include "npusim/emitter/scatter_add_rows.h"

#include <fmt/format.h>

#include "npusim/emitter/index_loads.h"
#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {

Kernel emit_scatter_add_rows(const ScatterAddRowsSpec& spec, const config::ChipConfig& config) {
  if (spec.table_rows < 1 || spec.row_length < 1 || spec.indices < 1)
    throw std::invalid_argument("a row scatter-add needs a non-empty table and at least one index");
  if (spec.index_bytes != 8 && spec.index_bytes != 4) throw Unsupported("indices must be int64 or int32");
  const int64_t row_bytes = spec.row_length * 4;
  const int64_t aligned_row_bytes = (row_bytes + 63) / 64 * 64;  // where the second row's tile starts
  if (static_cast<uint64_t>(aligned_row_bytes + row_bytes) > config.scratchpad_bytes())
    throw Unsupported(fmt::format("two rows of {} bytes do not fit the scratchpad", row_bytes));

  KernelBuilder b("scatter_add_rows_f32", config);
  b.describe(fmt::format("scatter_add_rows_f32: {} rows of {} into a table of {}, skipping index {}", spec.indices,
                         spec.row_length, spec.table_rows, spec.skip_index));
  const Tile sum_tile = b.tile(Space::Scratchpad, row_bytes, "table row");
  const Tile source_tile = b.tile(Space::Scratchpad, row_bytes, "source row");
  Reg table = b.reg("table"), rows = b.reg("rows"), indices = b.reg("indices");
  Reg row_length = b.reg("row length"), count = b.reg("index count"), table_rows = b.reg("table rows");
  Reg skip = b.reg("skip index"), row_stride = b.reg("row bytes"), i = b.reg("i");
  Reg sum = b.reg("table row buffer"), source = b.reg("source row buffer");
  b.Ld(table, kArgumentBlock, 0);
  b.Ld(rows, kArgumentBlock, 8);
  b.Ld(indices, kArgumentBlock, 16);
  b.li(row_length, spec.row_length);
  b.li(count, spec.indices);
  b.li(table_rows, spec.table_rows);
  b.li(skip, spec.skip_index);
  b.li(row_stride, row_bytes);
  b.point(sum, sum_tile);
  b.point(source, source_tile);
  b.li(i, 0);
  const Label next = b.label(), in_range = b.label(), added = b.label();
  b.bind(next);
  Reg index = b.reg("index"), address = b.reg("DRAM address");
  load_index(b, spec.index_bytes, indices, i, index);
  b.Beq(index, skip, added);
  b.Bltu(index, table_rows, in_range);
  // Lets the engines finish the rows before first: the timed model drops an engine's queued semaphore posts once the
  // kernel traps, which would leave another engine waiting for one forever.
  b.Fence();
  b.RaiseTrap(kIndexOutOfRangeTrap);
  b.bind(in_range);
  b.Mul(address, i, row_stride);  // this source row
  b.Add(address, rows, address);
  b.DmaLoad32(source, address, row_length, 4);
  b.Mul(address, index, row_stride);  // the table row
  b.Add(address, table, address);
  b.DmaLoad32(sum, address, row_length, 4);
  b.Vadd(isa::ElementType::F32, sum, sum, source, row_length);
  b.DmaStore32(address, sum, row_length, 4);
  b.bind(added);
  b.Addi(i, i, 1);
  b.Bltu(i, count, next);
  b.Halt();
  return b.finish(1);  // one core: repeated indices must accumulate in order
}

}  // namespace npusim::emitter
