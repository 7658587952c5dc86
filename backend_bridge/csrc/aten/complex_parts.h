// A complex64 tensor on the device as its real and imaginary parts, two float32 views of view_as_real strided by two,
// and the elementwise kernels over them: launch_parts runs a formula (pointwise_formula.h) over the operands' parts
// that gives the result's two parts, as one fused kernel. complex_arithmetic.cpp and complex_functions.cpp build on it.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <utility>
#include <vector>

#include "pointwise_formula.h"

namespace npusim::bridge {

// A complex value of a formula: its real and imaginary parts.
using ComplexValue = std::pair<Value, Value>;

bool is_complex64_on_device(const at::Tensor& tensor);

// The product of two complex values, as the CPU computes it: (ac - bd) + (ad + bc)i, unfused.
ComplexValue complex_product(ComplexValue x, ComplexValue y);
// x / y with both scaled by 1 / max(|c|, |d|) (y = c + di), so that |c|^2 + |d|^2 neither overflows nor underflows
// where the quotient itself is representable; by zero, (a / 0, b / 0) as the CPU gives it; a finite x over an infinite
// y is 0.
ComplexValue complex_quotient(ComplexValue x, ComplexValue y);

using PartsBody = std::function<ComplexValue(const std::vector<ComplexValue>&)>;

// out's two parts = body(the operands' parts), operands broadcast: each operand is a complex64 or float32 tensor on
// out's device (a real one has imaginary part 0, as PyTorch promotes it) or a 0-dim host scalar of any type. out must
// be complex64 on the device, resized by resize_for (whose checks refuse an out that overlaps an operand in another
// layout; an identical layout, as in place, is safe: the kernel reads each element's operands before writing it). The
// kernel is named "<name>_f32". False for operands it does not take (complex32, complex128).
bool launch_parts(const char* name, const std::vector<at::Tensor>& operands, at::Tensor& out, const PartsBody& body);

// The same for a real result (an angle, a predicate): out is float32 or bool, of the broadcast shape.
bool launch_parts_to_real(const char* name, const std::vector<at::Tensor>& operands, at::Tensor& out,
                          const std::function<Value(const std::vector<ComplexValue>&)>& body);

// out resized to the operands' broadcast shape, laid out as PyTorch's TensorIterator lays out a result it resizes (in
// the operands' dimension order); in place, an error if the result would grow.
void resize_for(at::Tensor& out, const std::vector<at::Tensor>& operands);

}  // namespace npusim::bridge
