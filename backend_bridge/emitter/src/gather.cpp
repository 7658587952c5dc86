// The row gather. Each core takes its share of the indices (units_across_cores.h): it loads the index with a scalar
// load, checks it against the table (unsigned, so negative indices fail too), then moves the row through the
// scratchpad. The load and the store of a row are on the one DMA engine, whose queue keeps them in order.
#include "npusim/emitter/gather.h"

#include <fmt/format.h>

#include <bit>

#include "npusim/emitter/index_loads.h"
#include "npusim/emitter/kernel_builder.h"
#include "units_across_cores.h"

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
  constexpr isa::Opcode kLoads[] = {isa::Opcode::DmaLoad8, isa::Opcode::DmaLoad16, isa::Opcode::DmaLoad32,
                                    isa::Opcode::DmaLoad64};
  constexpr isa::Opcode kStores[] = {isa::Opcode::DmaStore8, isa::Opcode::DmaStore16, isa::Opcode::DmaStore32,
                                     isa::Opcode::DmaStore64};
  const int element_log2 = std::countr_zero(static_cast<unsigned>(element));

  KernelBuilder b("gather_rows", config);
  b.describe(fmt::format("gather_rows: {} rows of {} bytes from a table of {}", spec.indices, spec.row_bytes,
                         spec.table_rows));
  const Tile row = b.tile(Space::Scratchpad, spec.row_bytes, "row");
  Reg output = b.reg("output"), table = b.reg("table"), indices = b.reg("indices"), i = b.reg("i");
  Reg row_elements = b.reg("row elements"), table_rows = b.reg("table rows"), row_bytes = b.reg("row bytes");
  Reg buffer = b.reg("row buffer");
  b.Ld(output, kArgumentBlock, 0);
  b.Ld(table, kArgumentBlock, 8);
  b.Ld(indices, kArgumentBlock, 16);
  b.li(row_elements, spec.row_bytes / element);
  b.li(table_rows, spec.table_rows);
  b.li(row_bytes, spec.row_bytes);
  b.point(buffer, row);
  const int64_t cores = cores_for_units(spec.indices, config);
  for_each_unit_across_cores(b, i, spec.indices, cores, [&] {
    const Label in_range = b.label();
    Reg index = b.reg("index"), address = b.reg("DRAM address");
    load_index(b, spec.index_bytes, indices, i, index);
    b.Bltu(index, table_rows, in_range);
    b.RaiseTrap(kIndexOutOfRangeTrap);
    b.bind(in_range);
    b.Mul(address, index, row_bytes);
    b.Add(address, table, address);
    b.emit(kLoads[element_log2], {buffer, address, row_elements, element});
    b.Mul(address, i, row_bytes);
    b.Add(address, output, address);
    b.emit(kStores[element_log2], {address, buffer, row_elements, element});
  });
  b.Halt();
  return b.finish(cores);
}

}  // namespace npusim::emitter
