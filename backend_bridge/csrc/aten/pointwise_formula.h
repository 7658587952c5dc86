// Elementwise operators declared once, as a formula over their operands: the formula is written with ordinary C++
// arithmetic on Values (each a node of an emitter::FusedSpec), and the whole operator runs as one fused kernel over
// the operands' broadcast shape, computing in float32. register_formula gives an operator its functional, in-place
// and out= variants from that one declaration, as one boxed kernel that reads the schema: tensor arguments are the
// formula's operands, the other arguments (scalars, numbers, None) its parameters. Anything the kernel does not take
// (other dtypes, devices, a shape it cannot express) goes to the CPU fallback, which widens half-precision tensors to
// float32 on the device first (float32_compute.cpp), so float16 and bfloat16 reach the same kernel.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "npusim/emitter/fused.h"

namespace npusim::bridge {

class Formula;

// A value of the formula at every point: float32, bool (comparisons) or int32 (a float's bits).
struct Value {
  Formula* formula;
  int node;
};

class Formula {
 public:
  Formula(emitter::FusedSpec& spec, std::vector<int> operand_nodes, std::vector<std::optional<double>> parameters)
      : spec_(spec), operands_(std::move(operand_nodes)), parameters_(std::move(parameters)) {}

  // Operand k (the k-th tensor argument), as float32.
  Value x(size_t k);
  // The k-th non-tensor argument, or nullopt for None.
  std::optional<double> parameter(size_t k) const;
  Value constant(double value);
  // Operand k's float32 bits, as an int32 value (loaded once however often a formula asks).
  Value bits(size_t k);
  // Whether operand k's sign bit is set (true for -0 and for a NaN with its sign bit), read from its float32 bits
  // (computed once).
  Value sign_bit(size_t k);
  Value integer(int32_t value);  // an int32 constant
  Value to_float(Value a);       // a (an integer) converted to float32

  Value apply(emitter::FusedOpcode op, Value a, std::optional<Value> b = {}, std::optional<Value> c = {});
  isa::ElementType type(Value value) const { return spec_.nodes[value.node].type; }

 private:
  emitter::FusedSpec& spec_;
  std::vector<int> operands_;
  std::vector<std::optional<double>> parameters_;
  std::map<size_t, int> bits_, sign_bits_;  // operand -> node, so that each is a load (a comparison) of its own once
};

// Arithmetic on float values (a number on either side is a constant).
Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator-(Value a);
Value operator+(Value a, double b);
Value operator-(Value a, double b);
Value operator*(Value a, double b);
Value operator/(Value a, double b);
Value operator+(double a, Value b);
Value operator-(double a, Value b);
Value operator*(double a, Value b);
Value operator/(double a, Value b);
// Comparisons give bool values; & | ! combine them.
Value operator<(Value a, Value b);
Value operator<=(Value a, Value b);
Value operator>(Value a, Value b);
Value operator>=(Value a, Value b);
Value operator==(Value a, Value b);
Value operator!=(Value a, Value b);
Value operator<(Value a, double b);
Value operator<=(Value a, double b);
Value operator>(Value a, double b);
Value operator>=(Value a, double b);
Value operator==(Value a, double b);
Value operator!=(Value a, double b);
Value operator&(Value a, Value b);
Value operator|(Value a, Value b);
Value operator^(Value a, Value b);
Value operator!(Value a);
// The vector engine's functions, and a few made of them.
Value abs(Value a);
Value exp(Value a);
Value log(Value a);
Value log1p(Value a);
Value expm1(Value a);
Value tanh(Value a);
Value sqrt(Value a);
Value sin(Value a);
Value cos(Value a);
Value erf(Value a);
Value trunc(Value a);
Value floor(Value a);
Value ceil(Value a);
Value round(Value a);                      // halves to even
Value mul_add(Value a, Value b, Value c);  // a b + c, rounded once (a fused multiply-add)
Value fmod(Value a, Value b);              // C's: a - trunc(a / b) b exactly, with a's sign
Value maximum(Value a, Value b);           // NaN if either is NaN
Value minimum(Value a, Value b);
Value where(Value condition, Value a, Value b);
Value where(Value condition, double a, Value b);
Value where(Value condition, Value a, double b);
Value isnan(Value a);
Value isinf(Value a);

// Series evaluated as the Cephes Math Library (and so PyTorch's CPU kernels) evaluate them, coefficients highest
// order first: a polynomial by Horner's rule (polevl), a Chebyshev series at y by Clenshaw's recurrence (chbevl).
Value polynomial(Value z, std::span<const double> coefficients);
Value chebyshev_series(Value y, std::span<const double> coefficients);

using FormulaBody = std::function<Value(Formula&)>;
using FormulaValues = std::function<std::vector<Value>(Formula&)>;

// Runs the formula over `operands` (float32 tensors on out's device, or 0-dim scalars) into `out` (float32, or bool
// for a predicate), resized to the broadcast shape unless it is an operand (in place). The kernel is named
// "<name>_f32". False when the tensors are not what it takes or the kernel cannot be built (out may have been
// resized by then).
bool launch_formula(const std::string& name, const std::vector<at::Tensor>& operands,
                    const std::vector<std::optional<double>>& parameters, at::Tensor& out, const FormulaBody& body);

// One kernel computing several results at once (a complex result's two parts): the body's k-th value is stored into
// outs[k], float32 tensors on the device that all have the shape the operands broadcast to (they are not resized).
// The kernel is named "<name>_f32". False when the tensors are not what it takes.
bool launch_formulas(const std::string& name, const std::vector<at::Tensor>& operands,
                     const std::vector<at::Tensor>& outs, const FormulaValues& body);

// The dtype of a functional variant's result, as PyTorch's kernel gives it.
enum class FormulaResult {
  Float,     // the operands' promoted type, integers promoting to the default float (erfc, atan2)
  Promoted,  // the operands' promoted type, integers staying integers (fmax, floor_divide): native for float32
  Bool,      // a predicate (isposinf, signbit)
};

// How a formula's operator takes complex operands (complex_functions.h): `launch` computes the operator into out
// (complex64, or float32 for a `real_result` such as angle's), false for operands it does not take.
struct ComplexForm {
  std::function<bool(const std::vector<at::Tensor>& operands, at::Tensor& out)> launch;
  bool real_result = false;
};

// Registers `schemas` (e.g. "erfc", "erfc_", "erfc.out") for npusim as the formula: functional variants return a new
// tensor of the result's dtype, in-place ones write their first argument, out= ones their out argument. Calls with a
// complex operand take `complex` (the CPU fallback without one).
void register_formula(torch::Library& library, std::initializer_list<const char*> schemas, const char* name,
                      FormulaResult result, FormulaBody body, ComplexForm complex = {});

}  // namespace npusim::bridge
