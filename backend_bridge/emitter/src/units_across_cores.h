// The work split of every kernel whose units (tiles, rows, blocks of queries, indices) are independent: core c of
// the n cores the kernel launches on takes units c, c + n, c + 2n, ... . Written once here; kernels that load the
// next unit while they compute this one use the double-buffered form of the same numbering
// (`emit_double_buffered_loop`, fused_steps.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {

// The cores a kernel of `units` units launches on: one per unit, up to the chip's cores. What `finish` gets.
inline int64_t cores_for_units(int64_t units, const config::ChipConfig& config) {
  return std::clamp<int64_t>(units, 1, config.chip_cores);
}

// Emits the loop: `unit` = this core's id; while unit < units { body(); unit += cores }. A core with no unit skips
// to the end. `bound` is a register the loop may overwrite with `units` before and after the body (a kernel short of
// registers passes one its body also uses for scratch); without one, the loop takes a register for the moment.
inline void for_each_unit_across_cores(KernelBuilder& b, R unit, int64_t units, int64_t cores,
                                       const std::function<void()>& body, std::optional<R> bound = std::nullopt) {
  const auto branch_on_count = [&](auto branch, Label target) {
    if (bound) {
      b.li(*bound, units);
      branch(*bound, target);
    } else {
      Reg count = b.reg("unit count");
      b.li(count, units);
      branch(count, target);
    }
  };
  const Label next = b.label(), done = b.label();
  b.Csrr(unit, isa::Csr::CoreId);
  branch_on_count([&](R count, Label target) { b.Bgeu(unit, count, target); }, done);
  b.bind(next);
  body();
  b.add_constant(unit, cores);
  branch_on_count([&](R count, Label target) { b.Bltu(unit, count, target); }, next);
  b.bind(done);
}

}  // namespace npusim::emitter
