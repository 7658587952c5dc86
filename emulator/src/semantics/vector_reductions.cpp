// Vector engine row reductions over a rows x cols tile: one result per row, elements taken in column order.
#include <fmt/format.h>

#include <cmath>
#include <span>
#include <vector>

#include "element_types.h"
#include "npusim/emulator/semantics.h"
#include "npusim/emulator/trap.h"

namespace npusim::emulator::semantics {
namespace {
using isa::Instruction;

uint64_t tile_elements(uint64_t rows, uint64_t cols) {
  uint64_t elements = 0;
  if (__builtin_mul_overflow(rows, cols, &elements))
    throw Trap(fmt::format("reduction tile of {} x {} elements overflows", rows, cols));
  return elements;
}

// Calls visit(row values as widened compute values, Out tag) and stores one Out per row; Out is T unless the
// reduction gives indices. Results are gathered first, so the output may overlap the input.
template <bool GivesIndex, typename Reduce>
void reduce_rows(ExecContext& c, const Instruction& i, Reduce reduce) {
  visit_type(i.type, [&]<typename T>(T) {
    using Out = std::conditional_t<GivesIndex, int64_t, T>;
    const uint64_t rows = c.reg(i.rs2), cols = c.reg(i.rs3);
    c.stats().vector_elements += tile_elements(rows, cols);
    const std::byte* in = c.scratchpad(c.reg(i.rs1), tile_elements(rows, cols), sizeof(T)).data();
    // The tile's bounds check limits rows only when there is a column, and cols only when there is a row: both
    // buffers are sized after the checks of the output and of the tile bound them.
    const std::span<std::byte> out = c.scratchpad(c.reg(i.rd), rows, sizeof(Out));
    std::vector<Out> results(rows);
    std::vector<Compute<T>> row(rows == 0 ? 0 : cols);
    for (uint64_t r = 0; r < rows; ++r) {
      for (uint64_t k = 0; k < cols; ++k) row[k] = widen(load<T>(in, r * cols + k));
      if constexpr (GivesIndex)
        results[r] = reduce(row);
      else
        results[r] = narrow<T>(reduce(row));
    }
    copy_bytes(out.data(), results.data(), rows * sizeof(Out));
  });
}

template <typename V>
bool is_nan(V value) {
  if constexpr (std::is_floating_point_v<V>)
    return std::isnan(value);
  else
    return false;
}

// The first index of the extreme value; a NaN is more extreme than any number, as in torch.argmax.
template <typename Better>
auto first_extreme(Better better) {
  return [better](const auto& row) -> int64_t {
    int64_t best = 0;
    for (size_t k = 1; k < row.size(); ++k) {
      if (is_nan(row[best])) break;
      if (is_nan(row[k]) || better(row[k], row[best])) best = static_cast<int64_t>(k);
    }
    return best;
  };
}

// max/min of a row, NaN if any element is NaN; an empty row (cols = 0) gives 0.
template <typename Better>
auto extreme(Better better) {
  return [better](const auto& row) {
    using V = typename std::decay_t<decltype(row)>::value_type;
    if (row.empty()) return V{0};
    V best = row[0];
    for (const V& value : row) {
      if (is_nan(value)) return value;
      if (better(value, best)) best = value;
    }
    return best;
  };
}
}  // namespace

void Vrsum(ExecContext& c, const Instruction& i) {
  reduce_rows<false>(c, i, [](const auto& row) {
    using V = typename std::decay_t<decltype(row)>::value_type;
    if constexpr (std::is_integral_v<V>) {  // integers wrap, as vadd's do (signed overflow would be undefined)
      std::make_unsigned_t<V> sum = 0;
      for (const V value : row) sum += static_cast<std::make_unsigned_t<V>>(value);
      return static_cast<V>(sum);
    } else {
      V sum{0};
      for (const auto& value : row) sum += value;
      return sum;
    }
  });
}
void Vrmax(ExecContext& c, const Instruction& i) {
  reduce_rows<false>(c, i, extreme([](auto x, auto y) { return x > y; }));
}
void Vrmin(ExecContext& c, const Instruction& i) {
  reduce_rows<false>(c, i, extreme([](auto x, auto y) { return x < y; }));
}
void Vargmax(ExecContext& c, const Instruction& i) {
  reduce_rows<true>(c, i, first_extreme([](auto x, auto y) { return x > y; }));
}
void Vargmin(ExecContext& c, const Instruction& i) {
  reduce_rows<true>(c, i, first_extreme([](auto x, auto y) { return x < y; }));
}

}  // namespace npusim::emulator::semantics
