// Operators linear in their tensors with real coefficients — the accumulating ones gradients use (index_add,
// scatter_add, put_, the padding and unfolding backwards, col2im) — give a complex result whose real part is the
// operator of the real parts and whose imaginary part that of the imaginary parts. For complex64 tensors, which
// these operators' native kernels do not take, the operator runs twice, on the float32 views of each part (nothing
// leaves the device; an in-place operator writes its part of the tensor through the view), and the two results are
// put together. Runs before the CPU fallback (cpu_fallback.cpp).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/complex.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/view_as_real.h>

#include <array>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bridge.h"
#include "stack_tensors.h"

namespace npusim::bridge {
namespace {

const std::set<std::string>& linear_operators() {
  static const std::set<std::string> names = {"aten::index_add",
                                              "aten::index_add_",
                                              "aten::scatter_add",
                                              "aten::scatter_add_",
                                              "aten::put",
                                              "aten::put_",
                                              "aten::index_copy",
                                              "aten::index_copy_",
                                              "aten::col2im",
                                              "aten::unfold_backward",
                                              "aten::reflection_pad1d_backward",
                                              "aten::reflection_pad2d_backward",
                                              "aten::reflection_pad3d_backward",
                                              "aten::replication_pad1d_backward",
                                              "aten::replication_pad2d_backward",
                                              "aten::replication_pad3d_backward"};
  return names;
}

// Whether the call's floating tensors are all complex64 on the device (and written ones not lazy conjugates), with at
// least one, and its numbers real (a complex alpha would mix the parts).
bool takes(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& arguments) {
  bool found = false, usable = true;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::IValue& argument = arguments[i];
    if (argument.isScalar() && argument.toScalar().isComplex()) return false;
    const bool written = schema.arguments()[i].alias_info() && schema.arguments()[i].alias_info()->isWrite();
    for_each_tensor(argument, [&](const at::Tensor& t) {
      if (!t.defined() || !(at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()))) return;
      found = true;
      usable &= t.scalar_type() == at::kComplexFloat && t.device().is_privateuseone() && !(written && t.is_conj());
    });
  }
  return found && usable;
}

}  // namespace

bool run_in_parts(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  if (!linear_operators().count(schema.name())) return false;
  const size_t count = schema.arguments().size();
  const std::vector<c10::IValue> arguments(stack->end() - static_cast<std::ptrdiff_t>(count), stack->end());
  if (!takes(schema, arguments)) return false;

  // Each run's arguments and results, and each written tensor with its two stand-ins: an in-place tensor's part
  // views, written through; an out= tensor's fresh float32 results, put together into it after both runs.
  struct Written {
    at::Tensor original;
    std::array<at::Tensor, 2> parts;
    bool out;
  };
  std::array<torch::jit::Stack, 2> runs;
  std::vector<Written> written;
  for (size_t i = 0; i < count; ++i) {
    const c10::Argument& argument = schema.arguments()[i];
    const bool writes = argument.alias_info() && argument.alias_info()->isWrite();
    std::array<at::Tensor, 2> stand_ins;
    for (int part = 0; part < 2; ++part)
      runs[part].push_back(map_tensors(arguments[i], [&](const at::Tensor& t) {
        if (!t.defined() || t.scalar_type() != at::kComplexFloat) return t;
        if (writes && argument.is_out()) return stand_ins[part] = at::empty({0}, t.options().dtype(at::kFloat));
        const at::Tensor view = at::view_as_real(writes ? t : t.resolve_conj()).select(-1, part);
        if (writes) stand_ins[part] = view;
        return view;
      }));
    if (writes && stand_ins[0].defined()) written.push_back({arguments[i].toTensor(), stand_ins, argument.is_out()});
  }
  for (torch::jit::Stack& run : runs) op.callBoxed(run);

  for (const Written& w : written)
    if (w.out) {
      at::native::resize_output(w.original, w.parts[0].sizes());
      w.original.copy_(at::complex(w.parts[0], w.parts[1]));
    }
  torch::jit::drop(*stack, count);
  for (size_t r = 0; r < runs[0].size(); ++r) {
    if (!runs[0][r].isTensor()) {
      stack->push_back(runs[0][r]);
      continue;
    }
    const at::Tensor real = runs[0][r].toTensor(), imag = runs[1][r].toTensor();
    std::optional<at::Tensor> original;  // a written tensor returned (in place, out=)
    for (const Written& w : written)
      if (real.is_same(w.parts[0])) original = w.original;
    stack->push_back(original ? *original : at::complex(real, imag));
  }
  return true;
}

}  // namespace npusim::bridge
