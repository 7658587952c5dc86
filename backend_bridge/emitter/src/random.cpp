// Random number kernels: each core takes tiles c, c + n, c + 2n, ... of the flat output, draws the tile's numbers
// at its stream positions, applies the op's parameters in f32 from the scratchpad, and stores the tile (converted
// to f16 or bf16 in the input buffer, which only dropout reads from DRAM). The builder orders the DMA and vector
// engines by the tiles they touch, so a tile's store overlaps the next tile's draws.
#include "npusim/emitter/random.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {
namespace {

using isa::ElementType;

bool is_dropout(RandomOp op) { return op == RandomOp::Dropout; }

class RandomEmitter {
 public:
  RandomEmitter(const RandomSpec& spec, const config::ChipConfig& config, const std::string& name)
      : spec_(spec), b_(name, config) {
    if (spec.type != ElementType::F32 && (is_dropout(spec.op) || !isa::is_float(spec.type)))
      throw std::invalid_argument(fmt::format("{} cannot produce {}", op_name(spec.op), isa::type_name(spec.type)));
    // Per element: an f32 sample, an f32 input (or the converted output) and a bool mask; 8 bytes of parameters
    // after the three tiles.
    tile_ = std::max<int64_t>(1, (static_cast<int64_t>(config.scratchpad_bytes()) - 8) / (4 + 4 + 1) / 64 * 64);
    const int64_t tiles = (spec.elements + tile_ - 1) / tile_;
    cores_ = std::clamp<int64_t>(tiles, 1, config.chip_cores);
  }

  Kernel emit() {
    b_.describe(fmt::format("{}: {} float32 elements in tiles of {} on {} cores", op_name(spec_.op), spec_.elements,
                            tile_, cores_));
    const Tile samples_tile = b_.tile(Space::Scratchpad, 4 * tile_, "samples");
    const Tile input_tile = b_.tile(Space::Scratchpad, 4 * tile_, "input");
    const Tile mask_tile = b_.tile(Space::Scratchpad, tile_, "mask");
    const Tile parameters = b_.tile(Space::Scratchpad, 8, "parameters");
    Reg output = b_.reg("output"), input = b_.reg("input"), mask = b_.reg("mask"), key = b_.reg("key");
    Reg first_position = b_.reg("first stream position");
    b_.Ld(output, kArgumentBlock, 0);
    b_.Ld(input, kArgumentBlock, 8);
    b_.Ld(mask, kArgumentBlock, 16);
    b_.Ld(key, kArgumentBlock, 24);
    b_.Ld(first_position, kArgumentBlock, 32);
    samples_ = b_.reg("samples");
    input_buffer_ = b_.reg("input buffer");
    mask_buffer_ = b_.reg("mask buffer");
    first_ = b_.reg("first parameter");
    second_ = b_.reg("second parameter");
    b_.point(samples_, samples_tile);
    b_.point(input_buffer_, input_tile);
    b_.point(mask_buffer_, mask_tile);
    b_.point(first_, parameters);
    b_.point(second_, parameters, 4);
    {
      Reg count = b_.reg("parameter count"), words = b_.reg("parameter words");
      b_.li(count, 2);  // both parameters: the low halves of words 5 and 6
      b_.Addi(words, kArgumentBlock, 40);
      b_.DmaLoad32(first_, words, count, 8);
    }
    Reg tile = b_.reg("tile index");
    b_.Csrr(tile, isa::Csr::CoreId);
    const Label loop = b_.label(), done = b_.label(), full = b_.label();
    b_.bind(loop);
    elements_ = b_.reg("elements in the tile");
    first_element_ = b_.reg("first element of the tile");
    {
      Reg tile_elements = b_.reg("tile elements");
      b_.li(first_element_, tile_);
      b_.Mul(first_element_, first_element_, tile);
      b_.li(elements_, spec_.elements);
      b_.Bgeu(first_element_, elements_, done);
      b_.Sub(elements_, elements_, first_element_);
      b_.li(tile_elements, tile_);
      b_.Bltu(elements_, tile_elements, full);
      b_.move(elements_, tile_elements);
    }
    b_.bind(full);
    position_ = b_.reg("stream position");
    b_.Add(position_, first_position, first_element_);
    emit_tile(output, input, mask, key);
    b_.Addi(tile, tile, cores_);
    b_.Jal(kZero, loop);
    b_.bind(done);
    b_.Halt();
    return b_.finish(cores_);
  }

 private:
  // The byte address of the tile in a tensor of `element_bytes` elements at `pointer`.
  Reg tile_address(R pointer, int element_bytes) {
    Reg address = b_.reg("tile address");
    b_.Slli(address, first_element_, std::countr_zero(static_cast<unsigned>(element_bytes)));
    b_.Add(address, address, pointer);
    return address;
  }

  void emit_tile(R output, R input, R mask, R key) {
    const ElementType type = spec_.type, f32 = ElementType::F32;
    const R s = samples_, x = input_buffer_, m = mask_buffer_, n = elements_;
    // The f32 result in s becomes the output type's in x.
    const auto convert_result = [&] {
      if (type != f32) b_.Vcvt(type, f32, x, s, n);
    };
    switch (spec_.op) {
      case RandomOp::Uniform:
        if (type == f32) {
          b_.Vrand(f32, s, key, position_, n);
        } else {  // on the output type's grid, so [0, 1) stays below 1 in that type
          b_.Vrand(type, x, key, position_, n);
          b_.Vcvt(f32, type, s, x, n);
        }
        b_.Vmul(f32, s, s, second_, n, 1);
        b_.Vadd(f32, s, s, first_, n, 1);
        convert_result();
        break;
      case RandomOp::Normal:
        b_.Vrandn(f32, s, key, position_, n);
        b_.Vmul(f32, s, s, second_, n, 1);
        b_.Vadd(f32, s, s, first_, n, 1);
        convert_result();
        break;
      case RandomOp::Bernoulli:
        b_.Vrand(f32, s, key, position_, n);
        b_.Vclt(f32, m, s, first_, n, 1);
        b_.Vcvt(type, ElementType::Bool, type == f32 ? s : x, m, n);
        break;
      case RandomOp::Dropout:
        b_.DmaLoad32(x, tile_address(input, 4), n, 4);
        b_.Vrand(f32, s, key, position_, n);
        b_.Vclt(f32, m, s, first_, n, 1);
        b_.Vmul(f32, x, x, second_, n, 1);
        b_.Vfill(f32, s, n, 0);
        b_.Vsel(f32, s, m, x, n);
        break;
    }
    const int bytes = static_cast<int>(isa::element_bytes(type));
    const R result = type == f32 ? s : x;
    switch (bytes) {
      case 4: b_.DmaStore32(tile_address(output, bytes), result, n, bytes); break;
      default: b_.DmaStore16(tile_address(output, bytes), result, n, bytes); break;
    }
    if (is_dropout(spec_.op)) b_.DmaStore8(tile_address(mask, 1), m, n, 1);
  }

  RandomSpec spec_;
  int64_t tile_ = 0, cores_ = 1;
  KernelBuilder b_;
  Reg samples_, input_buffer_, mask_buffer_, first_, second_, elements_, first_element_, position_;
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
  const std::string name = fmt::format("{}_{}", op_name(spec.op), isa::type_name(spec.type));
  if (spec.elements == 0) {
    KernelBuilder b(name, config);
    b.Halt();
    return b.finish(1);
  }
  return RandomEmitter(spec, config, name).emit();
}

}  // namespace npusim::emitter
