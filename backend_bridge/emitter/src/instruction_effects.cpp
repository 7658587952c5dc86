// The memory effects of DMA, vector and matrix instructions, from their documentation in instructions.def.
#include "instruction_effects.h"

#include <fmt/format.h>

#include <stdexcept>

namespace npusim::emitter {
namespace {

constexpr MemoryOperand spad_write(Field field) { return {field, Space::Scratchpad, false, true}; }
constexpr MemoryOperand spad_read(Field field) { return {field, Space::Scratchpad, true, false}; }

}  // namespace

std::optional<Engine> queue_engine(isa::Opcode opcode) {
  switch (isa::info(opcode).timing) {
    case isa::TimingClass::Dma: return Engine::Dma;
    case isa::TimingClass::Vector:
    case isa::TimingClass::VectorSpecial: return Engine::Vector;
    case isa::TimingClass::Matrix: return Engine::Matrix;
    default: return std::nullopt;
  }
}

std::vector<MemoryOperand> memory_operands(const isa::Instruction& instruction) {
  using enum isa::Opcode;
  using enum Field;
  switch (instruction.opcode) {
    case DmaLoad8:
    case DmaLoad16:
    case DmaLoad32:
    case DmaLoad64:
    case DmaLoad2d8:
    case DmaLoad2d16:
    case DmaLoad2d32:
    case DmaLoad2d64:
    case DmaLoad4d8:
    case DmaLoad4d16:
    case DmaLoad4d32:
    case DmaLoad4d64: return {spad_write(Rd)};
    case DmaStore8:
    case DmaStore16:
    case DmaStore32:
    case DmaStore64:
    case DmaStore2d8:
    case DmaStore2d16:
    case DmaStore2d32:
    case DmaStore2d64:
    case DmaStore4d8:
    case DmaStore4d16:
    case DmaStore4d32:
    case DmaStore4d64:
    case DmaCoreToCore: return {spad_read(Rs1)};  // the receiver's side is ordered by a barrier
    case DmaLoadIndexed: return {spad_write(Rd), spad_read(Rs2)};
    case DmaStoreIndexed:
    case DmaStoreAddIndexed: return {spad_read(Rs1), spad_read(Rs2)};
    case DmaDim:
    case SemPostDma:
    case SemWaitDma:
    case SemPostVector:
    case SemWaitVector:
    case SemPostMatrix:
    case SemWaitMatrix: return {};
    case Vadd:
    case Vmul:
    case Vmax:
    case Vmin:
    case Vsub:
    case Vdiv:
    case Vrem:
    case Vand:
    case Vor:
    case Vxor:
    case Vceq:
    case Vcne:
    case Vclt:
    case Vcle: return {spad_write(Rd), spad_read(Rs1), spad_read(Rs2)};
    case Vsel:
    case Vfma: return {{Rd, Space::Scratchpad, true, true}, spad_read(Rs1), spad_read(Rs2)};
    case Vfill:
    case Vrand:
    case Vrandn: return {spad_write(Rd)};
    case Vmov:
    case Vcvt:
    case Vneg:
    case Vabs:
    case Vexp:
    case Vlog:
    case Vtanh:
    case Vsigmoid:
    case Verf:
    case Vrsqrt:
    case Vrecip:
    case Vsqrt:
    case Vsin:
    case Vcos:
    case Vlog1p:
    case Vexpm1:
    case Vfloor:
    case Vceil:
    case Vround:
    case Vtrunc:
    case Vrsum:
    case Vrmax:
    case Vrmin:
    case Vargmax:
    case Vargmin:
    case Vtr: return {spad_write(Rd), spad_read(Rs1)};
    case Vcheck: return {spad_read(Rs1)};
    case MatrixLoadWeights:
    case MatrixLoadWeightsTransposed: return {spad_read(Rs1)};
    case MatrixMultiply: return {{Rd, Space::Accumulator, (instruction.imm & 1) != 0, true}, spad_read(Rs1)};
    case MatrixStore: return {spad_write(Rd), {Rs1, Space::Accumulator, true, false}};
    default: break;
  }
  if (queue_engine(instruction.opcode))
    throw std::logic_error(
        fmt::format("instruction_effects: no memory effects listed for {}", isa::info(instruction.opcode).name));
  return {};
}

}  // namespace npusim::emitter
