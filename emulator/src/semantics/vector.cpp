// Vector engine elementwise operations on scratchpad data.
#include <cmath>
#include <cstring>

#include "npusim/emulator/semantics.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

// Operands may alias (x + x, in-place), so each element is read before the result is written.
template <typename Operation>
void binary_f32(ExecContext& c, const Instruction& i, Operation operation) {
  const uint64_t count = c.reg(i.rs3);
  c.stats().vector_elements += count;
  std::byte* out = c.scratchpad(c.reg(i.rd), count, sizeof(float)).data();
  const std::byte* a = c.scratchpad(c.reg(i.rs1), count, sizeof(float)).data();
  const std::byte* b = c.scratchpad(c.reg(i.rs2), count, sizeof(float)).data();
  for (uint64_t k = 0; k < count; ++k) {
    float x, y;
    std::memcpy(&x, a + k * sizeof(float), sizeof(float));
    std::memcpy(&y, b + k * sizeof(float), sizeof(float));
    const float result = operation(x, y);
    std::memcpy(out + k * sizeof(float), &result, sizeof(float));
  }
}
}  // namespace

void VaddF32(ExecContext& c, const Instruction& i) {
  binary_f32(c, i, [](float x, float y) { return x + y; });
}
void VmulF32(ExecContext& c, const Instruction& i) {
  binary_f32(c, i, [](float x, float y) { return x * y; });
}
// NaN-propagating, like torch.maximum / torch.minimum (std::fmax would drop the NaN).
void VmaxF32(ExecContext& c, const Instruction& i) {
  binary_f32(c, i, [](float x, float y) { return std::isnan(x) || std::isnan(y) ? NAN : (x < y ? y : x); });
}
void VminF32(ExecContext& c, const Instruction& i) {
  binary_f32(c, i, [](float x, float y) { return std::isnan(x) || std::isnan(y) ? NAN : (y < x ? y : x); });
}

}  // namespace npusim::emulator::semantics
