// Ctrl-C while Python waits for the device (`.cpu()`, `.item()`, torch.npusim.synchronize()): the wait stops within
// runtime::kWaitInterruptPeriod and Python raises KeyboardInterrupt there, as it would in time.sleep; the device
// abandons the work the script gave up on (runtime::Device::abandon_work) and stays usable.
#include <torch/extension.h>

#include "npusim/runtime/wait_interrupt.h"

namespace npusim::bridge {

namespace py = pybind11;

namespace {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

}  // namespace

void install_keyboard_interrupt_check() {
  // Signal handlers run on the main thread only; other threads (the autograd engine's among them) wait on.
  const auto main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  runtime::set_wait_interrupt_check([main_thread] {
    if (PyThread_get_thread_ident() != main_thread || !Py_IsInitialized() || interpreter_finalizing()) return;
    py::gil_scoped_acquire gil;                                    // the waiting call may or may not have released it
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // torch's and pybind11's bindings restore it
  });
}

}  // namespace npusim::bridge
