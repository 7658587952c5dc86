// Buffer footprints of tile instructions, derived from the same operand meanings as their semantics.
#include "npusim/emulator/buffer_accesses.h"

#include <fmt/format.h>

namespace npusim::emulator {
namespace {

// [base, base + count * element_bytes), saturating instead of wrapping (the instruction itself traps then).
BufferAccess span(Buffer buffer, uint64_t base, uint64_t count, uint64_t element_bytes, bool write) {
  uint64_t bytes = 0, end = 0;
  if (__builtin_mul_overflow(count, element_bytes, &bytes) || __builtin_add_overflow(base, bytes, &end))
    end = UINT64_MAX;
  return {buffer, base, end, write};
}

uint64_t times(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

// Element sizes below come from each DMA family's opcodes being consecutive, b8 first.
constexpr bool consecutive(isa::Opcode first, isa::Opcode last) {
  return static_cast<int>(last) - static_cast<int>(first) == 3;
}
static_assert(consecutive(isa::Opcode::DmaLoad8, isa::Opcode::DmaLoad64) &&
              consecutive(isa::Opcode::DmaStore8, isa::Opcode::DmaStore64) &&
              consecutive(isa::Opcode::DmaLoad2d8, isa::Opcode::DmaLoad2d64) &&
              consecutive(isa::Opcode::DmaStore2d8, isa::Opcode::DmaStore2d64));

}  // namespace

std::vector<BufferAccess> buffer_accesses(const isa::Instruction& i, const std::array<uint64_t, isa::kRegisterCount>& r,
                                          IssuedWeightsShape& weights) {
  using isa::Opcode;
  constexpr Buffer spad = Buffer::Scratchpad, acc = Buffer::Accumulator;
  const auto element_bytes = [](Opcode op, Opcode first) {
    return uint64_t{1} << (static_cast<int>(op) - static_cast<int>(first));
  };
  switch (i.opcode) {
    case Opcode::DmaLoad8:
    case Opcode::DmaLoad16:
    case Opcode::DmaLoad32:
    case Opcode::DmaLoad64: return {span(spad, r[i.rd], r[i.rs2], element_bytes(i.opcode, Opcode::DmaLoad8), true)};
    case Opcode::DmaStore8:
    case Opcode::DmaStore16:
    case Opcode::DmaStore32:
    case Opcode::DmaStore64: return {span(spad, r[i.rs1], r[i.rs2], element_bytes(i.opcode, Opcode::DmaStore8), false)};
    case Opcode::DmaLoad2d8:
    case Opcode::DmaLoad2d16:
    case Opcode::DmaLoad2d32:
    case Opcode::DmaLoad2d64:
      return {span(spad, r[i.rd], times(r[i.rs2], r[i.rs3]), element_bytes(i.opcode, Opcode::DmaLoad2d8), true)};
    case Opcode::DmaStore2d8:
    case Opcode::DmaStore2d16:
    case Opcode::DmaStore2d32:
    case Opcode::DmaStore2d64:
      return {span(spad, r[i.rs1], times(r[i.rs2], r[i.rs3]), element_bytes(i.opcode, Opcode::DmaStore2d8), false)};
    case Opcode::VaddF32:
    case Opcode::VmulF32:
    case Opcode::VmaxF32:
    case Opcode::VminF32:
      return {span(spad, r[i.rs1], r[i.rs3], 4, false), span(spad, r[i.rs2], r[i.rs3], 4, false),
              span(spad, r[i.rd], r[i.rs3], 4, true)};
    case Opcode::MatrixLoadWeightsF32:
    case Opcode::MatrixLoadWeightsTransposedF32:
      weights = {r[i.rs2], r[i.rs3]};
      return {span(spad, r[i.rs1], times(r[i.rs2], r[i.rs3]), 4, false)};
    case Opcode::MatrixMultiplyF32:
      return {span(spad, r[i.rs1], times(r[i.rs2], weights.rows), 4, false),
              span(acc, r[i.rd], times(r[i.rs2], weights.cols), 4, true)};
    case Opcode::MatrixStoreF32:
      return {span(acc, r[i.rs1], r[i.rs2], 4, false), span(spad, r[i.rd], r[i.rs2], 4, true)};
    default: return {};
  }
}

bool conflicts(const BufferAccess& a, const BufferAccess& b) {
  return a.buffer == b.buffer && (a.write || b.write) && a.begin < b.end && b.begin < a.end;
}

std::string describe(const BufferAccess& access) {
  return fmt::format("{} {} bytes [0x{:x}, 0x{:x})", access.write ? "writes" : "reads",
                     access.buffer == Buffer::Scratchpad ? "scratchpad" : "accumulator", access.begin, access.end);
}

}  // namespace npusim::emulator
