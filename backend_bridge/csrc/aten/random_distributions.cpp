// The other distributions of PyTorch's in-place samplers and normal with tensor parameters, natively: a uniform or
// standard normal draw from the device generator (random_ops.cpp's kernels, through uniform_ and normal_), then the
// distribution's transform as one formula kernel (pointwise_formula.h), as PyTorch's CPU kernels transform their
// draws:
//   exponential_(lambda)      -log1p(-u) / lambda
//   geometric_(p)             ceil(log1p(-u) / log1p(-p))           (u in [0, 1): 1 - u is never 0)
//   cauchy_(median, sigma)    median + sigma tan(pi (u - 1/2))
//   log_normal_(mean, std)    exp(mean + std z)
//   normal(mean, std)         mean + std z, either a tensor, broadcast
//   multinomial               a bucketize of uniform draws in the cumulative distribution (with replacement), or
//                             the top weights / exponential draws (without)
//   rrelu_with_noise          slopes drawn uniformly in [lower, upper] for the negative elements
// float32 in place; float16 and bfloat16 through a float32 draw rounded once; other dtypes take the fallback, which
// also raises PyTorch's errors for them.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/all.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/topk.h>
#include <torch/library.h>

#include <numbers>

#include "bridge.h"
#include "pointwise_formula.h"

namespace npusim::bridge {
namespace {

// Draws into self (uniform in [0, 1) or standard normal) and transforms it in place; false when self is not a float
// tensor on npusim.
bool draw_and_transform(at::Tensor& self, bool normal, const std::optional<at::Generator>& generator, const char* name,
                        const FormulaBody& transform) {
  if (!self.device().is_privateuseone() || !is_float_kind(self.scalar_type())) return false;
  if (self.numel() == 0) return true;
  at::Tensor sample =
      self.scalar_type() == at::kFloat ? self : at::empty(self.sizes(), self.options().dtype(at::kFloat));
  if (normal) {
    sample.normal_(0, 1, generator);
  } else {
    sample.uniform_(0, 1, generator);
  }
  TORCH_CHECK(launch_formula(name, {sample}, {}, sample, transform), "npusim: the ", name, " transform cannot run");
  if (!sample.is_same(self)) self.copy_(sample);
  return true;
}

at::Tensor& npusim_exponential_(at::Tensor& self, double lambda, std::optional<at::Generator> generator) {
  TORCH_CHECK(lambda > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambda);
  if (draw_and_transform(self, false, generator, "exponential", [&](Formula& f) { return -log1p(-f.x(0)) / lambda; }))
    return self;
  torch::jit::Stack stack{self, lambda, c10::IValue()};
  call_cpu_fallback("aten::exponential_", "", stack);
  return self;
}

at::Tensor& npusim_geometric_(at::Tensor& self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  if (draw_and_transform(self, false, generator, "geometric", [&](Formula& f) {
        const Value trials = log1p(-f.x(0)) / std::log1p(-p);
        return ceil(trials);
      }))
    return self;
  torch::jit::Stack stack{self, p, c10::IValue()};
  call_cpu_fallback("aten::geometric_", "", stack);
  return self;
}

at::Tensor& npusim_cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> generator) {
  if (draw_and_transform(self, false, generator, "cauchy", [&](Formula& f) {
        const Value angle = (f.x(0) - 0.5) * std::numbers::pi;
        return median + sigma * (sin(angle) / cos(angle));
      }))
    return self;
  torch::jit::Stack stack{self, median, sigma, c10::IValue()};
  call_cpu_fallback("aten::cauchy_", "", stack);
  return self;
}

at::Tensor& npusim_log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> generator) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  if (draw_and_transform(self, true, generator, "log_normal", [&](Formula& f) { return exp(mean + std * f.x(0)); }))
    return self;
  torch::jit::Stack stack{self, mean, std, c10::IValue()};
  call_cpu_fallback("aten::log_normal_", "", stack);
  return self;
}

// An operand the formula takes as it is: float32 on the device, or a host scalar.
bool takes(const at::Tensor& operand, const at::Tensor& out) {
  return (operand.dim() == 0 && operand.is_cpu()) ||
         (operand.device() == out.device() && operand.scalar_type() == at::kFloat);
}

// normal with a tensor mean, std or both: mean + std z over their broadcast shape, into `out`; false (nothing drawn)
// when the operands are not what the formula takes.
bool normal_into(const at::Tensor& mean, const at::Tensor& std, const std::optional<at::Generator>& generator,
                 at::Tensor& out) {
  if (!out.device().is_privateuseone() || !is_float_kind(out.scalar_type()) || !takes(mean, out) || !takes(std, out))
    return false;
  TORCH_CHECK(at::all(at::ge(std, 0)).item<bool>(), "normal expects all elements of std >= 0.0");
  const std::vector<int64_t> shape = at::infer_size(mean.sizes(), std.sizes());
  at::Tensor z = at::empty(shape, out.options().dtype(at::kFloat));
  z.normal_(0, 1, generator);
  at::Tensor result = out.scalar_type() == at::kFloat ? out : at::empty({0}, z.options());
  if (result.sizes() != at::IntArrayRef(shape)) at::native::resize_output(result, shape);  // contiguous, as PyTorch's
  TORCH_CHECK(launch_formula("normal", {mean, std, z}, {}, result, [](Formula& f) { return f.x(0) + f.x(1) * f.x(2); }),
              "npusim: the normal transform cannot run");
  if (!result.is_same(out)) {
    at::native::resize_output(out, shape);
    out.copy_(result);
  }
  return true;
}

at::Tensor host_scalar(double value) { return at::scalar_tensor(value, at::TensorOptions().dtype(at::kDouble)); }

at::Tensor& normal_out(const at::Tensor& mean, const at::Tensor& std, const std::optional<at::Generator>& generator,
                       at::Tensor& out, const char* overload, torch::jit::Stack fallback_stack) {
  if (normal_into(mean, std, generator, out)) return out;
  call_cpu_fallback("aten::normal", overload, fallback_stack);
  return out;
}

at::Tensor npusim_normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std,
                                       std::optional<at::Generator> generator) {
  at::Tensor out = at::empty({0}, mean.options());
  return normal_out(mean, std, generator, out, "Tensor_Tensor_out", {mean, std, c10::IValue(), out});
}
at::Tensor& npusim_normal_tensor_tensor_out(const at::Tensor& mean, const at::Tensor& std,
                                            std::optional<at::Generator> generator, at::Tensor& out) {
  return normal_out(mean, std, generator, out, "Tensor_Tensor_out", {mean, std, c10::IValue(), out});
}
at::Tensor npusim_normal_tensor_float(const at::Tensor& mean, double std, std::optional<at::Generator> generator) {
  at::Tensor out = at::empty({0}, mean.options());
  return normal_out(mean, host_scalar(std), generator, out, "Tensor_float_out", {mean, std, c10::IValue(), out});
}
at::Tensor& npusim_normal_tensor_float_out(const at::Tensor& mean, double std, std::optional<at::Generator> generator,
                                           at::Tensor& out) {
  return normal_out(mean, host_scalar(std), generator, out, "Tensor_float_out", {mean, std, c10::IValue(), out});
}
at::Tensor npusim_normal_float_tensor(double mean, const at::Tensor& std, std::optional<at::Generator> generator) {
  at::Tensor out = at::empty({0}, std.options());
  return normal_out(host_scalar(mean), std, generator, out, "float_Tensor_out", {mean, std, c10::IValue(), out});
}
at::Tensor& npusim_normal_float_tensor_out(double mean, const at::Tensor& std, std::optional<at::Generator> generator,
                                           at::Tensor& out) {
  return normal_out(host_scalar(mean), std, generator, out, "float_Tensor_out", {mean, std, c10::IValue(), out});
}

// Categories drawn by probability (rows of `self`, any non-negative weights): with replacement, each draw's index is
// where a uniform number falls in the row's cumulative distribution (a bucketize); without, the largest
// weight / q for exponential q (the CPU's own trick), the top num_samples of them.
at::Tensor& npusim_multinomial_out(const at::Tensor& self, c10::SymInt samples_, bool replacement,
                                   std::optional<at::Generator> generator, at::Tensor& out) {
  const int64_t samples = samples_.expect_int();
  if (self.device().is_privateuseone() && self.scalar_type() == at::kFloat && (self.dim() == 1 || self.dim() == 2) &&
      self.size(-1) > 0 && samples > 0 && out.scalar_type() == at::kLong) {
    const at::Tensor rows = self.dim() == 1 ? self.unsqueeze(0) : self;
    const int64_t categories = rows.size(1);
    TORCH_CHECK(at::logical_and(at::isfinite(rows), at::ge(rows, 0)).all().item<bool>(),
                "probability tensor contains either `inf`, `nan` or element < 0");
    const at::Tensor totals = at::sum(rows, 1, /*keepdim=*/true);
    TORCH_CHECK(at::gt(totals, 0).all().item<bool>(), "invalid multinomial distribution (sum of probabilities <= 0)");
    TORCH_CHECK(replacement || samples <= categories,
                "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    at::Tensor drawn;
    if (replacement) {
      const at::Tensor cumulative = at::cumsum(at::div(rows, totals), 1);
      at::Tensor u = at::empty({rows.size(0), samples}, rows.options());
      u.uniform_(0, 1, generator);
      const at::Tensor last = at::full({}, categories - 1, rows.options().dtype(at::kLong));
      drawn = at::minimum(at::searchsorted(cumulative, u, false, /*right=*/true), last);  // a total rounded below 1
    } else {
      at::Tensor q = at::empty(rows.sizes(), rows.options());
      q.exponential_(1, generator);
      drawn = std::get<1>(at::topk(at::div(rows, q), samples, 1));
    }
    if (self.dim() == 1) drawn = drawn.squeeze(0);
    at::native::resize_output(out, drawn.sizes());
    return out.copy_(drawn);
  }
  torch::jit::Stack stack{self, samples, replacement, c10::IValue(), out};
  call_cpu_fallback("aten::multinomial", "out", stack);
  return out;
}
at::Tensor npusim_multinomial(const at::Tensor& self, c10::SymInt samples, bool replacement,
                              std::optional<at::Generator> generator) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return npusim_multinomial_out(self, std::move(samples), replacement, std::move(generator), out);
}

// Randomized leaky ReLU: in training each negative element gets a slope drawn uniformly from [lower, upper] (kept in
// `noise`, 1 elsewhere, for the backward); in evaluation the mean slope, as leaky_relu.
at::Tensor& npusim_rrelu_with_noise_out(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                                        const at::Scalar& upper, bool training, std::optional<at::Generator> generator,
                                        at::Tensor& out) {
  const bool native = self.device().is_privateuseone() && self.scalar_type() == at::kFloat &&
                      noise.device() == self.device() && noise.scalar_type() == at::kFloat &&
                      out.scalar_type() == at::kFloat && (!training || noise.sizes() == self.sizes());
  if (native && training) {
    noise.uniform_(lower.toDouble(), upper.toDouble(), generator);
    const bool done = launch_formula("rrelu_noise", {self, noise}, {}, noise,
                                     [](Formula& f) { return where(f.x(0) >= 0.0, 1.0, f.x(1)); }) &&
                      launch_formula("rrelu", {self, noise}, {}, out, [](Formula& f) { return f.x(0) * f.x(1); });
    TORCH_CHECK(done, "npusim: rrelu's kernels cannot run");
    return out;
  }
  const double slope = (lower.toDouble() + upper.toDouble()) / 2;
  if (native && launch_formula("rrelu", {self}, {}, out, [slope](Formula& f) {
        const Value x = f.x(0);
        return where(x > 0.0, x, x * slope);
      }))
    return out;
  torch::jit::Stack stack{self, noise, lower, upper, training, c10::IValue(), out};
  call_cpu_fallback("aten::rrelu_with_noise", "out", stack);
  return out;
}
at::Tensor npusim_rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                                   const at::Scalar& upper, bool training, std::optional<at::Generator> generator) {
  at::Tensor out = at::empty({0}, self.options());
  return npusim_rrelu_with_noise_out(self, noise, lower, upper, training, std::move(generator), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multinomial", npusim_multinomial);
  m.impl("multinomial.out", npusim_multinomial_out);
  m.impl("rrelu_with_noise", npusim_rrelu_with_noise);
  m.impl("rrelu_with_noise.out", npusim_rrelu_with_noise_out);
  m.impl("exponential_", npusim_exponential_);
  m.impl("geometric_", npusim_geometric_);
  m.impl("cauchy_", npusim_cauchy_);
  m.impl("log_normal_", npusim_log_normal_);
  m.impl("normal.Tensor_Tensor", npusim_normal_tensor_tensor);
  m.impl("normal.Tensor_Tensor_out", npusim_normal_tensor_tensor_out);
  m.impl("normal.Tensor_float", npusim_normal_tensor_float);
  m.impl("normal.Tensor_float_out", npusim_normal_tensor_float_out);
  m.impl("normal.float_Tensor", npusim_normal_float_tensor);
  m.impl("normal.float_Tensor_out", npusim_normal_float_tensor_out);
}

}  // namespace npusim::bridge
