// The fused Adam step (adam.h) as a multi-tensor fused kernel. Per segment, from its step counter t (one element, so
// the fused kernel computes these once per tile): step_size = lr / (1 - exp(t ln beta1)) and
// sqrt(1 - exp(t ln beta2)); then, per element, PyTorch's formulas:
//   m = m + (1 - beta1)(g - m); v = beta2 v + (1 - beta2) g^2; p = p - step_size m / (sqrt(v) / sqrt(bc2) + eps),
// each operation one vector instruction rounded in f32.
#include "npusim/emitter/adam.h"

#include "npusim/emitter/segment_program.h"

namespace npusim::emitter {
namespace {

using Op = FusedOpcode;

enum Tensor { kParam, kGrad, kExpAvg, kExpAvgSq, kMaxExpAvgSq, kStep };
enum Scalar { kLr, kWd, kBeta1, kBeta2, kEps, kLnBeta1, kLnBeta2, kOneMinusBeta1, kOneMinusBeta2 };

// 1 - exp(t ln beta): the bias correction 1 - beta^t.
int bias_correction(SegmentProgram& p, int step, int log_beta) {
  return p.op(Op::Sub, p.constant(1), p.op(Op::Exp, p.op(Op::Mul, step, p.scalar(log_beta))));
}

}  // namespace

FusedSpec adam_spec(const AdamSpec& spec, std::span<const int64_t> elements) {
  FusedSpec fused;
  fused.name = spec.decoupled_weight_decay ? "adamw_f32" : "adam_f32";
  fused.arguments = kAdamArguments;
  for (const int64_t count : elements)
    fused.segments.push_back({count, static_cast<int>(fused.segments.size()) * kAdamArguments});
  SegmentProgram p(fused, isa::ElementType::F32, kAdamTensors);
  // Every load first, into slots nothing else used before: the fused loop loads them a tile ahead.
  int param = p.load(kParam), grad = p.load(kGrad);
  const int exp_avg = p.load(kExpAvg), exp_avg_sq = p.load(kExpAvgSq);
  const int max_exp_avg_sq = spec.amsgrad ? p.load(kMaxExpAvgSq) : -1;
  const int step = p.load_element(kStep);
  const int step_size = p.op(Op::Div, p.scalar(kLr), bias_correction(p, step, kLnBeta1));
  const int bias2_sqrt = p.op(Op::Sqrt, bias_correction(p, step, kLnBeta2));

  if (spec.maximize) grad = p.op(Op::Neg, grad);
  if (spec.weight_decay && spec.decoupled_weight_decay) {  // p = p - p (lr wd)
    param = p.op(Op::Sub, param, p.op(Op::Mul, param, p.op(Op::Mul, p.scalar(kLr), p.scalar(kWd))));
  } else if (spec.weight_decay) {  // g = g + p wd
    grad = p.op(Op::Add, grad, p.op(Op::Mul, param, p.scalar(kWd)));
  }
  // m = m + (1 - beta1)(g - m), PyTorch's lerp
  const int m = p.op(Op::Add, exp_avg, p.op(Op::Mul, p.op(Op::Sub, grad, exp_avg), p.scalar(kOneMinusBeta1)));
  // v = beta2 v + (1 - beta2) g^2
  const int square = p.op(Op::Mul, p.op(Op::Mul, grad, grad), p.scalar(kOneMinusBeta2));
  const int v = p.op(Op::Add, p.op(Op::Mul, exp_avg_sq, p.scalar(kBeta2)), square);
  int second_moment = v;
  if (spec.amsgrad) {
    second_moment = p.op(Op::Maximum, max_exp_avg_sq, v);
    p.store(second_moment, kMaxExpAvgSq);
  }
  // denominator sqrt(v) / sqrt(bc2) + eps
  const int denominator = p.op(Op::Add, p.op(Op::Div, p.op(Op::Sqrt, second_moment), bias2_sqrt), p.scalar(kEps));
  const int update = p.op(Op::Mul, p.op(Op::Div, m, denominator), step_size);
  p.store(p.op(Op::Sub, param, update), kParam);
  p.store(m, kExpAvg);
  p.store(v, kExpAvgSq);
  return fused;
}

}  // namespace npusim::emitter
