// Operators that only move elements — select, gather, index, pad by reflection, fill with a given value — give the
// same bits whatever the elements mean. For complex64 and float64 tensors, which have no native kernels of their own
// for them, each such tensor is reinterpreted as int64 (a view of the same memory: no copy, nothing leaves the
// device), the operator runs again and reaches its native int64 kernel, and its results are reinterpreted back. A
// number argument (masked_fill's value) becomes the int64 of its bits in the tensors' type. Runs before the CPU
// fallback (cpu_fallback.cpp); what the int64 run cannot do natively falls back there, counted under its name.
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bridge.h"
#include "stack_tensors.h"

namespace npusim::bridge {
namespace {

// Operators whose every overload moves elements without reading their values (those that accumulate or reduce are
// refused below by their arguments).
const std::set<std::string>& moving_operators() {
  static const std::set<std::string> names = {"aten::index_select",
                                              "aten::index",
                                              "aten::_unsafe_index",
                                              "aten::masked_select",
                                              "aten::gather",
                                              "aten::take",
                                              "aten::flip",
                                              "aten::roll",
                                              "aten::reflection_pad1d",
                                              "aten::reflection_pad2d",
                                              "aten::reflection_pad3d",
                                              "aten::replication_pad1d",
                                              "aten::replication_pad2d",
                                              "aten::replication_pad3d",
                                              "aten::index_fill",
                                              "aten::index_fill_",
                                              "aten::masked_fill",
                                              "aten::masked_fill_",
                                              "aten::masked_scatter",
                                              "aten::masked_scatter_",
                                              "aten::index_put",
                                              "aten::index_put_",
                                              "aten::_index_put_impl_",
                                              "aten::constant_pad_nd",
                                              "aten::tril",
                                              "aten::triu",
                                              "aten::tril_",
                                              "aten::triu_",
                                              "aten::scatter",
                                              "aten::scatter_",
                                              "aten::im2col",
                                              "aten::take_along_dim"};
  return names;
}

bool is_eight_byte_float(at::ScalarType type) { return type == at::kComplexFloat || type == at::kDouble; }

// The one 8-byte floating type among the tensor arguments, if every floating tensor has it (and none is a conjugate
// or negative view, whose bits are not their values).
std::optional<at::ScalarType> reinterpreted_type(const std::vector<c10::IValue>& arguments) {
  std::optional<at::ScalarType> found;
  bool usable = true;
  for (const c10::IValue& argument : arguments)
    for_each_tensor(argument, [&](const at::Tensor& t) {
      if (!t.defined() || !(at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()))) return;
      if (!is_eight_byte_float(t.scalar_type()) || (found && *found != t.scalar_type()) || t.is_conj() || t.is_neg() ||
          !t.device().is_privateuseone())
        usable = false;
      found = t.scalar_type();
    });
  return usable ? found : std::nullopt;
}

// What the call does to its elements beyond moving them: an accumulation (index_put's accumulate=True) or a
// reduction (scatter's reduce=).
bool only_moves(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& arguments) {
  for (size_t i = 0; i < arguments.size(); ++i) {
    const std::string& name = schema.arguments()[i].name();
    if (name == "accumulate" && arguments[i].isBool() && arguments[i].toBool()) return false;
    if (name == "reduce" && !arguments[i].isNone()) return false;
  }
  return true;
}

// A number as the int64 of its bits in `type` (complex64: the real part's bits low, the imaginary part's high).
int64_t bits_of(const c10::Scalar& number, at::ScalarType type) {
  int64_t bits = 0;
  if (type == at::kDouble) {
    const double value = number.toDouble();
    std::memcpy(&bits, &value, sizeof bits);
  } else {
    const c10::complex<float> value = number.toComplexFloat();
    std::memcpy(&bits, &value, sizeof bits);
  }
  return bits;
}

}  // namespace

bool run_as_bits(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  if (!moving_operators().count(schema.name())) return false;
  const size_t count = schema.arguments().size();
  const std::vector<c10::IValue> arguments(stack->end() - static_cast<std::ptrdiff_t>(count), stack->end());
  const std::optional<at::ScalarType> type = reinterpreted_type(arguments);
  if (!type || !only_moves(schema, arguments)) return false;

  // Each reinterpreted tensor and its original, to give back the originals a call returns (out=, in place) with the
  // shape the int64 run gave them.
  std::vector<std::pair<at::Tensor, at::Tensor>> reinterpreted;
  torch::jit::Stack as_bits;
  for (size_t i = 0; i < count; ++i) {
    const c10::IValue& argument = arguments[i];
    const bool number = schema.arguments()[i].type()->kind() == c10::TypeKind::NumberType;
    if (number && argument.isScalar()) {
      as_bits.emplace_back(c10::Scalar(bits_of(argument.toScalar(), *type)));
      continue;
    }
    as_bits.push_back(map_tensors(argument, [&](const at::Tensor& t) {
      if (!t.defined() || t.scalar_type() != *type) return t;
      at::Tensor bits = t.view(at::kLong);
      reinterpreted.emplace_back(t, bits);
      return bits;
    }));
  }
  op.callBoxed(as_bits);

  torch::jit::drop(*stack, count);
  for (const c10::IValue& result : as_bits)
    stack->push_back(map_tensors(result, [&](const at::Tensor& t) {
      for (auto& [original, bits] : reinterpreted)
        if (t.is_same(bits)) {  // written in place or out=: its storage may have grown, its shape changed
          if (original.sizes() != bits.sizes() || original.strides() != bits.strides())
            original.as_strided_(bits.sizes(), bits.strides(), bits.storage_offset());
          return original;
        }
      return t.defined() && t.scalar_type() == at::kLong ? t.view(*type) : t;
    }));
  return true;
}

}  // namespace npusim::bridge
