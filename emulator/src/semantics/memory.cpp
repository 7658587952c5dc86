// Scalar loads and stores to device DRAM (naturally aligned, little-endian).
#include <fmt/format.h>

#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

uint64_t effective_address(ExecContext& c, const Instruction& i, uint64_t bytes) {
  const uint64_t address = c.reg(i.rs1) + static_cast<uint64_t>(static_cast<int64_t>(i.imm));
  if (address % bytes != 0) throw Trap(fmt::format("misaligned {}-byte access at 0x{:x}", bytes, address));
  return address;
}
template <typename T>
void load(ExecContext& c, const Instruction& i) {
  T value{};
  c.read_dram(effective_address(c, i, sizeof(T)), &value, sizeof(T));
  c.set_reg(i.rd, value);
}
template <typename T>
void store(ExecContext& c, const Instruction& i) {
  const T value = static_cast<T>(c.reg(i.rs2));
  c.write_dram(effective_address(c, i, sizeof(T)), &value, sizeof(T));
}
}  // namespace

void Ld(ExecContext& c, const Instruction& i) { load<uint64_t>(c, i); }
void Lw(ExecContext& c, const Instruction& i) { load<uint32_t>(c, i); }
void St(ExecContext& c, const Instruction& i) { store<uint64_t>(c, i); }
void Sw(ExecContext& c, const Instruction& i) { store<uint32_t>(c, i); }

}  // namespace npusim::emulator::semantics
