// Emitting a fused plan's steps (fused_plan.h), for each walker of its tiles: the tiled kernel (fused.cpp), the
// looped-row kernel (fused_looped.cpp) and the GEMM epilogue (fused_gemm.cpp). A walker knows where a tile lies and
// how many elements it has; these write the instructions of a vector step, of an Argument's load, of a strided move
// of a tile between DRAM and a slot, and the double-buffered loop the tiled and looped-row kernels share.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fused_layout.h"
#include "fused_plan.h"

namespace npusim::emitter::fused {

// Emits a vector step (not a DMA) over `count` elements (a reduction: rows x cols); point(reg, ref) loads the address
// of a Ref into reg, binds it and returns it. `destination`, `first` and `second` are the registers to point.
template <typename Point>
void emit_vector_step(KernelBuilder& b, const Step& s, R count, R rows, R cols, Reg& destination, Reg& first,
                      Reg& second, Point point) {
  if (s.opcode == isa::Opcode::Vcheck) {
    b.li(second, s.immediate);
    b.Vcheck(s.type, point(first, s.first), second, count, kIndexOutOfRangeTrap);
    return;
  }
  const R to = point(destination, s.destination);
  const std::string_view form = isa::info(s.opcode).operands;
  if (s.opcode == isa::Opcode::Vfill) {
    b.Vfill(s.type, to, count, s.immediate);
  } else if (s.opcode == isa::Opcode::Vcvt) {
    b.Vcvt(s.type, s.source, to, point(first, s.first), count);
  } else if (form == "d,s,t,u") {  // a row reduction: rows x row length
    b.emit(s.opcode, {s.type, to, point(first, s.first), rows, cols});
  } else if (form == "d,s,u") {
    b.emit(s.opcode, {s.type, to, point(first, s.first), count});
  } else {
    b.emit(s.opcode, {s.type, to, point(first, s.first), point(second, s.second), count, s.immediate});
  }
}

// A tile's steps (those numbered in `which`, in order) as a double-buffered loop issues them. `prefetched`: loads and
// Argument fills into slots no earlier step of the tile touches, which can go a tile ahead into the other set of slots
// (`may_prefetch` may refuse a load, as the tiled kernel does one that needs a vtr); `trailing_stores`: the stores
// that end the tile, which go out after the next tile's loads; `in_place`: the rest. `loads` is the spec's count of
// loads (a step's access at or above it is a store), `slots` the plan's count of slots.
struct DoubleBufferedSteps {
  std::vector<size_t> prefetched, in_place, trailing_stores;
};
template <typename MayPrefetch>
DoubleBufferedSteps split_for_double_buffering(const std::vector<Step>& steps, const std::vector<size_t>& which,
                                               int loads, size_t slots, MayPrefetch may_prefetch) {
  DoubleBufferedSteps split;
  size_t end = which.size();
  while (end > 0 && steps[which[end - 1]].access >= loads) --end;
  std::vector<char> touched(slots, 0);
  for (size_t position = 0; position < which.size(); ++position) {
    const Step& step = steps[which[position]];
    const bool into_untouched_slot = step.first.kind == Ref::Kind::Slot && !touched[step.first.index];
    const bool early = (step.argument >= 0 && (step.first.kind == Ref::Kind::Argument || into_untouched_slot)) ||
                       (step.access >= 0 && step.access < loads && into_untouched_slot &&
                        step.index.kind == Ref::Kind::None && may_prefetch(step));
    (early ? split.prefetched : position >= end ? split.trailing_stores : split.in_place).push_back(which[position]);
    for (const Ref& ref : {step.destination, step.first, step.second})
      if (ref.kind == Ref::Kind::Slot) touched[ref.index] = 1;
  }
  return split;
}

// Registers holding the addresses of the first `most` arguments the accesses name, loaded from the argument block
// (the others are loaded per use).
inline std::map<int, Reg> pointer_registers(KernelBuilder& b, const std::vector<const FusedAccess*>& accesses,
                                            int most) {
  std::map<int, Reg> pointers;
  for (const FusedAccess* access : accesses)
    if (!pointers.contains(access->argument) && static_cast<int>(pointers.size()) < most) {
      Reg pointer = b.reg(fmt::format("argument {}", access->argument));
      b.Ld(pointer, kArgumentBlock, 8 * access->argument);
      pointers.emplace(access->argument, std::move(pointer));
    }
  return pointers;
}

// to += index * stride, through `scratch`.
inline void add_scaled(KernelBuilder& b, R to, R index, int64_t stride, R scratch) {
  if (stride == 0) return;
  b.li(scratch, stride);
  b.Mul(scratch, scratch, index);
  b.Add(to, to, scratch);
}

// An Argument's value from its entry of the argument block, `block` (the block's address, or the segment's part of
// it): one element (or n whole entries) into the argument tile at `spad`, or repeated (stride 0) over `slot_count`
// elements of a slot. `address` and `count` are scratch.
inline void emit_argument_load(KernelBuilder& b, const Step& s, R block, R spad, R slot_count, R address, R count) {
  b.move(address, block);
  b.add_constant(address, 8 * int64_t{s.argument});
  const auto bytes = static_cast<int64_t>(isa::element_bytes(s.type));
  static constexpr isa::Opcode loads[] = {isa::Opcode::DmaLoad8, isa::Opcode::DmaLoad16, isa::Opcode::DmaLoad32,
                                          isa::Opcode::DmaLoad64};
  const isa::Opcode load = loads[std::countr_zero(static_cast<unsigned>(bytes))];
  if (s.first.kind == Ref::Kind::Slot) {
    b.emit(load, {spad, address, slot_count, 0});
    return;
  }
  b.li(count, std::max<int64_t>(1, s.immediate));
  b.emit(load, {spad, address, count, bytes});
}

// A dimension of a strided move, innermost first: `count` elements `stride` bytes apart (count 0: a count the walker
// holds in a register).
struct MoveDim {
  int64_t count, stride;
};

// A DMA byte stride as the instruction's immediate, or Unsupported naming the kernel.
inline int64_t stride_immediate(std::string_view kernel, int64_t stride) {
  if (stride < INT32_MIN || stride > INT32_MAX)
    throw Unsupported(
        fmt::format("fused kernel {}: a stride of {} bytes does not fit a DMA immediate", kernel, stride));
  return stride;
}

// A move of a tile between DRAM at `address` and a slot at `spad`: one dimension, `whole` elements (the tile's
// count), or up to four (dma.dim 1..3, then the 4-D move), a count of 0 being `variable`'s. `count` and `stride` are
// scratch.
inline void emit_strided_move(KernelBuilder& b, std::string_view kernel, bool load, int64_t element_bytes, R spad,
                              R address, const std::vector<MoveDim>& dims, R whole, R variable, R count, R stride) {
  using enum isa::Opcode;
  const int size = std::countr_zero(static_cast<unsigned>(element_bytes));
  if (dims.size() == 1) {
    static constexpr isa::Opcode loads[] = {DmaLoad8, DmaLoad16, DmaLoad32, DmaLoad64};
    static constexpr isa::Opcode stores[] = {DmaStore8, DmaStore16, DmaStore32, DmaStore64};
    const int64_t immediate = stride_immediate(kernel, dims[0].stride);
    if (load) {
      b.emit(loads[size], {spad, address, whole, immediate});
    } else {
      b.emit(stores[size], {address, spad, whole, immediate});
    }
    return;
  }
  if (dims.size() > kDmaDims) throw std::logic_error("a fused tile of more than four DMA dimensions");
  for (int d = 1; d < kDmaDims; ++d) {
    const MoveDim dim = d < static_cast<int>(dims.size()) ? dims[d] : MoveDim{1, 0};
    if (dim.count != 0) b.li(count, dim.count);
    b.li(stride, dim.stride);
    b.DmaDim(d, dim.count == 0 ? variable : count, stride);
  }
  b.li(count, dims[0].count);
  static constexpr isa::Opcode loads[] = {DmaLoad4d8, DmaLoad4d16, DmaLoad4d32, DmaLoad4d64};
  static constexpr isa::Opcode stores[] = {DmaStore4d8, DmaStore4d16, DmaStore4d32, DmaStore4d64};
  const int64_t immediate = stride_immediate(kernel, dims[0].stride);
  if (load) {
    b.emit(loads[size], {spad, address, count, immediate});
  } else {
    b.emit(stores[size], {address, spad, count, immediate});
  }
}

// How a double-buffered loop numbers its units (the tiled kernel's tiles, the looped-row kernel's chunks): `start`
// sets the current unit to the first one and the previous to none (any number at or above the bound), or goes to
// the label when there is no unit; `bound` returns a register holding that bound; `advance` sets the next unit after
// the current one; `position` computes where the unit numbered in a register lies; `sync` is the vector engine's sync
// on the DMA engine, a one-element move out of a slot of the set that the prefetched loads write (taken only when
// there are prefetched loads); `steps` issues the steps numbered in the list on the slots of the set.
struct UnitWalk {
  R current, next, previous;
  std::function<void(Label none)> start;
  std::function<R()> bound;
  std::function<void()> advance;
  std::function<void(R unit)> position;
  std::function<void(int set)> sync;
  std::function<void(const std::vector<size_t>& steps, int set)> steps;
};

// The loop over the units with two sets of slots, unrolled by two so that each half's slots are static. Each half
// issues, for its unit i in set h: the sync through set h (taken before unit i - 1's stores join the DMA queue), unit
// i - 1's trailing stores from the other set, unit i + 1's prefetched loads into the other set, then unit i's
// remaining steps. Each engine's queue runs in order and a sync waits for everything queued before it; in this order
// the vector engine computes unit i while the DMA engine stores unit i - 1 and loads unit i + 1.
inline void emit_double_buffered_loop(KernelBuilder& b, const DoubleBufferedSteps& split, const UnitWalk& walk) {
  const auto trailing_stores = [&](int set) {
    if (split.trailing_stores.empty()) return;
    walk.position(walk.previous);
    walk.steps(split.trailing_stores, set);
  };
  const auto half = [&](int set, bool previous_may_be_none) {
    const Label no_previous = b.label(), no_next = b.label();
    // A plan re-split once the layout is known can have no prefetched loads left: nothing to sync on.
    if (!split.prefetched.empty()) walk.sync(set);
    if (previous_may_be_none && !split.trailing_stores.empty()) b.Bgeu(walk.previous, walk.bound(), no_previous);
    trailing_stores(1 - set);
    b.bind(no_previous);
    walk.advance();
    b.Bgeu(walk.next, walk.bound(), no_next);
    walk.position(walk.next);
    walk.steps(split.prefetched, 1 - set);
    b.bind(no_next);
    walk.position(walk.current);
    walk.steps(split.in_place, set);
    b.move(walk.previous, walk.current);
    b.move(walk.current, walk.next);
  };
  const Label loop = b.label(), last_in_first_set = b.label(), done = b.label();
  walk.start(done);
  walk.position(walk.current);
  walk.steps(split.prefetched, 0);
  b.bind(loop);
  half(0, /*previous_may_be_none=*/true);
  b.Bgeu(walk.current, walk.bound(), last_in_first_set);
  half(1, /*previous_may_be_none=*/false);
  b.Bltu(walk.current, walk.bound(), loop);
  trailing_stores(1);
  b.Jal(kZero, done);
  b.bind(last_in_first_set);
  trailing_stores(0);
  b.bind(done);
}

}  // namespace npusim::emitter::fused
