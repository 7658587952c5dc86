// Integer pointwise operations as one-operation fused kernels (integer_pointwise.h).
#include "integer_pointwise.h"

#include <functional>
#include <limits>
#include <vector>

#include "bridge.h"
#include "pointwise_output.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {
namespace {

using emitter::FusedNode;
using emitter::FusedOpcode;

bool is_integer(at::ScalarType type) {
  return type == at::kLong || type == at::kInt || type == at::kShort || type == at::kChar;
}

const char* op_name(FusedOpcode op) {
  switch (op) {
    case FusedOpcode::Neg: return "neg";
    case FusedOpcode::Abs: return "abs";
    case FusedOpcode::Maximum: return "maximum";
    case FusedOpcode::Minimum: return "minimum";
    case FusedOpcode::And: return "bitwise_and";
    case FusedOpcode::Or: return "bitwise_or";
    case FusedOpcode::Xor: return "bitwise_xor";
    default: return "clamp";
  }
}

// The kernel: loads of `operands` (broadcast to out's shape), then `compute` adds the nodes from the loads' node
// indices and returns the node to store. Named like the elementwise kernels: neg_i64, maximum_i32, ...
bool launch(const char* name, const std::vector<at::Tensor>& operands, at::Tensor& out,
            const std::function<int(emitter::FusedSpec&, const std::vector<int>&)>& compute) {
  if (!is_integer(out.scalar_type())) return false;
  for (const at::Tensor& operand : operands)
    if (operand.scalar_type() != out.scalar_type() || operand.device() != out.device()) return false;
  const auto type = element_type(out.scalar_type());
  if (!type) return false;
  const std::vector<int64_t> shape = resize_to_broadcast(out, operands);
  if (out.numel() == 0) return true;

  emitter::FusedSpec spec;
  spec.name = c10::str(name, "_", isa::type_name(*type));
  spec.sizes = shape.empty() ? std::vector<int64_t>{1} : shape;
  spec.arguments = static_cast<int>(operands.size()) + 1;  // out, then the operands
  const auto strides = [&](const at::Tensor& tensor) {
    return shape.empty() ? std::vector<int64_t>{0} : tensor.expand(shape).strides().vec();
  };
  std::vector<int> loaded;
  for (size_t k = 0; k < operands.size(); ++k) {
    spec.loads.push_back({static_cast<int>(k) + 1, *type, 0, strides(operands[k])});
    spec.nodes.push_back(FusedNode{.op = FusedOpcode::Load, .type = *type, .access = static_cast<int>(k)});
    loaded.push_back(static_cast<int>(k));
  }
  const int result = compute(spec, loaded);
  spec.stores.push_back({0, *type, 0, strides(out)});
  spec.nodes.push_back(FusedNode{.op = FusedOpcode::Store, .type = *type, .a = result, .access = 0});
  std::vector<uint64_t> addresses = {device_address(out)};
  for (const at::Tensor& operand : operands) addresses.push_back(device_address(operand));
  return launched_natively([&] { launch_fused(out.device().index(), runtime_device(out), spec, addresses); });
}

int add_node(emitter::FusedSpec& spec, FusedNode node) {
  spec.nodes.push_back(node);
  return static_cast<int>(spec.nodes.size()) - 1;
}

}  // namespace

bool launch_integer_unary(FusedOpcode op, const at::Tensor& self, at::Tensor& out) {
  return launch(op_name(op), {self}, out, [&](emitter::FusedSpec& spec, const std::vector<int>& loads) {
    return add_node(spec, {.op = op, .type = spec.loads[0].type, .a = loads[0]});
  });
}

bool launch_integer_binary(FusedOpcode op, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return launch(op_name(op), {self, other}, out, [&](emitter::FusedSpec& spec, const std::vector<int>& loads) {
    return add_node(spec, {.op = op, .type = spec.loads[0].type, .a = loads[0], .b = loads[1]});
  });
}

bool launch_integer_clamp(const at::Tensor& self, const std::optional<at::Scalar>& low,
                          const std::optional<at::Scalar>& high, at::Tensor& out) {
  if (!low && !high) return false;
  // Bounds the dtype holds exactly (and the kernel's double constants: integers up to 2^53).
  const auto fits = [&](const std::optional<at::Scalar>& bound) {
    if (!bound) return true;
    if (!bound->isIntegral(/*includeBool=*/false)) return false;
    const int64_t value = bound->toLong();
    bool holds = false;
    AT_DISPATCH_INTEGRAL_TYPES(out.scalar_type(), "clamp", [&] {
      holds = value >= std::numeric_limits<scalar_t>::min() && value <= std::numeric_limits<scalar_t>::max();
    });
    return holds && value >= -(int64_t{1} << 53) && value <= (int64_t{1} << 53);
  };
  if (!is_integer(out.scalar_type()) || !fits(low) || !fits(high)) return false;
  return launch("clamp", {self}, out, [&](emitter::FusedSpec& spec, const std::vector<int>& loads) {
    const isa::ElementType type = spec.loads[0].type;
    int value = loads[0];
    const auto bounded = [&](FusedOpcode op, const at::Scalar& bound) {
      const int constant =
          add_node(spec, {.op = FusedOpcode::Constant, .type = type, .constant = static_cast<double>(bound.toLong())});
      value = add_node(spec, {.op = op, .type = type, .a = value, .b = constant});
    };
    if (low) bounded(FusedOpcode::Maximum, *low);
    if (high) bounded(FusedOpcode::Minimum, *high);
    return value;
  });
}

}  // namespace npusim::bridge
