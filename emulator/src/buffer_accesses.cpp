// Buffer footprints of tile instructions, derived from the same operand meanings as their semantics.
#include "npusim/emulator/buffer_accesses.h"

#include <fmt/format.h>

#include <algorithm>

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
              consecutive(isa::Opcode::DmaLoad4d8, isa::Opcode::DmaLoad4d64) &&
              consecutive(isa::Opcode::DmaStore4d8, isa::Opcode::DmaStore4d64) &&
              consecutive(isa::Opcode::DmaStore8, isa::Opcode::DmaStore64) &&
              consecutive(isa::Opcode::DmaLoad2d8, isa::Opcode::DmaLoad2d64) &&
              consecutive(isa::Opcode::DmaStore2d8, isa::Opcode::DmaStore2d64));

}  // namespace

std::vector<BufferAccess> buffer_accesses(const isa::Instruction& i, const std::array<uint64_t, isa::kRegisterCount>& r,
                                          IssuedEngineState& state) {
  using isa::Opcode;
  constexpr Buffer spad = Buffer::Scratchpad, acc = Buffer::Accumulator;
  const auto element_bytes = [](Opcode op, Opcode first) {
    return uint64_t{1} << (static_cast<int>(op) - static_cast<int>(first));
  };
  const uint64_t type_bytes = isa::element_bytes(i.type);
  const auto outer_elements = [&] {
    return times(times(state.dma_counts[0], state.dma_counts[1]), state.dma_counts[2]);
  };
  // The part of a binary operation's second operand that its broadcast mode reads.
  const auto broadcast_elements = [&](uint64_t count) -> uint64_t {
    const uint64_t mode = i.imm & 3, period = static_cast<uint32_t>(i.imm) >> 2;
    if (count == 0 || mode == 0) return count;
    if (mode == 1 || period == 0) return 1;
    return mode == 2 ? std::min(period, count) : (count - 1) / period + 1;
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
    case Opcode::DmaDim:
      if (i.imm >= 1 && i.imm <= 3) state.dma_counts[i.imm - 1] = r[i.rs1];
      return {};
    case Opcode::DmaLoad4d8:
    case Opcode::DmaLoad4d16:
    case Opcode::DmaLoad4d32:
    case Opcode::DmaLoad4d64:
      return {
          span(spad, r[i.rd], times(r[i.rs2], outer_elements()), element_bytes(i.opcode, Opcode::DmaLoad4d8), true)};
    case Opcode::DmaStore4d8:
    case Opcode::DmaStore4d16:
    case Opcode::DmaStore4d32:
    case Opcode::DmaStore4d64:
      return {
          span(spad, r[i.rs1], times(r[i.rs2], outer_elements()), element_bytes(i.opcode, Opcode::DmaStore4d8), false)};
    case Opcode::DmaCoreToCore: return {span(spad, r[i.rs1], r[i.rs3], 1, false)};
    case Opcode::Vadd:
    case Opcode::Vsub:
    case Opcode::Vmul:
    case Opcode::Vdiv:
    case Opcode::Vrem:
    case Opcode::Vmax:
    case Opcode::Vmin:
    case Opcode::Vand:
    case Opcode::Vor:
    case Opcode::Vxor:
      return {span(spad, r[i.rs1], r[i.rs3], type_bytes, false),
              span(spad, r[i.rs2], broadcast_elements(r[i.rs3]), type_bytes, false),
              span(spad, r[i.rd], r[i.rs3], type_bytes, true)};
    case Opcode::Vceq:
    case Opcode::Vcne:
    case Opcode::Vclt:
    case Opcode::Vcle:
      return {span(spad, r[i.rs1], r[i.rs3], type_bytes, false),
              span(spad, r[i.rs2], broadcast_elements(r[i.rs3]), type_bytes, false),
              span(spad, r[i.rd], r[i.rs3], 1, true)};
    case Opcode::Vfma:
      return {span(spad, r[i.rs1], r[i.rs3], type_bytes, false),
              span(spad, r[i.rs2], broadcast_elements(r[i.rs3]), type_bytes, false),
              span(spad, r[i.rd], r[i.rs3], type_bytes, true)};
    case Opcode::Vsel:
      return {span(spad, r[i.rs1], r[i.rs3], 1, false),
              span(spad, r[i.rs2], broadcast_elements(r[i.rs3]), type_bytes, false),
              span(spad, r[i.rd], r[i.rs3], type_bytes, true)};
    case Opcode::Vfill: return {span(spad, r[i.rd], r[i.rs3], type_bytes, true)};
    case Opcode::Vcvt:
      return {span(spad, r[i.rs1], r[i.rs3], isa::element_bytes(static_cast<isa::ElementType>(i.imm & 7)), false),
              span(spad, r[i.rd], r[i.rs3], type_bytes, true)};
    case Opcode::Vmov:
    case Opcode::Vneg:
    case Opcode::Vabs:
    case Opcode::Vexp:
    case Opcode::Vlog:
    case Opcode::Vtanh:
    case Opcode::Vsigmoid:
    case Opcode::Verf:
    case Opcode::Vrsqrt:
    case Opcode::Vrecip:
    case Opcode::Vsqrt:
    case Opcode::Vsin:
    case Opcode::Vcos:
    case Opcode::Vlog1p:
    case Opcode::Vexpm1:
    case Opcode::Vfloor:
    case Opcode::Vceil:
    case Opcode::Vround:
    case Opcode::Vtrunc:
      return {span(spad, r[i.rs1], r[i.rs3], type_bytes, false), span(spad, r[i.rd], r[i.rs3], type_bytes, true)};
    case Opcode::Vtr:
      return {span(spad, r[i.rs1], times(r[i.rs2], r[i.rs3]), type_bytes, false),
              span(spad, r[i.rd], times(r[i.rs2], r[i.rs3]), type_bytes, true)};
    case Opcode::DmaLoadIndexed:
      return {span(spad, r[i.rs2], r[i.rs3], 8, false), span(spad, r[i.rd], r[i.rs3], type_bytes, true)};
    case Opcode::DmaStoreIndexed:
    case Opcode::DmaStoreAddIndexed:
      return {span(spad, r[i.rs2], r[i.rs3], 8, false), span(spad, r[i.rs1], r[i.rs3], type_bytes, false)};
    case Opcode::Vcheck: return {span(spad, r[i.rs1], r[i.rs3], type_bytes, false)};
    case Opcode::Vrand:
    case Opcode::Vrandn: return {span(spad, r[i.rd], r[i.rs3], type_bytes, true)};
    case Opcode::Vrsum:
    case Opcode::Vrmax:
    case Opcode::Vrmin:
      return {span(spad, r[i.rs1], times(r[i.rs2], r[i.rs3]), type_bytes, false),
              span(spad, r[i.rd], r[i.rs2], type_bytes, true)};
    case Opcode::Vargmax:
    case Opcode::Vargmin:
      return {span(spad, r[i.rs1], times(r[i.rs2], r[i.rs3]), type_bytes, false),
              span(spad, r[i.rd], r[i.rs2], 8, true)};
    case Opcode::MatrixLoadWeights:
    case Opcode::MatrixLoadWeightsTransposed:
      state.weight_rows = r[i.rs2];
      state.weight_cols = r[i.rs3];
      return {span(spad, r[i.rs1], times(r[i.rs2], r[i.rs3]), type_bytes, false)};
    case Opcode::MatrixMultiply:
      return {span(spad, r[i.rs1], times(r[i.rs2], state.weight_rows), type_bytes, false),
              span(acc, r[i.rd], times(r[i.rs2], state.weight_cols), 4, true)};
    case Opcode::MatrixStore:
      return {span(acc, r[i.rs1], r[i.rs2], 4, false), span(spad, r[i.rd], r[i.rs2], type_bytes, true)};
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
