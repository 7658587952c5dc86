// The fused Adam step. Scalars first: the ten argument floats and the step go to the scratchpad, where 1-element
// vector operations derive step_size = lr / (1 - beta1^step) and sqrt(1 - beta2^step), the powers as
// exp(step ln beta); then each core updates tiles c, c + n, ... (the last one ragged) with PyTorch's formulas:
//   m = m + (1 - beta1)(g - m); v = beta2 v + (1 - beta2) g^2; p = p - step_size m / (sqrt(v) / sqrt(bc2) + eps).
//
// Registers: r1 arguments; r2-r7 param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step addresses; r8 element
// count; r9-r15 the tile loop's (optimizer_tiles.h); r16-r22 tiles P, G, M, V, X, T1, T2; r23 the scalars.
#include "npusim/emitter/adam.h"

#include <fmt/format.h>

#include <algorithm>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/emitter/optimizer_tiles.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

// Scalars in the scratchpad, as float32 offsets from r23.
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
};  // clang-format off
constexpr int kP = 16, kG = 17, kM = 18, kV = 19, kX = 20, kT1 = 21, kT2 = 22, kScalars = 23;

class AdamEmitter {
 public:
  AdamEmitter(const AdamSpec& spec, const config::ChipConfig& config) : spec_(spec) {
    // Seven float32 tiles (P, G, M, V, X, T1, T2), then the scalars.
    tile_ = std::max<int64_t>(16,
                              (static_cast<int64_t>(config.scratchpad_bytes()) - 4 * kScalarCount) / (4 * 7) / 16 * 16);
    if (7 * tile_ * 4 + 4 * kScalarCount > static_cast<int64_t>(config.scratchpad_bytes()))
      throw Unsupported("the scratchpad cannot hold the Adam step's tiles");
  }

  std::string emit() {
    w_.comment(fmt::format("{}_f32: tiles of {}{}{}{}", spec_.decoupled_weight_decay ? "adamw" : "adam", tile_,
                           spec_.weight_decay ? ", weight decay" : "", spec_.amsgrad ? ", amsgrad" : "",
                           spec_.maximize ? ", maximize" : ""));
    for (int k = 0; k < 7; ++k) w_.line("ld r{}, {}(r1)", 2 + k, 8 * k);
    for (int k = 0; k < 7; ++k) w_.load_constant(kP + k, k * tile_ * 4);
    w_.load_constant(kScalars, 7 * tile_ * 4);
    scalars();
    std::vector<TileOperand> loads = {{2, kP}, {3, kG}, {4, kM}, {5, kV}}, stores = {{2, kP}, {4, kM}, {5, kV}};
    if (spec_.amsgrad) {
      loads.emplace_back(6, kX);
      stores.emplace_back(6, kX);
    }
    emit_optimizer_tiles(w_, tile_, loads, stores, [this] { update(); });
    return w_.text();
  }

 private:
  // r13 = the address of scalar s.
  int scalar(Scalar s) {
    w_.line("addi r13, r{}, {}", kScalars, 4 * static_cast<int>(s));
    return 13;
  }
  // A 1-element vector operation on scalars: "op.f32 dst, a, b, 1".
  void on_scalars(const char* op, Scalar dst, Scalar a, std::optional<Scalar> b = std::nullopt) {
    w_.line("addi r24, r{}, {}", kScalars, 4 * static_cast<int>(dst));
    w_.line("addi r25, r{}, {}", kScalars, 4 * static_cast<int>(a));
    if (b) {
      w_.line("addi r26, r{}, {}", kScalars, 4 * static_cast<int>(*b));
      w_.line("{}.f32 r24, r25, r26, r27", op);
    } else {
      w_.line("{}.f32 r24, r25, r27", op);
    }
  }

  void scalars() {
    w_.line("li r27, 1");
    w_.line("li r13, {}", kOne + 1);
    w_.line("addi r15, r1, 56");
    w_.line("dma.ld.b32 r{}, r15, r13, 4", kScalars);  // the ten argument floats
    w_.line("dma.ld.b32 r{}, r7, r27, 4", scalar(kStep));
    w_.line("fence");
    on_scalars("vmul", kTemp, kStep, kLnBeta1);  // beta1^step = exp(step ln beta1)
    on_scalars("vexp", kTemp, kTemp);
    on_scalars("vsub", kTemp, kOne, kTemp);
    on_scalars("vdiv", kStepSize, kLr, kTemp);
    on_scalars("vmul", kTemp, kStep, kLnBeta2);
    on_scalars("vexp", kTemp, kTemp);
    on_scalars("vsub", kTemp, kOne, kTemp);
    on_scalars("vsqrt", kBias2Sqrt, kTemp);
    on_scalars("vmul", kLrWd, kLr, kWd);
    w_.line("fence");
  }

  // "op.f32 dst, a, b" over the tile; with_scalar: b is a scalar broadcast to every element.
  void tiles(const char* op, int dst, int a, int b) { w_.line("{}.f32 r{}, r{}, r{}, r11", op, dst, a, b); }
  void with_scalar(const char* op, int dst, int a, Scalar b) {
    w_.line("{}.f32 r{}, r{}, r{}, r11, 1", op, dst, a, scalar(b));
  }

  void update() {
    if (spec_.maximize) w_.line("vneg.f32 r{0}, r{0}, r11", kG);
    if (spec_.weight_decay && spec_.decoupled_weight_decay) {  // p = p - p (lr wd)
      with_scalar("vmul", kT1, kP, kLrWd);
      tiles("vsub", kP, kP, kT1);
    } else if (spec_.weight_decay) {  // g = g + p wd
      with_scalar("vmul", kT1, kP, kWd);
      tiles("vadd", kG, kG, kT1);
    }
    tiles("vsub", kT1, kG, kM);  // m = m + (1 - beta1)(g - m), PyTorch's lerp
    with_scalar("vmul", kT1, kT1, kOneMinusBeta1);
    tiles("vadd", kM, kM, kT1);
    tiles("vmul", kT1, kG, kG);  // v = beta2 v + (1 - beta2) g^2
    with_scalar("vmul", kT1, kT1, kOneMinusBeta2);
    with_scalar("vmul", kV, kV, kBeta2);
    tiles("vadd", kV, kV, kT1);
    int second_moment = kV;
    if (spec_.amsgrad) {
      tiles("vmax", kX, kX, kV);
      second_moment = kX;
    }
    w_.line("vsqrt.f32 r{}, r{}, r11", kT1, second_moment);  // denominator sqrt(v) / sqrt(bc2) + eps
    with_scalar("vdiv", kT1, kT1, kBias2Sqrt);
    with_scalar("vadd", kT1, kT1, kEps);
    tiles("vdiv", kT2, kM, kT1);
    with_scalar("vmul", kT2, kT2, kStepSize);
    tiles("vsub", kP, kP, kT2);
  }

  AdamSpec spec_;
  int64_t tile_ = 16;
  AssemblyWriter w_;
};

}  // namespace

Kernel emit_adam(const AdamSpec& spec, const config::ChipConfig& config) {
  Kernel kernel;
  kernel.name = spec.decoupled_weight_decay ? "adamw_f32" : "adam_f32";
  kernel.words = isa::assemble(AdamEmitter(spec, config).emit(), kernel.name + ".s");
  kernel.cores = config.chip_cores;
  return kernel;
}

}  // namespace npusim::emitter
