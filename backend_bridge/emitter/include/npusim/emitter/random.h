// Random number kernels: uniform and normal samples and Bernoulli draws in f32, f16 or bf16, and dropout with its
// mask, as fused kernels (fused.h) over a contiguous tensor. Element k of the output takes stream position
// `first position + k` under the generator's key (vrand, vrandn), so the numbers do not depend on how the kernel
// tiles the tensor or shares it among cores.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/fused.h"

namespace npusim::emitter {

enum class RandomOp {
  Uniform,    // out = low + span * u, u uniform in [0, 1) on the output type's grid (vrand.T)
  Normal,     // out = mean + std * z, z standard normal
  Bernoulli,  // out = 1 if u < p else 0
  Dropout,    // mask = u < keep probability; out = mask ? input * scale : 0
  Integers,   // out = low + b mod span for 63 random bits b (three draws: at p + k, p + n + k, p + 2n + k), i64 or i32
  WideIntegers,  // the same for a span beyond 2^63 - 1 (as unsigned), with 64 random bits
};

struct RandomSpec {
  RandomOp op = RandomOp::Uniform;
  int64_t elements = 0;
  isa::ElementType type = isa::ElementType::F32;  // the output's (dropout: and the input's): f32, f16 or bf16, math
                                                  // in f32; integers: i64 or i32, math in i64
};

// The argument block, one 64-bit word each: the output's address, the input's and the bool mask's (dropout only,
// else 0), the key, the first stream position, then the two f32 parameters in the low half of a word each:
// (low, span), (mean, std), (p, unused) or (keep probability, scale); integers: (low, span >= 1) as two i64 words,
// then the second and third first positions (first + n, first + 2n: they reserve 3n), and (wide) the span with its
// top bit flipped. Parameters and positions are arguments, so one program serves every call of a size. The spec is
// named <op>_<type> (dropout_f32); emit it with emit_fused.
FusedSpec random_spec(const RandomSpec& spec);
Kernel emit_random(const RandomSpec& spec, const config::ChipConfig& config);  // emit_fused(random_spec(spec))

std::string op_name(RandomOp op);

}  // namespace npusim::emitter
