// A fused GEMM kernel (fused_gemm.h): the GEMM loop computes each block of C, and the spec's program runs on it as the
// loop's epilogue. The program is planned once (fused_plan.h) with rows of one element, so every value is a tile of a
// block's elements in the staging tile's sub-tile layout and each vector step runs over the block's elements. A load
// is moved into its tile by the loop's block moves with the load's own strides (so a bias's zero stride broadcasts
// it), a store out of its tile likewise; a Product node is the staged f32 block itself, or rounded from it by vcvt.
// The builder orders the matrix engine's staging, the moves and the vector steps by the tiles they touch.
#include "fused_gemm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "fused_plan.h"
#include "fused_spec.h"
#include "fused_steps.h"
#include "gemm_loop.h"

namespace npusim::emitter {
namespace {

using fused::Ref;
using fused::Step;
using isa::ElementType;

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

gemm::Operands operands(const FusedMatmul& product) {
  gemm::Operands o;
  o.type = product.type;
  o.batch = product.batch;
  o.m = product.m;
  o.n = product.n;
  o.k = product.k;
  o.a_argument = product.a_argument;
  o.b_argument = product.b_argument;
  o.a_offset = product.a_offset;
  o.a_row = product.a_row;
  o.a_col = product.a_col;
  o.a_batch = product.a_batch;
  o.b_offset = product.b_offset;
  o.b_row = product.b_row;
  o.b_col = product.b_col;
  o.b_batch = product.b_batch;
  return o;
}

class FusedEpilogue : public gemm::Epilogue {
 public:
  FusedEpilogue(const FusedSpec& spec, const config::ChipConfig& config)
      : spec_(spec), plan_(spec, 1, std::vector<char>(spec.stores.size(), 0)) {
    for (size_t i = 0; i < spec.nodes.size(); ++i)
      if (fused::is_reduction(spec.nodes[i].op))
        unsupported(fmt::format("node {} ({}) reduces, and a product's epilogue has nothing to reduce over", i,
                                fused::op_name(spec.nodes[i].op)));
      else if (spec.nodes[i].op == FusedOpcode::Gather || spec.nodes[i].op == FusedOpcode::ScatterAdd)
        unsupported(fmt::format("node {} ({}) moves by index, which a product's epilogue does not", i,
                                fused::op_name(spec.nodes[i].op)));
    if (spec.matmul->k < 1) unsupported("a product over k = 0");
    for (size_t k = 0; k < spec.loads.size() + spec.stores.size(); ++k) {
      const FusedAccess& view = access(static_cast<int>(k));
      const auto [batch, row, column] = strides(view);
      for (int64_t stride : {row, column})
        if (!gemm::Loop::stride_fits(stride, static_cast<int64_t>(isa::element_bytes(view.type)), config))
          unsupported(fmt::format("{} {} has stride {}, beyond the DMA's immediates", is_load(k) ? "load" : "store",
                                  is_load(k) ? k : k - spec.loads.size(), stride));
    }
  }

  ElementType staged_type() const override { return ElementType::F32; }
  int64_t bytes_per_output() const override {
    int64_t bytes = 0;
    for (const fused::Slot& slot : plan_.slots()) bytes += slot.element_bytes;
    return bytes;
  }
  int64_t fixed_bytes() const override {
    return 64 * static_cast<int64_t>(plan_.slots().size()) +
           (plan_.has_scalars() ? round_up(plan_.scalar_tile_bytes(), 64) : 0);
  }

  void prepare(gemm::Loop& loop) override {
    KernelBuilder& b = loop.builder();
    describe(b);
    const std::vector<fused::Slot>& slots = plan_.slots();
    slot_tiles_.resize(loop.sets());
    for (int set = 0; set < loop.sets(); ++set)
      for (size_t k = 0; k < slots.size(); ++k)
        slot_tiles_[set].push_back(b.tile(Space::Scratchpad, plan_.slot_bytes(slots[k], loop.block_outputs()),
                                          fmt::format("epilogue {} {}", set, k)));
    if (!plan_.has_scalars()) return;
    scalar_tile_ = b.tile(Space::Scratchpad, plan_.scalar_tile_bytes(), "constants");
    Reg first = b.reg("constant"), second = b.reg("constant in f32");
    plan_.fill_scalars(b, *scalar_tile_, loop.one(), first, second);
  }

  // The plan's steps on the block: moves of the loads and stores, vector steps over the block's elements; compute
  // takes them up to the stores the plan ends with, store those.
  void compute(gemm::Loop& loop, const gemm::Block& block, int set) override {
    emit_steps(loop, block, set, 0, trailing_stores());
  }
  void store(gemm::Loop& loop, const gemm::Block& block, int set) override {
    emit_steps(loop, block, set, trailing_stores(), plan_.steps().size());
  }

 private:
  [[noreturn]] void unsupported(const std::string& what) const {
    throw Unsupported(fmt::format("fused kernel {}: {}", spec_.name, what));
  }
  bool is_load(size_t k) const { return k < spec_.loads.size(); }
  const FusedAccess& access(int k) const { return is_load(k) ? spec_.loads[k] : spec_.stores[k - spec_.loads.size()]; }
  // An access's strides over the batch (0 for one product), the rows and the columns of C.
  std::tuple<int64_t, int64_t, int64_t> strides(const FusedAccess& view) const {
    const std::vector<int64_t>& s = view.strides;
    if (s.size() == 3) return {s[0], s[1], s[2]};
    return {0, s[0], s[1]};
  }
  const Tile& tile_of(gemm::Loop& loop, Ref ref, int set) const {
    return ref.kind == Ref::Kind::Product ? loop.staging(set) : slot_tiles_.at(set).at(ref.index);
  }
  // The index of the first of the stores the plan ends with.
  size_t trailing_stores() const {
    const std::vector<Step>& steps = plan_.steps();
    size_t first = steps.size();
    while (first > 0 && steps[first - 1].access >= static_cast<int>(spec_.loads.size())) --first;
    return first;
  }

  void emit_steps(gemm::Loop& loop, const gemm::Block& block, int set, size_t begin, size_t end) {
    KernelBuilder& b = loop.builder();
    const auto point = [&](Reg& reg, Ref ref) -> R {
      if (ref.kind == Ref::Kind::Scalar) {
        b.point(reg, *scalar_tile_, fused::kScalarBytes * ref.index);
      } else {
        b.point(reg, tile_of(loop, ref, set));
      }
      return reg;
    };
    for (size_t k = begin; k < end; ++k) {
      const Step& step = plan_.steps()[k];
      if (step.access >= 0) {
        move(loop, block, step, set);
        continue;
      }
      Reg destination = b.reg("destination"), first = b.reg("first source"), second = b.reg("second source");
      fused::emit_vector_step(b, step, block.outputs, block.outputs, kZero, destination, first, second, point);
    }
  }

  // A load into its tile, or a store out of it, with the access's strides.
  void move(gemm::Loop& loop, const gemm::Block& block, const Step& step, int set) {
    KernelBuilder& b = loop.builder();
    const FusedAccess& view = access(step.access);
    const bool load = is_load(step.access);
    const auto bytes = static_cast<int64_t>(isa::element_bytes(view.type));
    const auto [batch, row, column] = strides(view);
    Reg dram = b.reg("DRAM"), spad = b.reg("epilogue tile");
    b.Ld(dram, kArgumentBlock, 8 * view.argument);
    b.add_constant(dram, view.offset * bytes);
    loop.point_at(dram, dram, block, row, column, batch, bytes);
    const Tile& tile = tile_of(loop, step.first, set);
    b.point(spad, tile);
    loop.move_block(load, spad, tile, dram, block, row, column, bytes);
  }

  void describe(KernelBuilder& b) const {
    const FusedMatmul& product = *spec_.matmul;
    b.describe(
        fmt::format("{}: sizes [{}]: {} x [{} x {}] @ [{} x {}] of {} (A argument {}, B argument {}), then {} "
                    "epilogue steps over {} block-shaped slots",
                    spec_.name, fmt::join(spec_.sizes, ", "), product.batch, product.m, product.k, product.k, product.n,
                    isa::type_name(product.type), product.a_argument, product.b_argument, plan_.steps().size(),
                    plan_.slots().size()));
    for (size_t k = 0; k < spec_.loads.size() + spec_.stores.size(); ++k) {
      const FusedAccess& view = access(static_cast<int>(k));
      b.describe(fmt::format("{} {}: argument {}, {}, offset {}, strides [{}]", is_load(k) ? "load" : "store",
                             is_load(k) ? k : k - spec_.loads.size(), view.argument, isa::type_name(view.type),
                             view.offset, fmt::join(view.strides, ", ")));
    }
  }

  const FusedSpec& spec_;
  fused::Plan plan_;
  std::vector<std::vector<Tile>> slot_tiles_;  // per set
  std::optional<Tile> scalar_tile_;
};

}  // namespace

Kernel emit_fused_gemm(const FusedSpec& spec, const config::ChipConfig& config, const std::string& name) {
  FusedEpilogue epilogue(spec, config);
  gemm::Loop loop(operands(*spec.matmul), epilogue, name, config);
  return loop.build();
}

}  // namespace npusim::emitter
