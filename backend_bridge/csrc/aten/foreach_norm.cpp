// torch._foreach_norm (clip_grad_norm_'s and the optimizers' foreach path): the norm of every tensor of the list,
// ord 1, 2 or inf, as one kernel per device and dtype. Each tensor is a segment reduced whole (FusedSpec::segments with
// reduced_dims 1, walked in chunks: fused_looped.h), its elements read in memory order (a norm does not depend on
// the order of its terms, only the rounding of the sum does), widened to float32 and the result rounded once to its
// dtype, as PyTorch's opmath does. Other orders, dtypes and tensors (not dense, of another device) take PyTorch's
// own path, one vector norm per tensor.
#include <ATen/ops/empty.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <torch/library.h>

#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "bridge.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

using Op = emitter::FusedOpcode;

enum class Order { One, Two, Infinity };

std::optional<Order> native_order(const at::Scalar& ord) {
  if (ord.isComplex()) return std::nullopt;
  const double value = ord.toDouble();
  if (value == 1) return Order::One;
  if (value == 2) return Order::Two;
  if (std::isinf(value) && value > 0) return Order::Infinity;
  return std::nullopt;
}

bool native_dtype(at::ScalarType type) { return type == at::kFloat || type == at::kHalf || type == at::kBFloat16; }

// One kernel over the tensors (of one device and dtype) into their results: per segment, the tensor and its result.
void launch_norms(const std::vector<at::Tensor>& tensors, const std::vector<at::Tensor>& results, Order order) {
  const isa::ElementType type = *element_type(tensors[0].scalar_type());
  const isa::ElementType result_type = *element_type(results[0].scalar_type());
  emitter::FusedSpec spec;
  spec.name = std::string(order == Order::Two   ? "foreach_norm_"
                          : order == Order::One ? "foreach_norm1_"
                                                : "foreach_norm_inf_") +
              std::string(isa::type_name(type));
  spec.reduced_dims = 1;
  spec.arguments = 2;
  spec.loads = {{.argument = 0, .type = type, .offset = 0, .strides = {1}}};
  spec.stores = {{.argument = 1, .type = result_type, .offset = 0, .strides = {0}}};
  const auto add = [&](emitter::FusedNode node) {
    spec.nodes.push_back(node);
    return static_cast<int>(spec.nodes.size()) - 1;
  };
  using isa::ElementType;
  int x = add({.op = Op::Load, .type = type, .access = 0});
  if (type != ElementType::F32) x = add({.op = Op::Convert, .type = ElementType::F32, .a = x});
  int norm = 0;
  if (order == Order::Two) {
    const int squares = add({.op = Op::Mul, .type = ElementType::F32, .a = x, .b = x});
    norm = add({.op = Op::Sqrt,
                .type = ElementType::F32,
                .a = add({.op = Op::ReduceSum, .type = ElementType::F32, .a = squares})});
  } else {
    const int magnitudes = add({.op = Op::Abs, .type = ElementType::F32, .a = x});
    norm = add({.op = order == Order::One ? Op::ReduceSum : Op::ReduceMax, .type = ElementType::F32, .a = magnitudes});
  }
  add({.op = Op::Store, .type = ElementType::F32, .a = norm, .access = 0});
  std::vector<uint64_t> addresses;
  for (size_t k = 0; k < tensors.size(); ++k) {
    spec.segments.push_back({.elements = tensors[k].numel(), .first_argument = static_cast<int>(2 * k)});
    addresses.push_back(device_address(tensors[k]));
    addresses.push_back(device_address(results[k]));
  }
  launch_fused(tensors[0].device().index(), runtime_device(tensors[0]), spec, addresses);
}

std::vector<at::Tensor> npusim_foreach_norm(at::TensorList self, const at::Scalar& ord,
                                            std::optional<at::ScalarType> dtype) {
  const std::optional<Order> order = native_order(ord);
  if (order == Order::Infinity)
    for (const at::Tensor& tensor : self)
      TORCH_CHECK(tensor.numel() > 0,
                  "_foreach_norm cannot compute the infinity norm on an empty tensor because the operation does not "
                  "have an identity");
  std::vector<at::Tensor> results(self.size());
  // One kernel per device, dtype and result dtype (the store's type is part of the program): its tensors and results.
  std::map<std::tuple<c10::DeviceIndex, at::ScalarType, at::ScalarType>,
           std::pair<std::vector<at::Tensor>, std::vector<at::Tensor>>>
      groups;
  for (size_t k = 0; k < self.size(); ++k) {
    const at::Tensor& tensor = self[k];
    const at::ScalarType result_type = dtype.value_or(tensor.scalar_type());
    if (order && tensor.device().type() == c10::DeviceType::PrivateUse1 && native_dtype(tensor.scalar_type()) &&
        native_dtype(result_type) && (result_type == tensor.scalar_type() || result_type == at::kFloat) &&
        tensor.is_non_overlapping_and_dense()) {
      results[k] = at::empty({}, tensor.options().dtype(result_type));
      if (tensor.numel() == 0) {  // no storage to read: the norm of nothing
        results[k].zero_();
        continue;
      }
      auto& [tensors, outputs] = groups[{tensor.device().index(), tensor.scalar_type(), result_type}];
      tensors.push_back(tensor);
      outputs.push_back(results[k]);
    } else {
      results[k] = at::linalg_vector_norm(tensor, ord, at::OptionalIntArrayRef{}, false, dtype);
    }
  }
  for (const auto& [key, lists] : groups) launch_norms(lists.first, lists.second, *order);
  return results;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("_foreach_norm.Scalar", npusim_foreach_norm); }

}  // namespace npusim::bridge
