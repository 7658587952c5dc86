// Operators without a native npusim kernel run on the CPU (half-precision arguments first try the float32 kernel,
// float32_compute.cpp; complex64 or float64 ones of operators that only move elements their int64 kernel,
// element_bits.cpp; complex64 ones of linear operators the float32 kernel twice, complex_in_parts.cpp): inputs are
// copied to the host (timed as host-link transfers), the CPU kernel runs, results are copied back. One warning per
// operator; NPUSIM_FALLBACK=error makes it an error instead, for coverage work and CI.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "bridge.h"
#include "fallback_counts.h"

namespace npusim::bridge {
namespace {

std::mutex counts_mutex;
std::map<std::string, uint64_t>& counts() {
  static std::map<std::string, uint64_t> table;
  return table;
}

bool fallback_is_error() {
  const char* setting = std::getenv("NPUSIM_FALLBACK");
  return setting && std::string(setting) == "error";
}

}  // namespace

void note_cpu_fallback(const std::string& operator_name) {
  TORCH_CHECK(!fallback_is_error(), "npusim: ", operator_name,
              " has no native npusim kernel and NPUSIM_FALLBACK=error forbids running it on the CPU");
  bool first = false;
  {
    std::lock_guard lock(counts_mutex);
    ++counts()[operator_name];
    static std::set<std::string> warned;  // once per process, however often the counts are reset
    first = warned.insert(operator_name).second;
  }
  if (first)
    TORCH_WARN("npusim: ", operator_name,
               " has no native npusim kernel; it runs on the CPU with its data copied over the host link "
               "(warned once per operator; NPUSIM_FALLBACK=error makes this an error)");
}

std::map<std::string, uint64_t> fallback_counts() {
  std::lock_guard lock(counts_mutex);
  return counts();
}

void reset_fallback_counts() {
  std::lock_guard lock(counts_mutex);
  counts().clear();
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (run_in_float32(op, stack)) return;  // half-precision arguments of a float32 kernel
  if (run_as_bits(op, stack)) return;     // complex64 and float64 elements moved as int64
  if (run_in_parts(op, stack)) return;    // complex64 through linear operators, part by part
  note_cpu_fallback(op.schema().operator_name().name +
                    (op.schema().overload_name().empty() ? "" : "." + op.schema().overload_name()));
  at::native::cpu_fallback(op, stack);
}

void call_cpu_fallback(const char* name, const char* overload, torch::jit::Stack& stack) {
  cpu_fallback(c10::Dispatcher::singleton().findSchemaOrThrow(name, overload), &stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>()); }

}  // namespace npusim::bridge
