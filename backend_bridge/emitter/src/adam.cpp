// The fused Adam step. Scalars first: the ten argument floats and the step go to the scratchpad, where 1-element
// vector operations derive step_size = lr / (1 - beta1^step) and sqrt(1 - beta2^step), the powers as
// exp(step ln beta); then each core updates tiles c, c + n, ... (the last one ragged) with PyTorch's formulas:
//   m = m + (1 - beta1)(g - m); v = beta2 v + (1 - beta2) g^2; p = p - step_size m / (sqrt(v) / sqrt(bc2) + eps).
#include "npusim/emitter/adam.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "npusim/emitter/kernel_builder.h"
#include "npusim/emitter/optimizer_tiles.h"

namespace npusim::emitter {
namespace {

using isa::ElementType;
using isa::Opcode;

// Scalars in the scratchpad, as float32 offsets into their tile.
enum Scalar {
  kLr,
  kWd,
  kBeta1,
  kBeta2,
  kEps,
  kLnBeta1,
  kLnBeta2,
  kOneMinusBeta1,
  kOneMinusBeta2,
  kOne,
  kStep,
  kStepSize,
  kBias2Sqrt,
  kLrWd,
  kTemp,
  kScalarCount
};
constexpr int kTiles = 7;  // the scratchpad is shared among P, G, M, V, X (amsgrad's max_exp_avg_sq only), T1, T2

class AdamEmitter {
 public:
  AdamEmitter(const AdamSpec& spec, const config::ChipConfig& config)
      : spec_(spec), b_(spec.decoupled_weight_decay ? "adamw_f32" : "adam_f32", config) {
    tile_ = std::max<int64_t>(
        16, (static_cast<int64_t>(config.scratchpad_bytes()) - 4 * kScalarCount) / (4 * kTiles) / 16 * 16);
    if (kTiles * tile_ * 4 + 4 * kScalarCount > static_cast<int64_t>(config.scratchpad_bytes()))
      throw Unsupported("the scratchpad cannot hold the Adam step's tiles");
  }

  Kernel emit() {
    b_.describe(fmt::format("{}: tiles of {}{}{}{}", b_.name(), tile_, spec_.weight_decay ? ", weight decay" : "",
                            spec_.amsgrad ? ", amsgrad" : "", spec_.maximize ? ", maximize" : ""));
    const std::pair<Reg*, const char*> tiles[kTiles] = {
        {&p_, "param tile"},          {&g_, "grad tile"},         {&m_, "exp_avg tile"},     {&v_, "exp_avg_sq tile"},
        {&x_, "max_exp_avg_sq tile"}, {&t1_, "temporary tile 1"}, {&t2_, "temporary tile 2"}};
    for (const auto& [reg, name] : tiles) {
      if (reg == &x_ && !spec_.amsgrad) continue;
      *reg = b_.reg(name);
      b_.point(*reg, b_.tile(Space::Scratchpad, tile_ * 4, name));
    }
    scalars_tile_ = b_.tile(Space::Scratchpad, 4 * kScalarCount, "scalars");
    Reg param = b_.reg("param"), grad = b_.reg("grad"), exp_avg = b_.reg("exp_avg"), exp_avg_sq = b_.reg("exp_avg_sq");
    Reg max_exp_avg_sq = b_.reg("max_exp_avg_sq"), elements = b_.reg("element count");
    b_.Ld(param, kArgumentBlock, 0);
    b_.Ld(grad, kArgumentBlock, 8);
    b_.Ld(exp_avg, kArgumentBlock, 16);
    b_.Ld(exp_avg_sq, kArgumentBlock, 24);
    if (spec_.amsgrad) b_.Ld(max_exp_avg_sq, kArgumentBlock, 32);
    b_.Ld(elements, kArgumentBlock, 48);
    scalars();
    std::vector<TileOperand> loads = {{param, p_}, {grad, g_}, {exp_avg, m_}, {exp_avg_sq, v_}};
    std::vector<TileOperand> stores = {{param, p_}, {exp_avg, m_}, {exp_avg_sq, v_}};
    if (spec_.amsgrad) {
      loads.push_back({max_exp_avg_sq, x_});
      stores.push_back({max_exp_avg_sq, x_});
    }
    emit_optimizer_tiles(b_, elements, tile_, loads, stores, [this](R count) { update(count); });
    return b_.finish(b_.config().chip_cores);
  }

 private:
  // A 1-element vector operation on scalars: dst = a op b, or dst = op a; `one` holds 1.
  void on_scalars(Opcode op, R one, Scalar dst, Scalar a, std::optional<Scalar> b = std::nullopt) {
    Reg d = b_.reg("scalar result"), x = b_.reg("scalar operand");
    b_.point(d, scalars_tile_, 4 * static_cast<int>(dst));
    b_.point(x, scalars_tile_, 4 * static_cast<int>(a));
    if (b) {
      Reg y = b_.reg("scalar operand");
      b_.point(y, scalars_tile_, 4 * static_cast<int>(*b));
      b_.emit(op, {ElementType::F32, d, x, y, one});
    } else {
      b_.emit(op, {ElementType::F32, d, x, one});
    }
  }

  void scalars() {
    Reg one = b_.reg("one element");
    b_.li(one, 1);
    {
      Reg scalars = b_.reg("scalars"), count = b_.reg("argument floats"), arguments = b_.reg("argument floats");
      Reg step = b_.reg("step");
      b_.point(scalars, scalars_tile_);
      b_.li(count, kOne + 1);
      b_.Addi(arguments, kArgumentBlock, 56);
      b_.DmaLoad32(scalars, arguments, count, 4);  // the ten argument floats
      b_.Ld(arguments, kArgumentBlock, 40);        // the step counter's address
      b_.point(step, scalars_tile_, 4 * kStep);
      b_.DmaLoad32(step, arguments, one, 4);
    }
    on_scalars(Opcode::Vmul, one, kTemp, kStep, kLnBeta1);  // beta1^step = exp(step ln beta1)
    on_scalars(Opcode::Vexp, one, kTemp, kTemp);
    on_scalars(Opcode::Vsub, one, kTemp, kOne, kTemp);
    on_scalars(Opcode::Vdiv, one, kStepSize, kLr, kTemp);
    on_scalars(Opcode::Vmul, one, kTemp, kStep, kLnBeta2);
    on_scalars(Opcode::Vexp, one, kTemp, kTemp);
    on_scalars(Opcode::Vsub, one, kTemp, kOne, kTemp);
    on_scalars(Opcode::Vsqrt, one, kBias2Sqrt, kTemp);
    on_scalars(Opcode::Vmul, one, kLrWd, kLr, kWd);
  }

  // dst = a op c over the tile; with_scalar: c is a scalar broadcast to every element.
  void tiles(Opcode op, R dst, R a, R c, R n) { b_.emit(op, {ElementType::F32, dst, a, c, n}); }
  void with_scalar(Opcode op, R dst, R a, Scalar s, R n) {
    Reg scalar = b_.reg("scalar");
    b_.point(scalar, scalars_tile_, 4 * static_cast<int>(s));
    b_.emit(op, {ElementType::F32, dst, a, scalar, n, 1});
  }

  void update(R n) {
    if (spec_.maximize) b_.Vneg(ElementType::F32, g_, g_, n);
    if (spec_.weight_decay && spec_.decoupled_weight_decay) {  // p = p - p (lr wd)
      with_scalar(Opcode::Vmul, t1_, p_, kLrWd, n);
      tiles(Opcode::Vsub, p_, p_, t1_, n);
    } else if (spec_.weight_decay) {  // g = g + p wd
      with_scalar(Opcode::Vmul, t1_, p_, kWd, n);
      tiles(Opcode::Vadd, g_, g_, t1_, n);
    }
    tiles(Opcode::Vsub, t1_, g_, m_, n);  // m = m + (1 - beta1)(g - m), PyTorch's lerp
    with_scalar(Opcode::Vmul, t1_, t1_, kOneMinusBeta1, n);
    tiles(Opcode::Vadd, m_, m_, t1_, n);
    tiles(Opcode::Vmul, t1_, g_, g_, n);  // v = beta2 v + (1 - beta2) g^2
    with_scalar(Opcode::Vmul, t1_, t1_, kOneMinusBeta2, n);
    with_scalar(Opcode::Vmul, v_, v_, kBeta2, n);
    tiles(Opcode::Vadd, v_, v_, t1_, n);
    R second_moment = v_;
    if (spec_.amsgrad) {
      tiles(Opcode::Vmax, x_, x_, v_, n);
      second_moment = x_;
    }
    b_.Vsqrt(ElementType::F32, t1_, second_moment, n);  // denominator sqrt(v) / sqrt(bc2) + eps
    with_scalar(Opcode::Vdiv, t1_, t1_, kBias2Sqrt, n);
    with_scalar(Opcode::Vadd, t1_, t1_, kEps, n);
    tiles(Opcode::Vdiv, t2_, m_, t1_, n);
    with_scalar(Opcode::Vmul, t2_, t2_, kStepSize, n);
    tiles(Opcode::Vsub, p_, p_, t2_, n);
  }

  AdamSpec spec_;
  KernelBuilder b_;
  int64_t tile_ = 16;
  Reg p_, g_, m_, v_, x_, t1_, t2_;  // registers bound to the tiles
  Tile scalars_tile_;
};

}  // namespace

Kernel emit_adam(const AdamSpec& spec, const config::ChipConfig& config) { return AdamEmitter(spec, config).emit(); }

}  // namespace npusim::emitter
