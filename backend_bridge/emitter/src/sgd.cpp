// The fused SGD step (sgd.h) as a multi-tensor fused kernel, PyTorch's formulas per element:
//   g = (maximize ? -g : g) + wd p; b = first step ? g : momentum b + (1 - dampening) g;
//   g = nesterov ? g + momentum b : b; p = p - lr g.
#include "npusim/emitter/sgd.h"

#include "npusim/emitter/segment_program.h"

namespace npusim::emitter {
namespace {

using Op = FusedOpcode;

enum Tensor { kParam, kGrad, kMomentumBuffer };
enum Scalar { kLr, kWd, kMomentum, kOneMinusDampening };

}  // namespace

FusedSpec sgd_spec(const SgdSpec& spec, std::span<const int64_t> elements) {
  FusedSpec fused;
  fused.name = "sgd_f32";
  fused.arguments = kSgdArguments;
  for (const int64_t count : elements)
    fused.segments.push_back({count, static_cast<int>(fused.segments.size()) * kSgdArguments});
  SegmentProgram p(fused, isa::ElementType::F32, kSgdTensors);
  // Every load first, into slots nothing else used before: the fused loop loads them a tile ahead.
  const int param = p.load(kParam);
  int grad = p.load(kGrad);
  const int buffer_in = spec.momentum && !spec.first_step ? p.load(kMomentumBuffer) : -1;
  if (spec.maximize) grad = p.op(Op::Neg, grad);
  if (spec.weight_decay) grad = p.op(Op::Add, grad, p.op(Op::Mul, param, p.scalar(kWd)));
  if (spec.momentum) {
    int buffer = grad;
    if (!spec.first_step) {
      const int kept = p.op(Op::Mul, buffer_in, p.scalar(kMomentum));
      buffer = p.op(Op::Add, kept, p.op(Op::Mul, grad, p.scalar(kOneMinusDampening)));
    }
    p.store(buffer, kMomentumBuffer);
    grad = spec.nesterov ? p.op(Op::Add, grad, p.op(Op::Mul, buffer, p.scalar(kMomentum))) : buffer;
  }
  p.store(p.op(Op::Sub, param, p.op(Op::Mul, grad, p.scalar(kLr))), kParam);
  return fused;
}

}  // namespace npusim::emitter
