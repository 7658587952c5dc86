// Gather, scatter, scatter-add and scatter with max, min or product of single elements by index. A unit of work is
// one (outer, inner) column: the positions j of the index tensor, in chunks that fit the scratchpad. Per chunk: load
// the indices (widening int32 to i64), check them against the indexed dimension with vcheck, then move the values
// with one indexed DMA, whose stride steps along the data's indexed dimension. A combining scatter reads, combines
// and writes back one element at a time, so that a repeated index combines with what the one before it stored. The
// builder orders the engines on the tiles; a fence keeps the check ahead of the indexed DMA, which only reads the
// checked indices, so no tile conflict would order it.
#include "npusim/emitter/indexed_elements.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "npusim/emitter/gather.h"
#include "npusim/emitter/kernel_builder.h"
#include "units_across_cores.h"

namespace npusim::emitter {
namespace {

int32_t immediate_stride(int64_t elements, int64_t bytes) {
  const int64_t stride = elements * bytes;
  if (stride < std::numeric_limits<int32_t>::min() || stride > std::numeric_limits<int32_t>::max())
    throw Unsupported(fmt::format("a stride of {} bytes does not fit the DMA immediate", stride));
  return static_cast<int32_t>(stride);
}

// base_out = base + (outer * strides.outer + inner * strides.inner) * bytes.
void column_base(KernelBuilder& b, R base_out, R base, R outer, R inner, const Strides3& strides, int64_t bytes) {
  Reg scratch = b.reg("column offset");
  b.li(scratch, strides.outer * bytes);
  b.Mul(scratch, outer, scratch);
  b.Add(base_out, base, scratch);
  b.li(scratch, strides.inner * bytes);
  b.Mul(scratch, inner, scratch);
  b.Add(base_out, base_out, scratch);
}

// address = base + chunk start * position stride.
void chunk_address(KernelBuilder& b, R address, R base, R chunk_start, int32_t position_stride) {
  b.li(address, position_stride);
  b.Mul(address, chunk_start, address);
  b.Add(address, base, address);
}

const char* move_name(IndexedMove move) {
  switch (move) {
    case IndexedMove::Gather: return "gather";
    case IndexedMove::Scatter: return "scatter";
    case IndexedMove::ScatterAdd: return "scatter_add";
    case IndexedMove::ScatterMax: return "scatter_amax";
    case IndexedMove::ScatterMin: return "scatter_amin";
    case IndexedMove::ScatterMul: return "scatter_prod";
  }
  return "?";
}

// The contiguous DMA load and store of `bytes`-wide elements.
isa::Opcode dma_load(int64_t bytes) {
  switch (bytes) {
    case 1: return isa::Opcode::DmaLoad8;
    case 2: return isa::Opcode::DmaLoad16;
    case 4: return isa::Opcode::DmaLoad32;
    default: return isa::Opcode::DmaLoad64;
  }
}
isa::Opcode dma_store(int64_t bytes) {
  switch (bytes) {
    case 1: return isa::Opcode::DmaStore8;
    case 2: return isa::Opcode::DmaStore16;
    case 4: return isa::Opcode::DmaStore32;
    default: return isa::Opcode::DmaStore64;
  }
}

}  // namespace

Kernel emit_indexed_elements(const IndexedElementsSpec& spec, const config::ChipConfig& config) {
  if (spec.outer < 1 || spec.positions < 1 || spec.inner < 1 || spec.dim_size < 1)
    throw std::invalid_argument("an indexed move needs at least one index and a non-empty dimension");
  if (spec.index_bytes != 8 && spec.index_bytes != 4) throw Unsupported("indices must be int64 or int32");
  const bool combines = spec.move == IndexedMove::ScatterMax || spec.move == IndexedMove::ScatterMin ||
                        spec.move == IndexedMove::ScatterMul;
  if ((spec.move == IndexedMove::ScatterAdd || combines) && spec.type == isa::ElementType::Bool)
    throw Unsupported(fmt::format("{} of bool elements", move_name(spec.move)));
  const auto bytes = static_cast<int64_t>(isa::element_bytes(spec.type));
  const std::string type(isa::type_name(spec.type));
  const int32_t data_stride = immediate_stride(spec.data.position, bytes);
  const int32_t index_stride = immediate_stride(spec.index.position, spec.index_bytes);
  const int32_t values_stride = immediate_stride(spec.values.position, bytes);
  if (spec.wrap_negative && spec.dim_size > std::numeric_limits<int32_t>::max())
    throw Unsupported("wrapping indices of a dimension beyond the vfill immediate");
  // Scratchpad per position: the i64 index, its int32 staging, the value, and for wrapping a mask byte and the
  // wrapped index; besides, the wrapping's two i64 constants and a combining scatter's element. The largest chunk
  // whose tiles fit once each is aligned.
  const int64_t staging_bytes = spec.index_bytes == 4 ? 4 : 0, wrap_bytes = spec.wrap_negative ? 1 + 8 : 0;
  const auto scratchpad_bytes = static_cast<int64_t>(config.scratchpad_bytes());
  const auto layout_bytes = [&](int64_t positions) {
    int64_t total = 0;
    for (int64_t tile :
         {8 * positions, staging_bytes * positions, bytes * positions, spec.wrap_negative ? positions : 0,
          spec.wrap_negative ? 8 * positions : 0, spec.wrap_negative ? int64_t{16} : 0, combines ? bytes : 0})
      total += (tile + 63) / 64 * 64;
    return total;
  };
  int64_t chunk = std::min<int64_t>(
      {spec.positions, int64_t{16384}, (scratchpad_bytes - 16) / (8 + staging_bytes + bytes + wrap_bytes)});
  while (chunk > 0 && layout_bytes(chunk) > scratchpad_bytes) --chunk;
  if (chunk < 1) throw Unsupported("the scratchpad cannot hold an indexed move's buffers");
  const int64_t units = spec.outer * spec.inner;
  const std::string name = fmt::format("{}_{}", move_name(spec.move), type);

  KernelBuilder b(name, config);
  b.describe(fmt::format("{}: {} x {} x {} elements, dimension of {}", name, spec.outer, spec.positions, spec.inner,
                         spec.dim_size));
  // The tiles (those of int32 indices and of wrapping only when used): i64 indices, int32 indices staged for
  // widening, the values, the mask of negative indices, the wrapped indices, the wrapping's constants 0 and dim_size.
  const Tile index_tile = b.tile(Space::Scratchpad, 8 * chunk, "i64 indices");
  const Tile staging_tile = spec.index_bytes == 4 ? b.tile(Space::Scratchpad, 4 * chunk, "int32 indices") : Tile{};
  const Tile values_tile = b.tile(Space::Scratchpad, bytes * chunk, "values");
  Tile mask_tile, wrapped_tile, constants_tile;
  if (spec.wrap_negative) {
    mask_tile = b.tile(Space::Scratchpad, chunk, "negative mask");
    wrapped_tile = b.tile(Space::Scratchpad, 8 * chunk, "wrapped indices");
    constants_tile = b.tile(Space::Scratchpad, 16, "wrap constants");
  }
  const Tile element_tile = combines ? b.tile(Space::Scratchpad, bytes, "combined element") : Tile{};
  Reg data = b.reg("data"), index = b.reg("index"), values = b.reg("values");
  Reg unit = b.reg("unit"), positions = b.reg("positions"), dim_size = b.reg("dimension size"),
      inner_count = b.reg("inner count");
  Reg capacity = b.reg("chunk capacity"), indices = b.reg("i64 indices buffer"), buffer = b.reg("values buffer");
  b.Ld(data, kArgumentBlock, 0);
  b.Ld(index, kArgumentBlock, 8);
  b.Ld(values, kArgumentBlock, 16);
  b.li(positions, spec.positions);
  b.li(dim_size, spec.dim_size);
  b.li(inner_count, spec.inner);
  b.li(capacity, chunk);
  b.point(indices, index_tile);
  b.point(buffer, values_tile);

  Reg staging, mask, wrapped, zero, dimension;
  if (spec.index_bytes == 4) {
    staging = b.reg("int32 indices buffer");
    b.point(staging, staging_tile);
  }
  // Wrapping negative indices: i < 0 ? i + dim_size : i, with the constants 0 and dim_size as i64 vectors of one.
  if (spec.wrap_negative) {
    mask = b.reg("negative mask buffer");
    wrapped = b.reg("wrapped indices buffer");
    zero = b.reg("zero");
    dimension = b.reg("dimension");
    b.point(mask, mask_tile);
    b.point(wrapped, wrapped_tile);
    b.point(zero, constants_tile);
    b.point(dimension, constants_tile, 8);
    Reg one = b.reg("one");
    b.li(one, 1);
    b.Vfill(isa::ElementType::I64, zero, one, 0);
    b.Vfill(isa::ElementType::I64, dimension, one, spec.dim_size);
  }

  const int64_t cores = cores_for_units(units, config);
  for_each_unit_across_cores(b, unit, units, cores, [&] {
    const Label next_chunk = b.label(), sized = b.label();
    Reg data_column = b.reg("data column"), index_column = b.reg("index column"),
        values_column = b.reg("values column");
    {
      Reg outer = b.reg("outer"), inner = b.reg("inner");
      b.Divu(outer, unit, inner_count);
      b.Remu(inner, unit, inner_count);
      column_base(b, data_column, data, outer, inner, spec.data, bytes);
      column_base(b, index_column, index, outer, inner, spec.index, spec.index_bytes);
      column_base(b, values_column, values, outer, inner, spec.values, bytes);
    }
    Reg start = b.reg("chunk start"), length = b.reg("chunk length"), address = b.reg("DRAM address");
    b.li(start, 0);
    b.bind(next_chunk);
    b.Sub(length, positions, start);
    b.Bltu(length, capacity, sized);
    b.move(length, capacity);
    b.bind(sized);
    chunk_address(b, address, index_column, start, index_stride);
    if (spec.index_bytes == 8) {
      b.DmaLoad64(indices, address, length, index_stride);
    } else {
      b.DmaLoad32(staging, address, length, index_stride);
      b.Vcvt(isa::ElementType::I64, isa::ElementType::I32, indices, staging, length);
    }
    if (spec.wrap_negative) {
      b.Vclt(isa::ElementType::I64, mask, indices, zero, length, 1);
      b.Vadd(isa::ElementType::I64, wrapped, indices, dimension, length, 1);
      b.Vsel(isa::ElementType::I64, indices, mask, wrapped, length);
    }
    b.Vcheck(isa::ElementType::I64, indices, dim_size, length, kIndexOutOfRangeTrap);
    b.Fence();  // no indexed access of DRAM before the check has passed
    chunk_address(b, address, values_column, start, values_stride);
    switch (spec.move) {
      case IndexedMove::Gather:
        b.DmaLoadIndexed(spec.type, buffer, data_column, indices, length, data_stride);
        b.emit(dma_store(bytes), {address, buffer, length, values_stride});
        break;
      case IndexedMove::Scatter:
        b.emit(dma_load(bytes), {buffer, address, length, values_stride});
        b.DmaStoreIndexed(spec.type, data_column, buffer, indices, length, data_stride);
        break;
      case IndexedMove::ScatterAdd:
        b.emit(dma_load(bytes), {buffer, address, length, values_stride});
        b.DmaStoreAddIndexed(spec.type, data_column, buffer, indices, length, data_stride);
        break;
      case IndexedMove::ScatterMax:
      case IndexedMove::ScatterMin:
      case IndexedMove::ScatterMul: {
        b.emit(dma_load(bytes), {buffer, address, length, values_stride});
        const isa::Opcode combine = spec.move == IndexedMove::ScatterMax   ? isa::Opcode::Vmax
                                    : spec.move == IndexedMove::ScatterMin ? isa::Opcode::Vmin
                                                                           : isa::Opcode::Vmul;
        Reg element = b.reg("combined element"), index_at = b.reg("this index"), value_at = b.reg("this value");
        Reg one = b.reg("one"), left = b.reg("positions left");
        b.point(element, element_tile);
        b.move(index_at, indices);
        b.bind(index_at, index_tile);
        b.move(value_at, buffer);
        b.bind(value_at, values_tile);
        b.li(one, 1);
        b.move(left, length);
        const Label next_position = b.label();
        b.bind(next_position);
        b.DmaLoadIndexed(spec.type, element, data_column, index_at, one, data_stride);
        b.emit(combine, {spec.type, element, element, value_at, one, 0});
        b.DmaStoreIndexed(spec.type, data_column, element, index_at, one, data_stride);
        b.Addi(index_at, index_at, 8);
        b.bind(index_at, index_tile);
        b.add_constant(value_at, bytes);
        b.bind(value_at, values_tile);
        b.Addi(left, left, -1);
        b.Bne(left, kZero, next_position);
        break;
      }
    }
    b.Add(start, start, length);
    b.Bltu(start, positions, next_chunk);
  });
  b.Halt();
  return b.finish(cores);
}

}  // namespace npusim::emitter
