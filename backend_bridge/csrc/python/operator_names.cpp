// npusim._C.set_operator_naming: while npusim.profile() is open, each device command is stamped with the aten
// operator that issued it — the outermost one the dispatcher is running on that thread. A RecordFunction callback
// rather than a Python dispatch mode, so that torch.compile still compiles inside a profile (Dynamo does not trace
// under a dispatch mode).
#include <torch/extension.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "npusim/runtime/session.h"

namespace npusim::bridge {
namespace {

namespace py = pybind11;

thread_local int depth = 0;  // aten operators running on this thread, nested

void stamp(const std::string& op) {
  runtime::Session& session = runtime::Session::instance();
  for (int index = 0; index < session.device_count(); ++index) session.device(index).set_op(op);
}

// As PyTorch prints an overload: aten::sub.Tensor, aten::relu.
std::string overload_name(const c10::OperatorName& op) {
  return op.overload_name.empty() ? op.name : op.name + "." + op.overload_name;
}

// Operators that decompose into others before reaching a backend (CompositeImplicitAutograd: linear, matmul, to)
// are not named: their parts are, as the dispatcher sees them after autograd (docs/reports.md).
// Records that are not operators (autograd's evaluate_function scopes, user ranges) are skipped likewise.
bool skipped(const at::RecordFunction& function) {
  const auto op = function.operator_name();
  if (!op) return true;
  static std::mutex cache_mutex;
  static std::unordered_map<std::string, bool> cache;
  const std::string key = op->name + "." + op->overload_name;
  std::lock_guard lock(cache_mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const auto handle = c10::Dispatcher::singleton().findOp(*op);
    const bool composite = handle && handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
    it = cache.emplace(key, composite).first;
  }
  return it->second;
}

std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& function) {
  if (skipped(function)) return nullptr;
  if (depth++ == 0) stamp(overload_name(*function.operator_name()));
  return nullptr;
}

void leave(const at::RecordFunction& function, at::ObserverContext*) {
  if (skipped(function)) return;
  if (--depth == 0) stamp("");
}

std::mutex mutex;
std::optional<at::CallbackHandle> handle;

void set_operator_naming(bool enabled) {
  std::lock_guard lock(mutex);
  if (enabled && !handle) {
    handle = at::addGlobalCallback(at::RecordFunctionCallback(enter, leave).scopes({at::RecordScope::FUNCTION}));
  } else if (!enabled && handle) {
    at::removeCallback(*handle);
    handle.reset();
  }
}

}  // namespace

void register_operator_names(py::module& m) { m.def("set_operator_naming", &set_operator_naming, py::arg("enabled")); }

}  // namespace npusim::bridge
