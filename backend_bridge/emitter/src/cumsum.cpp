// The cumsum (cumprod) kernel. The cores share tiles of rt rows (units_across_cores.h); per tile, a 2-D DMA with a
// row stride of one element and an element stride of one row loads it transposed into the scratchpad, [cols][rt], so
// that column j of all rt rows is contiguous; then column j += (*=) column j - 1 for j = 1 .. cols - 1 (one vector
// add or multiply of rt elements each, in order), and the same transposed DMA stores it back. The builder orders the
// load, the adds and the store by the tile they share.
//
// A row too long for the scratchpad is scanned in chunks of columns: a tile of a few rows, cc columns at a time,
// each chunk's first column combined with the previous chunk's last one (the carry, kept in the scratchpad and
// starting as the identity), so that every element sees the same sequence of adds as in one pass. A row that fits is
// one chunk.
#include "npusim/emitter/cumsum.h"

#include <fmt/format.h>

#include <algorithm>

#include "npusim/emitter/kernel_builder.h"
#include "units_across_cores.h"

namespace npusim::emitter {

namespace {

constexpr int64_t kChunkedRows = 8;  // rows per tile when a row does not fit: each column step scans this many

}  // namespace

Kernel emit_cumsum(const CumsumSpec& spec, const config::ChipConfig& config) {
  if (spec.rows < 1 || spec.cols < 1)
    throw std::invalid_argument(fmt::format("a cumsum over {} x {} has no elements", spec.rows, spec.cols));
  if (spec.type != isa::ElementType::F32 && spec.type != isa::ElementType::I32 && spec.type != isa::ElementType::I64)
    throw std::invalid_argument(
        fmt::format("cumsum of {}: the kernel sums f32, i32 or i64", isa::type_name(spec.type)));
  const int64_t bytes = static_cast<int64_t>(isa::element_bytes(spec.type));
  const auto scratchpad = static_cast<int64_t>(config.scratchpad_bytes());
  const auto carry_bytes = [&](int64_t rows) { return (rows * bytes + 63) / 64 * 64; };
  // Whole rows when one fits beside its carry, as many as fit; else kChunkedRows rows in chunks of columns.
  int64_t tile_rows = std::min(spec.rows, scratchpad / (spec.cols * bytes));
  while (tile_rows > 0 && tile_rows * spec.cols * bytes + carry_bytes(tile_rows) > scratchpad) --tile_rows;
  int64_t chunk = spec.cols;
  if (tile_rows < 1) {
    tile_rows = std::min(spec.rows, kChunkedRows);
    chunk = (scratchpad - carry_bytes(tile_rows)) / (tile_rows * bytes);
    if (chunk < 2) throw Unsupported("a cumsum's chunk of two columns does not fit the scratchpad");
  }
  const int64_t tiles = (spec.rows + tile_rows - 1) / tile_rows;
  const int64_t cores = cores_for_units(tiles, config);
  const bool wide = bytes == 8;
  const std::string name = (spec.product ? "cumprod_" : "cumsum_") + std::string(isa::type_name(spec.type));
  const isa::Opcode combine = spec.product ? isa::Opcode::Vmul : isa::Opcode::Vadd;
  // x + identity and x * identity are x for every x (-0 for float sums, so that -0 stays -0).
  const int64_t identity = spec.product ? (spec.type == isa::ElementType::F32 ? 0x3f800000 : 1)
                                        : (spec.type == isa::ElementType::F32 ? INT32_MIN : 0);
  KernelBuilder b(name, config);
  b.describe(fmt::format("{}: {} rows of {}, {} rows per tile, chunks of {} columns, {} cores", name, spec.rows,
                         spec.cols, tile_rows, chunk, cores));
  const Tile tile = b.tile(Space::Scratchpad, tile_rows * chunk * bytes, "transposed rows");
  const Tile carry = b.tile(Space::Scratchpad, carry_bytes(tile_rows), "last column of the previous chunk");
  Reg out = b.reg("output"), in = b.reg("input"), tile_number = b.reg("tile number");
  Reg row = b.reg("first row of the tile"), base = b.reg("tile");
  Reg rows_in_tile = b.reg("rows in the tile"), column = b.reg("first column of the chunk");
  Reg columns = b.reg("columns in the chunk"), run = b.reg("bytes per column run"), carried = b.reg("carry");
  Reg scratch = b.reg("scratch"), dram = b.reg("DRAM address");
  b.Ld(out, kArgumentBlock, 0);
  b.Ld(in, kArgumentBlock, 8);
  b.point(base, tile);
  b.point(carried, carry);
  {  // The transposed tile: rt elements one row apart, in runs of the chunk's columns one element apart.
    Reg one = b.reg("one");
    b.li(one, 1);
    b.DmaDim(2, one, kZero);
    b.DmaDim(3, one, kZero);
  }
  for_each_unit_across_cores(
      b, tile_number, tiles, cores,
      [&] {
        const Label next_chunk = b.label();
        b.li(row, tile_rows);
        b.Mul(row, row, tile_number);
        {
          const Label sized = b.label();
          b.li(rows_in_tile, spec.rows);  // min(rt, rows - first row)
          b.Sub(rows_in_tile, rows_in_tile, row);
          b.li(scratch, tile_rows);
          b.Bltu(rows_in_tile, scratch, sized);
          b.move(rows_in_tile, scratch);
          b.bind(sized);
        }
        b.Vfill(spec.type, carried, rows_in_tile, identity);
        b.li(run, bytes);
        b.Mul(run, run, rows_in_tile);
        b.move(column, kZero);
        b.bind(next_chunk);
        if (chunk == spec.cols) {
          b.li(columns, chunk);
        } else {  // min(cc, cols - first column)
          const Label sized = b.label();
          b.li(columns, spec.cols);
          b.Sub(columns, columns, column);
          b.li(scratch, chunk);
          b.Bltu(columns, scratch, sized);
          b.move(columns, scratch);
          b.bind(sized);
        }
        // The chunk in DRAM: element row * cols + first column of `tensor`, its runs of `columns` elements.
        const auto address_chunk = [&](R tensor) {
          b.li(dram, spec.cols);
          b.Mul(dram, dram, row);
          b.Add(dram, dram, column);
          b.mul_constant(dram, bytes);
          b.Add(dram, dram, tensor);
          Reg element = b.reg("element bytes");
          b.li(element, bytes);
          b.DmaDim(1, columns, element);
        };
        address_chunk(in);
        if (wide) {
          b.DmaLoad4d64(base, dram, rows_in_tile, spec.cols * bytes);
        } else {
          b.DmaLoad4d32(base, dram, rows_in_tile, spec.cols * bytes);
        }
        // The first column takes the carry outside the loop, so that the builder's wait for the load comes once per
        // chunk, not per column.
        b.emit(combine, {spec.type, base, base, carried, rows_in_tile, 0});
        {  // column j op= column j - 1, j = 1 .. columns - 1; then the last column is the next chunk's carry
          Reg previous = b.reg("previous column"), current = b.reg("this column"), left = b.reg("columns left");
          const Label scan = b.label(), scanned = b.label();
          b.move(current, base);
          b.Addi(left, columns, -1);
          b.Beq(left, kZero, scanned);
          b.bind(scan);
          b.move(previous, current);
          b.bind(previous, tile);
          b.Add(current, current, run);
          b.bind(current, tile);
          b.emit(combine, {spec.type, current, current, previous, rows_in_tile, 0});
          b.Addi(left, left, -1);
          b.Bne(left, kZero, scan);
          b.bind(scanned);
          if (chunk < spec.cols) {
            b.bind(current, tile);
            b.Vmov(spec.type, carried, current, rows_in_tile);
          }
        }
        address_chunk(out);
        if (wide) {
          b.DmaStore4d64(dram, base, rows_in_tile, spec.cols * bytes);
        } else {
          b.DmaStore4d32(dram, base, rows_in_tile, spec.cols * bytes);
        }
        b.add_constant(column, chunk);
        b.li(scratch, spec.cols);
        b.Bltu(column, scratch, next_chunk);
      },
      scratch);
  b.Halt();
  return b.finish(cores);
}

}  // namespace npusim::emitter
