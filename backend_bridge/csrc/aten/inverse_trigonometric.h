// Arctangent and arccosine of formula values (inverse_trigonometric_ops.cpp explains how), for formulas that need
// them inside a larger function (the Chebyshev polynomials' trigonometric forms).
#pragma once

#include "pointwise_formula.h"

namespace npusim::bridge {

Value atan(Value x);
Value acos(Value x);  // 2 atan(sqrt((1 - x) / (1 + x)))

}  // namespace npusim::bridge
