// Collapsing a fused kernel's iteration space (fused_layout.h).
#include "fused_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "fused_spec.h"

namespace npusim::emitter::fused {

bool Layout::varies_along_rows(int access) const {
  const std::vector<int64_t>& strides = reduced_strides[access];
  return std::any_of(strides.begin(), strides.end(), [](int64_t stride) { return stride != 0; });
}

Layout collapse(const FusedSpec& spec) {
  std::vector<const FusedAccess*> accesses;
  for (const FusedAccess& access : spec.loads) accesses.push_back(&access);
  for (const FusedAccess& access : spec.stores) accesses.push_back(&access);
  FusedAccess positions{.type = isa::ElementType::U8, .strides = std::vector<int64_t>(spec.sizes.size())};
  if (spec.segments.empty() &&
      std::any_of(spec.nodes.begin(), spec.nodes.end(), [](const FusedNode& node) { return is_random(node.op); })) {
    int64_t stride = 1;
    for (size_t d = spec.sizes.size(); d-- > 0; stride *= spec.sizes[d]) positions.strides[d] = stride;
    accesses.push_back(&positions);
  }
  Layout layout;
  if (accesses.size() > spec.loads.size() + spec.stores.size())
    layout.positions = static_cast<int>(accesses.size()) - 1;
  if (!spec.segments.empty()) {  // one dimension, as long as the longest segment, with each access's one stride
    int64_t longest = 1;
    for (const FusedSegment& segment : spec.segments) longest = std::max(longest, segment.elements);
    const bool reduced = spec.reduced_dims == 1;  // a segment is a row, its dimension reduced
    layout.outer = {reduced ? 1 : longest};
    if (reduced) layout.reduced = {longest};
    layout.row_length = reduced ? longest : 1;
    for (const FusedAccess* access : accesses) {
      const int64_t stride = access->strides[0] * static_cast<int64_t>(isa::element_bytes(access->type));
      layout.outer_strides.push_back({reduced ? 0 : stride});
      layout.reduced_strides.push_back(reduced ? std::vector<int64_t>{stride} : std::vector<int64_t>{});
    }
    return layout;
  }
  const size_t outer_dims = spec.sizes.size() - static_cast<size_t>(spec.reduced_dims);
  layout.outer_strides.assign(accesses.size(), {});
  layout.reduced_strides.assign(accesses.size(), {});
  // Appends dimension `dim` to `sizes`, merged into the last one when every access steps over it contiguously.
  const auto append = [&](std::vector<int64_t>& sizes, std::vector<std::vector<int64_t>>& strides, size_t dim) {
    const int64_t size = spec.sizes[dim];
    if (size == 1) return;
    const auto bytes = [&](size_t k) {
      return accesses[k]->strides[dim] * static_cast<int64_t>(isa::element_bytes(accesses[k]->type));
    };
    bool mergeable = !sizes.empty();
    for (size_t k = 0; k < accesses.size() && mergeable; ++k) mergeable = strides[k].back() == bytes(k) * size;
    if (mergeable) sizes.back() *= size;
    if (!mergeable) sizes.push_back(size);
    for (size_t k = 0; k < accesses.size(); ++k) {
      if (mergeable) strides[k].back() = bytes(k);
      if (!mergeable) strides[k].push_back(bytes(k));
    }
  };

  std::vector<size_t> order(outer_dims);
  std::iota(order.begin(), order.end(), 0);
  // A scatter-add keeps the space's order: repeated indices accumulate in the order of the points.
  const bool scatters = std::any_of(spec.nodes.begin(), spec.nodes.end(),
                                    [](const FusedNode& node) { return node.op == FusedOpcode::ScatterAdd; });
  if (!spec.stores.empty() && !scatters) {
    const std::vector<int64_t>& strides = spec.stores[0].strides;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return std::abs(strides[x]) > std::abs(strides[y]); });
  }
  for (size_t dim : order) append(layout.outer, layout.outer_strides, dim);
  for (size_t dim = outer_dims; dim < spec.sizes.size(); ++dim) append(layout.reduced, layout.reduced_strides, dim);
  if (layout.outer.empty()) {  // one row
    layout.outer.push_back(1);
    for (std::vector<int64_t>& strides : layout.outer_strides) strides.push_back(0);
  }
  if (layout.reduced.size() > kMaxReducedDims)
    throw Unsupported(
        fmt::format("fused kernel {}: {} reduced dimensions [{}] remain after collapsing; a tile moves {}", spec.name,
                    layout.reduced.size(), fmt::join(layout.reduced, ", "), kMaxReducedDims));
  for (int64_t size : layout.reduced) layout.row_length *= size;
  return layout;
}

}  // namespace npusim::emitter::fused
