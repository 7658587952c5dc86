// The looped-row kernel (fused_looped.h). The cores take rows c, c + n, ...; a row's reduced space is cut as the
// tiled kernel cuts its outer space: the innermost reduced dimensions whole (a block) while they fit, then chunks of
// the next one, the dimensions outside it walked by counters. Each access of a chunk is then one DMA of at most four
// dimensions. Chunks are numbered along the row and a chunk's position is computed from its number, so that a pass
// can load the next chunk while it computes this one: two sets of slots where they leave chunks of a useful size
// (the carries, one per reduction, are shared), and each pass's loop double-buffered as the tiled kernel's is.
//
// Segments reduced whole (a foreach norm): each segment is a row of its own length and arguments, listed in a table in
// the kernel's .data (per segment: its elements, and where its arguments start); the cores take segments in turn.
#include "fused_looped.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>

#include "fused_layout.h"
#include "fused_plan.h"
#include "fused_spec.h"
#include "fused_steps.h"
#include "units_across_cores.h"

namespace npusim::emitter::fused {
namespace {

constexpr int kPointerRegisters = 4;  // arguments whose addresses stay in registers; the others are loaded per use
constexpr int64_t kSinkBytes = 64;    // the tile a prefetch's sync is taken through (see emit_double_buffered_chunks)
// The shortest chunk worth a second set of slots: below it, the chunk loop's scalar work and the DMAs' fixed costs
// would outweigh the overlap.
constexpr int64_t kMinDoubleBufferedChunk = 512;

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

class LoopedRowEmitter {
 public:
  LoopedRowEmitter(const FusedSpec& spec, const config::ChipConfig& config, const std::string& name)
      : spec_(spec), config_(config), layout_(collapse(spec)), b_(name, config) {
    refuse_what_cannot_be_looped();
    for (const FusedAccess& access : spec.loads) accesses_.push_back(&access);
    for (const FusedAccess& access : spec.stores) accesses_.push_back(&access);
    for (size_t k = 0; k < spec.stores.size(); ++k)
      store_varies_.push_back(layout_.varies_along_rows(static_cast<int>(spec.loads.size() + k)));
    choose_chunks();
    assign_passes();
  }

  Kernel build() {
    describe();
    slot_tiles_.resize(sets_);
    for (size_t k = 0; k < plan_->slots().size(); ++k)
      for (int set = 0; set < sets_; ++set)
        slot_tiles_[set].push_back(
            set > 0 && plan_->slots()[k].kept  // a carry: one for the row, whichever set a chunk is in
                ? slot_tiles_[0][k]
                : b_.tile(Space::Scratchpad, plan_->slot_bytes(plan_->slots()[k], 1),
                          fmt::format("slot {} of set {}", k, set)));
    if (sets_ == 2) sink_ = b_.tile(Space::Scratchpad, kSinkBytes, "prefetch sink");
    if (plan_->has_scalars()) scalar_tile_ = b_.tile(Space::Scratchpad, plan_->scalar_tile_bytes(), "constants");
    if (plan_->has_arguments()) argument_tile_ = b_.tile(Space::Scratchpad, plan_->argument_tile_bytes(), "arguments");
    if (segmented()) {
      std::vector<uint64_t> words;
      for (const FusedSegment& segment : spec_.segments) {
        words.push_back(static_cast<uint64_t>(segment.elements));
        words.push_back(static_cast<uint64_t>(8 * int64_t{segment.first_argument}));
      }
      segment_table_ = b_.data(words);
    }
    allocate_registers();
    b_.li(one_, 1);
    if (plan_->has_scalars()) plan_->fill_scalars(b_, *scalar_tile_, one_, first_, second_);

    for_each_unit_across_cores(
        b_, row_, rows_, cores_,
        [&] {
          emit_row_position();
          emit_steps(prologue_, 0);
          for (size_t pass = 0; pass < passes_.size(); ++pass) {
            for (const Carry& carry : plan_->carries())
              if (depth_[carry.node] == static_cast<int>(pass)) {
                b_.point(destination_, slot_tiles_[0][carry.slot.index]);
                b_.Vfill(carry.type, destination_, one_, carry.identity);
                for (const Ref counter : {carry.index, carry.offset})
                  if (counter.kind == Ref::Kind::Slot) {
                    b_.point(destination_, slot_tiles_[0][counter.index]);
                    b_.Vfill(isa::ElementType::I64, destination_, one_, 0);
                  }
              }
            emit_chunks(passes_[pass]);
          }
          if (!full_stores_.empty()) emit_chunks(full_stores_);
          emit_steps(row_stores_, 0);
        },
        scratch_);
    b_.Halt();
    return b_.finish(cores_);
  }

 private:
  void refuse_what_cannot_be_looped() const {
    const auto refuse = [&](const std::string& what) {
      throw Unsupported(
          fmt::format("fused kernel {}: a row of {} elements does not fit the {}-byte scratchpad, and "
                      "rows walked in chunks cannot have {}",
                      spec_.name, layout_.row_length, config_.scratchpad_bytes(), what));
    };
    if (segmented() && spec_.reduced_dims != 1) refuse("segments that are not each reduced whole");
    if (layout_.positions >= 0) refuse("random numbers");
    for (const FusedNode& node : spec_.nodes)
      if (node.op == FusedOpcode::Gather || node.op == FusedOpcode::ScatterAdd || node.op == FusedOpcode::CheckIndex)
        refuse(fmt::format("indexed accesses ({})", op_name(node.op)));
    if (layout_.outer.size() > static_cast<size_t>(kMaxLoopDims))
      refuse(fmt::format("{} outer dimensions", layout_.outer.size()));
  }

  // A plan for the whole row tells which slots the program needs; a chunk is then as many elements as they leave
  // room for. The block is the innermost reduced dimensions that fit whole, the chunk a run of the next one.
  void choose_chunks() {
    const Plan whole(spec_, layout_.row_length, store_varies_, /*looped_rows=*/true);
    // The elements of a chunk that `sets` sets of slots leave room for (the carries are not doubled).
    const auto capacity_with = [&](int sets) {
      int64_t usable = static_cast<int64_t>(config_.scratchpad_bytes()) -
                       (whole.has_scalars() ? round_up(whole.scalar_tile_bytes(), 64) : 0) -
                       (whole.has_arguments() ? round_up(whole.argument_tile_bytes(), 64) : 0) -
                       (sets == 2 ? kSinkBytes : 0);
      int64_t bytes_per_element = 0;
      for (const Slot& slot : whole.slots()) {
        const int copies = slot.kept ? 1 : sets;
        usable -= 64 * copies;  // each slot's rounding to 64 bytes, at most
        if (slot.shape == Shape::Full) {
          bytes_per_element += slot.element_bytes * copies;
        } else {
          usable -= whole.slot_bytes(slot, 1) * copies;
        }
      }
      return bytes_per_element > 0 ? usable / bytes_per_element : int64_t{0};
    };
    // The block and the chunk for `capacity` elements; false when not one block fits.
    const std::vector<int64_t>& reduced = layout_.reduced;
    const auto cut = [&](int64_t capacity) {
      chunk_dim_ = static_cast<int>(reduced.size()) - 1;
      block_ = 1;
      while (chunk_dim_ > 0 && block_ * reduced[chunk_dim_] <= capacity) block_ *= reduced[chunk_dim_--];
      chunk_ = std::min(reduced[chunk_dim_], capacity / block_);
      if (chunk_ < reduced[chunk_dim_] && chunk_ >= 128) chunk_ = chunk_ / 64 * 64;
      return chunk_ >= 1;
    };
    sets_ = 2;
    if (!cut(capacity_with(2)) || chunk_ * block_ < kMinDoubleBufferedChunk) {
      sets_ = 1;
      const int64_t capacity = capacity_with(1);
      if (capacity < 1)
        throw Unsupported(fmt::format("fused kernel {}: its {} slots do not fit the {}-byte scratchpad", spec_.name,
                                      whole.slots().size(), config_.scratchpad_bytes()));
      if (!cut(capacity))
        throw Unsupported(
            fmt::format("fused kernel {}: a block of {} elements does not fit the scratchpad", spec_.name, block_));
    }
    plan_.emplace(spec_, chunk_ * block_, store_varies_, /*looped_rows=*/true);
    for (const Carry& carry : plan_->carries())
      if (carry.index.kind != Ref::Kind::None && layout_.reduced.size() != 1)
        throw Unsupported(
            fmt::format("fused kernel {}: the index of an extremum over a row too long for the "
                        "scratchpad needs one reduced dimension, not [{}]",
                        spec_.name, fmt::join(layout_.reduced, ", ")));
    rows_ = segmented() ? static_cast<int64_t>(spec_.segments.size()) : 1;
    for (const int64_t size : layout_.outer) rows_ *= size;
    cores_ = cores_for_units(rows_, config_);
  }

  // Each reduction's depth: how many reductions its operand waits for (a layer norm's mean 0, its variance 1). Pass
  // p computes the reductions of depth p from what they read, the carried reductions excepted; then the stores.
  void assign_passes() {
    const auto count = static_cast<int>(spec_.nodes.size());
    std::vector<int> level(count, 0);  // reductions below the value
    depth_.assign(count, -1);
    for (int i = 0; i < count; ++i) {
      const FusedNode& node = spec_.nodes[i];
      const int operands[] = {node.a, node.b, node.c};
      for (int k = 0; k < operand_count(node.op); ++k) level[i] = std::max(level[i], level[operands[k]]);
      if (is_reduction(node.op)) depth_[i] = level[i]++;
    }
    const int deepest = *std::max_element(depth_.begin(), depth_.end());
    std::vector<std::vector<char>> in_pass(deepest + 1);
    for (int pass = 0; pass <= deepest; ++pass) {
      std::vector<int> roots;
      for (int i = 0; i < count; ++i)
        if (depth_[i] == pass) roots.push_back(i);
      in_pass[pass] = what_computes(roots);
    }
    std::vector<int> full, per_row;
    for (int i = 0; i < count; ++i)
      if (spec_.nodes[i].op == FusedOpcode::Store) (store_varies_[spec_.nodes[i].access] ? full : per_row).push_back(i);
    const std::vector<char> in_full = what_computes(full), in_per_row = what_computes(per_row);
    passes_.resize(deepest + 1);
    for (size_t k = 0; k < plan_->steps().size(); ++k) {
      const int node = plan_->steps()[k].node;
      if (node < 0) {
        prologue_.push_back(k);
        continue;
      }
      for (int pass = 0; pass <= deepest; ++pass)
        if (in_pass[pass][node]) passes_[pass].push_back(k);
      if (in_full[node]) full_stores_.push_back(k);
      if (in_per_row[node]) row_stores_.push_back(k);
    }
  }

  // The roots and what they read, down to (not into) the reductions they read, which are carried.
  std::vector<char> what_computes(const std::vector<int>& roots) const {
    std::vector<char> marked(spec_.nodes.size(), 0);
    std::vector<int> pending;
    for (const int root : roots) {
      marked[root] = 1;
      pending.push_back(root);
    }
    while (!pending.empty()) {
      const FusedNode& node = spec_.nodes[pending.back()];
      pending.pop_back();
      const int operands[] = {node.a, node.b, node.c};
      for (int k = 0; k < operand_count(node.op); ++k)
        if (!marked[operands[k]] && !is_reduction(spec_.nodes[operands[k]].op)) {
          marked[operands[k]] = 1;
          pending.push_back(operands[k]);
        }
    }
    return marked;
  }

  void describe() {
    b_.describe(fmt::format("{}: sizes [{}], {} reduced; collapsed outer [{}], reduced [{}]", spec_.name,
                            fmt::join(spec_.sizes, ", "), spec_.reduced_dims, fmt::join(layout_.outer, ", "),
                            fmt::join(layout_.reduced, ", ")));
    b_.describe(fmt::format(
        "looped rows: {} rows on {} cores; chunks of {} of reduced dimension {} x {}; {} "
        "reduction passes, {} slots, {} set{}",
        rows_, cores_, chunk_, chunk_dim_, block_, passes_.size(), plan_->slots().size(), sets_, sets_ > 1 ? "s" : ""));
  }

  bool segmented() const { return !spec_.segments.empty(); }

  void allocate_registers() {
    row_ = b_.reg("row");
    one_ = b_.reg("one");
    if (segmented()) {
      segment_ = b_.reg("segment's arguments");
      segment_elements_ = b_.reg("segment's elements");
    } else {
      for (size_t d = 0; d < layout_.outer.size(); ++d)
        outer_index_.push_back(b_.reg(fmt::format("outer index {}", d)));
    }
    for (int d = 0; d < chunk_dim_; ++d) reduced_index_.push_back(b_.reg(fmt::format("reduced index {}", d)));
    chunk_number_ = b_.reg("chunk");
    chunks_ = b_.reg("chunks in the row");
    if (sets_ == 2) {
      previous_ = b_.reg("previous chunk");
      next_ = b_.reg("next chunk");
    }
    chunk_start_ = b_.reg("chunk start");
    chunk_count_ = b_.reg("chunk count");
    cols_ = b_.reg("chunk elements");
    destination_ = b_.reg("destination");
    first_ = b_.reg("first source");
    second_ = b_.reg("second source");
    address_ = b_.reg("DRAM address");
    scratch_ = b_.reg("scratch");
    count_ = b_.reg("DMA count");
    stride_ = b_.reg("DMA stride");
    if (!segmented()) pointers_ = pointer_registers(b_, accesses_, kPointerRegisters);
  }

  // The row's index in each outer dimension, or its segment's entry of the table.
  void emit_row_position() {
    if (segmented()) {
      b_.La(address_, *segment_table_);
      b_.Slli(scratch_, row_, 4);
      b_.Add(address_, address_, scratch_);
      b_.Ld(segment_elements_, address_, 0);
      b_.Ld(segment_, address_, 8);
      return;
    }
    b_.move(address_, row_);
    for (int d = static_cast<int>(layout_.outer.size()) - 1; d >= 0; --d) {
      if (d == 0) {
        b_.move(outer_index_[0], address_);
        break;
      }
      b_.li(scratch_, layout_.outer[d]);
      b_.Remu(outer_index_[d], address_, scratch_);
      b_.Divu(address_, address_, scratch_);
    }
  }

  // The chunks of the row, in the register chunks_: the runs of the chunk's dimension, times the chunks of a run
  // (a segment: of its own length).
  void emit_chunk_total() {
    if (segmented()) {  // ceil(elements / chunk)
      b_.move(chunks_, segment_elements_);
      b_.add_constant(chunks_, chunk_ - 1);
      b_.li(scratch_, chunk_);
      b_.Divu(chunks_, chunks_, scratch_);
      return;
    }
    int64_t runs = 1;
    for (int d = 0; d < chunk_dim_; ++d) runs *= layout_.reduced[d];
    b_.li(chunks_, runs * chunks_per_run());
  }
  int64_t chunks_per_run() const { return (layout_.reduced[chunk_dim_] + chunk_ - 1) / chunk_; }

  // Where the chunk numbered in `number` lies: its first element along the chunk's dimension, the indices of the
  // reduced dimensions outside it, and its counts (the last chunk of a run may be short).
  void emit_chunk_position(R number) {
    if (chunk_dim_ == 0) {  // one run (a segment is reduced over one dimension)
      b_.move(chunk_start_, number);
    } else {
      b_.li(scratch_, chunks_per_run());
      b_.Remu(chunk_start_, number, scratch_);
      b_.Divu(address_, number, scratch_);
      for (int d = chunk_dim_ - 1; d >= 0; --d) {
        if (d == 0) {
          b_.move(reduced_index_[0], address_);
          break;
        }
        b_.li(scratch_, layout_.reduced[d]);
        b_.Remu(reduced_index_[d], address_, scratch_);
        b_.Divu(address_, address_, scratch_);
      }
    }
    b_.mul_constant(chunk_start_, chunk_);
    if (!segmented() && layout_.reduced[chunk_dim_] % chunk_ == 0) {
      b_.li(chunk_count_, chunk_);
    } else {  // min(chunk, size - chunk start)
      const Label sized = b_.label();
      if (segmented()) {
        b_.move(chunk_count_, segment_elements_);
      } else {
        b_.li(chunk_count_, layout_.reduced[chunk_dim_]);
      }
      b_.Sub(chunk_count_, chunk_count_, chunk_start_);
      b_.li(scratch_, chunk_);
      b_.Bltu(chunk_count_, scratch_, sized);
      b_.move(chunk_count_, scratch_);
      b_.bind(sized);
    }
    b_.move(cols_, chunk_count_);
    b_.mul_constant(cols_, block_);
  }

  // The steps over every chunk of the row, double-buffered where there are two sets and the steps load something
  // ahead into slots (the arguments' loads are the row's prologue). A segment of no elements has no chunks.
  void emit_chunks(const std::vector<size_t>& steps) {
    const DoubleBufferedSteps split =
        split_for_double_buffering(plan_->steps(), steps, static_cast<int>(spec_.loads.size()), plan_->slots().size(),
                                   [](const Step&) { return true; });
    const bool prefetches_into_slots =
        !split.prefetched.empty() && std::all_of(split.prefetched.begin(), split.prefetched.end(), [&](size_t k) {
          return plan_->steps()[k].first.kind == Ref::Kind::Slot;
        });
    emit_chunk_total();
    if (sets_ == 2 && prefetches_into_slots) {
      emit_double_buffered_chunks(split);
      return;
    }
    const Label chunk = b_.label(), done = b_.label();
    b_.move(chunk_number_, kZero);
    b_.Beq(chunks_, kZero, done);
    b_.bind(chunk);
    emit_chunk_position(chunk_number_);
    emit_steps(steps, 0);
    b_.Addi(chunk_number_, chunk_number_, 1);
    b_.Bltu(chunk_number_, chunks_, chunk);
    b_.bind(done);
  }

  // The chunk loop double-buffered as the tiled kernel's tile loop (fused_steps.h, emit_double_buffered_loop); the
  // carries are shared by both sets.
  void emit_double_buffered_chunks(const DoubleBufferedSteps& split) {
    emit_double_buffered_loop(b_, split,
                              {.current = chunk_number_,
                               .next = next_,
                               .previous = previous_,
                               .start =
                                   [&](Label none) {
                                     b_.move(chunk_number_, kZero);
                                     b_.Beq(chunks_, kZero, none);
                                     b_.move(previous_, chunks_);  // none yet
                                   },
                               .bound = [&]() -> R { return chunks_; },
                               .advance = [&] { b_.Addi(next_, chunk_number_, 1); },
                               .position = [&](R chunk) { emit_chunk_position(chunk); },
                               .sync =
                                   [&](int set) {
                                     const Step& load = plan_->steps()[split.prefetched.front()];
                                     b_.point(destination_, *sink_);
                                     point(first_, load.first, set);
                                     b_.Vmov(fused::moved_type(load.type), destination_, first_, one_);
                                   },
                               .steps = [&](const std::vector<size_t>& steps, int set) { emit_steps(steps, set); }});
  }

  void emit_steps(const std::vector<size_t>& steps, int set) {
    for (const size_t k : steps) emit(plan_->steps()[k], set);
  }

  R point(Reg& reg, Ref ref, int set) {
    if (ref.kind == Ref::Kind::Slot) b_.point(reg, slot_tiles_[set][ref.index]);
    if (ref.kind == Ref::Kind::Scalar) b_.point(reg, *scalar_tile_, kScalarBytes * ref.index);
    if (ref.kind == Ref::Kind::Argument) b_.point(reg, *argument_tile_, kScalarBytes * ref.index);
    return reg;
  }
  R count_of(Shape shape) const { return shape == Shape::Full ? R(cols_) : R(one_); }

  void emit(const Step& s, int set) {
    const auto point_in_set = [&](Reg& reg, Ref ref) { return point(reg, ref, set); };
    if (s.access >= 0) {
      emit_dma(s, point_in_set(first_, s.first));
    } else if (s.argument >= 0) {
      if (segmented()) b_.Add(second_, kArgumentBlock, segment_);
      fused::emit_argument_load(b_, s, segmented() ? R(second_) : kArgumentBlock, point_in_set(first_, s.first),
                                count_of(s.shape), address_, count_);
    } else {
      emit_vector_step(b_, s, count_of(s.shape), one_, cols_, destination_, first_, second_, point_in_set);
    }
  }

  void add_index(R to, R index, int64_t stride) { add_scaled(b_, to, index, stride, scratch_); }

  using Dim = MoveDim;  // count 0: the chunk's, in chunk_count_
  // A full step's dimensions in access a, innermost first: the block's, then the chunk's; neighbours contiguous in
  // the access merge.
  std::vector<Dim> chunk_dims(int a) const {
    std::vector<Dim> dims;
    for (int d = static_cast<int>(layout_.reduced.size()) - 1; d > chunk_dim_; --d) {
      const int64_t count = layout_.reduced[d], stride = layout_.reduced_strides[a][d];
      if (!dims.empty() && stride == dims.back().count * dims.back().stride) {
        dims.back().count *= count;
      } else {
        dims.push_back({count, stride});
      }
    }
    const int64_t stride = layout_.reduced_strides[a][chunk_dim_];
    if (dims.size() == 1 && stride == dims[0].count * dims[0].stride) return {{0, dims[0].stride}};  // one run
    dims.push_back({0, stride});
    return dims;
  }

  // One access of the chunk (a full step) or of the row's one element (a per-row step), to or from `spad`.
  void emit_dma(const Step& s, R spad) {
    const FusedAccess& access = *accesses_[s.access];
    const bool load = s.access < static_cast<int>(spec_.loads.size());
    const auto bytes = static_cast<int64_t>(isa::element_bytes(access.type));
    if (segmented()) {
      b_.Add(address_, kArgumentBlock, segment_);
      b_.Ld(address_, address_, 8 * access.argument);
    } else if (const auto pointer = pointers_.find(access.argument); pointer != pointers_.end()) {
      b_.move(address_, pointer->second);
    } else {
      b_.Ld(address_, kArgumentBlock, 8 * access.argument);
    }
    b_.add_constant(address_, access.offset * bytes);
    for (size_t d = 0; d < outer_index_.size(); ++d)
      add_index(address_, outer_index_[d], layout_.outer_strides[s.access][d]);
    if (s.shape != Shape::Full) {  // one element
      emit_strided_move(b_, spec_.name, load, bytes, spad, address_, {{1, 0}}, one_, one_, count_, stride_);
      return;
    }
    for (int d = 0; d < chunk_dim_; ++d) add_index(address_, reduced_index_[d], layout_.reduced_strides[s.access][d]);
    add_index(address_, chunk_start_, layout_.reduced_strides[s.access][chunk_dim_]);
    emit_strided_move(b_, spec_.name, load, bytes, spad, address_, chunk_dims(s.access), cols_, chunk_count_, count_,
                      stride_);
  }

  const FusedSpec& spec_;
  config::ChipConfig config_;
  Layout layout_;
  std::vector<const FusedAccess*> accesses_;  // loads, then stores
  std::vector<char> store_varies_;            // per store: whether it writes different elements along a row
  std::optional<Plan> plan_;

  int chunk_dim_ = 0;  // the reduced dimension cut into chunks
  int64_t block_ = 1, chunk_ = 1, rows_ = 1, cores_ = 1;
  int sets_ = 1;                             // of the slots other than the carries
  std::vector<int> depth_;                   // per node: a reduction's pass, else -1
  std::vector<std::vector<size_t>> passes_;  // per pass: its steps
  std::vector<size_t> prologue_, full_stores_, row_stores_;

  KernelBuilder b_;                            // before the registers, which it must outlive
  std::vector<std::vector<Tile>> slot_tiles_;  // per set, per slot (a carry's tile is in every set)
  std::optional<Tile> scalar_tile_, argument_tile_, sink_;
  std::optional<Label> segment_table_;
  Reg row_, one_, chunk_number_, chunks_, previous_, next_, chunk_start_, chunk_count_, cols_, segment_,
      segment_elements_;
  std::vector<Reg> outer_index_, reduced_index_;
  Reg destination_, first_, second_, address_, scratch_, count_, stride_;
  std::map<int, Reg> pointers_;
};

}  // namespace

Kernel emit_looped_rows(const FusedSpec& spec, const config::ChipConfig& config, const std::string& name) {
  return LoopedRowEmitter(spec, config, name).build();
}

}  // namespace npusim::emitter::fused
