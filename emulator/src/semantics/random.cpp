// Vector engine random numbers: uniform and normal samples from the Philox stream position of each element.
#include <cmath>
#include <numbers>

#include "element_types.h"
#include "npusim/emulator/semantics.h"
#include "philox.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

// Significand bits of each float type: a uniform sample on that grid is exact in the type, so it never rounds up
// to 1.
template <typename T>
constexpr int kSignificandBits = std::is_same_v<T, float>         ? 24
                                 : std::is_same_v<T, Eigen::half> ? 11
                                                                  : 8;

// out[k] = sample(philox words at position rs2 + k under key rs1), for k < rs3; floats only (the decoder rejects
// other types, so the integer branch never runs).
template <typename Sample>
void draw(ExecContext& c, const Instruction& i, Sample sample) {
  visit_type(i.type, [&]<typename T>(T) {
    if constexpr (kIsFloat<T>) {
      const uint64_t count = c.reg(i.rs3), key = c.reg(i.rs1), first = c.reg(i.rs2);
      c.stats().vector_elements += count;
      std::byte* out = c.scratchpad(c.reg(i.rd), count, sizeof(T)).data();
      for (uint64_t k = 0; k < count; ++k) store(out, k, sample.template operator()<T>(philox_at(key, first + k)));
    }
  });
}
}  // namespace

void Vrand(ExecContext& c, const Instruction& i) {
  draw(c, i, []<typename T>(const PhiloxWords& x) {
    constexpr int bits = kSignificandBits<T>;
    return T(std::ldexp(static_cast<float>(x[0] >> (32 - bits)), -bits));
  });
}

void Vrandn(ExecContext& c, const Instruction& i) {
  draw(c, i, []<typename T>(const PhiloxWords& x) {
    const double u1 = std::ldexp(static_cast<double>((x[0] >> 8) + 1), -24);  // in (0, 1]: the log stays finite
    const double u2 = std::ldexp(static_cast<double>(x[1] >> 8), -24);
    return narrow<T>(static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2)));
  });
}

}  // namespace npusim::emulator::semantics
