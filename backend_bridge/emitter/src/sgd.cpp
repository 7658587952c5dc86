// The fused SGD step, PyTorch's formulas per element:
//   g = (maximize ? -g : g) + wd p; b = first step ? g : momentum b + (1 - dampening) g;
//   g = nesterov ? g + momentum b : b; p = p - lr g.
#include "npusim/emitter/sgd.h"

#include <fmt/format.h>

#include <utility>

#include "npusim/emitter/kernel_builder.h"
#include "npusim/emitter/optimizer_tiles.h"

namespace npusim::emitter {
namespace {

using isa::ElementType;
using isa::Opcode;

enum Scalar { kLr, kWd, kMomentum, kOneMinusDampening, kScalarCount };
constexpr int kTiles = 4;  // the scratchpad is shared among P, G, B (the momentum buffer, with momentum only), T

class SgdEmitter {
 public:
  SgdEmitter(const SgdSpec& spec, const config::ChipConfig& config) : spec_(spec), b_("sgd_f32", config) {
    tile_ = (static_cast<int64_t>(config.scratchpad_bytes()) - 4 * kScalarCount) / (4 * kTiles) / 16 * 16;
    if (tile_ < 16) throw Unsupported("the scratchpad cannot hold the SGD step's tiles");
  }

  Kernel emit() {
    b_.describe(fmt::format("sgd_f32: tiles of {}{}{}{}{}{}", tile_, spec_.weight_decay ? ", weight decay" : "",
                            spec_.momentum ? ", momentum" : "", spec_.first_step ? " (first step)" : "",
                            spec_.nesterov ? ", nesterov" : "", spec_.maximize ? ", maximize" : ""));
    const std::pair<Reg*, const char*> tiles[kTiles] = {
        {&p_, "param tile"}, {&g_, "grad tile"}, {&b_tile_, "momentum buffer tile"}, {&t_, "temporary tile"}};
    for (const auto& [reg, name] : tiles) {
      if (reg == &b_tile_ && !spec_.momentum) continue;
      *reg = b_.reg(name);
      b_.point(*reg, b_.tile(Space::Scratchpad, tile_ * 4, name));
    }
    scalars_tile_ = b_.tile(Space::Scratchpad, 4 * kScalarCount, "scalars");
    Reg param = b_.reg("param"), grad = b_.reg("grad"), buffer = b_.reg("momentum buffer");
    Reg elements = b_.reg("element count");
    b_.Ld(param, kArgumentBlock, 0);
    b_.Ld(grad, kArgumentBlock, 8);
    if (spec_.momentum) b_.Ld(buffer, kArgumentBlock, 16);
    b_.Ld(elements, kArgumentBlock, 24);
    {
      Reg scalars = b_.reg("scalars"), count = b_.reg("scalar count"), arguments = b_.reg("scalar arguments");
      b_.point(scalars, scalars_tile_);
      b_.li(count, kScalarCount);
      b_.Addi(arguments, kArgumentBlock, 32);
      b_.DmaLoad32(scalars, arguments, count, 4);
    }
    std::vector<TileOperand> loads = {{param, p_}, {grad, g_}}, stores = {{param, p_}};
    if (spec_.momentum) {
      if (!spec_.first_step) loads.push_back({buffer, b_tile_});
      stores.push_back({buffer, b_tile_});
    }
    emit_optimizer_tiles(b_, elements, tile_, loads, stores, [this](R count) { update(count); });
    return b_.finish(b_.config().chip_cores);
  }

 private:
  // dst = a op scalar s, over the tile.
  void with_scalar(Opcode op, R dst, R a, Scalar s, R count) {
    Reg scalar = b_.reg("scalar");
    b_.point(scalar, scalars_tile_, 4 * static_cast<int>(s));
    b_.emit(op, {ElementType::F32, dst, a, scalar, count, 1});
  }
  void tiles(Opcode op, R dst, R a, R c, R count) { b_.emit(op, {ElementType::F32, dst, a, c, count}); }

  void update(R n) {
    if (spec_.maximize) b_.Vneg(ElementType::F32, g_, g_, n);
    if (spec_.weight_decay) {
      with_scalar(Opcode::Vmul, t_, p_, kWd, n);
      tiles(Opcode::Vadd, g_, g_, t_, n);
    }
    if (spec_.momentum) {
      if (spec_.first_step) {
        b_.Vmov(ElementType::F32, b_tile_, g_, n);
      } else {
        with_scalar(Opcode::Vmul, b_tile_, b_tile_, kMomentum, n);
        with_scalar(Opcode::Vmul, t_, g_, kOneMinusDampening, n);
        tiles(Opcode::Vadd, b_tile_, b_tile_, t_, n);
      }
      if (spec_.nesterov) {
        with_scalar(Opcode::Vmul, t_, b_tile_, kMomentum, n);
        tiles(Opcode::Vadd, g_, g_, t_, n);
      } else {
        b_.Vmov(ElementType::F32, g_, b_tile_, n);
      }
    }
    with_scalar(Opcode::Vmul, t_, g_, kLr, n);
    tiles(Opcode::Vsub, p_, p_, t_, n);
  }

  SgdSpec spec_;
  KernelBuilder b_;
  int64_t tile_ = 16;
  Reg p_, g_, b_tile_, t_;  // the tiles of param, grad, momentum buffer and a temporary
  Tile scalars_tile_;
};

}  // namespace

Kernel emit_sgd(const SgdSpec& spec, const config::ChipConfig& config) { return SgdEmitter(spec, config).emit(); }

}  // namespace npusim::emitter
