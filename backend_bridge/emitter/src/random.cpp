// Random number kernels as fused kernels (fused.h) over the flat tensor: a RandomUniform or RandomNormal node draws
// each element at its stream position, and the op's parameters apply in f32 (the arguments' values, so that one
// kernel serves every call of a size).
#include "npusim/emitter/random.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace npusim::emitter {
namespace {

using isa::ElementType;
using Op = FusedOpcode;

// Entries of the argument block (random.h).
enum Entry { kOutput, kInput, kMask, kKey, kPosition, kFirst, kSecond, kSecondPosition, kThirdPosition, kFlippedSpan };
int entries(RandomOp op) {
  return op == RandomOp::WideIntegers ? kFlippedSpan + 1
         : op == RandomOp::Integers   ? kThirdPosition + 1
                                      : kSecondPosition;
}

class RandomGraph {
 public:
  explicit RandomGraph(const RandomSpec& random) {
    spec_.name = fmt::format("{}_{}", op_name(random.op), isa::type_name(random.type));
    spec_.sizes = {random.elements};
    spec_.arguments = entries(random.op);
  }

  int node(FusedNode node) {
    spec_.nodes.push_back(node);
    return static_cast<int>(spec_.nodes.size()) - 1;
  }
  int argument(Entry entry, ElementType type) { return node({.op = Op::Argument, .type = type, .argument = entry}); }
  int load(Entry entry, ElementType type) {
    spec_.loads.push_back({entry, type, 0, {1}});
    return node({.op = Op::Load, .type = type, .access = static_cast<int>(spec_.loads.size()) - 1});
  }
  void store(int value, Entry entry, ElementType type) {
    spec_.stores.push_back({entry, type, 0, {1}});
    node({.op = Op::Store,
          .type = spec_.nodes[value].type,
          .a = value,
          .access = static_cast<int>(spec_.stores.size()) - 1});
  }
  int op(Op opcode, ElementType type, int a, int b = -1, int c = -1) {
    return node({.op = opcode, .type = type, .a = a, .b = b, .c = c});
  }
  int draw(Op opcode, ElementType type) {
    return op(opcode, type, argument(kKey, ElementType::I64), argument(kPosition, ElementType::I64));
  }

  FusedSpec spec_;
};

}  // namespace

std::string op_name(RandomOp op) {
  switch (op) {
    case RandomOp::Uniform: return "uniform";
    case RandomOp::Normal: return "normal";
    case RandomOp::Bernoulli: return "bernoulli";
    case RandomOp::Dropout: return "dropout";
    case RandomOp::Integers: return "random_integers";
    case RandomOp::WideIntegers: return "random_wide_integers";
  }
  return "random";
}

// 63 (or 64, wrapping) uniform random bits per element from three 24-bit uniform draws u (u 2^24 is an integer in
// [0, 2^24)): the first two whole and 15 (16) bits of the third, drawn at positions p + k, p + n + k and p + 2n + k
// (three arguments).
int random_bits(RandomGraph& g, int bits) {
  const ElementType f32 = ElementType::F32, i64 = ElementType::I64;
  const auto constant = [&](ElementType type, double value) {
    return g.node({.op = Op::Constant, .type = type, .constant = value});
  };
  const int key = g.argument(kKey, i64);
  const auto bits24 = [&](Entry position) {
    const int u = g.op(Op::RandomUniform, f32, key, g.argument(position, i64));
    return g.op(Op::Convert, i64, g.op(Op::Mul, f32, u, constant(f32, 0x1p24)));
  };
  const int high =
      g.op(Op::Add, i64, g.op(Op::Mul, i64, bits24(kPosition), constant(i64, 0x1p24)), bits24(kSecondPosition));
  const int low = g.op(Op::Div, i64, bits24(kThirdPosition), constant(i64, std::ldexp(1.0, 72 - bits)));
  return g.op(Op::Add, i64, g.op(Op::Mul, i64, high, constant(i64, std::ldexp(1.0, bits - 48))), low);
}

// from + r mod span. A span below 2^63: 63 bits modulo it (PyTorch's kernels take 64 bits modulo it). A wider one
// (up to 2^64 - 1, whose bits the argument holds as an i64) takes 64 bits r, less the span where r >= span unsigned:
// unsigned order is signed order with the top bits flipped (the flipped span is an argument).
int integers_in_range(RandomGraph& g, bool wide) {
  const ElementType i64 = ElementType::I64;
  const int from = g.argument(kFirst, i64), span = g.argument(kSecond, i64);
  if (!wide) return g.op(Op::Add, i64, from, g.op(Op::Fmod, i64, random_bits(g, 63), span));
  const int r = random_bits(g, 64);
  const int quarter = g.node({.op = Op::Constant, .type = i64, .constant = 0x1p62});  // r - 2^63 flips the top bit
  const int flipped = g.op(Op::Sub, i64, g.op(Op::Sub, i64, r, quarter), quarter);
  const int beyond = g.op(Op::Ge, ElementType::Bool, flipped, g.argument(kFlippedSpan, i64));
  const int zero = g.node({.op = Op::Constant, .type = i64, .constant = 0});
  return g.op(Op::Sub, i64, g.op(Op::Add, i64, from, r), g.op(Op::Where, i64, beyond, span, zero));
}

FusedSpec random_spec(const RandomSpec& random) {
  const bool integers = random.op == RandomOp::Integers || random.op == RandomOp::WideIntegers;
  if (integers ? random.type != ElementType::I64 && random.type != ElementType::I32 : !isa::is_float(random.type))
    throw std::invalid_argument(fmt::format("{} cannot produce {}", op_name(random.op), isa::type_name(random.type)));
  if (random.elements < 0)
    throw std::invalid_argument(fmt::format("negative size {} in a random kernel", random.elements));
  const ElementType f32 = ElementType::F32, type = random.type;
  RandomGraph g(random);
  switch (random.op) {
    case RandomOp::Uniform: {  // on the output type's grid, so that [0, 1) stays below 1 in that type
      int u = g.draw(Op::RandomUniform, type);
      if (type != f32) u = g.op(Op::Convert, f32, u);
      const int scaled = g.op(Op::Mul, f32, u, g.argument(kSecond, f32));
      g.store(g.op(Op::Add, f32, scaled, g.argument(kFirst, f32)), kOutput, type);
      break;
    }
    case RandomOp::Normal: {
      const int scaled = g.op(Op::Mul, f32, g.draw(Op::RandomNormal, f32), g.argument(kSecond, f32));
      g.store(g.op(Op::Add, f32, scaled, g.argument(kFirst, f32)), kOutput, type);
      break;
    }
    case RandomOp::Bernoulli:
      g.store(g.op(Op::Lt, ElementType::Bool, g.draw(Op::RandomUniform, f32), g.argument(kFirst, f32)), kOutput, type);
      break;
    case RandomOp::Dropout: {
      int input = g.load(kInput, type);
      if (type != f32) input = g.op(Op::Convert, f32, input);
      const int keep = g.op(Op::Lt, ElementType::Bool, g.draw(Op::RandomUniform, f32), g.argument(kFirst, f32));
      const int scaled = g.op(Op::Mul, f32, input, g.argument(kSecond, f32));
      const int zero = g.node({.op = Op::Constant, .type = f32, .constant = 0});
      g.store(g.op(Op::Where, f32, keep, scaled, zero), kOutput, type);
      g.store(keep, kMask, ElementType::Bool);
      break;
    }
    case RandomOp::Integers:
    case RandomOp::WideIntegers:
      g.store(integers_in_range(g, random.op == RandomOp::WideIntegers), kOutput, type);
      break;
  }
  return g.spec_;
}

Kernel emit_random(const RandomSpec& spec, const config::ChipConfig& config) {
  return emit_fused(random_spec(spec), config);
}

}  // namespace npusim::emitter
