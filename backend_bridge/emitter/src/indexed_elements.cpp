// Gather, scatter and scatter-add of single elements by index. A unit of work is one (outer, inner) column: the
// positions j of the index tensor, in chunks that fit the scratchpad. Per chunk: load the indices (widening int32
// to i64), check them against the indexed dimension with vcheck, then move the values with one indexed DMA, whose
// stride steps along the data's indexed dimension. The fences keep the check ahead of every indexed access.
//
// Registers: r1 arguments; r2 data, r3 index, r4 values; r5 unit, r6 step across cores, r7 unit count, r8 outer,
// r9 inner, r10 chunk start, r11 chunk length, r12 positions, r13 dimension size, r14 inner count, r15 chunk
// capacity, r16-r18 scratch, r19 the values' scratchpad address, r22-r24 column bases of data, index and values;
// for wrapping negative indices, r25 the mask, r26 the wrapped indices, r27 the constant 0 and r28 the dimension.
// Scratchpad: i64 indices at 0, int32 indices staged after them, the values, then the wrapping's buffers.
#include "npusim/emitter/indexed_elements.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/emitter/gather.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

int32_t immediate_stride(int64_t elements, int64_t bytes) {
  const int64_t stride = elements * bytes;
  if (stride < std::numeric_limits<int32_t>::min() || stride > std::numeric_limits<int32_t>::max())
    throw Unsupported(fmt::format("a stride of {} bytes does not fit the DMA immediate", stride));
  return static_cast<int32_t>(stride);
}

// base_out = base + (outer * strides.outer + inner * strides.inner) * bytes.
void column_base(AssemblyWriter& w, int base_out, int base, const Strides3& strides, int64_t bytes) {
  w.load_constant(16, strides.outer * bytes);
  w.line("mul r16, r8, r16");
  w.load_constant(17, strides.inner * bytes);
  w.line("mul r17, r9, r17");
  w.line("add r{}, r{}, r16", base_out, base);
  w.line("add r{0}, r{0}, r17", base_out);
}

// r17 = base + chunk start * position stride.
void chunk_address(AssemblyWriter& w, int base, int32_t position_stride) {
  w.load_constant(16, position_stride);
  w.line("mul r17, r10, r16");
  w.line("add r17, r{}, r17", base);
}

const char* move_name(IndexedMove move) {
  switch (move) {
    case IndexedMove::Gather: return "gather";
    case IndexedMove::Scatter: return "scatter";
    case IndexedMove::ScatterAdd: return "scatter_add";
  }
  return "?";
}

}  // namespace

Kernel emit_indexed_elements(const IndexedElementsSpec& spec, const config::ChipConfig& config) {
  if (spec.outer < 1 || spec.positions < 1 || spec.inner < 1 || spec.dim_size < 1)
    throw std::invalid_argument("an indexed move needs at least one index and a non-empty dimension");
  if (spec.index_bytes != 8 && spec.index_bytes != 4) throw Unsupported("indices must be int64 or int32");
  if (spec.move == IndexedMove::ScatterAdd && spec.type == isa::ElementType::Bool)
    throw Unsupported("scatter-add of bool elements");
  const auto bytes = static_cast<int64_t>(isa::element_bytes(spec.type));
  const std::string type(isa::type_name(spec.type));
  const int32_t data_stride = immediate_stride(spec.data.position, bytes);
  const int32_t index_stride = immediate_stride(spec.index.position, spec.index_bytes);
  const int32_t values_stride = immediate_stride(spec.values.position, bytes);
  if (spec.wrap_negative && spec.dim_size > std::numeric_limits<int32_t>::max())
    throw Unsupported("wrapping indices of a dimension beyond the vfill immediate");
  const int64_t staging_bytes = spec.index_bytes == 4 ? 4 : 0, wrap_bytes = spec.wrap_negative ? 1 + 8 : 0;
  const int64_t chunk = std::min<int64_t>(
      {spec.positions, int64_t{16384},
       (static_cast<int64_t>(config.scratchpad_bytes()) - 16) / (8 + staging_bytes + bytes + wrap_bytes)});
  const int64_t staging = 8 * chunk, values = staging + staging_bytes * chunk, mask = values + bytes * chunk;
  const int64_t wrapped = mask + chunk, constants = wrapped + 8 * chunk;
  const int64_t units = spec.outer * spec.inner;

  AssemblyWriter w;
  w.comment(fmt::format("{}_{}: {} x {} x {} elements, dimension of {}", move_name(spec.move), type, spec.outer,
                        spec.positions, spec.inner, spec.dim_size));
  w.line("ld r2, 0(r1)");
  w.line("ld r3, 8(r1)");
  w.line("ld r4, 16(r1)");
  w.line("csrr r5, coreid");
  w.line("csrr r6, ncores");
  w.load_constant(7, units);
  w.load_constant(12, spec.positions);
  w.load_constant(13, spec.dim_size);
  w.load_constant(14, spec.inner);
  w.load_constant(15, chunk);
  w.load_constant(19, values);
  w.line("bgeu r5, r7, done");
  if (spec.wrap_negative) {
    w.load_constant(25, mask);
    w.load_constant(26, wrapped);
    w.load_constant(27, constants);
    w.load_constant(28, constants + 8);
    w.line("li r16, 1");
    w.line("vfill.i64 r27, r16, 0");
    w.line("vfill.i64 r28, r16, {}", spec.dim_size);
  }
  w.label("unit");
  w.line("divu r8, r5, r14");
  w.line("remu r9, r5, r14");
  column_base(w, 22, 2, spec.data, bytes);
  column_base(w, 23, 3, spec.index, spec.index_bytes);
  column_base(w, 24, 4, spec.values, bytes);
  w.line("li r10, 0");
  w.label("chunk");
  w.line("sub r11, r12, r10");
  w.line("bltu r11, r15, sized");
  w.line("addi r11, r15, 0");
  w.label("sized");
  chunk_address(w, 23, index_stride);
  if (spec.index_bytes == 8) {
    w.line("dma.ld.b64 r0, r17, r11, {}", index_stride);
    w.line("fence");
  } else {
    w.load_constant(18, staging);
    w.line("dma.ld.b32 r18, r17, r11, {}", index_stride);
    w.line("fence");
    w.line("vcvt.i64.i32 r0, r18, r11");
  }
  if (spec.wrap_negative) {
    w.line("vclt.i64 r25, r0, r27, r11, 1");
    w.line("vadd.i64 r26, r0, r28, r11, 1");
    w.line("vsel.i64 r0, r25, r26, r11");
  }
  w.line("vcheck.i64 r0, r13, r11, {}", kIndexOutOfRangeTrap);
  w.line("fence");
  chunk_address(w, 24, values_stride);
  switch (spec.move) {
    case IndexedMove::Gather:
      w.line("dma.ldx.{} r19, r22, r0, r11, {}", type, data_stride);
      w.line("dma.st.b{} r17, r19, r11, {}", bytes * 8, values_stride);
      break;
    case IndexedMove::Scatter:
      w.line("dma.ld.b{} r19, r17, r11, {}", bytes * 8, values_stride);
      w.line("dma.stx.{} r22, r19, r0, r11, {}", type, data_stride);
      break;
    case IndexedMove::ScatterAdd:
      w.line("dma.ld.b{} r19, r17, r11, {}", bytes * 8, values_stride);
      w.line("dma.stxadd.{} r22, r19, r0, r11, {}", type, data_stride);
      break;
  }
  w.line("add r10, r10, r11");
  w.line("bltu r10, r12, chunk");
  w.line("add r5, r5, r6");
  w.line("bltu r5, r7, unit");
  w.label("done");
  w.line("fence");
  w.line("halt");
  Kernel kernel;
  kernel.name = fmt::format("{}_{}", move_name(spec.move), type);
  kernel.words = isa::assemble(w.text(), kernel.name + ".s");
  kernel.cores = std::min<int64_t>(units, config.chip_cores);
  return kernel;
}

}  // namespace npusim::emitter
