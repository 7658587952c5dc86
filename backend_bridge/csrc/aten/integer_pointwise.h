// Integer pointwise operations (neg, abs, maximum, minimum, bitwise and, or and xor, clamp) on int64, int32 and int8
// tensors (int16 where the vector engine takes it): one fused kernel (emit_fused) of the operation over the broadcast
// shape, wrapping as PyTorch's integer kernels do (neg and abs of the most negative value are itself).
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "npusim/emitter/fused.h"

namespace npusim::bridge {

// Each returns false, having changed nothing, when the operands are not integers of out's dtype on out's device: the
// caller then runs the op another way. `op` is Neg or Abs (unary), Maximum, Minimum, And, Or or Xor (binary).
bool launch_integer_unary(emitter::FusedOpcode op, const at::Tensor& self, at::Tensor& out);
bool launch_integer_binary(emitter::FusedOpcode op, const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
// min(max(self, low), high), either bound optional; bounds must be integers that the dtype holds.
bool launch_integer_clamp(const at::Tensor& self, const std::optional<at::Scalar>& low,
                          const std::optional<at::Scalar>& high, at::Tensor& out);

}  // namespace npusim::bridge
