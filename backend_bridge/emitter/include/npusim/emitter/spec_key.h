// Equality and hashing generated over every field of a kernel specification, so that a kernel cache keyed by the
// spec itself cannot leave out a field that changes the program. A spec is a plain aggregate (no base classes, no
// constructors); its fields are found by aggregate initialisation and visited through structured bindings, and may be
// numbers, enums, bools, strings, vectors, arrays, optionals or nested aggregates of these. Floats compare and hash
// by their bits, so a NaN parameter is a key like any other.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace npusim::emitter::spec_key {
namespace detail {

// Converts to any field type, so `T{AnyField{}...}` compiles exactly when T has at least that many fields.
struct AnyField {
  template <typename T>
  operator T() const;  // NOLINT(google-explicit-constructor): only named in unevaluated contexts
};

template <typename T, size_t... I>
constexpr bool initialisable_with(std::index_sequence<I...>) {
  return requires { T{(static_cast<void>(I), AnyField{})...}; };
}

inline constexpr size_t kMaxFields = 24;

template <typename T, size_t N = kMaxFields>
constexpr size_t field_count() {
  if constexpr (N == 0)
    return 0;
  else if constexpr (initialisable_with<T>(std::make_index_sequence<N>{}))
    return N;
  else
    return field_count<T, N - 1>();
}

// Calls `visit` with a tuple-like pack of references to every field of `value`.
template <typename T, typename Visit>
constexpr void for_fields(const T& value, Visit&& visit) {
  constexpr size_t n = field_count<T>();
  static_assert(n > 0 && n <= 18, "a kernel spec has 1 to 18 fields; add a case below for more");
  // clang-format off
  if constexpr (n == 1) { const auto& [a] = value; visit(a); }
  else if constexpr (n == 2) { const auto& [a, b] = value; visit(a, b); }
  else if constexpr (n == 3) { const auto& [a, b, c] = value; visit(a, b, c); }
  else if constexpr (n == 4) { const auto& [a, b, c, d] = value; visit(a, b, c, d); }
  else if constexpr (n == 5) { const auto& [a, b, c, d, e] = value; visit(a, b, c, d, e); }
  else if constexpr (n == 6) { const auto& [a, b, c, d, e, f] = value; visit(a, b, c, d, e, f); }
  else if constexpr (n == 7) { const auto& [a, b, c, d, e, f, g] = value; visit(a, b, c, d, e, f, g); }
  else if constexpr (n == 8) { const auto& [a, b, c, d, e, f, g, h] = value; visit(a, b, c, d, e, f, g, h); }
  else if constexpr (n == 9) { const auto& [a, b, c, d, e, f, g, h, i] = value; visit(a, b, c, d, e, f, g, h, i); }
  else if constexpr (n == 10) { const auto& [a, b, c, d, e, f, g, h, i, j] = value; visit(a, b, c, d, e, f, g, h, i, j); }
  else if constexpr (n == 11) { const auto& [a, b, c, d, e, f, g, h, i, j, k] = value; visit(a, b, c, d, e, f, g, h, i, j, k); }
  else if constexpr (n == 12) { const auto& [a, b, c, d, e, f, g, h, i, j, k, l] = value; visit(a, b, c, d, e, f, g, h, i, j, k, l); }
  else if constexpr (n == 13) { const auto& [a, b, c, d, e, f, g, h, i, j, k, l, m] = value; visit(a, b, c, d, e, f, g, h, i, j, k, l, m); }
  else if constexpr (n == 14) { const auto& [a, b, c, d, e, f, g, h, i, j, k, l, m, o] = value; visit(a, b, c, d, e, f, g, h, i, j, k, l, m, o); }
  else if constexpr (n == 15) { const auto& [a, b, c, d, e, f, g, h, i, j, k, l, m, o, p] = value; visit(a, b, c, d, e, f, g, h, i, j, k, l, m, o, p); }
  else if constexpr (n == 16) { const auto& [a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q] = value; visit(a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q); }
  else if constexpr (n == 17) { const auto& [a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q, r] = value; visit(a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q, r); }
  else { const auto& [a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q, r, t] = value; visit(a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q, r, t); }
  // clang-format on
}

template <typename T>
struct IsVector : std::false_type {};
template <typename T, typename A>
struct IsVector<std::vector<T, A>> : std::true_type {};
template <typename T>
struct IsArray : std::false_type {};
template <typename T, size_t N>
struct IsArray<std::array<T, N>> : std::true_type {};
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

inline void combine(size_t& seed, size_t value) { seed ^= value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2); }

}  // namespace detail

template <typename T>
bool equal(const T& x, const T& y);
template <typename T>
void hash_into(size_t& seed, const T& value);

template <typename T>
bool equal(const T& x, const T& y) {
  if constexpr (std::is_same_v<T, float>)
    return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
  else if constexpr (std::is_same_v<T, double>)
    return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
  else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string>)
    return x == y;
  else if constexpr (detail::IsVector<T>::value || detail::IsArray<T>::value) {
    if (x.size() != y.size()) return false;
    for (size_t k = 0; k < x.size(); ++k)
      if (!equal(x[k], y[k])) return false;
    return true;
  } else if constexpr (detail::IsOptional<T>::value) {
    return x.has_value() == y.has_value() && (!x.has_value() || equal(*x, *y));
  } else {
    bool same = true;
    detail::for_fields(x, [&](const auto&... xs) {
      detail::for_fields(y, [&](const auto&... ys) { same = (equal(xs, ys) && ...); });
    });
    return same;
  }
}

template <typename T>
void hash_into(size_t& seed, const T& value) {
  if constexpr (std::is_same_v<T, float>)
    detail::combine(seed, std::bit_cast<uint32_t>(value));
  else if constexpr (std::is_same_v<T, double>)
    detail::combine(seed, std::bit_cast<uint64_t>(value));
  else if constexpr (std::is_enum_v<T>)
    detail::combine(seed, static_cast<size_t>(value));
  else if constexpr (std::is_arithmetic_v<T>)
    detail::combine(seed, static_cast<size_t>(value));
  else if constexpr (std::is_same_v<T, std::string>)
    detail::combine(seed, std::hash<std::string>{}(value));
  else if constexpr (detail::IsVector<T>::value || detail::IsArray<T>::value) {
    detail::combine(seed, value.size());
    for (const auto& element : value) hash_into(seed, element);
  } else if constexpr (detail::IsOptional<T>::value) {
    detail::combine(seed, value.has_value());
    if (value) hash_into(seed, *value);
  } else {
    detail::for_fields(value, [&](const auto&... fields) { (hash_into(seed, fields), ...); });
  }
}

template <typename T>
size_t hash(const T& value) {
  size_t seed = 0;
  hash_into(seed, value);
  return seed;
}

// For unordered containers keyed by a spec.
struct Hash {
  template <typename T>
  size_t operator()(const T& value) const {
    return hash(value);
  }
};
struct Equal {
  template <typename T>
  bool operator()(const T& x, const T& y) const {
    return equal(x, y);
  }
};

// The number of fields the generated equality and hash see; a test compares it with each spec's declaration.
template <typename T>
constexpr size_t field_count() {
  return detail::field_count<T>();
}

}  // namespace npusim::emitter::spec_key
