// Complex64 arithmetic on the device. A complex tensor is its real and imaginary parts, two float32 views of
// view_as_real strided by two: an elementwise operation is one fused kernel reading the operands' parts and writing
// the result's two parts (launch_formulas), a sum is the sum of the real view, and a product of matrices is four
// products of their parts. The operators' kernels call these for complex results; each returns false for arguments
// it does not take (the caller's CPU fallback then).
#pragma once

#include <ATen/core/Tensor.h>

namespace npusim::bridge {

enum class ComplexOp { Add, Sub, Mul, Div };

// out = self op other (add and sub scale other by alpha first), operands broadcast; either may be real or a host
// scalar, promoted to complex as PyTorch promotes it. out complex64 on the device.
bool complex_binary(ComplexOp op, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out);

// The sum over `dims` (every dimension when empty or absent), as sum.IntList_out.
bool complex_sum(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, at::Tensor& out);

// A product of matrices: mm for 2-D operands, bmm for 3-D ones.
bool complex_matmul(const at::Tensor& a, const at::Tensor& b, at::Tensor& out);

}  // namespace npusim::bridge
