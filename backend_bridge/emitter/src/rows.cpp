// Row kernels. Per tile of rt whole rows (n = rt x cols elements):
//   softmax      m = rowmax(x); x -= m (per row); x = exp(x); s = rowsum(x); x /= s (per row)
//   safe softmax the same with m = 0 and s = 1 for rows whose max is -inf, so those rows give 0, not NaN
//   log_softmax  m = rowmax(x); x -= m; e = exp(x); s = rowsum(e); s = log(s); x -= s
//   sum          s = rowsum(x)    (max, min, argmax, argmin likewise with vrmax, vrmin, vargmax, vargmin)
//   softmax backward      e = g * y; s = rowsum(e); g -= s (per row); g *= y
//   log_softmax backward  s = rowsum(g); e = exp(y); e *= s (per row); g -= e
//   layer_norm   m = rowsum(x) / cols; x -= m; v = rowsum(x * x) / cols; r = rsqrt(v + eps); x *= r (per row);
//                x *= weight, x += bias (a repeating row); m and r are stored too
//   layer_norm backward  x̂ = (x - m) r (per row; stored if asked); g = dy * weight; a = rowsum(g) / cols;
//                b = rowsum(g x̂) / cols; dx = ((g - a) - x̂ b) r
// The max subtraction keeps exp from overflowing, as PyTorch's CPU kernels do. The builder orders the DMA engine's
// load of a tile, the vector engine's work on it and the store.
#include "npusim/emitter/rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {
namespace {

using isa::ElementType;
constexpr int64_t kFloat = 4;

const char* name_of(RowOp op) {
  switch (op) {
    case RowOp::SoftmaxF32: return "softmax_f32";
    case RowOp::LogSoftmaxF32: return "log_softmax_f32";
    case RowOp::SumF32: return "row_sum_f32";
    case RowOp::LayerNormF32: return "layer_norm_f32";
    case RowOp::SafeSoftmaxF32: return "safe_softmax_f32";
    case RowOp::SoftmaxBackwardF32: return "softmax_backward_f32";
    case RowOp::LogSoftmaxBackwardF32: return "log_softmax_backward_f32";
    case RowOp::MaxF32: return "row_max_f32";
    case RowOp::MinF32: return "row_min_f32";
    case RowOp::ArgMaxF32: return "row_argmax_f32";
    case RowOp::ArgMinF32: return "row_argmin_f32";
    case RowOp::LayerNormBackwardF32: return "layer_norm_backward_f32";
  }
  return "?";
}

class RowEmitter {
 public:
  RowEmitter(const RowSpec& spec, const config::ChipConfig& config) : spec_(spec), b_(name_of(spec.op), config) {
    // x and e tiles of rt rows and rt per-row values (two sets for layer norm, which also keeps its weight and bias
    // rows and two constants).
    const int64_t floats = static_cast<int64_t>(config.scratchpad_bytes()) / kFloat;
    const bool norm = spec.op == RowOp::LayerNormF32;
    const int64_t tiles = backward() || norm_backward() ? 3 : reduction() ? 1 : 2;
    const int64_t fixed = norm                               ? 2 * spec.cols + 2
                          : norm_backward()                  ? spec.cols + 1
                          : spec.op == RowOp::SafeSoftmaxF32 ? 3
                                                             : 0;
    const int64_t per_row_values = norm_backward() ? 3 : norm || arg() ? 2 : 1;
    tile_rows_ = std::min(spec.rows, (floats - fixed) / (tiles * spec.cols + per_row_values));
    if (tile_rows_ < 1)
      throw Unsupported(
          fmt::format("a row of {} floats does not fit the scratchpad with its working tiles", spec.cols));
    if (spec.cols > (INT32_MAX >> 2)) throw Unsupported("rows too long for a broadcast period");
    cores_ = std::clamp<int64_t>((spec.rows + tile_rows_ - 1) / tile_rows_, 1, config.chip_cores);
  }

  Kernel emit() {
    b_.describe(
        fmt::format("{}: {} rows of {}, {} rows per tile", name_of(spec_.op), spec_.rows, spec_.cols, tile_rows_));
    allocate_tile();
    out_ = b_.reg("output");
    in_ = b_.reg("input");
    b_.Ld(out_, kArgumentBlock, 0);
    b_.Ld(in_, kArgumentBlock, 8);
    cols_ = b_.reg("cols");
    b_.li(cols_, spec_.cols);
    if (spec_.op == RowOp::LayerNormF32) emit_norm_setup();
    if (norm_backward()) emit_norm_backward_setup();
    if (spec_.op == RowOp::SafeSoftmaxF32) emit_safe_softmax_constants();
    if (backward() || norm_backward()) {
      forward_ = b_.reg(backward() ? "forward output" : "forward input");
      b_.Ld(forward_, kArgumentBlock, 16);
    }
    // Core c takes the tiles starting at rows c*rt, (c + n)*rt, ...
    row_ = b_.reg("first row of the tile");
    rows_in_tile_ = b_.reg("rows in the tile");
    elements_ = b_.reg("elements in the tile");
    Reg tile_rows = b_.reg("rows per tile"), step = b_.reg("row step across cores"), rows = b_.reg("rows");
    b_.li(tile_rows, tile_rows_);
    b_.Csrr(row_, isa::Csr::CoreId);
    b_.Mul(row_, row_, tile_rows);
    b_.Csrr(step, isa::Csr::CoreCount);
    b_.Mul(step, step, tile_rows);
    b_.li(rows, spec_.rows);
    const Label top = b_.label(), sized = b_.label(), done = b_.label();
    b_.Bgeu(row_, rows, done);
    b_.bind(top);
    b_.Sub(rows_in_tile_, rows, row_);  // min(rt, rows - first row)
    b_.Bltu(rows_in_tile_, tile_rows, sized);
    b_.move(rows_in_tile_, tile_rows);
    b_.bind(sized);
    b_.Mul(elements_, rows_in_tile_, cols_);
    emit_tile();
    b_.Add(row_, row_, step);
    b_.Bltu(row_, rows, top);
    b_.bind(done);
    b_.Halt();
    return b_.finish(cores_);
  }

 private:
  bool backward() const { return spec_.op == RowOp::SoftmaxBackwardF32 || spec_.op == RowOp::LogSoftmaxBackwardF32; }
  // Row to one value: no scratch tile.
  bool reduction() const {
    return spec_.op == RowOp::SumF32 || spec_.op == RowOp::MaxF32 || spec_.op == RowOp::MinF32 || arg();
  }
  bool arg() const { return spec_.op == RowOp::ArgMaxF32 || spec_.op == RowOp::ArgMinF32; }
  bool norm_backward() const { return spec_.op == RowOp::LayerNormBackwardF32; }

  // One tile holds the working set: x, then e, the per-row values, then layer norm's 1/std, weight and bias rows and
  // constants, safe softmax's constants or the backward ops' forward output tile. Every step of a tile's pipeline
  // waits for the step before (load, vector work, store, the next load into x), so separate tiles would order
  // nothing better, and their 64-byte alignments would leave room for fewer rows per tile in some shapes.
  void allocate_tile() {
    const int64_t tile = tile_rows_ * spec_.cols * kFloat;
    const int64_t per_row = (reduction() ? 1 : 2) * tile, after = 2 * tile + tile_rows_ * kFloat;
    int64_t bytes = per_row + tile_rows_ * (arg() ? 8 : kFloat);
    if (spec_.op == RowOp::LayerNormF32) bytes = after + (tile_rows_ + 2 * spec_.cols + 2) * kFloat;
    if (spec_.op == RowOp::SafeSoftmaxF32) bytes = after + 3 * kFloat;
    if (backward()) bytes = after + tile;
    if (norm_backward()) bytes = after + tile + (2 * tile_rows_ + spec_.cols + 1) * kFloat;
    working_set_ = b_.tile(Space::Scratchpad, bytes, "working set");
    const auto point = [&](Reg& reg, const char* purpose, int64_t offset) {
      reg = b_.reg(purpose);
      b_.point(reg, working_set_, offset);
    };
    point(x_, "x", 0);
    if (!reduction()) point(e_, "e", tile);
    point(per_row_, "per-row values", per_row);
    if (spec_.op == RowOp::LayerNormF32) {
      point(rstd_, "per-row 1/std", after);
      point(weight_, "weight row", after + tile_rows_ * kFloat);
      point(bias_, "bias row", after + (tile_rows_ + spec_.cols) * kFloat);
      point(inv_cols_, "1/cols", after + (tile_rows_ + 2 * spec_.cols) * kFloat);
      point(eps_, "eps", after + (tile_rows_ + 2 * spec_.cols + 1) * kFloat);
    }
    if (spec_.op == RowOp::SafeSoftmaxF32) {
      point(neg_inf_, "-inf", after);
      point(zero_, "zero", after + kFloat);
      point(one_, "one", after + 2 * kFloat);
    }
    if (backward()) point(forward_tile_, "forward output tile", after);
    if (norm_backward()) {
      point(forward_tile_, "x, then x̂", after);
      point(rstd_, "per-row 1/std", after + tile);
      point(second_per_row_, "per-row rowsum(g x̂) / cols", after + tile + tile_rows_ * kFloat);
      point(weight_, "weight row", after + tile + 2 * tile_rows_ * kFloat);
      point(inv_cols_, "1/cols", after + tile + (2 * tile_rows_ + spec_.cols) * kFloat);
    }
  }

  // dram = base + row * bytes_per_row.
  void point_at(R dram, R base, int64_t bytes_per_row) {
    b_.li(dram, bytes_per_row);
    b_.Mul(dram, dram, row_);
    b_.Add(dram, dram, base);
  }

  // Layer norm: 1/cols and eps as the constants, the weight and bias rows loaded once.
  void emit_norm_setup() {
    mean_out_ = b_.reg("means");
    rstd_out_ = b_.reg("1/stds");
    b_.Ld(mean_out_, kArgumentBlock, 32);
    b_.Ld(rstd_out_, kArgumentBlock, 40);
    Reg one = b_.reg("one");
    b_.li(one, 1);
    // The immediate is signed: a bit pattern with the top bit set (a negative eps) is written as a negative number.
    b_.Vfill(ElementType::F32, inv_cols_, one, std::bit_cast<int32_t>(1.0f / static_cast<float>(spec_.cols)));
    b_.Vfill(ElementType::F32, eps_, one, std::bit_cast<int32_t>(spec_.eps));
    if (spec_.weight) load_row(weight_, 16);
    if (spec_.bias) load_row(bias_, 24);
  }
  // Layer norm's backward: the forward's means and 1/stds to read, x̂ to write if asked, 1/cols, the weight row.
  void emit_norm_backward_setup() {
    mean_out_ = b_.reg("means");
    rstd_out_ = b_.reg("1/stds");
    b_.Ld(mean_out_, kArgumentBlock, 32);
    b_.Ld(rstd_out_, kArgumentBlock, 40);
    if (spec_.store_normalized) {
      normalized_out_ = b_.reg("x̂ out");
      b_.Ld(normalized_out_, kArgumentBlock, 48);
    }
    Reg one = b_.reg("one");
    b_.li(one, 1);
    // 1/cols as a double rounded to float, as the composition's scalar multiply took it.
    const auto inverse_cols = static_cast<float>(1.0 / static_cast<double>(spec_.cols));
    b_.Vfill(ElementType::F32, inv_cols_, one, std::bit_cast<int32_t>(inverse_cols));
    if (spec_.weight) load_row(weight_, 24);
  }

  // In the order of the composition this kernel replaced (x̂ first, then g, the two row means, dx), so that every
  // rounding is the same.
  void emit_norm_backward(R dram, int64_t per_row) {
    const int64_t repeating_row = 2 + (spec_.cols << 2);
    const ElementType f32 = ElementType::F32;
    point_at(dram, mean_out_, kFloat);
    b_.DmaLoad32(per_row_, dram, rows_in_tile_, 4);
    point_at(dram, rstd_out_, kFloat);
    b_.DmaLoad32(rstd_, dram, rows_in_tile_, 4);
    b_.Vsub(f32, forward_tile_, forward_tile_, per_row_, elements_, per_row);
    b_.Vmul(f32, forward_tile_, forward_tile_, rstd_, elements_, per_row);
    if (spec_.store_normalized) {
      point_at(dram, normalized_out_, spec_.cols * kFloat);
      b_.DmaStore32(dram, forward_tile_, elements_, 4);
    }
    if (spec_.weight) b_.Vmul(f32, x_, x_, weight_, elements_, repeating_row);
    b_.Vrsum(f32, per_row_, x_, rows_in_tile_, cols_);
    b_.Vmul(f32, per_row_, per_row_, inv_cols_, rows_in_tile_, 1);
    b_.Vmul(f32, e_, x_, forward_tile_, elements_);
    b_.Vrsum(f32, second_per_row_, e_, rows_in_tile_, cols_);
    b_.Vmul(f32, second_per_row_, second_per_row_, inv_cols_, rows_in_tile_, 1);
    b_.Vsub(f32, x_, x_, per_row_, elements_, per_row);
    b_.Vmul(f32, e_, forward_tile_, second_per_row_, elements_, per_row);
    b_.Vsub(f32, x_, x_, e_, elements_);
    b_.Vmul(f32, x_, x_, rstd_, elements_, per_row);
  }

  void emit_safe_softmax_constants() {
    Reg count = b_.reg("one element");
    b_.li(count, 1);
    // The immediate is signed: -inf's bit pattern is written as the negative number with the same bits.
    b_.Vfill(ElementType::F32, neg_inf_, count, static_cast<int32_t>(0xff800000u));
    b_.Vfill(ElementType::F32, zero_, count, 0);
    b_.Vfill(ElementType::F32, one_, count, std::bit_cast<int32_t>(1.0f));
  }

  // One row of cols floats from the address in argument word `offset` / 8.
  void load_row(R spad, int offset) {
    Reg dram = b_.reg("row address");
    b_.Ld(dram, kArgumentBlock, offset);
    b_.DmaLoad32(spad, dram, cols_, 4);
  }

  void emit_norm(int64_t per_row) {
    const int64_t repeating_row = 2 + (spec_.cols << 2);
    const ElementType f32 = ElementType::F32;
    b_.Vrsum(f32, per_row_, x_, rows_in_tile_, cols_);
    b_.Vmul(f32, per_row_, per_row_, inv_cols_, rows_in_tile_, 1);
    b_.Vsub(f32, x_, x_, per_row_, elements_, per_row);
    b_.Vmul(f32, e_, x_, x_, elements_);
    b_.Vrsum(f32, rstd_, e_, rows_in_tile_, cols_);
    b_.Vmul(f32, rstd_, rstd_, inv_cols_, rows_in_tile_, 1);
    b_.Vadd(f32, rstd_, rstd_, eps_, rows_in_tile_, 1);
    b_.Vrsqrt(f32, rstd_, rstd_, rows_in_tile_);
    b_.Vmul(f32, x_, x_, rstd_, elements_, per_row);
    if (spec_.weight) b_.Vmul(f32, x_, x_, weight_, elements_, repeating_row);
    if (spec_.bias) b_.Vadd(f32, x_, x_, bias_, elements_, repeating_row);
  }

  isa::Opcode reduction_opcode() const {
    switch (spec_.op) {
      case RowOp::MaxF32: return isa::Opcode::Vrmax;
      case RowOp::MinF32: return isa::Opcode::Vrmin;
      case RowOp::ArgMaxF32: return isa::Opcode::Vargmax;
      case RowOp::ArgMinF32: return isa::Opcode::Vargmin;
      default: return isa::Opcode::Vrsum;
    }
  }

  void emit_tile() {
    const int64_t per_row = 3 + (spec_.cols << 2);  // broadcast mode 3: one value per row of cols
    const ElementType f32 = ElementType::F32;
    Reg dram = b_.reg("DRAM address");
    point_at(dram, in_, spec_.cols * kFloat);
    b_.DmaLoad32(x_, dram, elements_, 4);
    if (backward() || norm_backward()) {
      point_at(dram, forward_, spec_.cols * kFloat);
      b_.DmaLoad32(forward_tile_, dram, elements_, 4);
    }
    switch (spec_.op) {
      case RowOp::SoftmaxF32:
        b_.Vrmax(f32, per_row_, x_, rows_in_tile_, cols_);
        b_.Vsub(f32, x_, x_, per_row_, elements_, per_row);
        b_.Vexp(f32, x_, x_, elements_);
        b_.Vrsum(f32, per_row_, x_, rows_in_tile_, cols_);
        b_.Vdiv(f32, x_, x_, per_row_, elements_, per_row);
        break;
      case RowOp::SafeSoftmaxF32:  // the e tile holds each row's "all -inf" flag (bools)
        b_.Vrmax(f32, per_row_, x_, rows_in_tile_, cols_);
        b_.Vceq(f32, e_, per_row_, neg_inf_, rows_in_tile_, 1);
        b_.Vsel(f32, per_row_, e_, zero_, rows_in_tile_, 1);
        b_.Vsub(f32, x_, x_, per_row_, elements_, per_row);
        b_.Vexp(f32, x_, x_, elements_);
        b_.Vrsum(f32, per_row_, x_, rows_in_tile_, cols_);
        b_.Vsel(f32, per_row_, e_, one_, rows_in_tile_, 1);
        b_.Vdiv(f32, x_, x_, per_row_, elements_, per_row);
        break;
      case RowOp::LogSoftmaxF32:
        b_.Vrmax(f32, per_row_, x_, rows_in_tile_, cols_);
        b_.Vsub(f32, x_, x_, per_row_, elements_, per_row);
        b_.Vexp(f32, e_, x_, elements_);
        b_.Vrsum(f32, per_row_, e_, rows_in_tile_, cols_);
        b_.Vlog(f32, per_row_, per_row_, rows_in_tile_);
        b_.Vsub(f32, x_, x_, per_row_, elements_, per_row);
        break;
      case RowOp::SumF32:
      case RowOp::MaxF32:
      case RowOp::MinF32:
      case RowOp::ArgMaxF32:
      case RowOp::ArgMinF32: b_.emit(reduction_opcode(), {f32, per_row_, x_, rows_in_tile_, cols_}); break;
      case RowOp::LayerNormF32: emit_norm(per_row); break;
      case RowOp::LayerNormBackwardF32: emit_norm_backward(dram, per_row); break;
      case RowOp::SoftmaxBackwardF32:
        b_.Vmul(f32, e_, x_, forward_tile_, elements_);
        b_.Vrsum(f32, per_row_, e_, rows_in_tile_, cols_);
        b_.Vsub(f32, x_, x_, per_row_, elements_, per_row);
        b_.Vmul(f32, x_, x_, forward_tile_, elements_);
        break;
      case RowOp::LogSoftmaxBackwardF32:
        b_.Vrsum(f32, per_row_, x_, rows_in_tile_, cols_);
        b_.Vexp(f32, e_, forward_tile_, elements_);
        b_.Vmul(f32, e_, e_, per_row_, elements_, per_row);
        b_.Vsub(f32, x_, x_, e_, elements_);
        break;
    }
    if (reduction()) {
      const int64_t bytes = arg() ? 8 : kFloat;
      point_at(dram, out_, bytes);
      if (arg()) {
        b_.DmaStore64(dram, per_row_, rows_in_tile_, bytes);
      } else {
        b_.DmaStore32(dram, per_row_, rows_in_tile_, bytes);
      }
    } else {
      point_at(dram, out_, spec_.cols * kFloat);
      b_.DmaStore32(dram, x_, elements_, 4);
    }
    if (spec_.op == RowOp::LayerNormF32) {  // each row's mean and 1/std
      point_at(dram, mean_out_, kFloat);
      b_.DmaStore32(dram, per_row_, rows_in_tile_, 4);
      point_at(dram, rstd_out_, kFloat);
      b_.DmaStore32(dram, rstd_, rows_in_tile_, 4);
    }
  }

  RowSpec spec_;
  int64_t tile_rows_ = 0, cores_ = 1;
  KernelBuilder b_;  // before the registers, which it must outlive
  Tile working_set_;
  // Addresses in the working set.
  Reg x_, e_, per_row_, second_per_row_, rstd_, weight_, bias_, inv_cols_, eps_, neg_inf_, zero_, one_, forward_tile_;
  // DRAM addresses and the tile loop's counters.
  Reg out_, in_, forward_, mean_out_, rstd_out_, normalized_out_, cols_, row_, rows_in_tile_, elements_;
};

}  // namespace

Kernel emit_rows(const RowSpec& spec, const config::ChipConfig& config) {
  if (spec.rows < 1 || spec.cols < 1)
    throw std::invalid_argument(fmt::format("a row kernel over {} x {} has no elements", spec.rows, spec.cols));
  return RowEmitter(spec, config).emit();
}

}  // namespace npusim::emitter
