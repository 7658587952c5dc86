// Native random ops: uniform_, normal_, bernoulli_ and native_dropout draw on the NPU from the device generator's
// Philox stream (device_generator.h), in float32, float16 or bfloat16 (computing in float32), each one fused kernel
// (uniform_ and normal_ of complex64 tensors too, as their parts);
// random_ draws int64 and int32 integers (torch.randint, Inductor's seeds; bool, 8- and 16-bit integers through
// int32), and whole numbers into float32 tensors; randperm sorts random keys.
// Other dtypes take the CPU fallback, which draws from the CPU generator (the npusim generator cannot drive a CPU
// kernel).
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include <bit>
#include <numbers>
#include <span>

#include "bridge.h"
#include "pointwise_formula.h"
#include "runtime/device_generator.h"
#include "runtime/kernel_launcher.h"
#include "tensor_kernel.h"

namespace npusim::bridge {
namespace {

using emitter::RandomOp;

bool drawable(const at::Tensor& tensor) { return is_float_kind(tensor.scalar_type()); }

uint64_t f32_bits(double value) { return std::bit_cast<uint32_t>(static_cast<float>(value)); }

// Runs the random kernel into `out`, a drawable tensor on the device whose elements fill its memory densely, in memory
// order (dropout: reading `input` of the same shape, type and strides and writing the bool `mask`, laid out alike),
// with the op's two parameters.
void draw(const at::Tensor& out, RandomOp op, double first, double second,
          const std::optional<at::Generator>& generator, const at::Tensor& input = {}, const at::Tensor& mask = {}) {
  const auto [key, position] = generator_for(generator, out.device().index()).reserve(out.numel());
  const uint64_t addresses[] = {device_address(out),
                                input.defined() ? device_address(input) : 0,
                                mask.defined() ? device_address(mask) : 0,
                                key,
                                position,
                                f32_bits(first),
                                f32_bits(second)};
  const emitter::FusedSpec spec = emitter::random_spec({op, out.numel(), float_element_type(out)});
  TORCH_CHECK(launched_natively([&] { launch_fused(out.device().index(), runtime_device(out), spec, addresses); }),
              "npusim: the random kernel cannot express ", out.numel(), " elements");
}

// Integers in [from, to) into `out`, a contiguous int64 or int32 tensor on the device: random bits (three draws per
// element) modulo the span, as PyTorch's kernels take 64 random bits modulo it.
void draw_integers(const at::Tensor& out, int64_t from, int64_t to, const std::optional<at::Generator>& generator) {
  const auto count = static_cast<uint64_t>(out.numel());
  const uint64_t span = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  const RandomOp op = span > uint64_t{INT64_MAX} ? RandomOp::WideIntegers : RandomOp::Integers;
  const auto [key, position] = generator_for(generator, out.device().index()).reserve(3 * count);
  const uint64_t addresses[] = {device_address(out),
                                0,
                                0,
                                key,
                                position,
                                static_cast<uint64_t>(from),
                                span,
                                position + count,
                                position + 2 * count,
                                span ^ (uint64_t{1} << 63)};
  const emitter::FusedSpec spec = emitter::random_spec({op, out.numel(), *element_type(out.scalar_type())});
  const std::span<const uint64_t> arguments(addresses, static_cast<size_t>(spec.arguments));  // the last is wide's
  TORCH_CHECK(launched_natively([&] { launch_fused(out.device().index(), runtime_device(out), spec, arguments); }),
              "npusim: the random kernel cannot express ", out.numel(), " elements");
}

// Fills `self` in place by draw(target): straight into it when it is contiguous, else through a contiguous
// temporary.
template <typename Draw>
at::Tensor& fill_in_place(at::Tensor& self, Draw draw) {
  if (self.numel() == 0) return self;
  const bool direct = self.is_contiguous();
  at::Tensor target = direct ? self : at::empty(self.sizes(), self.options());
  draw(target);
  if (!direct) self.copy_(target);
  return self;
}
at::Tensor& fill_random(at::Tensor& self, RandomOp op, double first, double second,
                        const std::optional<at::Generator>& generator) {
  return fill_in_place(self, [&](const at::Tensor& target) { draw(target, op, first, second, generator); });
}

// The values a bool, 8- or 16-bit integer type holds, which random_ draws among.
std::optional<std::pair<int64_t, int64_t>> narrow_integer_range(at::ScalarType type) {
  switch (type) {
    case at::kBool: return std::pair<int64_t, int64_t>{0, 1};
    case at::kByte: return std::pair<int64_t, int64_t>{0, 255};
    case at::kChar: return std::pair<int64_t, int64_t>{-128, 127};
    case at::kShort: return std::pair<int64_t, int64_t>{-32768, 32767};
    default: return std::nullopt;
  }
}

// random_(from, to) natively: of int64 and int32 tensors with PyTorch's check of the bounds; of bool, 8- and 16-bit
// integers within the type (to the type's largest value with no upper bound); whole numbers into float32. Anything
// else (other types, bounds outside the type, whose errors PyTorch's kernel raises) through the fallback.
at::Tensor& npusim_random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                                std::optional<at::Generator> generator) {
  const auto dtype = self.scalar_type();
  if (const auto limits = narrow_integer_range(dtype); limits && self.device().is_privateuseone()) {
    // bool, 8- and 16-bit integers: drawn as int32 and converted. No upper bound means up to the type's largest.
    const int64_t end = to.value_or(limits->second + 1);
    if (from >= limits->first && from < end && end - 1 <= limits->second) {
      at::Tensor wide = at::empty(self.sizes(), self.options().dtype(at::kInt));
      npusim_random_from_(wide, from, end, generator);
      return self.copy_(wide);
    }
  }
  if ((dtype == at::kLong || dtype == at::kInt) && to.has_value()) {
    TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to);
    const bool in_type = dtype == at::kLong || (from >= INT32_MIN && *to <= int64_t{INT32_MAX} + 1);
    if (in_type)
      return fill_in_place(self, [&](const at::Tensor& target) { draw_integers(target, from, *to, generator); });
  }
  // Whole numbers in [from, to) as floats (torch.randint_like of a float tensor): from + floor(u span), u uniform in
  // [0, 1), kept below `to` where u span rounds up to span. Spans beyond 2^24 would leave holes in float32: fallback.
  const double span = to.has_value() ? static_cast<double>(*to - from) : 0;
  if (self.scalar_type() == at::kFloat && to.has_value() && from < *to && span <= 0x1p24 &&
      self.device().is_privateuseone()) {
    return fill_in_place(self, [&](const at::Tensor& target) {
      at::Tensor draw = target;
      fill_random(draw, RandomOp::Uniform, 0, 1, generator);
      TORCH_CHECK(
          launch_formula("random", {draw}, {}, draw,
                         [&](Formula& f) { return minimum(floor(f.x(0) * span), f.constant(span - 1)) + from; }),
          "npusim: the random_ transform cannot run");
    });
  }
  torch::jit::Stack stack{self, from, to, c10::IValue()};
  call_cpu_fallback("aten::random_", "from", stack);
  return self;
}
at::Tensor& npusim_random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  return npusim_random_from_(self, 0, to, std::move(generator));
}

// A random permutation of 0 .. n-1: n random keys of 62 bits (ties, which the stable sort breaks by position, have
// odds below n^2 / 2^63) sorted, their order the permutation.
at::Tensor& npusim_randperm_out(int64_t n, std::optional<at::Generator> generator, at::Tensor& result) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  const at::ScalarType type = result.scalar_type();
  const bool holds_n = type == at::kLong || (type == at::kInt && n <= INT32_MAX) ||
                       (type == at::kFloat && n <= (int64_t{1} << 24)) || (type == at::kHalf && n <= 2048) ||
                       (type == at::kBFloat16 && n <= 256);  // exact integers
  if (holds_n && result.device().is_privateuseone()) {
    at::native::resize_output(result, {n});
    if (n == 0) return result;
    at::Tensor keys = at::empty({n}, result.options().dtype(at::kLong));
    draw_integers(keys, 0, int64_t{1} << 62, generator);
    return result.copy_(std::get<1>(at::sort(keys, /*stable=*/true, 0, /*descending=*/false)));
  }
  torch::jit::Stack stack{n, generator, result};
  call_cpu_fallback("aten::randperm", "generator_out", stack);
  return result;
}

// A complex64 tensor on the device whose parts can be drawn in place (not a lazy conjugate).
bool complex64_parts(const at::Tensor& self) {
  return self.scalar_type() == at::kComplexFloat && self.device().is_privateuseone() && !self.is_conj();
}

at::Tensor& npusim_uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> generator) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  if (drawable(self)) return fill_random(self, RandomOp::Uniform, from, to - from, generator);
  if (complex64_parts(self)) {  // each part drawn from [from, to), as PyTorch draws complex numbers
    at::view_as_real(self).uniform_(from, to, generator);
    return self;
  }
  torch::jit::Stack stack{self, from, to, c10::IValue()};
  call_cpu_fallback("aten::uniform_", "", stack);
  return self;
}

at::Tensor& npusim_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (drawable(self)) return fill_random(self, RandomOp::Normal, mean, std, generator);
  if (complex64_parts(self)) {  // each part normal with std / sqrt(2), so that |z - mean|^2 averages std^2 (PyTorch's)
    at::view_as_real(self).normal_(mean, std / std::numbers::sqrt2, generator);
    return self;
  }
  torch::jit::Stack stack{self, mean, std, c10::IValue()};
  call_cpu_fallback("aten::normal_", "", stack);
  return self;
}

at::Tensor& npusim_bernoulli_(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (drawable(self)) return fill_random(self, RandomOp::Bernoulli, p, 0, generator);
  torch::jit::Stack stack{self, p, c10::IValue()};
  call_cpu_fallback("aten::bernoulli_", "float", stack);
  return self;
}

// Per-element probabilities: a uniform draw compared with them on the device.
at::Tensor& npusim_bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> generator) {
  if (drawable(self) && p.device() == self.device() && p.scalar_type() == at::kFloat) {
    at::Tensor uniform = at::empty(self.sizes(), self.options().dtype(at::kFloat));
    fill_random(uniform, RandomOp::Uniform, 0, 1, generator);
    self.copy_(at::lt(uniform, p.expand(self.sizes())));
    return self;
  }
  torch::jit::Stack stack{self, p, c10::IValue()};
  call_cpu_fallback("aten::bernoulli_", "Tensor", stack);
  return self;
}

at::Tensor npusim_bernoulli(const at::Tensor& self, std::optional<at::Generator> generator) {
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);  // as PyTorch's bernoulli
  return npusim_bernoulli_tensor_(out, self, generator);
}

// PyTorch's native_dropout: in training, mask = bernoulli(1 - p) (bool) and output = input * mask / (1 - p), with a
// zero scale when p = 1; in evaluation, the input unchanged and an all-true mask.
std::tuple<at::Tensor, at::Tensor> npusim_native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input)};
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  TORCH_CHECK(0 <= p && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (drawable(input)) {  // input * scale where kept, in float32, rounded once to the input's type
    // The kernel walks memory in order: a dense input as it lies (its results laid out like it, as PyTorch's meta
    // function promises), any other made contiguous first.
    const at::Tensor source = input.is_non_overlapping_and_dense() ? input : input.contiguous();
    at::Tensor output = at::empty_like(source);
    at::Tensor mask = at::empty_like(source, source.options().dtype(at::kBool));
    const double keep = 1.0 - p;
    draw(output, RandomOp::Dropout, keep, keep == 0 ? 0.0 : 1.0 / keep, std::nullopt, source, mask);
    return {output, mask};
  }
  torch::jit::Stack stack{input, p, train};
  call_cpu_fallback("aten::native_dropout", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

// grad * mask * scale, as PyTorch computes it (so a dropped negative gradient is -0, a dropped infinity NaN): one
// fused kernel in float32, rounded once to the gradient's type.
at::Tensor npusim_native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  if (drawable(grad) && mask.scalar_type() == at::kBool && mask.sizes() == grad.sizes() &&
      mask.device() == grad.device()) {
    at::Tensor out = at::empty_like(grad);
    if (out.numel() == 0) return out;
    TensorKernel k(TensorKernel::name_for("dropout_backward", grad), grad.sizes().vec(), 0);
    const auto f32 = isa::ElementType::F32;
    const int gradient = k.op(emitter::FusedOpcode::Convert, k.load(grad, grad.strides()), -1, -1, f32);
    const int kept = k.op(emitter::FusedOpcode::Convert, k.load(mask, mask.strides()), -1, -1, f32);
    const int masked = k.op(emitter::FusedOpcode::Mul, gradient, kept);
    k.store(k.op(emitter::FusedOpcode::Mul, masked, k.constant(scale)), out, out.strides());
    if (k.launch(out)) return out;
  }
  return at::mul(at::mul(grad, mask), at::scalar_tensor(scale, grad.options().device(at::kCPU)));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", npusim_uniform_);
  m.impl("normal_", npusim_normal_);
  m.impl("bernoulli_.float", npusim_bernoulli_);
  m.impl("bernoulli_.Tensor", npusim_bernoulli_tensor_);
  m.impl("bernoulli", npusim_bernoulli);
  m.impl("random_.from", npusim_random_from_);
  m.impl("random_.to", npusim_random_to_);
  m.impl("randperm.generator_out", npusim_randperm_out);
  m.impl("native_dropout", npusim_native_dropout);
  m.impl("native_dropout_backward", npusim_native_dropout_backward);
}

}  // namespace npusim::bridge
