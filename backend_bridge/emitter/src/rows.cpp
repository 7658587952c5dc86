// Row kernels. Per tile of rt whole rows (n = rt x cols elements):
//   softmax      m = rowmax(x); x -= m (per row); x = exp(x); s = rowsum(x); x /= s (per row)
//   safe softmax the same with m = 0 and s = 1 for rows whose max is -inf, so those rows give 0, not NaN
//   log_softmax  m = rowmax(x); x -= m; e = exp(x); s = rowsum(e); s = log(s); x -= s
//   sum          s = rowsum(x)    (max, min, argmax, argmin likewise with vrmax, vrmin, vargmax, vargmin)
//   softmax backward      e = g * y; s = rowsum(e); g -= s (per row); g *= y
//   log_softmax backward  s = rowsum(g); e = exp(y); e *= s (per row); g -= e
//   layer_norm   m = rowsum(x) / cols; x -= m; v = rowsum(x * x) / cols; r = rsqrt(v + eps); x *= r (per row);
//                x *= weight, x += bias (a repeating row); m and r are stored too
// The max subtraction keeps exp from overflowing, as PyTorch's CPU kernels do.
//
// Registers: r1 arguments; r2 output, r3 input; r4 first row of the tile, r5 rows in it, r6 its elements;
// r7 row step across cores; r8 scratch; r10 cols; r11 DRAM pointer; r20 tile x, r21 scratch tile e,
// r22 per-row values; layer norm: r23 per-row 1/std, r24 weight row, r25 bias row, r26 1/cols, r27 eps,
// r28/r29 mean and 1/std outputs; backward ops: r30 the forward output's tile, r31 its DRAM address;
// safe softmax: r23..r25 the constants -inf, 0 and 1 after the per-row values.
#include "npusim/emitter/rows.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

constexpr int kOut = 2, kIn = 3, kRow = 4, kRowsInTile = 5, kElements = 6, kRowStep = 7, kScratch = 8, kCols = 10,
              kDram = 11, kTile = 20, kTemp = 21, kPerRow = 22, kRstd = 23, kWeight = 24, kBias = 25, kInvCols = 26,
              kEps = 27, kMeanOut = 28, kRstdOut = 29, kForwardTile = 30, kForward = 31, kNegInf = 23, kZero = 24,
              kOne = 25;
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
  }
  return "?";
}

class RowEmitter {
 public:
  RowEmitter(const RowSpec& spec, const config::ChipConfig& config) : spec_(spec) {
    // x and e tiles of rt rows and rt per-row values (two sets for layer norm, which also keeps its weight and bias
    // rows and two constants).
    const int64_t floats = static_cast<int64_t>(config.scratchpad_bytes()) / kFloat;
    const bool norm = spec.op == RowOp::LayerNormF32;
    // The backward ops also hold the forward output's tile; reductions need no scratch tile.
    const int64_t tiles = backward() ? 3 : reduction() ? 1 : 2;
    const int64_t fixed = norm ? 2 * spec.cols + 2 : spec.op == RowOp::SafeSoftmaxF32 ? 3 : 0;
    tile_rows_ = std::min(spec.rows, (floats - fixed) / (tiles * spec.cols + (norm || arg() ? 2 : 1)));
    if (tile_rows_ < 1)
      throw Unsupported(
          fmt::format("a row of {} floats does not fit the scratchpad with its working tiles", spec.cols));
    if (spec.cols > (INT32_MAX >> 2)) throw Unsupported("rows too long for a broadcast period");
    cores_ = std::clamp<int64_t>((spec.rows + tile_rows_ - 1) / tile_rows_, 1, config.chip_cores);
  }

  int64_t cores() const { return cores_; }
  bool backward() const { return spec_.op == RowOp::SoftmaxBackwardF32 || spec_.op == RowOp::LogSoftmaxBackwardF32; }
  // Row to one value: no scratch tile, the per-row values right after the input tile.
  bool reduction() const {
    return spec_.op == RowOp::SumF32 || spec_.op == RowOp::MaxF32 || spec_.op == RowOp::MinF32 || arg();
  }
  bool arg() const { return spec_.op == RowOp::ArgMaxF32 || spec_.op == RowOp::ArgMinF32; }

  std::string emit() {
    w_.comment(
        fmt::format("{}: {} rows of {}, {} rows per tile", name_of(spec_.op), spec_.rows, spec_.cols, tile_rows_));
    w_.line("ld r{}, 0(r1)", kOut);
    w_.line("ld r{}, 8(r1)", kIn);
    w_.load_constant(kCols, spec_.cols);
    w_.line("li r{}, 0", kTile);
    w_.load_constant(kTemp, tile_rows_ * spec_.cols * kFloat);
    w_.load_constant(kPerRow, (reduction() ? 1 : 2) * tile_rows_ * spec_.cols * kFloat);
    if (spec_.op == RowOp::LayerNormF32) emit_norm_setup();
    if (spec_.op == RowOp::SafeSoftmaxF32) emit_safe_softmax_constants();
    if (backward()) {  // the forward output's tile after the per-row values
      w_.load_constant(kForwardTile, (2 * tile_rows_ * spec_.cols + tile_rows_) * kFloat);
      w_.line("ld r{}, 16(r1)", kForward);
    }
    // Core c takes the tiles starting at rows c*rt, (c + n)*rt, ...
    const std::string top = w_.new_label("tile"), sized = w_.new_label("sized"), done = w_.new_label("done");
    w_.line("csrr r{}, coreid", kRow);
    w_.load_constant(kScratch, tile_rows_);
    w_.line("mul r{0}, r{0}, r{1}", kRow, kScratch);
    w_.line("csrr r{}, ncores", kRowStep);
    w_.line("mul r{0}, r{0}, r{1}", kRowStep, kScratch);
    w_.load_constant(kScratch, spec_.rows);
    w_.line("bgeu r{}, r{}, {}", kRow, kScratch, done);
    w_.label(top);
    w_.load_constant(kScratch, spec_.rows);
    w_.line("sub r{0}, r{0}, r{1}", kScratch, kRow);
    w_.load_constant(kRowsInTile, tile_rows_);
    w_.line("bgeu r{}, r{}, {}", kScratch, kRowsInTile, sized);
    w_.line("addi r{}, r{}, 0", kRowsInTile, kScratch);
    w_.label(sized);
    w_.line("mul r{}, r{}, r{}", kElements, kRowsInTile, kCols);
    emit_tile();
    w_.line("add r{0}, r{0}, r{1}", kRow, kRowStep);
    w_.load_constant(kScratch, spec_.rows);
    w_.line("bltu r{}, r{}, {}", kRow, kScratch, top);
    w_.label(done);
    w_.line("halt");
    return w_.text();
  }

 private:
  const char* reduction_mnemonic() const {
    switch (spec_.op) {
      case RowOp::MaxF32: return "vrmax";
      case RowOp::MinF32: return "vrmin";
      case RowOp::ArgMaxF32: return "vargmax";
      case RowOp::ArgMinF32: return "vargmin";
      default: return "vrsum";
    }
  }

  // kDram = base + row * bytes_per_row.
  void point_at(int base, int64_t bytes_per_row) {
    w_.load_constant(kScratch, bytes_per_row);
    w_.line("mul r{0}, r{0}, r{1}", kScratch, kRow);
    w_.line("add r{}, r{}, r{}", kDram, base, kScratch);
  }

  // Layer norm: the per-row 1/std after the means, then the weight and bias rows and the two constants.
  void emit_norm_setup() {
    const int64_t base = 2 * tile_rows_ * spec_.cols + tile_rows_;
    w_.load_constant(kRstd, base * kFloat);
    w_.load_constant(kWeight, (base + tile_rows_) * kFloat);
    w_.load_constant(kBias, (base + tile_rows_ + spec_.cols) * kFloat);
    w_.load_constant(kInvCols, (base + tile_rows_ + 2 * spec_.cols) * kFloat);
    w_.load_constant(kEps, (base + tile_rows_ + 2 * spec_.cols + 1) * kFloat);
    w_.line("ld r{}, 32(r1)", kMeanOut);
    w_.line("ld r{}, 40(r1)", kRstdOut);
    w_.line("li r{}, 1", kScratch);
    // The immediate is signed: a bit pattern with the top bit set (a negative eps) is written as a negative number.
    w_.line("vfill.f32 r{}, r{}, {}", kInvCols, kScratch,
            std::bit_cast<int32_t>(1.0f / static_cast<float>(spec_.cols)));
    w_.line("vfill.f32 r{}, r{}, {}", kEps, kScratch, std::bit_cast<int32_t>(spec_.eps));
    if (spec_.weight) load_row(kWeight, 16);
    if (spec_.bias) load_row(kBias, 24);
    w_.line("fence");
  }
  void emit_safe_softmax_constants() {
    const int64_t base = 2 * tile_rows_ * spec_.cols + tile_rows_;
    const std::pair<int, uint32_t> constants[] = {{kNegInf, 0xff800000}, {kZero, 0}, {kOne, 0x3f800000}};
    w_.line("li r{}, 1", kScratch);
    for (size_t k = 0; k < std::size(constants); ++k) {
      w_.load_constant(constants[k].first, (base + static_cast<int64_t>(k)) * kFloat);
      // The immediate is signed: -inf's bit pattern is written as the negative number with the same bits.
      w_.line("vfill.f32 r{}, r{}, {}", constants[k].first, kScratch, static_cast<int32_t>(constants[k].second));
    }
  }

  // One row of cols floats from the address in argument word `offset` / 8.
  void load_row(int spad, int offset) {
    w_.line("ld r{}, {}(r1)", kDram, offset);
    w_.line("dma.ld.b32 r{}, r{}, r{}, 4", spad, kDram, kCols);
  }

  void emit_norm(int64_t per_row) {
    const int64_t repeating_row = 2 + (spec_.cols << 2);
    w_.line("vrsum.f32 r{}, r{}, r{}, r{}", kPerRow, kTile, kRowsInTile, kCols);
    w_.line("vmul.f32 r{0}, r{0}, r{1}, r{2}, 1", kPerRow, kInvCols, kRowsInTile);
    w_.line("vsub.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kPerRow, kElements, per_row);
    w_.line("vmul.f32 r{}, r{}, r{}, r{}", kTemp, kTile, kTile, kElements);
    w_.line("vrsum.f32 r{}, r{}, r{}, r{}", kRstd, kTemp, kRowsInTile, kCols);
    w_.line("vmul.f32 r{0}, r{0}, r{1}, r{2}, 1", kRstd, kInvCols, kRowsInTile);
    w_.line("vadd.f32 r{0}, r{0}, r{1}, r{2}, 1", kRstd, kEps, kRowsInTile);
    w_.line("vrsqrt.f32 r{0}, r{0}, r{1}", kRstd, kRowsInTile);
    w_.line("vmul.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kRstd, kElements, per_row);
    if (spec_.weight) w_.line("vmul.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kWeight, kElements, repeating_row);
    if (spec_.bias) w_.line("vadd.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kBias, kElements, repeating_row);
  }

  void emit_tile() {
    const int64_t per_row = 3 + (spec_.cols << 2);  // broadcast mode 3: one value per row of cols
    point_at(kIn, spec_.cols * kFloat);
    w_.line("dma.ld.b32 r{}, r{}, r{}, 4", kTile, kDram, kElements);
    if (backward()) {
      point_at(kForward, spec_.cols * kFloat);
      w_.line("dma.ld.b32 r{}, r{}, r{}, 4", kForwardTile, kDram, kElements);
    }
    w_.line("fence");
    switch (spec_.op) {
      case RowOp::SoftmaxF32:
        w_.line("vrmax.f32 r{}, r{}, r{}, r{}", kPerRow, kTile, kRowsInTile, kCols);
        w_.line("vsub.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kPerRow, kElements, per_row);
        w_.line("vexp.f32 r{0}, r{0}, r{1}", kTile, kElements);
        w_.line("vrsum.f32 r{}, r{}, r{}, r{}", kPerRow, kTile, kRowsInTile, kCols);
        w_.line("vdiv.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kPerRow, kElements, per_row);
        break;
      case RowOp::SafeSoftmaxF32:  // the e tile holds each row's "all -inf" flag (bools)
        w_.line("vrmax.f32 r{}, r{}, r{}, r{}", kPerRow, kTile, kRowsInTile, kCols);
        w_.line("vceq.f32 r{}, r{}, r{}, r{}, 1", kTemp, kPerRow, kNegInf, kRowsInTile);
        w_.line("vsel.f32 r{}, r{}, r{}, r{}, 1", kPerRow, kTemp, kZero, kRowsInTile);
        w_.line("vsub.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kPerRow, kElements, per_row);
        w_.line("vexp.f32 r{0}, r{0}, r{1}", kTile, kElements);
        w_.line("vrsum.f32 r{}, r{}, r{}, r{}", kPerRow, kTile, kRowsInTile, kCols);
        w_.line("vsel.f32 r{}, r{}, r{}, r{}, 1", kPerRow, kTemp, kOne, kRowsInTile);
        w_.line("vdiv.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kPerRow, kElements, per_row);
        break;
      case RowOp::LogSoftmaxF32:
        w_.line("vrmax.f32 r{}, r{}, r{}, r{}", kPerRow, kTile, kRowsInTile, kCols);
        w_.line("vsub.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kPerRow, kElements, per_row);
        w_.line("vexp.f32 r{}, r{}, r{}", kTemp, kTile, kElements);
        w_.line("vrsum.f32 r{}, r{}, r{}, r{}", kPerRow, kTemp, kRowsInTile, kCols);
        w_.line("vlog.f32 r{0}, r{0}, r{1}", kPerRow, kRowsInTile);
        w_.line("vsub.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kPerRow, kElements, per_row);
        break;
      case RowOp::SumF32:
      case RowOp::MaxF32:
      case RowOp::MinF32:
      case RowOp::ArgMaxF32:
      case RowOp::ArgMinF32:
        w_.line("{}.f32 r{}, r{}, r{}, r{}", reduction_mnemonic(), kPerRow, kTile, kRowsInTile, kCols);
        break;
      case RowOp::LayerNormF32: emit_norm(per_row); break;
      case RowOp::SoftmaxBackwardF32:
        w_.line("vmul.f32 r{}, r{}, r{}, r{}", kTemp, kTile, kForwardTile, kElements);
        w_.line("vrsum.f32 r{}, r{}, r{}, r{}", kPerRow, kTemp, kRowsInTile, kCols);
        w_.line("vsub.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTile, kPerRow, kElements, per_row);
        w_.line("vmul.f32 r{0}, r{0}, r{1}, r{2}", kTile, kForwardTile, kElements);
        break;
      case RowOp::LogSoftmaxBackwardF32:
        w_.line("vrsum.f32 r{}, r{}, r{}, r{}", kPerRow, kTile, kRowsInTile, kCols);
        w_.line("vexp.f32 r{}, r{}, r{}", kTemp, kForwardTile, kElements);
        w_.line("vmul.f32 r{0}, r{0}, r{1}, r{2}, {3}", kTemp, kPerRow, kElements, per_row);
        w_.line("vsub.f32 r{0}, r{0}, r{1}, r{2}", kTile, kTemp, kElements);
        break;
    }
    w_.line("fence");
    if (reduction()) {
      const int64_t bytes = arg() ? 8 : kFloat;
      point_at(kOut, bytes);
      w_.line("dma.st.b{} r{}, r{}, r{}, {}", 8 * bytes, kDram, kPerRow, kRowsInTile, bytes);
    } else {
      point_at(kOut, spec_.cols * kFloat);
      w_.line("dma.st.b32 r{}, r{}, r{}, 4", kDram, kTile, kElements);
    }
    if (spec_.op == RowOp::LayerNormF32) {  // each row's mean and 1/std
      point_at(kMeanOut, kFloat);
      w_.line("dma.st.b32 r{}, r{}, r{}, 4", kDram, kPerRow, kRowsInTile);
      point_at(kRstdOut, kFloat);
      w_.line("dma.st.b32 r{}, r{}, r{}, 4", kDram, kRstd, kRowsInTile);
    }
    w_.line("fence");
  }

  RowSpec spec_;
  int64_t tile_rows_ = 0, cores_ = 1;
  AssemblyWriter w_;
};

}  // namespace

Kernel emit_rows(const RowSpec& spec, const config::ChipConfig& config) {
  if (spec.rows < 1 || spec.cols < 1)
    throw std::invalid_argument(fmt::format("a row kernel over {} x {} has no elements", spec.rows, spec.cols));
  RowEmitter emitter(spec, config);
  Kernel kernel;
  kernel.name = name_of(spec.op);
  kernel.words = isa::assemble(emitter.emit(), kernel.name + ".s");
  kernel.cores = emitter.cores();
  return kernel;
}

}  // namespace npusim::emitter
