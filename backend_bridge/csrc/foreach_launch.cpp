// Foreach operators as multi-tensor fused kernels (foreach_launch.h): the segments' checks, their grouping by device
// and dtype, the spec and the argument block of each group.
#include "foreach_launch.h"

#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <bit>
#include <map>
#include <utility>

#include "bridge.h"
#include "kernel_launcher.h"

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

}  // namespace

Program::Program(emitter::FusedSpec& spec, ElementType storage, int tensors)
    : spec_(spec), storage_(storage), tensors_(tensors) {}

int Program::node(emitter::FusedNode node) {
  spec_.nodes.push_back(node);
  return static_cast<int>(spec_.nodes.size()) - 1;
}

int Program::load(int tensor) {
  spec_.loads.push_back({tensor, storage_, 0, {1}});
  const int loaded =
      node({.op = FusedOpcode::Load, .type = storage_, .access = static_cast<int>(spec_.loads.size()) - 1});
  return storage_ == ElementType::F32 ? loaded
                                      : node({.op = FusedOpcode::Convert, .type = ElementType::F32, .a = loaded});
}

int Program::load_element(int tensor) {
  spec_.loads.push_back({tensor, storage_, 0, {0}});
  const int loaded =
      node({.op = FusedOpcode::Load, .type = storage_, .access = static_cast<int>(spec_.loads.size()) - 1});
  return storage_ == ElementType::F32 ? loaded
                                      : node({.op = FusedOpcode::Convert, .type = ElementType::F32, .a = loaded});
}

int Program::load_stored(int tensor) {
  spec_.loads.push_back({tensor, storage_, 0, {1}});
  return node({.op = FusedOpcode::Load, .type = storage_, .access = static_cast<int>(spec_.loads.size()) - 1});
}

int Program::scalar(int k) {
  return node({.op = FusedOpcode::Argument, .type = ElementType::F32, .argument = tensors_ + k});
}

int Program::constant(double value) {
  return node({.op = FusedOpcode::Constant, .type = ElementType::F32, .constant = value});
}

int Program::op(FusedOpcode opcode, int a, int b, int c) {
  const bool compare = opcode >= FusedOpcode::Eq && opcode <= FusedOpcode::Ge;
  return node({.op = opcode, .type = compare ? ElementType::Bool : ElementType::F32, .a = a, .b = b, .c = c});
}

void Program::store(int value, int tensor) {
  spec_.stores.push_back({tensor, storage_, 0, {1}});
  node({.op = FusedOpcode::Store,
        .type = spec_.nodes[value].type,
        .a = value,
        .access = static_cast<int>(spec_.stores.size()) - 1});
}

void Program::store_zero(int tensor) {
  const int zero = node({.op = FusedOpcode::Constant, .type = storage_, .constant = 0});
  store(zero, tensor);
}

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

}  // namespace npusim::bridge::foreach
