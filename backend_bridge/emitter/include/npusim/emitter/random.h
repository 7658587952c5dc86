// Emits ISA programs that draw random numbers on the vector engine (vrand, vrandn) into a contiguous tensor: uniform
// and normal samples and Bernoulli draws in f32, f16 or bf16, and dropout of f32 with its mask. Element k of the output
// takes stream position `first position + k` under the generator's key, so the numbers do not depend on how the kernel
// tiles the tensor or shares it among cores.
#pragma once

#include <cstdint>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/elementwise.h"

namespace npusim::emitter {

enum class RandomOp {
  Uniform,    // out = low + span * u, u uniform in [0, 1) on the output type's grid (vrand.T)
  Normal,     // out = mean + std * z, z standard normal
  Bernoulli,  // out = 1 if u < p else 0
  Dropout,    // mask = u < keep probability; out = mask ? input * scale : 0
};

struct RandomSpec {
  RandomOp op = RandomOp::Uniform;
  int64_t elements = 0;
  isa::ElementType type = isa::ElementType::F32;  // the output's: f32, f16 or bf16 (dropout: f32); math is in f32
};

// The argument block, one 64-bit word each: the output's address, the input's and the bool mask's (dropout only,
// else 0), the key, the first stream position, then the two f32 parameters in the low half of a word each:
// (low, span), (mean, std), (p, unused) or (keep probability, scale). Parameters and positions are arguments, so
// one program serves every call of a size.
Kernel emit_random(const RandomSpec& spec, const config::ChipConfig& config);

std::string op_name(RandomOp op);

}  // namespace npusim::emitter
