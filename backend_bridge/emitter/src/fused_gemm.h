// A fused kernel with a matrix product (FusedSpec::matmul): the GEMM loop (gemm_loop.h) with the spec's program as
// its epilogue.
#pragma once

#include <string>

#include "npusim/emitter/fused.h"

namespace npusim::emitter {

// For a valid spec with a product and no empty dimension (emit_fused checks both). Throws Unsupported for what the
// epilogue cannot do: reductions, strides beyond the DMA's immediates, operations the vector engine lacks, a block
// that does not fit.
Kernel emit_fused_gemm(const FusedSpec& spec, const config::ChipConfig& config, const std::string& name);

}  // namespace npusim::emitter
