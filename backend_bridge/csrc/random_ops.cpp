// Native random ops: uniform_, normal_, bernoulli_ and native_dropout draw on the NPU from the device generator's
// Philox stream (device_generator.h), in float32, float16 or bfloat16 (dropout computes in float32). Other dtypes
// take the CPU fallback, which draws from the CPU generator (the npusim generator cannot drive a CPU kernel).
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <bit>

#include "bridge.h"
#include "device_generator.h"
#include "kernel_launcher.h"

namespace npusim::bridge {
namespace {

using emitter::RandomOp;

bool drawable(const at::Tensor& tensor) { return is_float_kind(tensor.scalar_type()); }

uint64_t f32_bits(double value) { return std::bit_cast<uint32_t>(static_cast<float>(value)); }

// Runs the random kernel into `out`, a contiguous drawable tensor on the device (dropout: float32, reading `input` of
// the same shape and writing the bool `mask`), with the op's two parameters.
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
  const emitter::RandomSpec spec{op, out.numel(), float_element_type(out)};
  TORCH_CHECK(launched_natively([&] { launch_random(out.device().index(), runtime_device(out), spec, addresses); }),
              "npusim: the random kernel cannot express ", out.numel(), " elements");
}

// Fills `self` in place: straight into it when it is contiguous, else through a contiguous temporary.
at::Tensor& fill_random(at::Tensor& self, RandomOp op, double first, double second,
                        const std::optional<at::Generator>& generator) {
  if (self.numel() == 0) return self;
  const bool direct = self.is_contiguous();
  at::Tensor target = direct ? self : at::empty(self.sizes(), self.options());
  draw(target, op, first, second, generator);
  if (!direct) self.copy_(target);
  return self;
}

at::Tensor& npusim_uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> generator) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  if (drawable(self)) return fill_random(self, RandomOp::Uniform, from, to - from, generator);
  torch::jit::Stack stack{self, from, to, c10::IValue()};
  call_cpu_fallback("aten::uniform_", "", stack);
  return self;
}

at::Tensor& npusim_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (drawable(self)) return fill_random(self, RandomOp::Normal, mean, std, generator);
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
  at::Tensor out = at::empty_like(self);
  return npusim_bernoulli_tensor_(out, self, generator);
}

// PyTorch's native_dropout: in training, mask = bernoulli(1 - p) (bool) and output = input * mask / (1 - p), with a
// zero scale when p = 1; in evaluation, the input unchanged and an all-true mask.
std::tuple<at::Tensor, at::Tensor> npusim_native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input)};
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  TORCH_CHECK(0 <= p && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (drawable(input)) {
    const at::Tensor source = input.to(at::kFloat).contiguous();
    at::Tensor output = at::empty(input.sizes(), input.options().dtype(at::kFloat));
    at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
    const double keep = 1.0 - p;
    draw(output, RandomOp::Dropout, keep, keep == 0 ? 0.0 : 1.0 / keep, std::nullopt, source, mask);
    return {output.to(input.scalar_type()), mask};
  }
  torch::jit::Stack stack{input, p, train};
  call_cpu_fallback("aten::native_dropout", "", stack);
  return {stack[0].toTensor(), stack[1].toTensor()};
}

// grad * mask * scale, as where(mask, grad * scale, 0).
at::Tensor npusim_native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  const at::Tensor scaled = at::mul(grad, at::scalar_tensor(scale, grad.options().device(at::kCPU)));
  return at::where(mask, scaled, at::scalar_tensor(0, grad.options().device(at::kCPU)));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", npusim_uniform_);
  m.impl("normal_", npusim_normal_);
  m.impl("bernoulli_.float", npusim_bernoulli_);
  m.impl("bernoulli_.Tensor", npusim_bernoulli_tensor_);
  m.impl("bernoulli", npusim_bernoulli);
  m.impl("native_dropout", npusim_native_dropout);
  m.impl("native_dropout_backward", npusim_native_dropout_backward);
}

}  // namespace npusim::bridge
