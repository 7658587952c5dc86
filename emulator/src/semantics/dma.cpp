// DMA moves between DRAM (strided, stride in bytes, 0 broadcasts) and the contiguous scratchpad.
#include <fmt/format.h>

#include <cstring>

#include "element_types.h"
#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

template <uint64_t ElementBytes>
void dma_load(ExecContext& c, const Instruction& i) {
  const uint64_t count = c.reg(i.rs2);
  const uint64_t dram = c.reg(i.rs1);
  const int64_t stride = i.imm;
  std::byte* destination = c.scratchpad(c.reg(i.rd), count, ElementBytes).data();
  if (stride == static_cast<int64_t>(ElementBytes)) {
    c.read_dram(dram, destination, count * ElementBytes);
    return;
  }
  c.read_dram_rows(dram, stride, ElementBytes, count, destination);
}

template <uint64_t ElementBytes>
void dma_store(ExecContext& c, const Instruction& i) {
  const uint64_t count = c.reg(i.rs2);
  const uint64_t dram = c.reg(i.rd);
  const int64_t stride = i.imm;
  const std::byte* source = c.scratchpad(c.reg(i.rs1), count, ElementBytes).data();
  if (stride == static_cast<int64_t>(ElementBytes)) {
    c.write_dram(dram, source, count * ElementBytes);
    return;
  }
  c.write_dram_rows(dram, stride, ElementBytes, count, source);
}
// rows x columns elements; traps (rather than wrapping) when the product cannot be a scratchpad size.
uint64_t tile_elements(uint64_t rows, uint64_t columns) {
  uint64_t elements = 0;
  if (__builtin_mul_overflow(rows, columns, &elements))
    throw Trap(fmt::format("DMA tile of {} x {} elements overflows", rows, columns));
  return elements;
}

template <uint64_t ElementBytes>
void dma_load_2d(ExecContext& c, const Instruction& i) {
  const uint64_t columns = c.reg(i.rs2), rows = c.reg(i.rs3);
  std::byte* destination = c.scratchpad(c.reg(i.rd), tile_elements(rows, columns), ElementBytes).data();
  const uint64_t row_bytes = columns * ElementBytes;
  if (static_cast<int64_t>(row_bytes) == i.imm) {  // back-to-back rows: one contiguous run
    c.read_dram(c.reg(i.rs1), destination, rows * row_bytes);
    return;
  }
  c.read_dram_rows(c.reg(i.rs1), i.imm, row_bytes, rows, destination);
}

template <uint64_t ElementBytes>
void dma_store_2d(ExecContext& c, const Instruction& i) {
  const uint64_t columns = c.reg(i.rs2), rows = c.reg(i.rs3);
  const std::byte* source = c.scratchpad(c.reg(i.rs1), tile_elements(rows, columns), ElementBytes).data();
  const uint64_t row_bytes = columns * ElementBytes;
  if (static_cast<int64_t>(row_bytes) == i.imm) {  // back-to-back rows: one contiguous run
    c.write_dram(c.reg(i.rd), source, rows * row_bytes);
    return;
  }
  c.write_dram_rows(c.reg(i.rd), i.imm, row_bytes, rows, source);
}
// A 4-D tile: dimension 0 from the instruction (count rs2, stride imm), dimensions 1..3 from dma.dim. The
// scratchpad side is contiguous, dimension 0 innermost. `move(dram address, stride, run bytes, runs, scratchpad)`
// moves a set of equally spaced runs: a plane of whole rows when dimension 0 is contiguous in DRAM, else the
// elements of one row.
template <typename Move>
void for_each_4d_run(ExecContext& c, const Instruction& i, uint64_t element_bytes, std::byte* spad_base, Move move,
                     uint64_t dram) {
  const DmaShape& shape = c.dma_shape();
  const uint64_t inner = c.reg(i.rs2);
  const bool contiguous = i.imm == static_cast<int64_t>(element_bytes);
  uint64_t offset = 0;
  for (uint64_t i3 = 0; i3 < shape.counts[2]; ++i3)
    for (uint64_t i2 = 0; i2 < shape.counts[1]; ++i2) {
      const uint64_t plane = dram + i2 * shape.strides[1] + i3 * shape.strides[2];
      if (contiguous) {
        move(plane, shape.strides[0], inner * element_bytes, shape.counts[0], spad_base + offset);
        offset += shape.counts[0] * inner * element_bytes;
        continue;
      }
      for (uint64_t i1 = 0; i1 < shape.counts[0]; ++i1, offset += inner * element_bytes)
        move(plane + i1 * shape.strides[0], i.imm, element_bytes, inner, spad_base + offset);
    }
}

uint64_t elements_4d(ExecContext& c, const Instruction& i) {
  const DmaShape& shape = c.dma_shape();
  uint64_t elements = c.reg(i.rs2);
  for (uint64_t count : shape.counts)
    if (__builtin_mul_overflow(elements, count, &elements))
      throw Trap("4-D DMA tile overflows: its element count does not fit 64 bits");
  return elements;
}

template <uint64_t ElementBytes>
void dma_load_4d(ExecContext& c, const Instruction& i) {
  std::byte* destination = c.scratchpad(c.reg(i.rd), elements_4d(c, i), ElementBytes).data();
  for_each_4d_run(
      c, i, ElementBytes, destination,
      [&](uint64_t address, int64_t stride, uint64_t bytes, uint64_t runs, std::byte* spad) {
        c.read_dram_rows(address, stride, bytes, runs, spad);
      },
      c.reg(i.rs1));
}

template <uint64_t ElementBytes>
void dma_store_4d(ExecContext& c, const Instruction& i) {
  std::byte* source = c.scratchpad(c.reg(i.rs1), elements_4d(c, i), ElementBytes).data();
  for_each_4d_run(
      c, i, ElementBytes, source,
      [&](uint64_t address, int64_t stride, uint64_t bytes, uint64_t runs, std::byte* spad) {
        c.write_dram_rows(address, stride, bytes, runs, spad);
      },
      c.reg(i.rd));
}
}  // namespace

void DmaDim(ExecContext& c, const Instruction& i) {
  if (i.imm < 1 || i.imm > 3) throw Trap(fmt::format("dma.dim dimension {} is not 1, 2 or 3", i.imm));
  DmaShape& shape = c.dma_shape();
  shape.counts[i.imm - 1] = c.reg(i.rs1);
  shape.strides[i.imm - 1] = static_cast<int64_t>(c.reg(i.rs2));
}
void DmaLoad4d8(ExecContext& c, const Instruction& i) { dma_load_4d<1>(c, i); }
void DmaLoad4d16(ExecContext& c, const Instruction& i) { dma_load_4d<2>(c, i); }
void DmaLoad4d32(ExecContext& c, const Instruction& i) { dma_load_4d<4>(c, i); }
void DmaLoad4d64(ExecContext& c, const Instruction& i) { dma_load_4d<8>(c, i); }
void DmaStore4d8(ExecContext& c, const Instruction& i) { dma_store_4d<1>(c, i); }
void DmaStore4d16(ExecContext& c, const Instruction& i) { dma_store_4d<2>(c, i); }
void DmaStore4d32(ExecContext& c, const Instruction& i) { dma_store_4d<4>(c, i); }
void DmaStore4d64(ExecContext& c, const Instruction& i) { dma_store_4d<8>(c, i); }

void DmaCoreToCore(ExecContext& c, const Instruction& i) {
  const uint64_t bytes = c.reg(i.rs3);
  const std::byte* source = c.scratchpad(c.reg(i.rs1), bytes, 1).data();
  const std::span<std::byte> peer = c.peer_scratchpad(c.reg(i.rs2));
  const uint64_t address = c.reg(i.rd);
  if (address > peer.size() || bytes > peer.size() - address)
    throw Trap(fmt::format("dma.c2c of {} bytes at 0x{:x} is outside core {}'s {} KiB scratchpad", bytes, address,
                           c.reg(i.rs2), peer.size() / 1024));
  copy_bytes(peer.data() + address, source, bytes);
  c.stats().core_to_core_bytes += bytes;
}

void DmaLoad2d8(ExecContext& c, const Instruction& i) { dma_load_2d<1>(c, i); }
void DmaLoad2d16(ExecContext& c, const Instruction& i) { dma_load_2d<2>(c, i); }
void DmaLoad2d32(ExecContext& c, const Instruction& i) { dma_load_2d<4>(c, i); }
void DmaLoad2d64(ExecContext& c, const Instruction& i) { dma_load_2d<8>(c, i); }
void DmaStore2d8(ExecContext& c, const Instruction& i) { dma_store_2d<1>(c, i); }
void DmaStore2d16(ExecContext& c, const Instruction& i) { dma_store_2d<2>(c, i); }
void DmaStore2d32(ExecContext& c, const Instruction& i) { dma_store_2d<4>(c, i); }
void DmaStore2d64(ExecContext& c, const Instruction& i) { dma_store_2d<8>(c, i); }

void DmaLoad8(ExecContext& c, const Instruction& i) { dma_load<1>(c, i); }
void DmaLoad16(ExecContext& c, const Instruction& i) { dma_load<2>(c, i); }
void DmaLoad32(ExecContext& c, const Instruction& i) { dma_load<4>(c, i); }
void DmaLoad64(ExecContext& c, const Instruction& i) { dma_load<8>(c, i); }
void DmaStore8(ExecContext& c, const Instruction& i) { dma_store<1>(c, i); }
void DmaStore16(ExecContext& c, const Instruction& i) { dma_store<2>(c, i); }
void DmaStore32(ExecContext& c, const Instruction& i) { dma_store<4>(c, i); }
void DmaStore64(ExecContext& c, const Instruction& i) { dma_store<8>(c, i); }

}  // namespace npusim::emulator::semantics
