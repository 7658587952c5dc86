// Half-precision tensors for operators whose native kernels compute in float32 (norms, losses, pooling, most
// reductions and activations' gradients): instead of the CPU fallback, each bfloat16 or float16 argument is widened
// on the device by a native conversion, the operator runs again on the float32 copies (reaching its float32 kernel),
// and each result is rounded back once to the dtype the operator gives for the original arguments, which a run on
// the meta device tells (once for each operator and argument dtypes). This is how the CPU computes these operators in
// half precision too ("opmath" float32), and how NPUs keep bfloat16 in memory and compute in float32. In-place and out=
// arguments get their results written back. What the float32 run cannot do natively takes the CPU fallback there,
// counted under its own name.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "bridge.h"
#include "pointwise_output.h"
#include "stack_tensors.h"

namespace npusim::bridge {
namespace {

bool is_half(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf);
}

// The one half-precision dtype among the npusim tensor arguments, if there is one and no other floating dtype.
std::optional<at::ScalarType> half_dtype(const std::vector<c10::IValue>& arguments) {
  std::optional<at::ScalarType> half;
  bool mixed = false;
  for (const c10::IValue& argument : arguments)
    for_each_tensor(argument, [&](const at::Tensor& t) {
      if (!is_half(t) || !t.device().is_privateuseone()) return;
      mixed |= half.has_value() && *half != t.scalar_type();
      half = t.scalar_type();
    });
  return mixed ? std::nullopt : half;
}

// The dtypes of each of the operator's results (one per tensor, undefined ones the half dtype) for these arguments,
// from a run on the meta device; none if it has no meta kernel or refuses the arguments, or a result aliases an
// argument without writing it (a view, which copies could not keep).
using ResultDtypes = std::vector<std::vector<at::ScalarType>>;
std::optional<ResultDtypes> results_on_meta(const c10::OperatorHandle& op, const std::vector<c10::IValue>& arguments,
                                            at::ScalarType half) {
  for (const c10::Argument& result : op.schema().returns())
    if (result.alias_info() && !result.alias_info()->isWrite()) return std::nullopt;
  torch::jit::Stack stack;
  for (const c10::IValue& argument : arguments)
    stack.push_back(map_tensors(argument, [](const at::Tensor& t) { return t.defined() ? meta_like(t) : t; }));
  try {
    op.callBoxed(stack);
  } catch (const std::exception&) {  // c10::Error, or a Python meta function's error
    return std::nullopt;
  }
  ResultDtypes dtypes(stack.size());
  for (size_t r = 0; r < stack.size(); ++r)
    for_each_tensor(stack[r], [&](const at::Tensor& t) { dtypes[r].push_back(t.defined() ? t.scalar_type() : half); });
  return dtypes;
}

// What the results' dtypes depend on: the operator, its tensors' dtypes (and whether each is a wrapped Python
// number, which promotes differently) and its other arguments' values; not the tensors' shapes.
std::string dtype_key(const c10::OperatorHandle& op, const std::vector<c10::IValue>& arguments) {
  std::ostringstream key;
  key << op.schema().name() << '.' << op.schema().overload_name();
  for (const c10::IValue& argument : arguments) {
    key << '|';
    bool tensors = false;
    for_each_tensor(argument, [&](const at::Tensor& t) {
      tensors = true;
      key << (t.defined() ? c10::toString(t.scalar_type()) : "undefined")
          << (t.defined() && t.unsafeGetTensorImpl()->is_wrapped_number() ? "w" : "") << ',';
    });
    const bool tensor_list = argument.isList() && argument.toList().size() > 0 && argument.toList().get(0).isNone();
    if (!tensors && !tensor_list && !argument.isTensor() && !argument.isTensorList()) key << argument;
  }
  return key.str();
}

// results_on_meta, run once for each dtype_key: a meta function can be slow (some are Python: torch 2.13's
// upsample_bicubic2d takes half a second a call), and every half-precision call of a native operator asks. Refusals
// are not remembered (they may come from these arguments' shapes).
std::optional<ResultDtypes> result_dtypes(const c10::OperatorHandle& op, const std::vector<c10::IValue>& arguments,
                                          at::ScalarType half) {
  static std::mutex mutex;
  static std::unordered_map<std::string, ResultDtypes> known;
  const std::string key = dtype_key(op, arguments);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto found = known.find(key); found != known.end()) return found->second;
  }
  std::optional<ResultDtypes> dtypes = results_on_meta(op, arguments, half);
  if (dtypes) {
    const std::lock_guard<std::mutex> lock(mutex);
    known.emplace(key, *dtypes);
  }
  return dtypes;
}

// native_batch_norm writes its running statistics without its schema saying so (a legacy of the operator).
bool writes(const c10::OperatorHandle& op, size_t index) {
  const c10::Argument& argument = op.schema().arguments()[index];
  if (argument.alias_info() && argument.alias_info()->isWrite()) return true;
  return op.schema().name() == "aten::native_batch_norm" &&
         (argument.name() == "running_mean" || argument.name() == "running_var");
}

// A dtype argument naming the half-precision type names float32 in the widened run.
c10::IValue widened_dtype(const c10::Argument& argument, const c10::IValue& value, at::ScalarType half) {
  c10::TypePtr type = argument.real_type();
  if (const auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  if (type->kind() == c10::TypeKind::ScalarTypeType && value.isInt() && value.toInt() == static_cast<int64_t>(half))
    return static_cast<int64_t>(at::kFloat);
  return value;
}

thread_local bool widening = false;  // conversions and the float32 run never widen again

}  // namespace

bool run_in_float32(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t count = schema.arguments().size();
  std::vector<c10::IValue> arguments(stack->end() - static_cast<std::ptrdiff_t>(count), stack->end());
  const std::optional<at::ScalarType> half = widening ? std::nullopt : half_dtype(arguments);
  if (!half) return false;
  const std::optional<ResultDtypes> dtypes = result_dtypes(op, arguments, *half);
  if (!dtypes) return false;
  widening = true;
  struct Reset {
    ~Reset() { widening = false; }
  } reset;

  // Written arguments: the original and its float32 stand-in, to copy back.
  std::vector<std::pair<at::Tensor, at::Tensor>> written;
  torch::jit::Stack widened;
  for (size_t i = 0; i < count; ++i) {
    const c10::Argument& argument = schema.arguments()[i];
    const bool written_to = writes(op, i);
    widened.push_back(map_tensors(widened_dtype(argument, arguments[i], *half), [&](const at::Tensor& t) {
      if (!is_half(t) || !t.device().is_privateuseone()) return t;
      // An out= argument's values are not read: an empty stand-in of its shape.
      at::Tensor wide = argument.is_out() ? at::empty(t.sizes(), t.options().dtype(at::kFloat)) : t.to(at::kFloat);
      if (written_to) written.emplace_back(t, wide);
      return wide;
    }));
  }
  op.callBoxed(widened);

  for (auto& [original, wide] : written) {
    if (original.sizes() != wide.sizes()) at::native::resize_output(original, wide.sizes());
    original.copy_(wide);
  }
  torch::jit::drop(*stack, count);
  for (size_t r = 0; r < widened.size(); ++r) {
    size_t next = 0;
    stack->push_back(map_tensors(widened[r], [&](const at::Tensor& t) {
      const at::ScalarType dtype = (*dtypes)[r].at(next++);
      for (const auto& [original, wide] : written)
        if (t.is_same(wide)) return original;
      return t.defined() && t.scalar_type() != dtype ? t.to(dtype) : t;
    }));
  }
  return true;
}

}  // namespace npusim::bridge
