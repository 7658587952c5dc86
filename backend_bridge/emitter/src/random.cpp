// Random number kernels: each core takes tiles c, c + n, c + 2n, ... of the flat output, draws the tile's numbers
// at its stream positions, applies the op's parameters in f32 from the scratchpad, and stores the tile (converted
// to f16 or bf16 in the input buffer, which only dropout reads from DRAM).
//
// Register use: r1 argument block, r2 output, r3 input, r4 mask, r5 key, r6 first stream position, r7/r8 the two
// parameters' scratchpad addresses, r9 scratch, r10 tile index, r11 elements in the tile, r12 first element of the
// tile, r13 its stream position, r14 cores, r15 core id, r16..r18 buffers (samples, input, mask).
#include "npusim/emitter/random.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

constexpr int kSamples = 16, kInput = 17, kMask = 18;

bool is_dropout(RandomOp op) { return op == RandomOp::Dropout; }

class RandomEmitter {
 public:
  RandomEmitter(const RandomSpec& spec, const config::ChipConfig& config) : spec_(spec) {
    if (spec.type != isa::ElementType::F32 && (is_dropout(spec.op) || !isa::is_float(spec.type)))
      throw std::invalid_argument(fmt::format("{} cannot produce {}", op_name(spec.op), isa::type_name(spec.type)));
    // Per element: an f32 sample, an f32 input (or the converted output) and a bool mask; 8 bytes of parameters
    // after the three tiles.
    tile_ = std::max<int64_t>(1, (static_cast<int64_t>(config.scratchpad_bytes()) - 8) / (4 + 4 + 1) / 64 * 64);
    const int64_t tiles = (spec.elements + tile_ - 1) / tile_;
    cores_ = std::clamp<int64_t>(tiles, 1, config.chip_cores);
  }
  int64_t cores() const { return cores_; }

  std::string emit() {
    w_.comment(fmt::format("{}: {} float32 elements in tiles of {} on {} cores", op_name(spec_.op), spec_.elements,
                           tile_, cores_));
    for (int k = 0; k < 5; ++k) w_.line("ld r{}, {}(r1)", 2 + k, 8 * k);
    w_.line("li r{}, 0", kSamples);
    w_.load_constant(kInput, 4 * tile_);
    w_.load_constant(kMask, 8 * tile_);
    w_.load_constant(7, 9 * tile_);
    w_.line("addi r8, r7, 4");
    w_.line("li r9, 2");  // both parameters: the low halves of words 5 and 6
    w_.line("addi r11, r1, 40");
    w_.line("dma.ld.b32 r7, r11, r9, 8");
    w_.line("fence");
    w_.line("csrr r15, coreid");
    w_.line("addi r10, r15, 0");
    w_.load_constant(14, cores_);
    const std::string loop = w_.new_label("tile"), done = w_.new_label("done"), full = w_.new_label("full");
    w_.label(loop);
    // r12 = first element, r11 = elements left from it, capped at a tile
    w_.load_constant(12, tile_);
    w_.line("mul r12, r12, r10");
    w_.load_constant(11, spec_.elements);
    w_.line("bgeu r12, r11, {}", done);
    w_.line("sub r11, r11, r12");
    w_.load_constant(9, tile_);
    w_.line("bltu r11, r9, {}", full);
    w_.line("addi r11, r9, 0");
    w_.label(full);
    w_.line("add r13, r6, r12");
    emit_tile();
    w_.line("add r10, r10, r14");
    w_.line("jal r0, {}", loop);
    w_.label(done);
    w_.line("halt");
    return w_.text();
  }

 private:
  // r9 = byte offset of the tile in a tensor of `element_bytes` elements, added to `pointer` into r9.
  void tile_address(int pointer, int element_bytes) {
    w_.line("slli r9, r12, {}", std::countr_zero(static_cast<unsigned>(element_bytes)));
    w_.line("add r9, r9, r{}", pointer);
  }

  void emit_tile() {
    const std::string s = fmt::format("r{}", kSamples), x = fmt::format("r{}", kInput), m = fmt::format("r{}", kMask);
    const std::string type(isa::type_name(spec_.type));
    const bool f32 = spec_.type == isa::ElementType::F32;
    // The f32 result in {s} becomes the output type's in {x}.
    const auto convert_result = [&] {
      if (!f32) w_.line("vcvt.{}.f32 {}, {}, r11", type, x, s);
    };
    switch (spec_.op) {
      case RandomOp::Uniform:
        if (f32) {
          w_.line("vrand.f32 {}, r5, r13, r11", s);
        } else {  // on the output type's grid, so [0, 1) stays below 1 in that type
          w_.line("vrand.{} {}, r5, r13, r11", type, x);
          w_.line("vcvt.f32.{} {}, {}, r11", type, s, x);
        }
        w_.line("vmul.f32 {0}, {0}, r8, r11, 1", s);
        w_.line("vadd.f32 {0}, {0}, r7, r11, 1", s);
        convert_result();
        break;
      case RandomOp::Normal:
        w_.line("vrandn.f32 {}, r5, r13, r11", s);
        w_.line("vmul.f32 {0}, {0}, r8, r11, 1", s);
        w_.line("vadd.f32 {0}, {0}, r7, r11, 1", s);
        convert_result();
        break;
      case RandomOp::Bernoulli:
        w_.line("vrand.f32 {}, r5, r13, r11", s);
        w_.line("vclt.f32 {}, {}, r7, r11, 1", m, s);
        w_.line("vcvt.{}.bool {}, {}, r11", type, f32 ? s : x, m);
        break;
      case RandomOp::Dropout:
        tile_address(3, 4);
        w_.line("dma.ld.b32 {}, r9, r11, 4", x);
        w_.line("vrand.f32 {}, r5, r13, r11", s);
        w_.line("vclt.f32 {}, {}, r7, r11, 1", m, s);
        w_.line("fence");  // the input has arrived
        w_.line("vmul.f32 {0}, {0}, r8, r11, 1", x);
        w_.line("vfill.f32 {}, r11, 0", s);
        w_.line("vsel.f32 {}, {}, {}, r11", s, m, x);
        break;
    }
    w_.line("fence");
    const int bytes = static_cast<int>(isa::element_bytes(spec_.type));
    tile_address(2, bytes);
    w_.line("dma.st.b{} r9, {}, r11, {}", 8 * bytes, f32 ? s : x, bytes);
    if (is_dropout(spec_.op)) {
      tile_address(4, 1);
      w_.line("dma.st.b8 r9, {}, r11, 1", m);
    }
    w_.line("fence");
  }

  RandomSpec spec_;
  int64_t tile_ = 0, cores_ = 1;
  AssemblyWriter w_;
};

}  // namespace

std::string op_name(RandomOp op) {
  switch (op) {
    case RandomOp::Uniform: return "uniform";
    case RandomOp::Normal: return "normal";
    case RandomOp::Bernoulli: return "bernoulli";
    case RandomOp::Dropout: return "dropout";
  }
  return "random";
}

Kernel emit_random(const RandomSpec& spec, const config::ChipConfig& config) {
  if (spec.elements < 0) throw std::invalid_argument(fmt::format("negative size {} in a random kernel", spec.elements));
  Kernel kernel;
  kernel.name = fmt::format("{}_{}", op_name(spec.op), isa::type_name(spec.type));
  if (spec.elements == 0) {
    kernel.words = isa::assemble("    halt\n", kernel.name + ".s");
  } else {
    RandomEmitter emitter(spec, config);
    kernel.words = isa::assemble(emitter.emit(), kernel.name + ".s");
    kernel.cores = emitter.cores();
  }
  return kernel;
}

}  // namespace npusim::emitter
