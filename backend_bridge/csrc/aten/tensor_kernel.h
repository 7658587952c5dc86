// A fused kernel (emitter::FusedSpec) written over the tensors of an op's call: each load or store names a tensor and
// its strides over the kernel's iteration space, and the tensors' addresses become the argument block. The glue's
// one-kernel ops (batch norm's training steps, nearest upsampling, padding, dropout's backward) build their specs
// with it.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "bridge.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {

class TensorKernel {
 public:
  // The kernel's name in reports, its iteration space and how many of its last dimensions are reduced.
  TensorKernel(std::string name, std::vector<int64_t> sizes, int reduced_dims) {
    spec_.name = std::move(name);
    spec_.sizes = std::move(sizes);
    spec_.reduced_dims = reduced_dims;
  }

  // A kernel name for an op over `tensor`: "<name>_<type>" (upsample_nearest2d_f32).
  static std::string name_for(const char* name, const at::Tensor& tensor) {
    return c10::str(name, "_", std::string(isa::type_name(type_of(tensor))));
  }

  // Host values (index terms, weights) as a one-dimensional tensor on `device`, for the kernel to load: one copy.
  template <typename T>
  static at::Tensor table(const std::vector<T>& values, at::ScalarType type, const at::Device& device) {
    at::Tensor host = at::empty({static_cast<int64_t>(values.size())}, at::TensorOptions().dtype(type));
    std::copy(values.begin(), values.end(), static_cast<T*>(host.data_ptr()));
    return host.to(device);
  }

  // The tensor's elements, of its own type, at element offset + sum(i_k strides[k]) for point i of the space.
  int load(const at::Tensor& tensor, std::span<const int64_t> strides, int64_t offset = 0) {
    const isa::ElementType type = type_of(tensor);
    spec_.loads.push_back({argument(tensor), type, offset, {strides.begin(), strides.end()}});
    return add({.op = emitter::FusedOpcode::Load, .type = type, .access = static_cast<int>(spec_.loads.size()) - 1});
  }
  // The tensor's element at the index node `index` (i64, element offsets from its first element), at every point.
  int gather(const at::Tensor& tensor, int index) {
    const isa::ElementType type = type_of(tensor);
    spec_.loads.push_back({argument(tensor), type, 0, std::vector<int64_t>(spec_.sizes.size(), 0)});
    return add({.op = emitter::FusedOpcode::Gather,
                .type = type,
                .a = index,
                .access = static_cast<int>(spec_.loads.size()) - 1});
  }
  // Adds node `value` (of the tensor's type) to the tensor's element at the index node `index`, in the order of the
  // points (the kernel then runs on one core).
  void scatter_add(int value, const at::Tensor& tensor, int index) {
    spec_.stores.push_back({argument(tensor), type_of(tensor), 0, std::vector<int64_t>(spec_.sizes.size(), 0)});
    add({.op = emitter::FusedOpcode::ScatterAdd,
         .type = type_of(tensor),
         .a = value,
         .b = index,
         .access = static_cast<int>(spec_.stores.size()) - 1});
  }
  // Node `value` into the tensor, converted to its type, at element offset + sum(i_k strides[k]) for point i.
  void store(int value, const at::Tensor& tensor, std::span<const int64_t> strides, int64_t offset = 0) {
    spec_.stores.push_back({argument(tensor), type_of(tensor), offset, {strides.begin(), strides.end()}});
    add({.op = emitter::FusedOpcode::Store,
         .type = spec_.nodes[value].type,
         .a = value,
         .access = static_cast<int>(spec_.stores.size()) - 1});
  }
  int op(emitter::FusedOpcode opcode, int a, int b = -1, int c = -1, isa::ElementType type = isa::ElementType::F32) {
    return add({.op = opcode, .type = type, .a = a, .b = b, .c = c});
  }
  int constant(double value, isa::ElementType type = isa::ElementType::F32) {
    return add({.op = emitter::FusedOpcode::Constant, .type = type, .constant = value});
  }

  // Builds (once per spec) and launches the kernel on `on`'s device; false when it cannot be built.
  bool launch(const at::Tensor& on) {
    return launched_natively([&] { launch_fused(on.device().index(), runtime_device(on), spec_, addresses_); });
  }

 private:
  static isa::ElementType type_of(const at::Tensor& tensor) {
    const std::optional<isa::ElementType> type = element_type(tensor.scalar_type());
    TORCH_INTERNAL_ASSERT(type, "a fused kernel over a ", tensor.scalar_type(), " tensor");
    return *type;
  }
  int add(emitter::FusedNode node) {
    spec_.nodes.push_back(node);
    return static_cast<int>(spec_.nodes.size()) - 1;
  }
  int argument(const at::Tensor& tensor) {
    addresses_.push_back(device_address(tensor));
    return spec_.arguments++;
  }

  emitter::FusedSpec spec_;
  std::vector<uint64_t> addresses_;
};

}  // namespace npusim::bridge
