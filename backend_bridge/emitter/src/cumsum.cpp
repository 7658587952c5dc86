// The cumsum (cumprod) kernel. Each core takes tiles of rt rows (c, c + n, c + 2n, ...); per tile, a 2-D DMA with a
// row stride of one element and an element stride of one row loads it transposed into the scratchpad, [cols][rt], so
// that column j of all rt rows is contiguous; then column j += (*=) column j - 1 for j = 1 .. cols - 1 (one vector
// add or multiply of rt elements each, in order), and the same transposed DMA stores it back. The builder orders the
// load, the adds and the store by the tile they share.
#include "npusim/emitter/cumsum.h"

#include <fmt/format.h>

#include <algorithm>

#include "npusim/emitter/kernel_builder.h"

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
  const bool wide = bytes == 8;

  const std::string name = (spec.product ? "cumprod_" : "cumsum_") + type;
  const isa::Opcode combine = spec.product ? isa::Opcode::Vmul : isa::Opcode::Vadd;
  KernelBuilder b(name, config);
  b.describe(
      fmt::format("{}: {} rows of {}, {} rows per tile, {} cores", name, spec.rows, spec.cols, tile_rows, cores));
  const Tile tile = b.tile(Space::Scratchpad, tile_rows * spec.cols * bytes, "transposed rows");
  Reg out = b.reg("output"), in = b.reg("input"), rows = b.reg("rows"), row = b.reg("first row of the tile");
  Reg step = b.reg("row step across cores"), rows_in_tile = b.reg("rows in the tile"), base = b.reg("tile");
  b.Ld(out, kArgumentBlock, 0);
  b.Ld(in, kArgumentBlock, 8);
  b.li(rows, spec.rows);
  b.point(base, tile);
  b.Csrr(row, isa::Csr::CoreId);
  b.mul_constant(row, tile_rows);
  b.li(step, tile_rows * cores);
  {  // The transposed tile: rt elements one row apart, in cols runs one element apart.
    Reg cols = b.reg("cols"), element = b.reg("element bytes"), one = b.reg("one");
    b.li(cols, spec.cols);
    b.li(element, bytes);
    b.DmaDim(1, cols, element);
    b.li(one, 1);
    b.DmaDim(2, one, kZero);
    b.DmaDim(3, one, kZero);
  }
  const Label top = b.label(), sized = b.label(), done = b.label();
  b.Bgeu(row, rows, done);
  b.bind(top);
  {
    Reg tile_rows_reg = b.reg("rows per tile"), dram = b.reg("DRAM address");
    b.Sub(rows_in_tile, rows, row);  // min(rt, rows - first row)
    b.li(tile_rows_reg, tile_rows);
    b.Bltu(rows_in_tile, tile_rows_reg, sized);
    b.move(rows_in_tile, tile_rows_reg);
    b.bind(sized);
    b.li(dram, spec.cols * bytes);
    b.Mul(dram, dram, row);
    b.Add(dram, dram, in);
    if (wide) {
      b.DmaLoad4d64(base, dram, rows_in_tile, spec.cols * bytes);
    } else {
      b.DmaLoad4d32(base, dram, rows_in_tile, spec.cols * bytes);
    }
  }
  if (spec.cols > 1) {
    // The first add is outside the loop so that the builder's wait for the load comes once per tile, not per column.
    Reg run = b.reg("bytes per column run"), column = b.reg("this column");
    b.li(run, bytes);
    b.Mul(run, run, rows_in_tile);
    b.Add(column, base, run);
    b.bind(column, tile);
    b.emit(combine, {spec.type, column, column, base, rows_in_tile, 0});
    if (spec.cols > 2) {
      Reg previous = b.reg("previous column"), left = b.reg("columns left");
      b.li(left, spec.cols - 2);
      const Label scan = b.label();
      b.bind(scan);
      b.move(previous, column);
      b.bind(previous, tile);
      b.Add(column, column, run);
      b.bind(column, tile);
      b.emit(combine, {spec.type, column, column, previous, rows_in_tile, 0});
      b.Addi(left, left, -1);
      b.Bne(left, kZero, scan);
    }
  }
  {
    Reg dram = b.reg("DRAM address");
    b.li(dram, spec.cols * bytes);
    b.Mul(dram, dram, row);
    b.Add(dram, dram, out);
    if (wide) {
      b.DmaStore4d64(dram, base, rows_in_tile, spec.cols * bytes);
    } else {
      b.DmaStore4d32(dram, base, rows_in_tile, spec.cols * bytes);
    }
  }
  b.Add(row, row, step);
  b.Bltu(row, rows, top);
  b.bind(done);
  b.Halt();
  return b.finish(cores);
}

}  // namespace npusim::emitter
