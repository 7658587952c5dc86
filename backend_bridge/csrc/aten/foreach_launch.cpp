// Foreach operators as multi-tensor fused kernels (foreach_launch.h): the segments' checks, their grouping by device
// and dtype, the spec and the argument block of each group.
#include "foreach_launch.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty_like.h>

#include <algorithm>
#include <bit>
#include <map>
#include <utility>

#include "bridge.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge::foreach {
namespace {

using emitter::FusedOpcode;
using isa::ElementType;

bool contains(const std::vector<int>& list, int value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// Whether the operator's kernel can walk the segment's tensors in memory order, tensor 0's order being every other's.
bool walkable(const Operator& op, const Segment& segment) {
  TORCH_INTERNAL_ASSERT(
      static_cast<int>(segment.tensors.size()) == op.tensors && static_cast<int>(segment.scalars.size()) == op.scalars,
      op.name, ": a segment of ", segment.tensors.size(), " tensors and ", segment.scalars.size(),
      " scalars for a program of ", op.tensors, " and ", op.scalars);
  const at::Tensor& written = segment.tensors[0];
  if (!written.defined() || !written.is_privateuseone() ||
      std::find(op.dtypes.begin(), op.dtypes.end(), written.scalar_type()) == op.dtypes.end() ||
      !element_type(written.scalar_type()))
    return false;
  for (int k = 0; k < op.tensors; ++k) {
    const at::Tensor& tensor = segment.tensors[k];
    if (!tensor.defined() || tensor.device() != written.device() || tensor.scalar_type() != written.scalar_type())
      return false;
    if (contains(op.elements, k)) {
      if (tensor.numel() != 1) return false;
      continue;
    }
    if (tensor.sizes() != written.sizes()) return false;
    if (tensor.numel() > 1 && (!tensor.is_non_overlapping_and_dense() || tensor.strides() != written.strides()))
      return false;
    if (k > 0 && tensor.numel() > 0) {
      const at::MemOverlapStatus overlap = at::get_overlap_status(written, tensor);
      if (overlap != at::MemOverlapStatus::No && overlap != at::MemOverlapStatus::Full) return false;
    }
  }
  return true;
}

// Segments of the written tensor (self in place, else a new result) then self, the others and the shared ones.
std::vector<Segment> segments_of(const Operands& operands, const std::vector<at::Tensor>& written) {
  std::vector<Segment> segments;
  for (size_t i = 0; i < operands.self.size(); ++i) {
    Segment segment{{written[i], operands.self[i]}, operands.scalars(i)};
    for (const at::TensorList& list : operands.others) segment.tensors.push_back(list[i]);
    for (const at::Tensor& tensor : operands.shared) segment.tensors.push_back(tensor);
    segments.push_back(std::move(segment));
  }
  return segments;
}

}  // namespace

std::vector<size_t> run(const Operator& op, const std::vector<Segment>& segments) {
  std::vector<size_t> others;
  std::map<std::pair<c10::DeviceIndex, at::ScalarType>, std::vector<size_t>> groups;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (!walkable(op, segments[i])) {
      others.push_back(i);
      continue;
    }
    const at::Tensor& written = segments[i].tensors[0];
    groups[{written.device().index(), written.scalar_type()}].push_back(i);
  }
  for (const auto& [key, members] : groups) {
    const ElementType storage = *element_type(key.second);
    emitter::FusedSpec spec;
    spec.name = c10::str(op.name, "_", std::string(isa::type_name(storage)));
    spec.arguments = op.tensors + op.scalars;
    Program program(spec, storage, op.tensors);
    op.program(program);
    std::vector<uint64_t> block;
    for (const size_t i : members) {
      const Segment& segment = segments[i];
      spec.segments.push_back({segment.tensors[0].numel(), static_cast<int>(block.size())});
      for (const at::Tensor& tensor : segment.tensors)
        block.push_back(tensor.numel() == 0 ? 0 : device_address(tensor));
      for (const float value : segment.scalars) block.push_back(std::bit_cast<uint32_t>(value));
    }
    const bool native = launched_natively([&] { launch_fused(key.first, runtime_device(key.first), spec, block); });
    if (!native) others.insert(others.end(), members.begin(), members.end());
  }
  std::sort(others.begin(), others.end());
  return others;
}

// The operator's tensors: the written one, self, the others, then the shared ones (listed as one element each).
Operator make(std::string name, const Operands& operands, std::function<void(Program&)> program, int scalars) {
  Operator op{std::move(name), 2 + static_cast<int>(operands.others.size() + operands.shared.size()), scalars,
              std::move(program)};
  for (size_t k = 0; k < operands.shared.size(); ++k)
    op.elements.push_back(2 + static_cast<int>(operands.others.size() + k));
  return op;
}

// In place: the kernel over what it can walk, `slow(positions)` (PyTorch's per-tensor kernel) over the rest.
void in_place(const Operator& op, const Operands& operands, const std::function<void(const Positions&)>& slow) {
  const std::vector<at::Tensor> self(operands.self.begin(), operands.self.end());
  const Positions rest = run(op, segments_of(operands, self));
  if (!rest.empty()) slow(rest);
}

// Out of place, into results shaped and strided like self.
std::vector<at::Tensor> out_of_place(const Operator& op, const Operands& operands,
                                     const std::function<std::vector<at::Tensor>(const Positions&)>& slow) {
  std::vector<at::Tensor> results;
  for (const at::Tensor& tensor : operands.self)
    results.push_back(tensor.defined() && tensor.is_privateuseone() ? at::empty_like(tensor) : at::Tensor());
  const Positions rest = run(op, segments_of(operands, results));
  if (!rest.empty()) {
    const std::vector<at::Tensor> computed = slow(rest);
    for (size_t k = 0; k < rest.size(); ++k) results[rest[k]] = computed[k];
  }
  return results;
}

}  // namespace npusim::bridge::foreach
