// Arctangent and arccosine of formula values (inverse_trigonometric_ops.cpp explains how), for formulas that need
// them inside a larger function (the Chebyshev polynomials' trigonometric forms, complex logarithms).
#pragma once

#include "pointwise_formula.h"

namespace npusim::bridge {

Value atan(Value x);
Value acos(Value x);            // 2 atan(sqrt((1 - x) / (1 + x)))
Value atan2(Value y, Value x);  // C's atan2, zeros' and infinities' cases included
// Whether x's sign bit is set (-0 included; a NaN's sign is not told).
Value sign_bit(Value x);

}  // namespace npusim::bridge
