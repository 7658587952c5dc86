// The fused SGD step, PyTorch's formulas per element:
//   g = (maximize ? -g : g) + wd p; b = first step ? g : momentum b + (1 - dampening) g;
//   g = nesterov ? g + momentum b : b; p = p - lr g.
//
// Registers: r1 arguments; r2-r4 param, grad, buffer addresses; r8 element count; r9-r15 the tile loop's
// (optimizer_tiles.h); r16-r19 tiles P, G, B, T; r20 the scalars.
#include "npusim/emitter/sgd.h"

#include <fmt/format.h>

#include <algorithm>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/emitter/optimizer_tiles.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

enum Scalar { kLr, kWd, kMomentum, kOneMinusDampening, kScalarCount };
constexpr int kP = 16, kG = 17, kB = 18, kT = 19, kScalars = 20, kTiles = 4;

class SgdEmitter {
 public:
  SgdEmitter(const SgdSpec& spec, const config::ChipConfig& config) : spec_(spec) {
    tile_ = (static_cast<int64_t>(config.scratchpad_bytes()) - 4 * kScalarCount) / (4 * kTiles) / 16 * 16;
    if (tile_ < 16) throw Unsupported("the scratchpad cannot hold the SGD step's tiles");
  }

  std::string emit() {
    w_.comment(fmt::format("sgd_f32: tiles of {}{}{}{}{}{}", tile_, spec_.weight_decay ? ", weight decay" : "",
                           spec_.momentum ? ", momentum" : "", spec_.first_step ? " (first step)" : "",
                           spec_.nesterov ? ", nesterov" : "", spec_.maximize ? ", maximize" : ""));
    for (int k = 0; k < 3; ++k) w_.line("ld r{}, {}(r1)", 2 + k, 8 * k);
    w_.line("ld r8, 24(r1)");
    for (int k = 0; k < kTiles; ++k) w_.load_constant(kP + k, k * tile_ * 4);
    w_.load_constant(kScalars, kTiles * tile_ * 4);
    w_.line("li r13, {}", static_cast<int>(kScalarCount));
    w_.line("addi r15, r1, 32");
    w_.line("dma.ld.b32 r{}, r15, r13, 4", kScalars);
    w_.line("fence");
    std::vector<TileOperand> loads = {{2, kP}, {3, kG}}, stores = {{2, kP}};
    if (spec_.momentum) {
      if (!spec_.first_step) loads.emplace_back(4, kB);
      stores.emplace_back(4, kB);
    }
    emit_optimizer_tiles(w_, tile_, loads, stores, [this] { update(); });
    return w_.text();
  }

 private:
  // "op.f32 dst, a, scalar b" over the tile.
  void with_scalar(const char* op, int dst, int a, Scalar b) {
    w_.line("addi r13, r{}, {}", kScalars, 4 * static_cast<int>(b));
    w_.line("{}.f32 r{}, r{}, r13, r11, 1", op, dst, a);
  }
  void tiles(const char* op, int dst, int a, int b) { w_.line("{}.f32 r{}, r{}, r{}, r11", op, dst, a, b); }

  void update() {
    if (spec_.maximize) w_.line("vneg.f32 r{0}, r{0}, r11", kG);
    if (spec_.weight_decay) {
      with_scalar("vmul", kT, kP, kWd);
      tiles("vadd", kG, kG, kT);
    }
    if (spec_.momentum) {
      if (spec_.first_step) {
        w_.line("vmov.f32 r{}, r{}, r11", kB, kG);
      } else {
        with_scalar("vmul", kB, kB, kMomentum);
        with_scalar("vmul", kT, kG, kOneMinusDampening);
        tiles("vadd", kB, kB, kT);
      }
      if (spec_.nesterov) {
        with_scalar("vmul", kT, kB, kMomentum);
        tiles("vadd", kG, kG, kT);
      } else {
        w_.line("vmov.f32 r{}, r{}, r11", kG, kB);
      }
    }
    with_scalar("vmul", kT, kG, kLr);
    tiles("vsub", kP, kP, kT);
  }

  SgdSpec spec_;
  int64_t tile_ = 16;
  AssemblyWriter w_;
};

}  // namespace

Kernel emit_sgd(const SgdSpec& spec, const config::ChipConfig& config) {
  Kernel kernel;
  kernel.name = "sgd_f32";
  kernel.words = isa::assemble(SgdEmitter(spec, config).emit(), kernel.name + ".s");
  kernel.cores = config.chip_cores;
  return kernel;
}

}  // namespace npusim::emitter
