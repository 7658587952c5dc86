// Vector engine elementwise operations on scratchpad data, for every element type (element_types.h): arithmetic,
// bitwise, compares, select, fill, move and conversion.
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "element_types.h"
#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

// How a binary instruction reads its second operand b (the broadcast mode in imm; see docs/isa.md).
struct Broadcast {
  uint32_t mode, period;
  explicit Broadcast(const Instruction& i) : mode(i.imm & 3), period(static_cast<uint32_t>(i.imm) >> 2) {
    if ((mode == 2 || mode == 3) && period == 0) throw Trap(fmt::format("broadcast mode {} with period 0", mode));
    if (mode < 2 && period != 0) throw Trap(fmt::format("broadcast mode {} takes no period (imm {})", mode, i.imm));
  }
  uint64_t index(uint64_t k) const {
    switch (mode) {
      case 0: return k;
      case 1: return 0;
      case 2: return k % period;
      default: return k / period;
    }
  }
  uint64_t elements_read(uint64_t count) const {  // how much of b the instruction reads
    if (count == 0) return 0;
    switch (mode) {
      case 0: return count;
      case 1: return 1;
      case 2: return std::min<uint64_t>(period, count);
      default: return (count - 1) / period + 1;
    }
  }
  // b's elements, copied when broadcast so that an output overlapping b cannot change values still to be read.
  template <typename T>
  std::vector<T> read(ExecContext& c, uint64_t address, uint64_t count) const {
    const uint64_t elements = elements_read(count);
    std::vector<T> values(elements);
    copy_bytes(values.data(), c.scratchpad(address, elements, sizeof(T)).data(), elements * sizeof(T));
    return values;
  }
};

// out[k] = operation(a[k], b) in the type's compute type, for k < rs3. Operands may alias (x + x, in-place): an
// elementwise element is read before its result is written, and a broadcast b is read whole first.
template <typename Out, typename Operation>
void binary(ExecContext& c, const Instruction& i, Operation operation) {
  visit_type(i.type, [&]<typename T>(T) {
    const uint64_t count = c.reg(i.rs3);
    const Broadcast broadcast(i);
    c.stats().vector_elements += count;
    const std::byte* a = c.scratchpad(c.reg(i.rs1), count, sizeof(T)).data();
    using Result = std::conditional_t<std::is_same_v<Out, void>, T, Out>;
    std::byte* out = c.scratchpad(c.reg(i.rd), count, sizeof(Result)).data();
    if (broadcast.mode == 0) {
      const std::byte* b = c.scratchpad(c.reg(i.rs2), count, sizeof(T)).data();
      for (uint64_t k = 0; k < count; ++k)
        store(out, k, narrow<Result>(operation(widen(load<T>(a, k)), widen(load<T>(b, k)))));
      return;
    }
    const std::vector<T> b = broadcast.read<T>(c, c.reg(i.rs2), count);
    for (uint64_t k = 0; k < count; ++k)
      store(out, k, narrow<Result>(operation(widen(load<T>(a, k)), widen(b[broadcast.index(k)]))));
  });
}
template <typename Operation>
void arithmetic(ExecContext& c, const Instruction& i, Operation operation) {
  binary<void>(c, i, operation);
}
template <typename Predicate>
void compare(ExecContext& c, const Instruction& i, Predicate predicate) {
  binary<Bool>(c, i, [&](auto x, auto y) { return static_cast<int64_t>(predicate(x, y)); });
}

// NaN-propagating, like torch.maximum / torch.minimum (std::fmax would drop the NaN).
template <typename V>
V maximum(V x, V y) {
  if constexpr (std::is_floating_point_v<V>)
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<V>::quiet_NaN();
  return x < y ? y : x;
}
template <typename V>
V minimum(V x, V y) {
  if constexpr (std::is_floating_point_v<V>)
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<V>::quiet_NaN();
  return y < x ? y : x;
}

template <typename V>
V divide(V x, V y) {
  if constexpr (std::is_floating_point_v<V>) {
    return x / y;
  } else {
    if (y == 0) throw Trap("integer division by zero in vdiv");
    if (x == std::numeric_limits<V>::min() && y == -1) return x;  // wraps, as INT_MIN / -1 does in two's complement
    return x / y;
  }
}

// Truncated remainder, as C's fmod and %; exact in floating point, so f16/bf16 widened to f32 round back exactly.
template <typename V>
V remainder(V x, V y) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::fmod(x, y);
  } else {
    if (y == 0) throw Trap("integer division by zero in vrem");
    if (y == -1) return 0;  // INT_MIN % -1 overflows in C++; mathematically 0
    return x % y;
  }
}

// vcvt: floats round to nearest-even; float to integer truncates and saturates (NaN gives 0); integers saturate.
template <typename To, typename From>
To convert(From value) {
  if constexpr (std::is_same_v<To, Bool> || std::is_same_v<From, Bool> || kIsFloat<To>) {
    return narrow<To>(widen(value));
  } else {
    using Limits = std::numeric_limits<To>;
    if constexpr (kIsFloat<From>) {
      using Float = Compute<From>;  // f32, or f64 for f64
      const Float x = static_cast<Float>(value);
      if (std::isnan(x)) return To{0};
      if (x <= static_cast<Float>(Limits::min())) return Limits::min();
      if (x >= static_cast<Float>(Limits::max())) return Limits::max();  // f32(INT64_MAX) rounds up to 2^63, f64's too
      return static_cast<To>(std::trunc(x));
    } else {
      const int64_t x = widen(value);
      if constexpr (std::is_same_v<From, int64_t> && std::is_same_v<To, int64_t>) return x;
      if (x < static_cast<int64_t>(Limits::min())) return Limits::min();
      if (static_cast<uint64_t>(x) > static_cast<uint64_t>(Limits::max()) && x > 0) return Limits::max();
      return static_cast<To>(x);
    }
  }
}
}  // namespace

// Integer sums, differences and products wrap, as vneg's do: computed on 64-bit unsigned values, since a signed
// overflow (of i64 lanes, which UBSan found) is undefined behaviour.
template <typename Operation>
auto wrapping(Operation operation) {
  return [operation](auto x, auto y) {
    using V = decltype(x);
    if constexpr (std::is_integral_v<V>)
      return static_cast<V>(operation(static_cast<uint64_t>(x), static_cast<uint64_t>(y)));
    else
      return operation(x, y);
  };
}

void Vadd(ExecContext& c, const Instruction& i) {
  arithmetic(c, i, wrapping([](auto x, auto y) { return x + y; }));
}
void Vsub(ExecContext& c, const Instruction& i) {
  arithmetic(c, i, wrapping([](auto x, auto y) { return x - y; }));
}
void Vmul(ExecContext& c, const Instruction& i) {
  arithmetic(c, i, wrapping([](auto x, auto y) { return x * y; }));
}
void Vdiv(ExecContext& c, const Instruction& i) {
  arithmetic(c, i, [](auto x, auto y) { return divide(x, y); });
}
void Vrem(ExecContext& c, const Instruction& i) {
  arithmetic(c, i, [](auto x, auto y) { return remainder(x, y); });
}
void Vmax(ExecContext& c, const Instruction& i) {
  arithmetic(c, i, [](auto x, auto y) { return maximum(x, y); });
}
void Vmin(ExecContext& c, const Instruction& i) {
  arithmetic(c, i, [](auto x, auto y) { return minimum(x, y); });
}
// Bitwise operations exist for integer types only (the decoder rejects others); the float branch never runs.
template <typename Operation>
void bitwise(ExecContext& c, const Instruction& i, Operation operation) {
  arithmetic(c, i, [&](auto x, auto y) {
    if constexpr (std::is_integral_v<decltype(x)>)
      return operation(x, y);
    else
      return x;
  });
}
void Vand(ExecContext& c, const Instruction& i) {
  bitwise(c, i, [](auto x, auto y) { return x & y; });
}
void Vor(ExecContext& c, const Instruction& i) {
  bitwise(c, i, [](auto x, auto y) { return x | y; });
}
void Vxor(ExecContext& c, const Instruction& i) {
  bitwise(c, i, [](auto x, auto y) { return x ^ y; });
}
void Vceq(ExecContext& c, const Instruction& i) {
  compare(c, i, [](auto x, auto y) { return x == y; });
}
void Vcne(ExecContext& c, const Instruction& i) {
  compare(c, i, [](auto x, auto y) { return x != y; });
}
void Vclt(ExecContext& c, const Instruction& i) {
  compare(c, i, [](auto x, auto y) { return x < y; });
}
void Vcle(ExecContext& c, const Instruction& i) {
  compare(c, i, [](auto x, auto y) { return x <= y; });
}

void Vsel(ExecContext& c, const Instruction& i) {
  visit_type(i.type, [&]<typename T>(T) {
    const uint64_t count = c.reg(i.rs3);
    const Broadcast broadcast(i);
    c.stats().vector_elements += count;
    const std::byte* mask = c.scratchpad(c.reg(i.rs1), count, 1).data();
    const std::vector<T> b = broadcast.read<T>(c, c.reg(i.rs2), count);
    std::byte* out = c.scratchpad(c.reg(i.rd), count, sizeof(T)).data();
    for (uint64_t k = 0; k < count; ++k)
      if (load<uint8_t>(mask, k) != 0) store(out, k, b[broadcast.index(k)]);
  });
}

// out[k] = fma(a[k], b, out[k]): the product is not rounded before the sum, as CPU kernels' vectorised fmadd (PyTorch's
// add with alpha, addcmul and lerp) compute it.
void Vfma(ExecContext& c, const Instruction& i) {
  visit_type(i.type, [&]<typename T>(T) {
    if constexpr (kIsFloat<T>) {
      const uint64_t count = c.reg(i.rs3);
      const Broadcast broadcast(i);
      c.stats().vector_elements += count;
      const std::byte* a = c.scratchpad(c.reg(i.rs1), count, sizeof(T)).data();
      const std::vector<T> b = broadcast.read<T>(c, c.reg(i.rs2), count);
      std::byte* out = c.scratchpad(c.reg(i.rd), count, sizeof(T)).data();
      for (uint64_t k = 0; k < count; ++k) {
        const auto x = static_cast<float>(widen(load<T>(a, k)));
        const auto y = static_cast<float>(widen(b[broadcast.index(k)]));
        const auto z = static_cast<float>(widen(load<T>(out, k)));
        store(out, k, narrow<T>(std::fma(x, y, z)));
      }
    }
  });
}

void Vfill(ExecContext& c, const Instruction& i) {
  visit_type(i.type, [&]<typename T>(T) {
    const uint64_t count = c.reg(i.rs3);
    c.stats().vector_elements += count;
    T value;
    if constexpr (std::is_same_v<T, float>)
      value = std::bit_cast<float>(i.imm);
    else if constexpr (kIsFloat<T>)
      value = Eigen::numext::bit_cast<T>(static_cast<uint16_t>(i.imm));  // the low half
    else
      value = narrow<T>(static_cast<int64_t>(i.imm));
    std::byte* out = c.scratchpad(c.reg(i.rd), count, sizeof(T)).data();
    for (uint64_t k = 0; k < count; ++k) store(out, k, value);
  });
}

void Vmov(ExecContext& c, const Instruction& i) {
  const uint64_t count = c.reg(i.rs3), bytes = isa::element_bytes(i.type);
  c.stats().vector_elements += count;
  const std::byte* source = c.scratchpad(c.reg(i.rs1), count, bytes).data();
  copy_bytes(c.scratchpad(c.reg(i.rd), count, bytes).data(), source, count * bytes);
}

// Elements move as bits (no NaN canonicalisation); the tile is read whole first, so source and result may overlap.
void Vtr(ExecContext& c, const Instruction& i) {
  const uint64_t rows = c.reg(i.rs2), cols = c.reg(i.rs3), bytes = isa::element_bytes(i.type);
  uint64_t count = 0;
  if (__builtin_mul_overflow(rows, cols, &count))
    throw Trap(fmt::format("transpose tile of {} x {} elements overflows", rows, cols));
  c.stats().vector_elements += count;
  const std::byte* source = c.scratchpad(c.reg(i.rs1), count, bytes).data();
  std::vector<std::byte> transposed(count * bytes);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t k = 0; k < cols; ++k)
      std::memcpy(transposed.data() + (k * rows + r) * bytes, source + (r * cols + k) * bytes, bytes);
  copy_bytes(c.scratchpad(c.reg(i.rd), count, bytes).data(), transposed.data(), transposed.size());
}

// The source is read whole before anything is written, so converting in place (even to a wider type) is defined.
void Vcvt(ExecContext& c, const Instruction& i) {
  visit_conversion_type(i.type, [&]<typename To>(To) {
    visit_conversion_type(static_cast<isa::ElementType>(i.imm), [&]<typename From>(From) {
      const uint64_t count = c.reg(i.rs3);
      c.stats().vector_elements += count;
      const std::byte* source = c.scratchpad(c.reg(i.rs1), count, sizeof(From)).data();
      std::byte* out = c.scratchpad(c.reg(i.rd), count, sizeof(To)).data();
      std::vector<To> converted(count);
      for (uint64_t k = 0; k < count; ++k) converted[k] = convert<To>(load<From>(source, k));
      copy_bytes(out, converted.data(), count * sizeof(To));
    });
  });
}

}  // namespace npusim::emulator::semantics
