// npusim._C.set_operator_naming: while npusim.profile() is open, each device command is stamped with the aten
// operator that issued it — the outermost one the dispatcher is running on that thread. A RecordFunction callback
// rather than a Python dispatch mode, so that torch.compile still compiles inside a profile (Dynamo does not trace
// under a dispatch mode).
#include <torch/extension.h>

#include <ATen/record_function.h>

#include <mutex>
#include <optional>

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
std::string overload_name(const at::RecordFunction& function) {
  const auto op = function.operator_name();
  if (!op) return function.name();
  return op->overload_name.empty() ? op->name : op->name + "." + op->overload_name;
}

std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& function) {
  if (depth++ == 0) stamp(overload_name(function));
  return nullptr;
}

void leave(const at::RecordFunction&, at::ObserverContext*) {
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

void register_operator_names(py::module& m) {
  m.def("set_operator_naming", &set_operator_naming, py::arg("enabled"));
}

}  // namespace npusim::bridge
