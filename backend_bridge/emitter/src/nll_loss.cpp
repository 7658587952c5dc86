// The nll_loss kernels run on one core. The scalar unit walks the targets: for each row it loads the target, checks
// it, and has the DMA engine fetch that row's weight (and, forward, its log-probability) into a scratchpad vector,
// or the vector engine zero them for an ignored target. After a fence the vector engine does the arithmetic over
// those vectors: products and, for Sum and Mean, row sums. Backward then scatters each row's gradient to its target
// column with a one-element DMA store.
//
// Registers: r1 arguments; r2..r6 the five addresses; r7 row, r8 target, r9 scratch, r10 DRAM pointer,
// r11/r12 this row's slots in the picked and weight vectors, r13 rows, r14 classes, r15 ignore_index, r16 one,
// r17 picked vector, r18 weight vector, r19/r20 scalar slots.
#include "npusim/emitter/nll_loss.h"

#include <fmt/format.h>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/emitter/index_loads.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

constexpr int kRow = 7, kTarget = 8, kScratch = 9, kDram = 10, kPickedSlot = 11, kWeightSlot = 12, kRows = 13,
              kClasses = 14, kIgnore = 15, kOne = 16, kPicked = 17, kWeights = 18, kScalarA = 19, kScalarB = 20;
constexpr uint32_t kOneBits = 0x3f800000;  // 1.0f

class NllEmitter {
 public:
  NllEmitter(const NllLossSpec& spec, const config::ChipConfig& config) : spec_(spec) {
    if (spec.rows < 1 || spec.classes < 1) throw std::invalid_argument("nll_loss needs at least one row and class");
    // Two vectors of rows floats and two scalars in the scratchpad.
    if (static_cast<uint64_t>(spec.rows) * 8 + 8 > config.scratchpad_bytes())
      throw Unsupported(fmt::format("nll_loss over {} rows does not fit the scratchpad", spec.rows));
  }

  // out, total_weight, input, target, weight
  std::string forward() {
    prologue("nll_loss_f32");
    for_each_row(/*fetch_input=*/true);
    w_.line("fence");
    w_.line("vmul.f32 r{0}, r{0}, r{1}, r{2}", kPicked, kWeights, kRows);
    w_.line("vneg.f32 r{0}, r{0}, r{1}", kPicked, kRows);
    if (spec_.reduction == NllReduction::None) {
      w_.line("vfill.f32 r{}, r{}, 0", kScalarB, kOne);  // total_weight is not used without a reduction
      w_.line("fence");
      w_.line("dma.st.b32 r2, r{}, r{}, 4", kPicked, kRows);
    } else {
      w_.line("vrsum.f32 r{}, r{}, r{}, r{}", kScalarA, kPicked, kOne, kRows);
      w_.line("vrsum.f32 r{}, r{}, r{}, r{}", kScalarB, kWeights, kOne, kRows);
      if (spec_.reduction == NllReduction::Mean) w_.line("vdiv.f32 r{0}, r{0}, r{1}, r{2}", kScalarA, kScalarB, kOne);
      w_.line("fence");
      w_.line("dma.st.b32 r2, r{}, r{}, 4", kScalarA, kOne);
    }
    w_.line("dma.st.b32 r3, r{}, r{}, 4", kScalarB, kOne);
    w_.line("halt");
    return w_.text();
  }

  // grad_input, grad_output, target, weight, total_weight
  std::string backward() {
    prologue("nll_loss_backward_f32");
    for_each_row(/*fetch_input=*/false);
    // The picked vector holds grad_output (None) or the scalar gradient (divided by total_weight for Mean).
    if (spec_.reduction == NllReduction::None) {
      w_.line("dma.ld.b32 r{}, r3, r{}, 4", kPicked, kRows);
    } else {
      w_.line("dma.ld.b32 r{}, r3, r{}, 4", kScalarA, kOne);
      if (spec_.reduction == NllReduction::Mean) w_.line("dma.ld.b32 r{}, r6, r{}, 4", kScalarB, kOne);
    }
    w_.line("fence");
    if (spec_.reduction == NllReduction::None) {
      w_.line("vmul.f32 r{0}, r{0}, r{1}, r{2}", kWeights, kPicked, kRows);
    } else {
      if (spec_.reduction == NllReduction::Mean) w_.line("vdiv.f32 r{0}, r{0}, r{1}, r{2}", kScalarA, kScalarB, kOne);
      w_.line("vmul.f32 r{0}, r{0}, r{1}, r{2}, 1", kWeights, kScalarA, kRows);
    }
    w_.line("vneg.f32 r{0}, r{0}, r{1}", kWeights, kRows);
    w_.line("fence");
    // Scatter: grad_input[i][t_i] = this row's value, for rows whose target is not ignored (checked in range above).
    w_.line("li r{}, 0", kRow);
    w_.line("addi r{}, r{}, 0", kWeightSlot, kWeights);
    w_.label("scatter");
    load_target();
    w_.line("beq r{}, r{}, scattered", kTarget, kIgnore);
    element_address(2);
    w_.line("dma.st.b32 r{}, r{}, r{}, 4", kDram, kWeightSlot, kOne);
    w_.label("scattered");
    w_.line("addi r{0}, r{0}, 4", kWeightSlot);
    w_.line("addi r{0}, r{0}, 1", kRow);
    w_.line("bltu r{}, r{}, scatter", kRow, kRows);
    w_.line("fence");
    w_.line("halt");
    return w_.text();
  }

 private:
  void prologue(const char* name) {
    w_.comment(fmt::format("{}: {} rows x {} classes, {}, reduction {}, ignore_index {}", name, spec_.rows,
                           spec_.classes, spec_.weighted ? "weighted" : "unweighted", static_cast<int>(spec_.reduction),
                           spec_.ignore_index));
    for (int k = 0; k < 5; ++k) w_.line("ld r{}, {}(r1)", 2 + k, 8 * k);
    w_.load_constant(kRows, spec_.rows);
    w_.load_constant(kClasses, spec_.classes);
    w_.load_constant(kIgnore, spec_.ignore_index);
    w_.line("li r{}, 1", kOne);
    w_.line("li r{}, 0", kPicked);
    w_.load_constant(kWeights, spec_.rows * 4);
    w_.load_constant(kScalarA, spec_.rows * 8);
    w_.load_constant(kScalarB, spec_.rows * 8 + 4);
  }

  // kTarget = target[kRow]; the target vector's address is r5 forward, r4 backward.
  void load_target() { load_index(w_, 8, target_register_, kRow, kTarget, kScratch); }

  // kDram = base + (row * classes + target) * 4
  void element_address(int base) {
    w_.line("mul r{}, r{}, r{}", kDram, kRow, kClasses);
    w_.line("add r{0}, r{0}, r{1}", kDram, kTarget);
    w_.line("slli r{0}, r{0}, 2", kDram);
    w_.line("add r{0}, r{0}, r{1}", kDram, base);
  }

  // Fills the weight vector (and, forward, the picked vector) row by row, trapping on a target out of range.
  void for_each_row(bool fetch_input) {
    target_register_ = fetch_input ? 5 : 4;
    const int weight_register = fetch_input ? 6 : 5;
    w_.line("li r{}, 0", kRow);
    w_.line("addi r{}, r{}, 0", kPickedSlot, kPicked);
    w_.line("addi r{}, r{}, 0", kWeightSlot, kWeights);
    w_.label("row");
    load_target();
    w_.line("beq r{}, r{}, ignored", kTarget, kIgnore);
    w_.line("bltu r{}, r{}, in_range", kTarget, kClasses);  // unsigned: a negative target fails too
    w_.line("trap {}", kIndexOutOfRangeTrap);
    w_.label("in_range");
    if (fetch_input) {
      element_address(4);
      w_.line("dma.ld.b32 r{}, r{}, r{}, 4", kPickedSlot, kDram, kOne);
    }
    if (spec_.weighted) {
      w_.line("slli r{}, r{}, 2", kDram, kTarget);
      w_.line("add r{0}, r{0}, r{1}", kDram, weight_register);
      w_.line("dma.ld.b32 r{}, r{}, r{}, 4", kWeightSlot, kDram, kOne);
    } else {
      w_.line("vfill.f32 r{}, r{}, 0x{:08x}", kWeightSlot, kOne, kOneBits);
    }
    w_.line("jal r0, next_row");
    w_.label("ignored");  // contributes nothing, and nothing to the total weight
    if (fetch_input) w_.line("vfill.f32 r{}, r{}, 0", kPickedSlot, kOne);
    w_.line("vfill.f32 r{}, r{}, 0", kWeightSlot, kOne);
    w_.label("next_row");
    w_.line("addi r{0}, r{0}, 4", kPickedSlot);
    w_.line("addi r{0}, r{0}, 4", kWeightSlot);
    w_.line("addi r{0}, r{0}, 1", kRow);
    w_.line("bltu r{}, r{}, row", kRow, kRows);
  }

  NllLossSpec spec_;
  int target_register_ = 5;
  AssemblyWriter w_;
};

Kernel assembled(const std::string& name, std::string assembly) {
  Kernel kernel;
  kernel.name = name;
  kernel.words = isa::assemble(std::move(assembly), name + ".s");
  return kernel;  // one core
}

}  // namespace

Kernel emit_nll_loss(const NllLossSpec& spec, const config::ChipConfig& config) {
  return assembled("nll_loss_f32", NllEmitter(spec, config).forward());
}

Kernel emit_nll_loss_backward(const NllLossSpec& spec, const config::ChipConfig& config) {
  return assembled("nll_loss_backward_f32", NllEmitter(spec, config).backward());
}

}  // namespace npusim::emitter
