// Vector engine unary functions. Special functions are evaluated in binary64 from the f32 value and rounded to f32
// (then to T), so they are within 1 ulp of the exact result and do not depend on the host's libm float variants.
#include <cmath>

#include "element_types.h"
#include "npusim/emulator/semantics.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

// out[k] = function(in[k]) in the type's compute type, for k < rs3; in and out may be the same region.
template <typename Function>
void unary(ExecContext& c, const Instruction& i, Function function) {
  visit_type(i.type, [&]<typename T>(T) {
    const uint64_t count = c.reg(i.rs3);
    c.stats().vector_elements += count;
    const std::byte* in = c.scratchpad(c.reg(i.rs1), count, sizeof(T)).data();
    std::byte* out = c.scratchpad(c.reg(i.rd), count, sizeof(T)).data();
    for (uint64_t k = 0; k < count; ++k) store(out, k, narrow<T>(function(widen(load<T>(in, k)))));
  });
}

// Special functions exist for float types only (the decoder rejects others); the integer branch never runs.
template <typename Function>
void special(ExecContext& c, const Instruction& i, Function function) {
  unary(c, i, [&](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>)
      return static_cast<float>(function(static_cast<double>(x)));
    else
      return x;
  });
}
}  // namespace

void Vneg(ExecContext& c, const Instruction& i) {
  unary(c, i, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>)
      return -x;  // flips the sign of zero and NaN too
    else
      return static_cast<decltype(x)>(0ull - static_cast<uint64_t>(x));  // wraps
  });
}
void Vabs(ExecContext& c, const Instruction& i) {
  unary(c, i, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>)
      return std::fabs(x);
    else
      return x < 0 ? static_cast<decltype(x)>(0ull - static_cast<uint64_t>(x)) : x;  // wraps
  });
}
void Vexp(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::exp(x); });
}
void Vlog(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::log(x); });
}
void Vtanh(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::tanh(x); });
}
void Vsigmoid(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}
void Verf(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::erf(x); });
}
void Vrsqrt(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return 1.0 / std::sqrt(x); });
}
void Vrecip(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return 1.0 / x; });
}
void Vsqrt(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::sqrt(x); });
}
void Vsin(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::sin(x); });
}
void Vcos(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::cos(x); });
}
void Vlog1p(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::log1p(x); });
}
void Vexpm1(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::expm1(x); });
}

// Rounding is exact in any float type: the f32 result of a widened f16/bf16 value is representable in it.
void Vfloor(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::floor(x); });
}
void Vceil(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::ceil(x); });
}
void Vround(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::nearbyint(x); });  // the default rounding mode: halves to even
}
void Vtrunc(ExecContext& c, const Instruction& i) {
  special(c, i, [](double x) { return std::trunc(x); });
}

}  // namespace npusim::emulator::semantics
