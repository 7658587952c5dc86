// Element types as host types, and the arithmetic each is computed in: floats widen exactly to f32, integers and
// bool to i64. Eigen's half and bfloat16 provide the round-to-nearest-even narrowing.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "npusim/emulator/trap.h"
#include "npusim/isa/isa.h"

namespace npusim::emulator::semantics {

// bool is one byte holding 0 or 1; a distinct type so that narrowing to it tests for non-zero.
struct Bool {
  uint8_t value;
};

template <typename T>
inline constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, Eigen::half> ||
                                 std::is_same_v<T, Eigen::bfloat16> || std::is_same_v<T, double>;

// The type an element is computed in (f64 is only converted: vcvt is the one instruction that takes it).
template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<kIsFloat<T>, float, int64_t>>;

template <typename T>
Compute<T> widen(T value) {
  if constexpr (std::is_same_v<T, Bool>)
    return value.value;
  else
    return static_cast<Compute<T>>(value);
}

// Floats round to nearest-even (f16 and bf16 through f32, as PyTorch's conversions of float64 do); integers wrap
// (two's complement); bool tests for non-zero.
template <typename T, typename From>
T narrow(From value) {
  if constexpr (std::is_same_v<T, Bool>)
    return Bool{static_cast<uint8_t>(value != From{0})};
  else if constexpr (std::is_same_v<T, double>)
    return static_cast<double>(value);
  else if constexpr (kIsFloat<T>)
    return T(static_cast<float>(value));
  else
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<uint64_t>(value)));
}

// memmove of `bytes`, and nothing for none: an empty vector's data() may be null, and memcpy or memmove from or to
// null is undefined behaviour even for no bytes (UBSan reports it; instructions with a count of 0 do this).
inline void copy_bytes(void* out, const void* in, uint64_t bytes) {
  if (bytes > 0) std::memmove(out, in, bytes);
}

template <typename T>
T load(const std::byte* base, uint64_t index) {
  T value;
  std::memcpy(&value, base + index * sizeof(T), sizeof(T));
  return value;
}
template <typename T>
void store(std::byte* base, uint64_t index, T value) {
  std::memcpy(base + index * sizeof(T), &value, sizeof(T));
}

// Calls visit(T{}) with the host type of `type`, one the vector engine computes in: the decoder lets f64 reach only
// vcvt, which visits with visit_conversion_type.
template <typename Visit>
decltype(auto) visit_type(isa::ElementType type, Visit&& visit) {
  switch (type) {
    case isa::ElementType::F64: throw Trap("f64 is only converted (vcvt), never computed in");
    case isa::ElementType::F32: return visit(float{});
    case isa::ElementType::F16: return visit(Eigen::half{});
    case isa::ElementType::BF16: return visit(Eigen::bfloat16{});
    case isa::ElementType::I8: return visit(int8_t{});
    case isa::ElementType::U8: return visit(uint8_t{});
    case isa::ElementType::I32: return visit(int32_t{});
    case isa::ElementType::I64: return visit(int64_t{});
    case isa::ElementType::Bool: break;
  }
  return visit(Bool{});
}

// visit_type, and double for f64.
template <typename Visit>
decltype(auto) visit_conversion_type(isa::ElementType type, Visit&& visit) {
  if (type == isa::ElementType::F64) return visit(double{});
  return visit_type(type, std::forward<Visit>(visit));
}

static_assert(sizeof(Bool) == 1 && sizeof(Eigen::half) == 2 && sizeof(Eigen::bfloat16) == 2);

}  // namespace npusim::emulator::semantics
