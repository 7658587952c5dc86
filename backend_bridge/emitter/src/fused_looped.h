// Fused kernels whose rows do not fit the scratchpad (a softmax over a vocabulary, batch norm over a large image): a
// tile is one row, walked in chunks once per pass. Pass p reduces every chunk into the reductions that need p earlier
// reductions' results (their carries: one value per reduction, kept in the scratchpad for the whole row), then a pass
// stores the values that vary along the row, chunk by chunk, and the per-row values are stored last. A value needed
// in several passes is computed again in each from its loads, so a row costs one read per pass and no trip of a
// partial result through DRAM: layer norm reads its row three times and writes it once, in one launch.
#pragma once

#include <string>

#include "npusim/emitter/fused.h"

namespace npusim::emitter::fused {

// Thrown by the tiled emitter (fused.cpp) when not one row fits the scratchpad; emit_fused then loops over the rows.
class RowTooLong : public Unsupported {
 public:
  using Unsupported::Unsupported;
};

// The kernel of a valid spec with reductions, without segments, a matrix product, random numbers or indexed
// accesses (Unsupported names what it refuses, as it does a reduction it cannot combine chunk by chunk: the indices
// of extrema, extrema of types other than f32 and i32).
Kernel emit_looped_rows(const FusedSpec& spec, const config::ChipConfig& config, const std::string& name);

}  // namespace npusim::emitter::fused
