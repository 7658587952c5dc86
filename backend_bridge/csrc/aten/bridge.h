// Helpers shared by the operators' glue: launching natively or falling back, element types, copies on the device,
// and the launches that several operators share.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>
#include <c10/util/Exception.h>

#include "npusim/emitter/elementwise.h"
#include "npusim/emitter/gather.h"
#include "npusim/emitter/indexed_elements.h"
#include "npusim/emitter/matmul.h"
#include "npusim/emitter/rows.h"
#include "npusim/runtime/device.h"
#include "runtime/tensor_device.h"

namespace npusim::bridge {

// Whether writing `a` could change `b` (or the reverse): same storage and not provably disjoint.
bool may_share_memory(const at::Tensor& a, const at::Tensor& b);

// Copies within one device, choosing a flat copy command or a strided copy kernel.
void copy_on_device(const at::Tensor& source, const at::Tensor& destination);

// Runs `launch`, which launches an emitted kernel. Returns false when the emitter cannot express the case (the
// caller then takes the CPU fallback); a device error (a trapped kernel) becomes a PyTorch error.
template <typename Launch>
bool launched_natively(Launch&& launch) {
  try {
    launch();
  } catch (const emitter::Unsupported&) {
    return false;
  } catch (const runtime::DeviceError& error) {
    TORCH_CHECK(false, error.what());
  }
  return true;
}

// launched_natively for kernels that check indices: their `trap 1` (an index outside the table) becomes PyTorch's
// IndexError, `message` first. It waits for the kernel on `device`, so that the error is raised by the operator that
// indexed out of range, as on the CPU, rather than at a later synchronising call.
template <typename Launch>
bool launched_checking_indices(runtime::Device& device, Launch&& launch, const char* message) {
  try {
    launch();
    device.synchronize_stream(runtime::kCurrentStream);
  } catch (const emitter::Unsupported&) {
    return false;
  } catch (const runtime::DeviceError& error) {
    const std::string what = error.what();
    const bool out_of_range = what.find("code " + std::to_string(emitter::kIndexOutOfRangeTrap)) != std::string::npos;
    TORCH_CHECK_INDEX(!out_of_range, message, " (npusim: ", what, ")");
    TORCH_CHECK(false, what);
  }
  return true;
}

// out = self indexed by the 1-D `index` (on self's device) along `dim`, out being contiguous with self's shape but
// index.numel() along dim; negative indices count from the end when `wrap_negative`. An index outside the
// dimension is an IndexError starting with `what`. False when the emitter cannot express it.
bool gather_along(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& out,
                  bool wrap_negative, const char* what);

// Scatters `values` (read over the iteration shape `sizes`) into `self` in place along `dim`, at the positions
// `index` holds (read through `index_strides` over `sizes`), storing, adding or combining as `move` says. Float16 and
// bfloat16 data combine in float32 and round once, as PyTorch's CPU scatter kernels do, or in their own type,
// rounding every step, when `rounding_each_step` (as its index_reduce does). An index outside the dimension is an
// IndexError starting with `what`. False when the emitter cannot express it.
bool scatter_along(emitter::IndexedMove move, const at::Tensor& self, int64_t dim, at::IntArrayRef sizes,
                   const at::Tensor& index, at::IntArrayRef index_strides, const at::Tensor& values, const char* what,
                   bool rounding_each_step = false);

// The matmul kernel for a [m x k] @ [k x n] into `out` [m x n], all on one device, not overlapping: float operands
// into their type or float32, or int8 into int32. False when the emitter cannot express the case.
bool launch_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out);
// The same for batches of matrices (3-D tensors), in one launch.
// With an epilogue, `bias` (of out's shape, broadcast by zero strides) goes into it: out = alpha (a @ b) + beta bias.
bool launch_bmm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out,
                const emitter::MatmulEpilogue& epilogue = {}, const at::Tensor& bias = {});

// The int64 flat positions of a bool mask's true elements, ascending, computed on the mask's device.
at::Tensor true_positions(const at::Tensor& mask);

// The ISA's element type for a PyTorch dtype, if it has one.
std::optional<isa::ElementType> element_type(at::ScalarType type);

// The float types elementwise kernels take (computing in float32, as PyTorch computes half precision).
inline bool is_float_kind(at::ScalarType type) {
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

// The ISA element type of a float32, float16 or bfloat16 tensor (f32 for any other).
inline isa::ElementType float_element_type(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kHalf: return isa::ElementType::F16;
    case at::kBFloat16: return isa::ElementType::BF16;
    default: return isa::ElementType::F32;
  }
}

// Elementwise kernels over float32, float16 and bfloat16 tensors on one device, with the op's parameters
// (ElementwiseSpec::parameters). Each returns false, having changed nothing, when it cannot run natively (the caller
// then takes the CPU fallback). out = f(self), resized to self's shape unless it is self:
bool launch_unary(emitter::ElementwiseOp op, const at::Tensor& self, at::Tensor& out,
                  const std::array<float, 3>& parameters = {});
// out = f(self, other), broadcast, resized to the broadcast shape; either operand may be a 0-dim scalar:
bool launch_binary(emitter::ElementwiseOp op, const at::Tensor& self, const at::Tensor& other, at::Tensor& out,
                   const std::array<float, 3>& parameters = {});

// Runs a row kernel over `self` (and, for the backward ops, `forward`, of the same shape; both made contiguous on the
// device first) into `out`, already of the result's shape. Returns false, having changed nothing, when the emitter
// cannot express it (the index of an extremum of a row too long for the scratchpad, for one).
bool launch_row_op(emitter::RowOp op, const at::Tensor& self, at::Tensor& out, const at::Tensor& forward = {});
// Whether a reduction of `rows_last`'s rows is better split into two launches, rows of `chunk` elements first (spread
// over the cores) and then their results: a row kernel walks each row on one core, so a few long rows (a whole
// tensor's sum) would leave the other cores idle.
bool split_long_rows_across_cores(const at::Tensor& rows_last, int64_t chunk);

// Counts and warns once per operator that runs on the CPU instead of the NPU (see cpu_fallback.cpp).
void note_cpu_fallback(const std::string& operator_name);
// Runs the operator with its bfloat16 / float16 npusim tensor arguments widened to float32 on the device, its results
// rounded back once (float32_compute.cpp); false, with the stack untouched, if it does not apply.
bool run_in_float32(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Runs an operator that only moves elements with its complex64 / float64 tensors reinterpreted as int64, reaching
// its int64 kernel (element_bits.cpp); false, with the stack untouched, if it does not apply.
bool run_as_bits(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Runs an operator linear in its tensors (index_add, scatter_add, padding backwards, ...) on the real and the imaginary
// parts of its complex64 tensors in turn, putting the results together (complex_in_parts.cpp); false, with the stack
// untouched, if it does not apply.
bool run_in_parts(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Runs the operator through the CPU fallback (counted, or an error under NPUSIM_FALLBACK=error), after trying
// run_in_float32, run_as_bits and run_in_parts.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Runs operator `name`.`overload` through the CPU fallback with its arguments on `stack`.
void call_cpu_fallback(const char* name, const char* overload, torch::jit::Stack& stack);

}  // namespace npusim::bridge
