// The cumsum kernel. Each core takes tiles of rt rows (c, c + n, c + 2n, ...); per tile, a 2-D DMA with a row
// stride of one element and an element stride of one row loads it transposed into the scratchpad, [cols][rt], so
// that column j of all rt rows is contiguous; then column j += column j - 1 for j = 1 .. cols - 1 (one vector add
// of rt elements each, in order), and the same transposed DMA stores it back.
//
// Registers: r1 arguments; r2 output, r3 input; r4 first row of the tile, r5 rows in it, r6 row step across cores,
// r7 scratch, r8 DRAM pointer, r9 column counter, r10 this column's tile, r11 the previous column's, r12 rows,
// r13 cols, r14 bytes per column run (rt elements).
#include "npusim/emitter/cumsum.h"

#include <fmt/format.h>

#include <algorithm>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {

Kernel emit_cumsum(const CumsumSpec& spec, const config::ChipConfig& config) {
  if (spec.rows < 1 || spec.cols < 1)
    throw std::invalid_argument(fmt::format("a cumsum over {} x {} has no elements", spec.rows, spec.cols));
  if (spec.type != isa::ElementType::F32 && spec.type != isa::ElementType::I32 && spec.type != isa::ElementType::I64)
    throw std::invalid_argument(
        fmt::format("cumsum of {}: the kernel sums f32, i32 or i64", isa::type_name(spec.type)));
  const int64_t bytes = static_cast<int64_t>(isa::element_bytes(spec.type));
  const int64_t tile_rows = std::min(spec.rows, static_cast<int64_t>(config.scratchpad_bytes()) / (spec.cols * bytes));
  if (tile_rows < 1) throw Unsupported(fmt::format("a row of {} elements does not fit the scratchpad", spec.cols));
  const int64_t tiles = (spec.rows + tile_rows - 1) / tile_rows;
  const int64_t cores = std::clamp<int64_t>(tiles, 1, config.chip_cores);
  const std::string type(isa::type_name(spec.type));

  AssemblyWriter w;
  w.comment(fmt::format("cumsum_{}: {} rows of {}, {} rows per tile, {} cores", type, spec.rows, spec.cols, tile_rows,
                        cores));
  w.line("ld r2, 0(r1)");
  w.line("ld r3, 8(r1)");
  w.load_constant(12, spec.rows);
  w.load_constant(13, spec.cols);
  w.line("csrr r4, coreid");
  w.load_constant(7, tile_rows);
  w.line("mul r4, r4, r7");
  w.load_constant(6, tile_rows * cores);
  // The transposed tile: rt elements one row apart, in cols runs one element apart.
  w.load_constant(7, bytes);
  w.line("dma.dim 1, r13, r7");
  w.line("li r7, 1");
  w.line("dma.dim 2, r7, r0");
  w.line("dma.dim 3, r7, r0");
  const std::string tile = w.new_label("tile"), sized = w.new_label("sized"), scan = w.new_label("scan"),
                    scanned = w.new_label("scanned"), done = w.new_label("done");
  w.line("bgeu r4, r12, {}", done);
  w.label(tile);
  w.line("sub r5, r12, r4");  // rows in this tile: min(rt, rows - first)
  w.load_constant(7, tile_rows);
  w.line("bltu r5, r7, {}", sized);
  w.line("addi r5, r7, 0");
  w.label(sized);
  w.load_constant(7, spec.cols * bytes);
  w.line("mul r8, r4, r7");
  w.line("add r8, r8, r3");
  w.line("dma.ld4.b{} r0, r8, r5, {}", 8 * bytes, spec.cols * bytes);
  w.line("fence");
  w.load_constant(7, bytes);
  w.line("mul r14, r5, r7");
  w.line("li r11, 0");
  w.line("addi r10, r14, 0");
  w.line("li r9, 1");
  w.label(scan);
  w.line("bgeu r9, r13, {}", scanned);
  w.line("vadd.{} r10, r10, r11, r5", type);
  w.line("addi r11, r10, 0");
  w.line("add r10, r10, r14");
  w.line("addi r9, r9, 1");
  w.line("jal r0, {}", scan);
  w.label(scanned);
  w.line("fence");
  w.load_constant(7, spec.cols * bytes);
  w.line("mul r8, r4, r7");
  w.line("add r8, r8, r2");
  w.line("dma.st4.b{} r8, r0, r5, {}", 8 * bytes, spec.cols * bytes);
  w.line("fence");
  w.line("add r4, r4, r6");
  w.line("bltu r4, r12, {}", tile);
  w.label(done);
  w.line("halt");

  Kernel kernel;
  kernel.name = "cumsum_" + type;
  kernel.words = isa::assemble(w.text(), kernel.name + ".s");
  kernel.cores = cores;
  return kernel;
}

}  // namespace npusim::emitter
