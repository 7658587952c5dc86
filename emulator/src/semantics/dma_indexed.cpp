// Indexed DMA: gathers and scatters of single elements at DRAM addresses base + idx[k] * stride, the indices being
// i64 in the scratchpad. Each element is its own DRAM access, so a timed model charges one burst per element.
#include <fmt/format.h>

#include "element_types.h"
#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

// The DRAM address of element k: base + idx[k] * stride, wrapping (an address outside the device then traps).
class IndexedAddresses {
 public:
  IndexedAddresses(ExecContext& c, const Instruction& i, uint64_t base)
      : base_(base), stride_(i.imm), indices_(c.scratchpad(c.reg(i.rs2), c.reg(i.rs3), sizeof(int64_t)).data()) {}
  uint64_t operator[](uint64_t k) const {
    return base_ + static_cast<uint64_t>(load<int64_t>(indices_, k)) * static_cast<uint64_t>(stride_);
  }

 private:
  uint64_t base_;
  int64_t stride_;
  const std::byte* indices_;
};

}  // namespace

void DmaLoadIndexed(ExecContext& c, const Instruction& i) {
  const uint64_t count = c.reg(i.rs3), bytes = isa::element_bytes(i.type);
  const IndexedAddresses address(c, i, c.reg(i.rs1));
  std::byte* destination = c.scratchpad(c.reg(i.rd), count, bytes).data();
  for (uint64_t k = 0; k < count; ++k) c.read_dram(address[k], destination + k * bytes, bytes);
}

void DmaStoreIndexed(ExecContext& c, const Instruction& i) {
  const uint64_t count = c.reg(i.rs3), bytes = isa::element_bytes(i.type);
  const IndexedAddresses address(c, i, c.reg(i.rd));
  const std::byte* source = c.scratchpad(c.reg(i.rs1), count, bytes).data();
  for (uint64_t k = 0; k < count; ++k) c.write_dram(address[k], source + k * bytes, bytes);
}

// Read, add and write back one element at a time, so a repeated index sees the sum before it.
void DmaStoreAddIndexed(ExecContext& c, const Instruction& i) {
  visit_type(i.type, [&]<typename T>(T) {
    const uint64_t count = c.reg(i.rs3);
    const IndexedAddresses address(c, i, c.reg(i.rd));
    const std::byte* source = c.scratchpad(c.reg(i.rs1), count, sizeof(T)).data();
    for (uint64_t k = 0; k < count; ++k) {
      T sum;
      c.read_dram(address[k], &sum, sizeof(T));
      sum = narrow<T>(widen(sum) + widen(load<T>(source, k)));
      c.write_dram(address[k], &sum, sizeof(T));
    }
  });
}

void Vcheck(ExecContext& c, const Instruction& i) {
  visit_type(i.type, [&]<typename T>(T) {
    const uint64_t count = c.reg(i.rs3), bound = c.reg(i.rs2);
    const std::byte* values = c.scratchpad(c.reg(i.rs1), count, sizeof(T)).data();
    c.stats().vector_elements += count;
    for (uint64_t k = 0; k < count; ++k) {
      const int64_t value = widen(load<T>(values, k));
      if (value < 0 || static_cast<uint64_t>(value) >= bound)
        throw Trap(fmt::format("vcheck: element {} is {}, outside [0, {}): trap instruction, code {}", k, value, bound,
                               i.imm));
    }
  });
}

}  // namespace npusim::emulator::semantics
