// Elementwise operators as formulas (pointwise_formula.h): the Value arithmetic, the kernel launch and the boxed
// kernel that gives one declaration its functional, in-place and out= variants.
#include "pointwise_formula.h"

#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <limits>

#include "bridge.h"
#include "pointwise_output.h"
#include "runtime/kernel_launcher.h"

namespace npusim::bridge {

using emitter::FusedNode;
using emitter::FusedOpcode;
using isa::ElementType;

namespace {

bool is_comparison(FusedOpcode op) {
  return op == FusedOpcode::Eq || op == FusedOpcode::Ne || op == FusedOpcode::Lt || op == FusedOpcode::Le ||
         op == FusedOpcode::Gt || op == FusedOpcode::Ge;
}

}  // namespace

Value Formula::x(size_t k) {
  TORCH_INTERNAL_ASSERT(k < operands_.size(), "a formula reads operand ", k, " of ", operands_.size());
  return {this, operands_[k]};
}

std::optional<double> Formula::parameter(size_t k) const {
  TORCH_INTERNAL_ASSERT(k < parameters_.size(), "a formula reads parameter ", k, " of ", parameters_.size());
  return parameters_[k];
}

Value Formula::constant(double value) {
  spec_.nodes.push_back(FusedNode{.op = FusedOpcode::Constant, .type = ElementType::F32, .constant = value});
  return {this, static_cast<int>(spec_.nodes.size()) - 1};
}

Value Formula::bits(size_t k) {
  if (const auto known = bits_.find(k); known != bits_.end()) return {this, known->second};
  emitter::FusedAccess access = spec_.loads[spec_.nodes[x(k).node].access];
  access.type = ElementType::I32;
  spec_.loads.push_back(access);
  spec_.nodes.push_back(
      FusedNode{.op = FusedOpcode::Load, .type = ElementType::I32, .access = static_cast<int>(spec_.loads.size()) - 1});
  bits_[k] = static_cast<int>(spec_.nodes.size()) - 1;
  return {this, bits_[k]};
}

Value Formula::sign_bit(size_t k) {
  if (const auto known = sign_bits_.find(k); known != sign_bits_.end()) return {this, known->second};
  const Value negative = apply(FusedOpcode::Lt, bits(k), integer(0));
  sign_bits_[k] = negative.node;
  return negative;
}

Value Formula::integer(int32_t value) {
  spec_.nodes.push_back(FusedNode{.op = FusedOpcode::Constant, .type = ElementType::I32, .constant = double(value)});
  return {this, static_cast<int>(spec_.nodes.size()) - 1};
}

Value Formula::to_float(Value a) {
  spec_.nodes.push_back(FusedNode{.op = FusedOpcode::Convert, .type = ElementType::F32, .a = a.node});
  return {this, static_cast<int>(spec_.nodes.size()) - 1};
}

Value Formula::apply(FusedOpcode op, Value a, std::optional<Value> b, std::optional<Value> c) {
  ElementType type = this->type(a);
  if (is_comparison(op)) type = ElementType::Bool;
  if (op == FusedOpcode::Where) type = this->type(*b);
  spec_.nodes.push_back(FusedNode{.op = op, .type = type, .a = a.node, .b = b ? b->node : -1, .c = c ? c->node : -1});
  return {this, static_cast<int>(spec_.nodes.size()) - 1};
}

namespace {

Value binary(FusedOpcode op, Value a, Value b) { return a.formula->apply(op, a, b); }
Value with_constant(FusedOpcode op, Value a, double b) { return binary(op, a, a.formula->constant(b)); }
Value constant_with(FusedOpcode op, double a, Value b) { return binary(op, b.formula->constant(a), b); }
Value unary(FusedOpcode op, Value a) { return a.formula->apply(op, a); }

}  // namespace

Value operator+(Value a, Value b) { return binary(FusedOpcode::Add, a, b); }
Value operator-(Value a, Value b) { return binary(FusedOpcode::Sub, a, b); }
Value operator*(Value a, Value b) { return binary(FusedOpcode::Mul, a, b); }
Value operator/(Value a, Value b) { return binary(FusedOpcode::Div, a, b); }
Value operator-(Value a) { return unary(FusedOpcode::Neg, a); }
Value operator+(Value a, double b) { return with_constant(FusedOpcode::Add, a, b); }
Value operator-(Value a, double b) { return with_constant(FusedOpcode::Sub, a, b); }
Value operator*(Value a, double b) { return with_constant(FusedOpcode::Mul, a, b); }
Value operator/(Value a, double b) { return with_constant(FusedOpcode::Div, a, b); }
Value operator+(double a, Value b) { return constant_with(FusedOpcode::Add, a, b); }
Value operator-(double a, Value b) { return constant_with(FusedOpcode::Sub, a, b); }
Value operator*(double a, Value b) { return constant_with(FusedOpcode::Mul, a, b); }
Value operator/(double a, Value b) { return constant_with(FusedOpcode::Div, a, b); }
Value operator<(Value a, Value b) { return binary(FusedOpcode::Lt, a, b); }
Value operator<=(Value a, Value b) { return binary(FusedOpcode::Le, a, b); }
Value operator>(Value a, Value b) { return binary(FusedOpcode::Gt, a, b); }
Value operator>=(Value a, Value b) { return binary(FusedOpcode::Ge, a, b); }
Value operator==(Value a, Value b) { return binary(FusedOpcode::Eq, a, b); }
Value operator!=(Value a, Value b) { return binary(FusedOpcode::Ne, a, b); }
Value operator<(Value a, double b) { return with_constant(FusedOpcode::Lt, a, b); }
Value operator<=(Value a, double b) { return with_constant(FusedOpcode::Le, a, b); }
Value operator>(Value a, double b) { return with_constant(FusedOpcode::Gt, a, b); }
Value operator>=(Value a, double b) { return with_constant(FusedOpcode::Ge, a, b); }
Value operator==(Value a, double b) { return with_constant(FusedOpcode::Eq, a, b); }
Value operator!=(Value a, double b) { return with_constant(FusedOpcode::Ne, a, b); }
Value operator&(Value a, Value b) { return binary(FusedOpcode::And, a, b); }
Value operator|(Value a, Value b) { return binary(FusedOpcode::Or, a, b); }
Value operator^(Value a, Value b) { return binary(FusedOpcode::Xor, a, b); }
Value operator!(Value a) { return unary(FusedOpcode::Not, a); }
Value abs(Value a) { return unary(FusedOpcode::Abs, a); }
Value exp(Value a) { return unary(FusedOpcode::Exp, a); }
Value log(Value a) { return unary(FusedOpcode::Log, a); }
Value log1p(Value a) { return unary(FusedOpcode::Log1p, a); }
Value expm1(Value a) { return unary(FusedOpcode::Expm1, a); }
Value tanh(Value a) { return unary(FusedOpcode::Tanh, a); }
Value sqrt(Value a) { return unary(FusedOpcode::Sqrt, a); }
Value sin(Value a) { return unary(FusedOpcode::Sin, a); }
Value cos(Value a) { return unary(FusedOpcode::Cos, a); }
Value erf(Value a) { return unary(FusedOpcode::Erf, a); }
Value trunc(Value a) { return unary(FusedOpcode::Trunc, a); }
Value floor(Value a) { return unary(FusedOpcode::Floor, a); }
Value ceil(Value a) { return unary(FusedOpcode::Ceil, a); }
Value round(Value a) { return unary(FusedOpcode::Round, a); }
Value mul_add(Value a, Value b, Value c) { return a.formula->apply(FusedOpcode::MulAdd, a, b, c); }
Value fmod(Value a, Value b) { return binary(FusedOpcode::Fmod, a, b); }
Value maximum(Value a, Value b) { return binary(FusedOpcode::Maximum, a, b); }
Value minimum(Value a, Value b) { return binary(FusedOpcode::Minimum, a, b); }
Value where(Value condition, Value a, Value b) { return condition.formula->apply(FusedOpcode::Where, condition, a, b); }
Value where(Value condition, double a, Value b) { return where(condition, b.formula->constant(a), b); }
Value where(Value condition, Value a, double b) { return where(condition, a, a.formula->constant(b)); }
Value isnan(Value a) { return a != a; }
Value isinf(Value a) { return abs(a) == std::numeric_limits<double>::infinity(); }

Value polynomial(Value z, std::span<const double> coefficients) {
  Value p = z.formula->constant(coefficients[0]);
  for (size_t k = 1; k < coefficients.size(); ++k) p = p * z + coefficients[k];
  return p;
}

// b0 = y b1 - b2 + c over the coefficients, then (b0 - b2) / 2.
Value chebyshev_series(Value y, std::span<const double> coefficients) {
  Formula& f = *y.formula;
  Value b0 = f.constant(coefficients[0]), b1 = f.constant(0), b2 = f.constant(0);
  for (size_t k = 1; k < coefficients.size(); ++k) {
    b2 = b1;
    b1 = b0;
    b0 = y * b1 - b2 + coefficients[k];
  }
  return 0.5 * (b0 - b2);
}

namespace {

// Scalars (0-dim, on the host or the device) and integer or bool tensors on the device become float32 there (a
// native conversion), as PyTorch promotes them; float32 tensors on the device are read as they are. Empty when an
// operand is none of these.
std::optional<std::vector<at::Tensor>> float32_operands(const std::vector<at::Tensor>& operands,
                                                        const at::Tensor& out) {
  std::vector<at::Tensor> on_device;
  for (const at::Tensor& operand : operands) {
    const bool scalar = operand.dim() == 0 && operand.is_cpu();
    const bool here = operand.device() == out.device();
    const bool integral = at::isIntegralType(operand.scalar_type(), /*includeBool=*/true);
    if (operand.is_complex() || (!here && !scalar)) return {};
    if (here && operand.scalar_type() == at::kFloat) {
      on_device.push_back(operand);
    } else if (scalar || integral || operand.dim() == 0) {
      on_device.push_back(operand.to(out.device(), at::kFloat));
    } else {
      return {};  // half precision reaches the kernel widened by the fallback (float32_compute.cpp)
    }
  }
  return on_device;
}

// The kernel of `body` over float32 `operands` on the device, storing its k-th value into outs[k] (all of `shape`).
bool launch_spec(const std::string& name, const std::vector<at::Tensor>& operands, const std::vector<at::Tensor>& outs,
                 const std::vector<std::optional<double>>& parameters, c10::IntArrayRef shape,
                 const FormulaValues& body) {
  emitter::FusedSpec spec;
  spec.name = name + "_f32";
  spec.sizes = shape.empty() ? std::vector<int64_t>{1} : shape.vec();
  spec.arguments = static_cast<int>(outs.size() + operands.size());  // the results, then the operands
  const auto strides = [&](const at::Tensor& tensor) {
    return shape.empty() ? std::vector<int64_t>{0} : tensor.expand(shape).strides().vec();
  };
  std::vector<int> loads;
  for (size_t k = 0; k < operands.size(); ++k) {
    spec.loads.push_back({static_cast<int>(outs.size() + k), ElementType::F32, 0, strides(operands[k])});
    spec.nodes.push_back(FusedNode{.op = FusedOpcode::Load, .type = ElementType::F32, .access = static_cast<int>(k)});
    loads.push_back(static_cast<int>(k));
  }
  Formula formula(spec, loads, parameters);
  const std::vector<Value> results = body(formula);
  TORCH_INTERNAL_ASSERT(results.size() == outs.size(), "formula ", name, " gives ", results.size(), " values for ",
                        outs.size(), " results");
  std::vector<uint64_t> addresses;
  for (size_t k = 0; k < outs.size(); ++k) {
    const ElementType type = outs[k].scalar_type() == at::kBool ? ElementType::Bool : ElementType::F32;
    TORCH_INTERNAL_ASSERT(formula.type(results[k]) == type, "formula ", name, " gives ",
                          isa::type_name(formula.type(results[k])), " for a ", outs[k].scalar_type(), " result");
    spec.stores.push_back({static_cast<int>(k), type, 0, strides(outs[k])});
    spec.nodes.push_back(
        FusedNode{.op = FusedOpcode::Store, .type = type, .a = results[k].node, .access = static_cast<int>(k)});
    addresses.push_back(device_address(outs[k]));
  }
  for (const at::Tensor& operand : operands) addresses.push_back(device_address(operand));
  const at::Tensor& out = outs.front();
  return launched_natively([&] { launch_fused(out.device().index(), runtime_device(out), spec, addresses); });
}

}  // namespace

bool launch_formula(const std::string& name, const std::vector<at::Tensor>& operands,
                    const std::vector<std::optional<double>>& parameters, at::Tensor& out, const FormulaBody& body) {
  const bool predicate = out.scalar_type() == at::kBool;
  if (!out.device().is_privateuseone() || (out.scalar_type() != at::kFloat && !predicate)) return false;
  const std::optional<std::vector<at::Tensor>> on_device = float32_operands(operands, out);
  if (!on_device) return false;
  const std::vector<int64_t> shape = resize_to_broadcast(out, *on_device);
  if (out.numel() == 0) return true;
  return launch_spec(name, *on_device, {out}, parameters, shape,
                     [&](Formula& formula) { return std::vector<Value>{body(formula)}; });
}

bool launch_formulas(const std::string& name, const std::vector<at::Tensor>& operands,
                     const std::vector<at::Tensor>& outs, const FormulaValues& body) {
  const at::Tensor& out = outs.front();
  for (const at::Tensor& result : outs)
    if (result.device() != out.device() || result.scalar_type() != at::kFloat || result.sizes() != out.sizes())
      return false;
  if (!out.device().is_privateuseone()) return false;
  const std::optional<std::vector<at::Tensor>> on_device = float32_operands(operands, out);
  if (!on_device) return false;
  if (out.numel() == 0) return true;
  return launch_spec(name, *on_device, outs, {}, out.sizes(), body);
}

namespace {

// The boxed kernel of one formula, for each variant registered: it sorts the call's arguments by the schema.
class FormulaKernel final : public c10::OperatorKernel {
 public:
  FormulaKernel(std::string name, FormulaResult result, FormulaBody body, ComplexForm complex)
      : name_(std::move(name)), result_(result), body_(std::move(body)), complex_(std::move(complex)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/, torch::jit::Stack* stack) {
    const std::vector<c10::Argument>& schema = op.schema().arguments();
    const auto arguments = torch::jit::last(*stack, schema.size());
    std::vector<at::Tensor> operands;
    std::vector<std::optional<double>> parameters;
    at::Tensor out;
    for (size_t i = 0; i < schema.size(); ++i) {
      const c10::IValue& value = arguments[i];
      if (schema[i].is_out()) {
        out = value.toTensor();
      } else if (value.isTensor()) {
        operands.push_back(value.toTensor());
      } else if (value.isNone()) {
        parameters.emplace_back();
      } else {
        parameters.emplace_back(value.toScalar().toDouble());
      }
    }
    const bool in_place = !out.defined() && schema.front().alias_info() && schema.front().alias_info()->isWrite();
    if (in_place) out = operands.front();
    if (!out.defined()) {  // on the operands' npusim device (a host scalar operand may come first)
      const at::Tensor& on_npusim = *std::find_if(operands.begin(), operands.end(),
                                                  [](const at::Tensor& t) { return t.device().is_privateuseone(); });
      out = at::empty({0}, on_npusim.options().dtype(result_type(operands)));
    }
    const bool complex =
        std::any_of(operands.begin(), operands.end(), [](const at::Tensor& t) { return t.is_complex(); });
    // An integer result computes in integers, which the float32 formula does not.
    const bool integral_result = at::isIntegralType(out.scalar_type(), /*includeBool=*/false);
    const bool launched = complex ? complex_.launch && complex_.launch(operands, out)
                                  : !integral_result && launch_formula(name_, operands, parameters, out, body_);
    if (!launched) {
      cpu_fallback(op, stack);
      return;
    }
    torch::jit::drop(*stack, schema.size());
    torch::jit::push(*stack, out);
  }

 private:
  at::ScalarType result_type(const std::vector<at::Tensor>& operands) const {
    if (result_ == FormulaResult::Bool) return at::kBool;
    const at::ScalarType promoted = at::native::result_type(operands);
    if (at::isComplexType(promoted)) return complex_.real_result ? c10::toRealValueType(promoted) : promoted;
    if (result_ == FormulaResult::Promoted || at::isFloatingType(promoted)) return promoted;
    return c10::typeMetaToScalarType(c10::get_default_dtype());
  }

  std::string name_;
  FormulaResult result_;
  FormulaBody body_;
  ComplexForm complex_;
};

}  // namespace

void register_formula(torch::Library& library, std::initializer_list<const char*> schemas, const char* name,
                      FormulaResult result, FormulaBody body, ComplexForm complex) {
  for (const char* schema : schemas)
    library.impl(
        schema, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<FormulaKernel>(name, result, body, complex)));
}

}  // namespace npusim::bridge
