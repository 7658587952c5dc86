// DMA moves between DRAM (strided, stride in bytes, 0 broadcasts) and the contiguous scratchpad.
#include <cstring>

#include "npusim/emulator/semantics.h"

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
}  // namespace

void DmaLoad8(ExecContext& c, const Instruction& i) { dma_load<1>(c, i); }
void DmaLoad16(ExecContext& c, const Instruction& i) { dma_load<2>(c, i); }
void DmaLoad32(ExecContext& c, const Instruction& i) { dma_load<4>(c, i); }
void DmaLoad64(ExecContext& c, const Instruction& i) { dma_load<8>(c, i); }
void DmaStore8(ExecContext& c, const Instruction& i) { dma_store<1>(c, i); }
void DmaStore16(ExecContext& c, const Instruction& i) { dma_store<2>(c, i); }
void DmaStore32(ExecContext& c, const Instruction& i) { dma_store<4>(c, i); }
void DmaStore64(ExecContext& c, const Instruction& i) { dma_store<8>(c, i); }

}  // namespace npusim::emulator::semantics
