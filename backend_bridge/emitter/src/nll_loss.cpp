// The nll_loss kernels run on one core. The scalar unit walks the targets: for each row it loads the target, checks
// it, and has the DMA engine fetch that row's weight (and, forward, its log-probability) into its slot of a
// scratchpad vector, or the vector engine zero them for an ignored target. Then the vector engine does the arithmetic
// over those vectors: products and, for Sum and Mean, row sums. Backward then scatters each row's gradient to its
// target column with a one-element DMA store.
//
// Two engines write slots of the same vectors, each slot chosen by a register, so the builder could only order every
// row after the one before; the tiles are unordered instead and the kernel orders its three phases (rows fetched,
// arithmetic, stores) with two semaphores of its own.
#include "npusim/emitter/nll_loss.h"

#include <fmt/format.h>

#include <bit>

#include "npusim/emitter/index_loads.h"
#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter {
namespace {

using isa::ElementType;

int64_t aligned(int64_t bytes) { return (bytes + 63) / 64 * 64; }

class NllEmitter {
 public:
  NllEmitter(const NllLossSpec& spec, const config::ChipConfig& config, const char* name)
      : spec_(spec), b_(name, config) {
    if (spec.rows < 1 || spec.classes < 1) throw std::invalid_argument("nll_loss needs at least one row and class");
    // Two vectors of rows floats and two scalars in the scratchpad.
    if (static_cast<uint64_t>(2 * aligned(spec.rows * 4) + 8) > config.scratchpad_bytes())
      throw Unsupported(fmt::format("nll_loss over {} rows does not fit the scratchpad", spec.rows));
  }

  // out, total_weight, input, target, weight
  Kernel forward() {
    prologue();
    Reg out = b_.reg("output"), total = b_.reg("total weight"), input = b_.reg("input"), target = b_.reg("targets");
    Reg weight = b_.reg("class weights");
    load_arguments({&out, &total, &input, &target, &weight});
    for_each_row(target, weight, &input);
    order(Engine::Dma, Engine::Vector);
    b_.Vmul(ElementType::F32, picked_, picked_, weights_, rows_);
    b_.Vneg(ElementType::F32, picked_, picked_, rows_);
    if (spec_.reduction == NllReduction::None) {
      b_.Vfill(ElementType::F32, scalar_b_, one_, 0);  // total_weight is not used without a reduction
      order(Engine::Vector, Engine::Dma);
      b_.DmaStore32(out, picked_, rows_, 4);
    } else {
      b_.Vrsum(ElementType::F32, scalar_a_, picked_, one_, rows_);
      b_.Vrsum(ElementType::F32, scalar_b_, weights_, one_, rows_);
      if (spec_.reduction == NllReduction::Mean) b_.Vdiv(ElementType::F32, scalar_a_, scalar_a_, scalar_b_, one_);
      order(Engine::Vector, Engine::Dma);
      b_.DmaStore32(out, scalar_a_, one_, 4);
    }
    b_.DmaStore32(total, scalar_b_, one_, 4);
    b_.Halt();
    return b_.finish(1);
  }

  // grad_input, grad_output, target, weight, total_weight
  Kernel backward() {
    prologue();
    Reg grad_input = b_.reg("grad_input"), grad_output = b_.reg("grad_output"), target = b_.reg("targets");
    Reg weight = b_.reg("class weights"), total = b_.reg("total weight");
    load_arguments({&grad_input, &grad_output, &target, &weight, &total});
    for_each_row(target, weight, nullptr);
    // The picked vector holds grad_output (None) or the scalar gradient (divided by total_weight for Mean).
    if (spec_.reduction == NllReduction::None) {
      b_.DmaLoad32(picked_, grad_output, rows_, 4);
    } else {
      b_.DmaLoad32(scalar_a_, grad_output, one_, 4);
      if (spec_.reduction == NllReduction::Mean) b_.DmaLoad32(scalar_b_, total, one_, 4);
    }
    order(Engine::Dma, Engine::Vector);
    if (spec_.reduction == NllReduction::None) {
      b_.Vmul(ElementType::F32, weights_, weights_, picked_, rows_);
    } else {
      if (spec_.reduction == NllReduction::Mean) b_.Vdiv(ElementType::F32, scalar_a_, scalar_a_, scalar_b_, one_);
      b_.Vmul(ElementType::F32, weights_, weights_, scalar_a_, rows_, 1);
    }
    b_.Vneg(ElementType::F32, weights_, weights_, rows_);
    order(Engine::Vector, Engine::Dma);
    // Scatter: grad_input[i][t_i] = this row's value, for rows whose target is not ignored (checked in range above).
    Reg row = b_.reg("row"), index = b_.reg("target"), slot = b_.reg("weight slot"), dram = b_.reg("DRAM address");
    b_.li(row, 0);
    b_.point(slot, weight_tile_);
    const Label scatter = b_.label(), scattered = b_.label();
    b_.bind(scatter);
    load_index(b_, 8, target, row, index);
    b_.Beq(index, ignore_, scattered);
    element_address(dram, grad_input, row, index);
    b_.DmaStore32(dram, slot, one_, 4);
    b_.bind(scattered);
    b_.Addi(slot, slot, 4);
    b_.bind(slot, weight_tile_);
    b_.Addi(row, row, 1);
    b_.Bltu(row, rows_, scatter);
    b_.Halt();
    return b_.finish(1);
  }

 private:
  void prologue() {
    b_.describe(fmt::format("{}: {} rows x {} classes, {}, reduction {}, ignore_index {}", b_.name(), spec_.rows,
                            spec_.classes, spec_.weighted ? "weighted" : "unweighted",
                            static_cast<int>(spec_.reduction), spec_.ignore_index));
    picked_tile_ = b_.tile(Space::Scratchpad, spec_.rows * 4, "picked", /*ordered=*/false);
    weight_tile_ = b_.tile(Space::Scratchpad, spec_.rows * 4, "weights", /*ordered=*/false);
    const Tile scalars = b_.tile(Space::Scratchpad, 8, "scalars", /*ordered=*/false);
    rows_ = b_.reg("rows");
    classes_ = b_.reg("classes");
    ignore_ = b_.reg("ignore_index");
    one_ = b_.reg("one");
    b_.li(rows_, spec_.rows);
    b_.li(classes_, spec_.classes);
    b_.li(ignore_, spec_.ignore_index);
    b_.li(one_, 1);
    picked_ = b_.reg("picked vector");
    weights_ = b_.reg("weight vector");
    scalar_a_ = b_.reg("first scalar");
    scalar_b_ = b_.reg("second scalar");
    b_.point(picked_, picked_tile_);
    b_.point(weights_, weight_tile_);
    b_.point(scalar_a_, scalars);
    b_.point(scalar_b_, scalars, 4);
  }

  void load_arguments(std::initializer_list<Reg*> addresses) {
    int offset = 0;
    for (Reg* address : addresses) {
      b_.Ld(*address, kArgumentBlock, offset);
      offset += 8;
    }
  }

  // `to` waits until `from` has finished what it was given (the tiles are unordered, see the top of the file).
  void order(Engine from, Engine to) {
    const int semaphore = b_.semaphore();
    if (from == Engine::Dma) {
      b_.SemPostDma(semaphore);
    } else {
      b_.SemPostVector(semaphore);
    }
    if (to == Engine::Dma) {
      b_.SemWaitDma(semaphore);
    } else {
      b_.SemWaitVector(semaphore);
    }
  }

  // dram = base + (row * classes + target) * 4
  void element_address(R dram, R base, R row, R target) {
    b_.Mul(dram, row, classes_);
    b_.Add(dram, dram, target);
    b_.Slli(dram, dram, 2);
    b_.Add(dram, dram, base);
  }

  // Fills the weight vector (and, forward, the picked vector from `input`) row by row, trapping on a target out of
  // range.
  void for_each_row(R targets, R weights, const Reg* input) {
    Reg row = b_.reg("row"), target = b_.reg("target"), dram = b_.reg("DRAM address");
    Reg picked_slot = b_.reg("picked slot"), weight_slot = b_.reg("weight slot");
    b_.li(row, 0);
    if (input) b_.point(picked_slot, picked_tile_);
    b_.point(weight_slot, weight_tile_);
    const Label next = b_.label(), ignored = b_.label(), in_range = b_.label(), done = b_.label();
    b_.bind(next);
    load_index(b_, 8, targets, row, target);
    b_.Beq(target, ignore_, ignored);
    b_.Bltu(target, classes_, in_range);  // unsigned: a negative target fails too
    b_.RaiseTrap(kIndexOutOfRangeTrap);
    b_.bind(in_range);
    if (input) {
      element_address(dram, *input, row, target);
      b_.DmaLoad32(picked_slot, dram, one_, 4);
    }
    if (spec_.weighted) {
      b_.Slli(dram, target, 2);
      b_.Add(dram, dram, weights);
      b_.DmaLoad32(weight_slot, dram, one_, 4);
    } else {
      b_.Vfill(ElementType::F32, weight_slot, one_, std::bit_cast<int32_t>(1.0f));
    }
    b_.Jal(kZero, done);
    b_.bind(ignored);  // contributes nothing, and nothing to the total weight
    if (input) b_.Vfill(ElementType::F32, picked_slot, one_, 0);
    b_.Vfill(ElementType::F32, weight_slot, one_, 0);
    b_.bind(done);
    if (input) {
      b_.Addi(picked_slot, picked_slot, 4);
      b_.bind(picked_slot, picked_tile_);
    }
    b_.Addi(weight_slot, weight_slot, 4);
    b_.bind(weight_slot, weight_tile_);
    b_.Addi(row, row, 1);
    b_.Bltu(row, rows_, next);
  }

  NllLossSpec spec_;
  KernelBuilder b_;  // before the registers, which it must outlive
  Tile picked_tile_, weight_tile_;
  Reg rows_, classes_, ignore_, one_, picked_, weights_, scalar_a_, scalar_b_;
};

}  // namespace

Kernel emit_nll_loss(const NllLossSpec& spec, const config::ChipConfig& config) {
  return NllEmitter(spec, config, "nll_loss_f32").forward();
}

Kernel emit_nll_loss_backward(const NllLossSpec& spec, const config::ChipConfig& config) {
  return NllEmitter(spec, config, "nll_loss_backward_f32").backward();
}

}  // namespace npusim::emitter
