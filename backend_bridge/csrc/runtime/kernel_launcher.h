// Runs built kernels: builds a program once per (device, kernel specification) — the cache's key is the spec itself —,
// keeps it loaded on the device, and writes its disassembly to $NPUSIM_DUMP_KERNELS when that is set.
#pragma once

#include <cstdint>
#include <span>

#include "npusim/emitter/attention.h"
#include "npusim/emitter/cumsum.h"
#include "npusim/emitter/elementwise.h"
#include "npusim/emitter/fused.h"
#include "npusim/emitter/gather.h"
#include "npusim/emitter/indexed_elements.h"
#include "npusim/emitter/matmul.h"
#include "npusim/emitter/nll_loss.h"
#include "npusim/emitter/random.h"
#include "npusim/emitter/rows.h"
#include "npusim/emitter/scatter_add_rows.h"
#include "npusim/emitter/triangle.h"
#include "npusim/runtime/device.h"

namespace npusim::bridge {

// Throws emitter::Unsupported when the emitter cannot express the specification.
void launch_elementwise(int device_index, runtime::Device& device, const emitter::ElementwiseSpec& spec,
                        std::span<const uint64_t> operand_addresses);
void launch_matmul(int device_index, runtime::Device& device, const emitter::MatmulSpec& spec,
                   std::span<const uint64_t> operand_addresses);
void launch_gather(int device_index, runtime::Device& device, const emitter::GatherSpec& spec,
                   std::span<const uint64_t> operand_addresses);
void launch_attention(int device_index, runtime::Device& device, const emitter::AttentionSpec& spec,
                      std::span<const uint64_t> operand_addresses);
// The argument block emit_attention_gradient documents for spec.part.
void launch_attention_gradient(int device_index, runtime::Device& device, const emitter::AttentionGradientSpec& spec,
                               std::span<const uint64_t> operand_addresses);
void launch_indexed_elements(int device_index, runtime::Device& device, const emitter::IndexedElementsSpec& spec,
                             std::span<const uint64_t> operand_addresses);
// The forward kernel, or with `backward` the gradient's.
void launch_nll_loss(int device_index, runtime::Device& device, const emitter::NllLossSpec& spec, bool backward,
                     std::span<const uint64_t> operand_addresses);
void launch_scatter_add_rows(int device_index, runtime::Device& device, const emitter::ScatterAddRowsSpec& spec,
                             std::span<const uint64_t> operand_addresses);
void launch_zero_triangle(int device_index, runtime::Device& device, const emitter::TriangleSpec& spec,
                          std::span<const uint64_t> operand_addresses);
void launch_cumsum(int device_index, runtime::Device& device, const emitter::CumsumSpec& spec,
                   std::span<const uint64_t> operand_addresses);
// One of torch.compile's kernels (npusim/inductor): the argument block is its tensors' addresses.
void launch_fused(int device_index, runtime::Device& device, const emitter::FusedSpec& spec,
                  std::span<const uint64_t> operand_addresses);
void launch_rows(int device_index, runtime::Device& device, const emitter::RowSpec& spec,
                 std::span<const uint64_t> operand_addresses);

}  // namespace npusim::bridge
