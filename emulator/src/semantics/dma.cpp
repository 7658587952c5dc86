// DMA moves between DRAM (strided, stride in bytes, 0 broadcasts) and the contiguous scratchpad.
#include <fmt/format.h>

#include <cstring>

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
  for (uint64_t k = 0; k < count; ++k) c.read_dram(dram + k * stride, destination + k * ElementBytes, ElementBytes);
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
  for (uint64_t k = 0; k < count; ++k) c.write_dram(dram + k * stride, source + k * ElementBytes, ElementBytes);
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
  for (uint64_t r = 0; r < rows; ++r) c.read_dram(c.reg(i.rs1) + r * i.imm, destination + r * row_bytes, row_bytes);
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
  for (uint64_t r = 0; r < rows; ++r) c.write_dram(c.reg(i.rd) + r * i.imm, source + r * row_bytes, row_bytes);
}
}  // namespace

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
