// The matmul kernels (matmul.h): the GEMM loop (gemm_loop.h) with the epilogue of addmm, linear and baddbmm, C =
// alpha * (A @ B) + beta * bias on the vector engine in f32, rounded once to C's type. Without a scale or a bias the
// matrix engine rounds the block as it stores it to the staging tile, which then goes straight to C.
#include "npusim/emitter/matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <optional>

#include "gemm_loop.h"

namespace npusim::emitter {
namespace {

using isa::ElementType;

std::string kernel_name(const MatmulSpec& spec) {
  std::string name = fmt::format("{}_{}", spec.a_run > 0 ? "conv" : "matmul", isa::type_name(spec.type));
  if (spec.epilogue.alpha != 1.0f) name += "+scale";
  if (spec.epilogue.bias) name += spec.epilogue.beta != 1.0f ? "+scaled_bias" : "+bias";
  return name;
}

// The argument block is C, A, B and the bias.
gemm::Operands operands(const MatmulSpec& spec) {
  gemm::Operands o;
  o.type = spec.type;
  o.batch = spec.batch;
  o.m = spec.m;
  o.n = spec.n;
  o.k = spec.k;
  o.a_argument = 1;
  o.b_argument = 2;
  o.a_row = spec.a_row;
  o.a_col = spec.a_col;
  o.a_batch = spec.a_batch;
  o.b_row = spec.b_row;
  o.b_col = spec.b_col;
  o.b_batch = spec.b_batch;
  o.a_run = spec.a_run;
  o.a_run_stride = spec.a_run_stride;
  return o;
}

class ScaleAndBias : public gemm::Epilogue {
  struct Tiles {  // one set's
    std::optional<Tile> rounded, bias_block, bias_loaded;
  };

 public:
  ScaleAndBias(const MatmulSpec& spec, const config::ChipConfig& config)
      : spec_(spec),
        out_type_(spec.output_type.value_or(spec.type)),
        out_bytes_(static_cast<int64_t>(isa::element_bytes(out_type_))),
        computes_(spec.epilogue.alpha != 1.0f || spec.epilogue.bias) {
    const int64_t bytes = std::max<int64_t>(out_bytes_, isa::element_bytes(spec.type));
    for (int64_t stride : {spec.c_row, spec.c_col, spec.epilogue.bias_row, spec.epilogue.bias_col})
      if (!gemm::Loop::stride_fits(stride, bytes, config))
        throw Unsupported(fmt::format("matmul stride {} does not fit a DMA immediate", stride));
  }

  ElementType staged_type() const override { return computes_ ? ElementType::F32 : out_type_; }
  // With a computation, the rounded result (when narrow), and the bias widened (and as loaded when narrow).
  int64_t bytes_per_output() const override {
    if (!computes_) return 0;
    int64_t bytes = narrow_out() ? out_bytes_ : 0;
    if (spec_.epilogue.bias) bytes += 4 + (narrow_out() ? out_bytes_ : 0);
    return bytes;
  }
  int64_t fixed_bytes() const override { return 0; }  // the scalars fit the loop's alignment margin

  void prepare(gemm::Loop& loop) override {
    KernelBuilder& b = loop.builder();
    const int64_t outputs = loop.block_outputs();
    for (int set = 0; set < loop.sets(); ++set) {
      Tiles& tiles = tiles_.emplace_back();
      if (computes_ && narrow_out())
        tiles.rounded = b.tile(Space::Scratchpad, outputs * out_bytes_, fmt::format("C rounded {}", set));
      if (spec_.epilogue.bias) {
        tiles.bias_block = b.tile(Space::Scratchpad, outputs * 4, fmt::format("bias block {}", set));
        if (narrow_out())
          tiles.bias_loaded = b.tile(Space::Scratchpad, outputs * out_bytes_, fmt::format("bias as loaded {}", set));
      }
    }
    if (spec_.epilogue.alpha != 1.0f) scalars_.push_back(spec_.epilogue.alpha);
    if (spec_.epilogue.bias && spec_.epilogue.beta != 1.0f) scalars_.push_back(spec_.epilogue.beta);
    if (!scalars_.empty())
      scalar_tile_ = b.tile(Space::Scratchpad, 4 * static_cast<int64_t>(scalars_.size()), "alpha, beta");
    c_ = b.reg("C");
    b.Ld(c_, kArgumentBlock, 0);
    if (spec_.epilogue.bias) {
      bias_ = b.reg("bias");
      b.Ld(bias_, kArgumentBlock, 24);
    }
    Reg address = b.reg("scalar");
    for (size_t k = 0; k < scalars_.size(); ++k) {
      b.point(address, *scalar_tile_, 4 * static_cast<int64_t>(k));
      b.Vfill(ElementType::F32, address, loop.one(), std::bit_cast<int32_t>(scalars_[k]));
    }
  }

  // The bias block is loaded and the block computed on (when there is something to compute), then stored to C.
  void compute(gemm::Loop& loop, const gemm::Block& block, int set) override {
    if (!computes_) return;
    KernelBuilder& b = loop.builder();
    const Tiles& tiles = tiles_.at(set);
    if (spec_.epilogue.bias) {
      Reg dram = b.reg("DRAM"), loaded = b.reg("bias tile");
      const Tile& tile = narrow_out() ? *tiles.bias_loaded : *tiles.bias_block;
      b.point(loaded, tile);
      loop.point_at(dram, bias_, block, spec_.epilogue.bias_row, spec_.epilogue.bias_col, spec_.epilogue.bias_batch,
                    out_bytes_);
      loop.move_block(true, loaded, tile, dram, block, spec_.epilogue.bias_row, spec_.epilogue.bias_col, out_bytes_);
    }
    Reg result = b.reg("C block");
    b.point(result, loop.staging(set));
    scale_and_add(b, tiles, result, block.outputs);
  }
  void release_registers() override {
    c_ = Reg();
    bias_ = Reg();
  }
  void store(gemm::Loop& loop, const gemm::Block& block, int set) override {
    KernelBuilder& b = loop.builder();
    const Tile& tile = computes_ && narrow_out() ? *tiles_.at(set).rounded : loop.staging(set);
    Reg dram = b.reg("DRAM"), result = b.reg("C block");
    b.point(result, tile);
    loop.point_at(dram, c_, block, spec_.c_row, spec_.c_col, spec_.c_batch, out_bytes_);
    loop.move_block(false, result, tile, dram, block, spec_.c_row, spec_.c_col, out_bytes_);
  }

 private:
  bool narrow_out() const { return out_type_ == ElementType::F16 || out_type_ == ElementType::BF16; }

  // staging = alpha * staging + beta * bias on the vector engine, in f32, then rounded once (into `result`, pointed
  // at the rounded tile when C is narrow).
  void scale_and_add(KernelBuilder& b, const Tiles& tiles, Reg& result, R outputs) {
    Reg scalar = b.reg("scalar"), bias = b.reg("bias block");
    size_t next_scalar = 0;
    if (spec_.epilogue.alpha != 1.0f) {
      b.point(scalar, *scalar_tile_, 4 * static_cast<int64_t>(next_scalar++));
      b.Vmul(ElementType::F32, result, result, scalar, outputs, 1);
    }
    if (spec_.epilogue.bias) {
      b.point(bias, *tiles.bias_block);
      if (narrow_out()) {
        Reg loaded = b.reg("bias as loaded");
        b.point(loaded, *tiles.bias_loaded);
        b.Vcvt(ElementType::F32, out_type_, bias, loaded, outputs);
      }
      if (spec_.epilogue.beta != 1.0f) {
        b.point(scalar, *scalar_tile_, 4 * static_cast<int64_t>(next_scalar++));
        b.Vmul(ElementType::F32, bias, bias, scalar, outputs, 1);
      }
      b.Vadd(ElementType::F32, result, result, bias, outputs);
    }
    if (!narrow_out()) return;
    Reg rounded = b.reg("C rounded");
    b.point(rounded, *tiles.rounded);
    b.Vcvt(out_type_, ElementType::F32, rounded, result, outputs);
    result = std::move(rounded);
  }

  MatmulSpec spec_;
  ElementType out_type_;
  int64_t out_bytes_;
  bool computes_;             // a scale or a bias: the block is computed on in f32
  std::vector<Tiles> tiles_;  // per set
  std::optional<Tile> scalar_tile_;
  std::vector<float> scalars_;  // alpha, then beta, where they are not 1
  Reg c_, bias_;
};

}  // namespace

bool reads_columns_in_runs(int64_t run, const config::ChipConfig& config) {
  return run > 0 && run % config.core_systolic_rows == 0;
}

Kernel emit_matmul(const MatmulSpec& spec, const config::ChipConfig& config) {
  if (spec.m < 1 || spec.k < 1 || spec.n < 1 || spec.batch < 1)
    throw std::invalid_argument(fmt::format("matmul of {} x [{} x {}] @ [{} x {}] has an empty dimension", spec.batch,
                                            spec.m, spec.k, spec.k, spec.n));
  const bool integer = spec.type == ElementType::I8 && spec.output_type == ElementType::I32;
  if (!isa::is_float(spec.type) && !integer)
    throw std::invalid_argument(fmt::format("matmul of {} operands; the kernel takes f32, f16 or bf16, or i8 into i32",
                                            isa::type_name(spec.type)));
  if (integer && (spec.epilogue.bias || spec.epilogue.alpha != 1.0f))
    throw std::invalid_argument("an i8 matmul into i32 takes no epilogue");
  ScaleAndBias epilogue(spec, config);
  gemm::Loop loop(operands(spec), epilogue, kernel_name(spec), config);
  return loop.build();
}

}  // namespace npusim::emitter
