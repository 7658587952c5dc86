// Fused pointwise and reduction kernels (fused.h): the kernels torch.compile's Inductor backend generates, and the
// eager elementwise ops (elementwise.cpp).
//
// The spec's dataflow program is planned once into steps over scratchpad slots (fused_plan.h). The kernel then walks
// the tiles of the outer space, core c taking tiles c, c + n, ..., and runs the steps on each tile; the builder orders
// the engines by the slots each step touches. A spec with a matrix product is the GEMM loop's epilogue instead
// (fused_gemm.h).
//
// Layout (fused_layout.h): the outer dimensions are ordered by the first store's strides and, like the reduced ones,
// collapsed over every access. A tile is a chunk of one outer dimension, times whole blocks of the small outer
// dimensions inside it, times the whole reduced space, so every access of a tile is one DMA of at most four
// dimensions; when not one row fits the scratchpad, the rows are walked in chunks instead (fused_looped.h). A choice
// the header leaves open: a per-row value stored to a view that varies along the row is broadcast over it.
//
// Segments (a multi-tensor kernel): each segment is cut into tiles of at most the tile's rows, and a table in the
// kernel's .data lists every tile of every segment (its first element, its count and where its arguments start); core
// c takes tiles c, c + n, ... of the table, so the cores share the work of all segments at once, and a tile's accesses
// start from its segment's argument addresses. Arguments' values are loaded per tile into an argument tile (one per
// set of slots, so that double buffering loads the next tile's values while this tile's steps read its own).
#include "npusim/emitter/fused.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <stdexcept>

#include "fused_gemm.h"
#include "fused_layout.h"
#include "fused_looped.h"
#include "fused_plan.h"
#include "fused_spec.h"
#include "fused_steps.h"
#include "units_across_cores.h"

namespace npusim::emitter {
namespace {

using fused::kScalarBytes;
using fused::Layout;
using fused::Ref;
using fused::Shape;
using fused::Slot;
using fused::Step;
using isa::ElementType;
using isa::Opcode;

constexpr int kPointerRegisters = 6;  // arguments whose addresses stay in registers; the others are loaded per use
constexpr int64_t kSinkBytes = 64;    // the tile a prefetch's sync is taken through (see emit_double_buffered_loop)
constexpr int64_t kMinTileElements = 4096;  // the smallest tile worth splitting a kernel's work further for

class FusedEmitter {
 public:
  FusedEmitter(const FusedSpec& spec, const config::ChipConfig& config, std::string name)
      : spec_(spec),
        config_(config),
        layout_(fused::collapse(spec)),
        plan_(spec, layout_.row_length, store_variation(spec, layout_)),
        slots_(plan_.slots()),
        b_(std::move(name), config) {
    for (const FusedAccess& access : spec.loads) accesses_.push_back(&access);
    for (const FusedAccess& access : spec.stores) accesses_.push_back(&access);
    split_steps(/*layout_known=*/false);
    choose_tiles();
    split_steps(/*layout_known=*/true);
    check_positions_run_on();
  }

  Kernel build() {
    describe();
    slot_tiles_.resize(sets_);
    for (int set = 0; set < sets_; ++set)
      for (size_t k = 0; k < slots_.size(); ++k)
        slot_tiles_[set].push_back(b_.tile(Space::Scratchpad, plan_.slot_bytes(slots_[k], tile_rows_),
                                           fmt::format("{} {} of set {}", shape_name(slots_[k].shape), k, set)));
    if (plan_.has_scalars()) scalar_tile_ = b_.tile(Space::Scratchpad, plan_.scalar_tile_bytes(), "constants");
    for (int set = 0; set < sets_ && plan_.has_arguments(); ++set)
      argument_tiles_.push_back(
          b_.tile(Space::Scratchpad, plan_.argument_tile_bytes(), fmt::format("arguments of set {}", set)));
    if (segmented()) tile_table_ = b_.data(tile_table_words_);
    allocate_registers();
    fill_scalars();
    b_.li(cols_, layout_.row_length);
    if (one_element_steps()) b_.li(one_, 1);
    if (sets_ == 2) {
      emit_double_buffered_loop();
    } else {
      for_each_unit_across_cores(
          b_, tile_, tiles_, cores_,
          [&] {
            emit_tile_position(tile_);
            for (const Step& step : plan_.steps()) emit(step, 0);
          },
          scratch_);
    }
    b_.Halt();
    return b_.finish(cores_);
  }

 private:
  // Which steps load a tile ahead, which go out after it, and which stay in place (fused_steps.h). Once the tile's
  // layout is known, a load that needs a vtr is not prefetched: it would put the vector engine behind the next tile's
  // loads.
  void split_steps(bool layout_known) {
    std::vector<size_t> every_step(plan_.steps().size());
    for (size_t k = 0; k < every_step.size(); ++k) every_step[k] = k;
    split_ = fused::split_for_double_buffering(
        plan_.steps(), every_step, static_cast<int>(spec_.loads.size()), slots_.size(),
        [&](const Step& step) { return !(layout_known && transposed_load(step)); });
  }

  // ---- tiles and cores

  static int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }
  // Whether each store writes different elements along a row.
  static std::vector<char> store_variation(const FusedSpec& spec, const Layout& layout) {
    std::vector<char> varies;
    for (size_t k = 0; k < spec.stores.size(); ++k)
      varies.push_back(layout.varies_along_rows(static_cast<int>(spec.loads.size() + k)));
    return varies;
  }
  bool rows_fit(int64_t rows, int64_t bytes) const {
    for (const Slot& slot : slots_) bytes -= plan_.slot_bytes(slot, rows);
    return bytes >= 0;
  }

  // The most rows whose slots fit the scratchpad; then the tile: a chunk of one outer dimension times whole blocks
  // of the small outer dimensions inside it (each block fitting twice, so that several travel in one tile), within
  // the DMA's four dimensions. The tiles are spread over the cores.
  void choose_tiles() {
    const int64_t usable = static_cast<int64_t>(config_.scratchpad_bytes()) -
                           (plan_.has_scalars() ? round_up(plan_.scalar_tile_bytes(), 64) : 0);
    int64_t per_row_bytes = 0, pattern_bytes = 0;  // a pattern's or a single value's slot, whatever the tile's rows
    for (const Slot& slot : slots_) {
      if (slot.shape == Shape::Pattern || slot.shape == Shape::One) pattern_bytes += plan_.slot_bytes(slot, 1);
      per_row_bytes += slot.element_bytes * (slot.shape == Shape::Full  ? layout_.row_length
                                             : slot.shape == Shape::Row ? 1
                                                                        : 0);
    }
    const auto most_rows = [&](int64_t bytes) {
      int64_t rows = std::max<int64_t>(
          0, (bytes - pattern_bytes - 64 * static_cast<int64_t>(slots_.size())) / std::max<int64_t>(1, per_row_bytes));
      while (rows_fit(rows + 1, bytes) && rows < (int64_t{1} << 40)) ++rows;
      return rows;
    };
    // Two sets of slots (and the sink a prefetch's sync goes through) when a row fits each, else one. A kernel that
    // only moves data (a copy) has nothing to overlap its DMA with: one set of tiles twice the size, half the DMAs.
    const int64_t arguments = plan_.has_arguments() ? round_up(plan_.argument_tile_bytes(), 64) : 0;
    int64_t rows = most_rows((usable - kSinkBytes) / 2 - arguments);
    const bool computes = std::any_of(plan_.steps().begin(), plan_.steps().end(),
                                      [](const Step& step) { return step.access < 0 && step.argument < 0; });
    sets_ = rows >= 1 && !split_.prefetched.empty() && computes ? 2 : 1;
    if (sets_ == 1) rows = most_rows(usable - arguments);
    if (rows < 1)
      throw fused::RowTooLong(
          fmt::format("fused kernel {}: a row of {} elements does not fit the {}-byte scratchpad with "
                      "its {} tiles",
                      spec_.name, layout_.row_length, config_.scratchpad_bytes(), slots_.size()));
    if (segmented()) {
      choose_segment_tiles(rows);
      return;
    }
    const std::vector<int64_t>& outer = layout_.outer;
    const int reduced = static_cast<int>(layout_.reduced.size());
    chunk_dim_ = static_cast<int>(outer.size()) - 1;
    block_rows_ = 1;
    while (chunk_dim_ > 0 && reduced + static_cast<int>(outer.size()) - chunk_dim_ + 1 <= fused::kDmaDims &&
           outer[chunk_dim_] * block_rows_ * 2 <= rows) {
      block_rows_ *= outer[chunk_dim_];
      --chunk_dim_;
    }
    if (chunk_dim_ > fused::kMaxLoopDims)
      throw Unsupported(
          fmt::format("fused kernel {}: {} outer dimensions remain after collapsing", spec_.name, outer.size()));
    const int64_t chunk_size = outer[chunk_dim_];
    chunk_ = std::min(chunk_size, rows / block_rows_);
    if (chunk_ < chunk_size && block_rows_ == 1 && chunk_ >= 64) chunk_ = chunk_ / 64 * 64;
    int64_t loop_tiles = 1;
    for (int d = 0; d < chunk_dim_; ++d) loop_tiles *= outer[d];
    // Too few tiles for the cores: smaller chunks, while a tile still has a few thousand elements.
    const auto tile_count = [&] { return loop_tiles * ((chunk_size + chunk_ - 1) / chunk_); };
    if (tile_count() < config_.chip_cores) {
      const int64_t chunks_wanted = (config_.chip_cores + loop_tiles - 1) / loop_tiles;
      const int64_t smallest =
          (kMinTileElements + block_rows_ * layout_.row_length - 1) / (block_rows_ * layout_.row_length);
      chunk_ = std::min(chunk_, std::max((chunk_size + chunks_wanted - 1) / chunks_wanted, smallest));
    }
    chunks_ = (chunk_size + chunk_ - 1) / chunk_;
    tiles_ = tile_count();
    tile_rows_ = chunk_ * block_rows_;
    // A scatter-add runs on one core, which walks the tiles in order: repeated indices accumulate in the space's order.
    const bool scatters = std::any_of(spec_.nodes.begin(), spec_.nodes.end(),
                                      [](const FusedNode& node) { return node.op == FusedOpcode::ScatterAdd; });
    cores_ = std::clamp<int64_t>(tiles_, 1, scatters ? 1 : config_.chip_cores);
    single_tiles_take_one_set();
    if (layout_.row_length > (INT32_MAX >> 2))
      throw Unsupported(fmt::format("fused kernel {}: rows of {} elements exceed a broadcast period", spec_.name,
                                    layout_.row_length));
  }

  // A core with at most one tile has nothing to load ahead: one set of slots, without the prefetch's syncs.
  void single_tiles_take_one_set() {
    if (tiles_ <= cores_) sets_ = 1;
  }

  bool segmented() const { return !spec_.segments.empty(); }

  // vrand draws a run of consecutive stream positions: a tile's points must be consecutive in the space, which holds
  // when the layout keeps the space's order (the first store walks it in order).
  void check_positions_run_on() const {
    if (layout_.positions < 0) return;
    Step positions;
    positions.access = layout_.positions;
    positions.shape = layout_.row_length > 1 ? Shape::Full : Shape::Row;
    std::vector<Dim> dims = dma_dims(positions);
    std::erase_if(dims, [&](const Dim& dim) { return dim.count == 1 || (dim.count == 0 && chunk_ == 1); });
    if (dims.size() > 1 || (dims.size() == 1 && dims[0].stride != 1))
      throw Unsupported(
          fmt::format("fused kernel {}: random numbers over a tile whose points are not consecutive in "
                      "the space (the first store does not walk it in order)",
                      spec_.name));
  }

  // Tiles of at most `rows` elements (a multiple of 64 when larger), fewer when the segments' tiles would not keep
  // every core busy; then the table of every segment's tiles: per tile, its first element, and its count with its
  // segment's argument offset in bytes above it.
  void choose_segment_tiles(int64_t rows) {
    int64_t total = 0;
    for (const FusedSegment& segment : spec_.segments) total += segment.elements;
    int64_t size = rows >= 64 ? rows / 64 * 64 : rows;
    const auto tiles_of = [&](int64_t tile) {
      int64_t tiles = 0;
      for (const FusedSegment& segment : spec_.segments) tiles += (segment.elements + tile - 1) / tile;
      return tiles;
    };
    if (tiles_of(size) < config_.chip_cores) {
      const int64_t even = (total + config_.chip_cores - 1) / config_.chip_cores;
      size = std::min(size, std::max(round_up(even, 64), kMinTileElements));
    }
    for (const FusedSegment& segment : spec_.segments)
      for (int64_t first = 0; first < segment.elements; first += size) {
        const int64_t count = std::min(size, segment.elements - first);
        tile_table_words_.push_back(static_cast<uint64_t>(first));
        tile_table_words_.push_back(static_cast<uint64_t>(count) |
                                    static_cast<uint64_t>(8 * int64_t{segment.first_argument}) << 32);
      }
    chunk_dim_ = 0;
    block_rows_ = 1;
    chunk_ = size;
    chunks_ = (layout_.outer[0] + size - 1) / size;
    tiles_ = static_cast<int64_t>(tile_table_words_.size() / 2);
    tile_rows_ = size;
    cores_ = cores_for_units(tiles_, config_);
    single_tiles_take_one_set();
  }

  void describe() {
    if (segmented()) {
      std::vector<int64_t> elements;
      for (const FusedSegment& segment : spec_.segments) elements.push_back(segment.elements);
      b_.describe(fmt::format("{}: {} segments of [{}] elements, {} arguments each", spec_.name, spec_.segments.size(),
                              fmt::join(elements, ", "), spec_.arguments));
    } else {
      b_.describe(fmt::format("{}: sizes [{}], {} reduced; collapsed outer [{}], reduced [{}]", spec_.name,
                              fmt::join(spec_.sizes, ", "), spec_.reduced_dims, fmt::join(layout_.outer, ", "),
                              fmt::join(layout_.reduced, ", ")));
    }
    b_.describe(
        fmt::format("tiles: {} rows ({} of outer dimension {} x {}) x {}; {} tiles on {} cores, {} slots, {} "
                    "set{}",
                    tile_rows_, chunk_, chunk_dim_, block_rows_, layout_.row_length, tiles_, cores_, slots_.size(),
                    sets_, sets_ > 1 ? "s" : ""));
    for (size_t k = 0; k < accesses_.size(); ++k) {
      const bool load = k < spec_.loads.size();
      b_.describe(fmt::format("{} {}: argument {}, {}, offset {}, byte strides outer [{}] reduced [{}]",
                              load ? "load" : "store", load ? k : k - spec_.loads.size(), accesses_[k]->argument,
                              isa::type_name(accesses_[k]->type), accesses_[k]->offset,
                              fmt::join(layout_.outer_strides[k], ", "), fmt::join(layout_.reduced_strides[k], ", ")));
    }
  }

  // ---- emission

  void allocate_registers() {
    tile_ = b_.reg("tile");
    chunk_start_ = b_.reg("chunk start");
    chunk_rows_ = b_.reg("chunk rows");
    rows_ = b_.reg("rows");
    elements_ = b_.reg("elements");
    cols_ = b_.reg("row length");
    if (one_element_steps()) one_ = b_.reg("one");
    for (int d = 0; d < chunk_dim_; ++d) loop_index_.push_back(b_.reg(fmt::format("outer index {}", d)));
    if (sets_ == 2) {
      previous_ = b_.reg("previous tile");
      next_ = b_.reg("next tile");
    }
    destination_ = b_.reg("destination");
    first_ = b_.reg("first source");
    second_ = b_.reg("second source");
    address_ = b_.reg("DRAM address");
    scratch_ = b_.reg("scratch");
    count_ = b_.reg("DMA count");
    stride_ = b_.reg("DMA stride");
    if (segmented()) segment_ = b_.reg("segment's arguments");
    if (layout_.positions >= 0) position_ = b_.reg("stream position");
    if (!segmented()) pointers_ = fused::pointer_registers(b_, accesses_, kPointerRegisters);
  }

  void fill_scalars() {
    if (!plan_.has_scalars()) return;
    Reg one = b_.reg("one");
    b_.li(one, 1);
    plan_.fill_scalars(b_, *scalar_tile_, one, first_, second_);
  }

  // Where the tile numbered in `tile` lies: the index of each outer dimension outside the chunk dimension, the chunk's
  // first row, and the counts (the last chunk may be short).
  void emit_tile_position(R tile) {
    if (segmented()) {
      emit_segment_tile_position(tile);
      return;
    }
    const std::vector<int64_t>& outer = layout_.outer;
    if (chunks_ > 1) {
      b_.li(scratch_, chunks_);
      b_.Remu(chunk_start_, tile, scratch_);
      b_.Divu(address_, tile, scratch_);
      b_.mul_constant(chunk_start_, chunk_);
    } else {
      b_.move(address_, tile);
    }
    for (int d = chunk_dim_ - 1; d >= 0; --d) {
      if (d == 0) {
        b_.move(loop_index_[0], address_);
        break;
      }
      b_.li(scratch_, outer[d]);
      b_.Remu(loop_index_[d], address_, scratch_);
      b_.Divu(address_, address_, scratch_);
    }
    if (outer[chunk_dim_] % chunk_ == 0) {
      b_.li(chunk_rows_, chunk_);
    } else {  // min(chunk, size - chunk start)
      const Label sized = b_.label();
      b_.li(chunk_rows_, outer[chunk_dim_]);
      b_.Sub(chunk_rows_, chunk_rows_, chunk_start_);
      b_.li(scratch_, chunk_);
      b_.Bltu(chunk_rows_, scratch_, sized);
      b_.move(chunk_rows_, scratch_);
      b_.bind(sized);
    }
    b_.move(rows_, chunk_rows_);
    b_.mul_constant(rows_, block_rows_);
    b_.move(elements_, rows_);
    b_.mul_constant(elements_, layout_.row_length);
  }

  // A segment's tile, from its entry in the table: the first element, the count, and the segment's arguments.
  void emit_segment_tile_position(R tile) {
    b_.La(address_, *tile_table_);
    b_.Slli(scratch_, tile, 4);
    b_.Add(address_, address_, scratch_);
    b_.Ld(chunk_start_, address_, 0);
    b_.Ld(scratch_, address_, 8);
    b_.Srli(segment_, scratch_, 32);
    b_.Slli(chunk_rows_, scratch_, 32);
    b_.Srli(chunk_rows_, chunk_rows_, 32);
    b_.move(rows_, chunk_rows_);
    b_.move(elements_, chunk_rows_);
  }

  // Two sets of slots (fused_steps.h, emit_double_buffered_loop): the cores take tiles c, c + n, ...
  void emit_double_buffered_loop() {
    sink_ = b_.tile(Space::Scratchpad, kSinkBytes, "prefetch sink");
    const auto tiles = [this]() -> R {
      b_.li(scratch_, tiles_);
      return scratch_;
    };
    fused::emit_double_buffered_loop(b_, split_,
                                     {.current = tile_,
                                      .next = next_,
                                      .previous = previous_,
                                      .start =
                                          [&](Label none) {
                                            b_.Csrr(tile_, isa::Csr::CoreId);
                                            b_.Bgeu(tile_, tiles(), none);
                                            b_.move(previous_, scratch_);  // none yet
                                          },
                                      .bound = tiles,
                                      .advance =
                                          [&] {
                                            b_.move(next_, tile_);
                                            b_.add_constant(next_, cores_);
                                          },
                                      .position = [&](R tile) { emit_tile_position(tile); },
                                      .sync =
                                          [&](int set) {
                                            const Step& load = plan_.steps()[split_.prefetched.front()];
                                            b_.point(destination_, *sink_);
                                            point(first_, load.first, set);
                                            b_.li(count_, 1);
                                            b_.Vmov(fused::moved_type(load.type), destination_, first_, count_);
                                          },
                                      .steps =
                                          [&](const std::vector<size_t>& steps, int set) {
                                            for (const size_t k : steps) emit(plan_.steps()[k], set);
                                          }});
  }

  bool one_element_steps() const {
    return std::any_of(plan_.steps().begin(), plan_.steps().end(),
                       [](const Step& step) { return step.shape == Shape::One; });
  }
  // A step's element count.
  R count_of(Shape shape) const {
    switch (shape) {
      case Shape::Full: return elements_;
      case Shape::Pattern: return cols_;
      case Shape::One: return one_;
      case Shape::Row: break;
    }
    return rows_;
  }
  static const char* shape_name(Shape shape) {
    return shape == Shape::Full      ? "full"
           : shape == Shape::Pattern ? "pattern"
           : shape == Shape::One     ? "one"
                                     : "per-row";
  }

  R point(Reg& reg, Ref ref, int set) {
    if (ref.kind == Ref::Kind::Slot) b_.point(reg, slot_tiles_[set][ref.index]);
    if (ref.kind == Ref::Kind::Scalar) b_.point(reg, *scalar_tile_, kScalarBytes * ref.index);
    if (ref.kind == Ref::Kind::Argument) b_.point(reg, argument_tiles_[set], kScalarBytes * ref.index);
    return reg;
  }

  void emit(const Step& s, int set) {
    if (s.access >= 0) {
      emit_dma(s, set);
      return;
    }
    if (s.argument >= 0) {
      emit_argument_load(s, set);
      return;
    }
    if (s.random >= 0) {
      emit_random(s, set);
      return;
    }
    if (s.opcode == Opcode::Vtr) {  // an indexed load's runs: their first indices to the front
      const R to = point(destination_, s.destination, set), from = point(first_, s.first, set);
      b_.li(scratch_, s.immediate);
      b_.Divu(count_, count_of(s.shape), scratch_);
      b_.Vtr(s.type, to, from, count_, scratch_);
      return;
    }
    emit_vector_step(b_, s, count_of(s.shape), rows_, cols_, destination_, first_, second_,
                     [&](Reg& reg, Ref ref) { return point(reg, ref, set); });
  }

  // A Random node's value over the tile: the key and the tile's first stream position (the node's first position
  // plus the tile's first point's row-major index, computed as the address of the positions access) in registers.
  void emit_random(const Step& s, int set) {
    const FusedNode& node = spec_.nodes[s.random];
    read_scalar(first_, node.a);
    read_scalar(position_, node.b);
    for (int d = 0; d < chunk_dim_; ++d)
      add_index(position_, loop_index_[d], layout_.outer_strides[layout_.positions][d]);
    if (chunks_ > 1) add_index(position_, chunk_start_, layout_.outer_strides[layout_.positions][chunk_dim_]);
    b_.emit(s.opcode, {s.type, point(destination_, s.destination, set), first_, position_, count_of(s.shape)});
  }
  // A constant's, an argument's or a load's (with strides 0) i64 value into `reg`.
  void read_scalar(R reg, int node) {
    const FusedNode& value = spec_.nodes[node];
    if (value.op == FusedOpcode::Constant) {
      b_.li(reg, static_cast<int64_t>(value.constant));
    } else if (value.op == FusedOpcode::Argument) {
      b_.Ld(reg, kArgumentBlock, 8 * int64_t{value.argument});
    } else {
      const FusedAccess& access = spec_.loads[value.access];
      load_pointer(reg, access.argument);
      b_.Ld(reg, reg, 8 * access.offset);
    }
  }
  // The address of argument tensor `argument` (not with segments) into `reg`.
  void load_pointer(R reg, int argument) {
    if (const auto pointer = pointers_.find(argument); pointer != pointers_.end()) {
      b_.move(reg, pointer->second);
    } else {
      b_.Ld(reg, kArgumentBlock, 8 * argument);
    }
  }
  // to += index * stride (through scratch_).
  void add_index(R to, R index, int64_t stride) { fused::add_scaled(b_, to, index, stride, scratch_); }

  using Dim = fused::MoveDim;  // count 0: the chunk's, in chunk_rows_
  // The tile's dimensions in access s, innermost first (see emit_dma).
  std::vector<Dim> dma_dims(const Step& s) const {
    const std::vector<int64_t>& outer = layout_.outer;
    const std::vector<int64_t>& outer_strides = layout_.outer_strides[s.access];
    std::vector<Dim> dims;
    const auto push = [&](int64_t count, int64_t stride) {
      if (!dims.empty() && dims.back().count != 0 && stride == dims.back().count * dims.back().stride) {
        dims.back().count *= count;
      } else {
        dims.push_back({count, stride});
      }
    };
    if (s.shape == Shape::One) return {{1, 0}};  // one element, the same everywhere
    if (s.shape != Shape::Row)
      for (int d = static_cast<int>(layout_.reduced.size()) - 1; d >= 0; --d)
        push(layout_.reduced[d], layout_.reduced_strides[s.access][d]);
    if (s.shape == Shape::Pattern) return dims;  // one row, the same for every row of the tile
    for (int d = static_cast<int>(outer.size()) - 1; d > chunk_dim_; --d) push(outer[d], outer_strides[d]);
    dims.push_back({0, outer_strides[chunk_dim_]});
    if (dims.size() == 2 && dims[1].stride == dims[0].count * dims[0].stride)
      dims = {{0, dims[0].stride}};  // one run: all of the tile's count
    return dims;
  }
  // An Argument's value from its entry of the argument block (the segment's, with segments): one element (or n whole
  // entries) into the argument tile, or repeated (stride 0) over a slot's rows or elements.
  void emit_argument_load(const Step& s, int set) {
    if (segmented()) b_.Add(second_, kArgumentBlock, segment_);
    fused::emit_argument_load(b_, s, segmented() ? R(second_) : kArgumentBlock, point(first_, s.first, set),
                              count_of(s.shape), address_, count_);
  }

  // Whether load step s arrives transposed, to be put right by a vtr on the vector engine.
  bool transposed_load(const Step& s) const {
    if (s.index.kind != Ref::Kind::None || s.shape == Shape::Pattern || s.shape == Shape::One) return false;
    const std::vector<Dim> dims = dma_dims(s);
    const auto bytes = static_cast<int64_t>(isa::element_bytes(accesses_[s.access]->type));
    return dims.size() == 2 && dims[1].stride == bytes && dims[0].stride != 0;
  }

  // One access of the tile. The tile's dimensions, innermost first: the reduced ones (full rows only), the block,
  // then the chunk; neighbours contiguous in this access merge, and what remains is a 1-D, 2-D or 4-D move (or a 2-D
  // load of the transposed tile and a vtr, when only the chunk is contiguous).
  void emit_dma(const Step& s, int set) {
    const FusedAccess& access = *accesses_[s.access];
    const bool load = s.access < static_cast<int>(spec_.loads.size());
    const int64_t bytes = static_cast<int64_t>(isa::element_bytes(access.type));
    const std::vector<int64_t>& outer_strides = layout_.outer_strides[s.access];
    // The address of the tile's first element.
    if (segmented()) {
      b_.Add(address_, kArgumentBlock, segment_);
      b_.Ld(address_, address_, 8 * access.argument);
    } else {
      load_pointer(address_, access.argument);
    }
    b_.add_constant(address_, access.offset * bytes);
    if (s.index.kind != Ref::Kind::None) {  // by index: element offset + index[k] of the argument, wherever the tile is
      const R spad = point(first_, s.first, set), indices = point(second_, s.index, set);
      R count = count_of(s.shape);
      if (load && s.immediate > 1) {  // runs of consecutive elements, each moved as one wider element
        b_.li(scratch_, s.immediate);
        b_.Divu(count_, count, scratch_);
        const ElementType run = bytes * s.immediate == 8 ? ElementType::I64 : ElementType::I32;
        b_.DmaLoadIndexed(run, spad, address_, indices, count_, bytes);
      } else if (load) {
        b_.DmaLoadIndexed(access.type, spad, address_, indices, count, bytes);
      } else {
        b_.DmaStoreAddIndexed(access.type, address_, spad, indices, count, bytes);
      }
      return;
    }
    for (int d = 0; d < chunk_dim_; ++d) add_index(address_, loop_index_[d], outer_strides[d]);
    if (chunks_ > 1 || segmented()) add_index(address_, chunk_start_, outer_strides[chunk_dim_]);

    const std::vector<Dim> dims = dma_dims(s);
    const R spad = point(first_, s.first, set);
    const int size = std::countr_zero(static_cast<unsigned>(bytes));
    using enum Opcode;
    if (dims.size() == 2 && load && transposed_load(s)) {
      // Contiguous along the chunk, strided within a row (a transposed operand, a sum over an outer dimension): runs
      // of the chunk's elements, one per element of the row, then transposed in place into rows.
      static constexpr Opcode loads[] = {DmaLoad2d8, DmaLoad2d16, DmaLoad2d32, DmaLoad2d64};
      b_.li(count_, dims[0].count);
      b_.emit(loads[size], {spad, address_, chunk_rows_, count_, fused::stride_immediate(spec_.name, dims[0].stride)});
      b_.Vtr(access.type, spad, spad, count_, chunk_rows_);
    } else if (dims.size() == 2 && dims[0].stride == bytes && s.shape != Shape::Pattern) {
      static constexpr Opcode loads[] = {DmaLoad2d8, DmaLoad2d16, DmaLoad2d32, DmaLoad2d64};
      static constexpr Opcode stores[] = {DmaStore2d8, DmaStore2d16, DmaStore2d32, DmaStore2d64};
      const int64_t row_stride = fused::stride_immediate(spec_.name, dims[1].stride);
      b_.li(count_, dims[0].count);
      if (load) {
        b_.emit(loads[size], {spad, address_, count_, chunk_rows_, row_stride});
      } else {
        b_.emit(stores[size], {address_, spad, count_, chunk_rows_, row_stride});
      }
    } else {
      // One dimension (then the whole tile: a lone chunk dimension is the whole tile too, as any block or reduced
      // dimension would be another dimension), or up to four.
      fused::emit_strided_move(b_, spec_.name, load, bytes, spad, address_, dims, count_of(s.shape), chunk_rows_,
                               count_, stride_);
    }
  }

  const FusedSpec& spec_;
  config::ChipConfig config_;
  Layout layout_;
  fused::Plan plan_;
  const std::vector<Slot>& slots_;
  std::vector<const FusedAccess*> accesses_;  // loads, then stores

  // The tiles.
  int chunk_dim_ = 0;
  int64_t block_rows_ = 1, chunk_ = 1, chunks_ = 1, tiles_ = 1, tile_rows_ = 1, cores_ = 1;
  int sets_ = 1;
  // Double buffering: the steps that load a tile ahead (the loads into slots no earlier step touches), the stores the
  // plan ends with, and the rest, in the plan's order.
  fused::DoubleBufferedSteps split_;

  KernelBuilder b_;                            // before the registers, which it must outlive
  std::vector<std::vector<Tile>> slot_tiles_;  // per set
  std::optional<Tile> scalar_tile_;
  std::vector<Tile> argument_tiles_;  // per set
  std::optional<Tile> sink_;
  std::vector<uint64_t> tile_table_words_;  // segments: two words per tile (see choose_segment_tiles)
  std::optional<Label> tile_table_;
  Reg tile_, chunk_start_, chunk_rows_, rows_, elements_, cols_, one_, previous_, next_;
  std::vector<Reg> loop_index_;
  Reg destination_, first_, second_, address_, scratch_, count_, stride_, segment_, position_;
  std::map<int, Reg> pointers_;
};

}  // namespace

Kernel emit_fused(const FusedSpec& spec, const config::ChipConfig& config) {
  fused::validate(spec);
  const std::string name = spec.name.empty() ? "fused" : spec.name;
  // (Segments reduced whole still store a value each, a reduction of nothing.)
  const bool empty = std::find(spec.sizes.begin(), spec.sizes.end(), 0) != spec.sizes.end() ||
                     (!spec.segments.empty() && spec.reduced_dims == 0 &&
                      std::all_of(spec.segments.begin(), spec.segments.end(),
                                  [](const FusedSegment& segment) { return segment.elements == 0; }));
  const bool stores = std::any_of(spec.nodes.begin(), spec.nodes.end(), [](const FusedNode& node) {
    return node.op == FusedOpcode::Store || node.op == FusedOpcode::ScatterAdd;
  });
  if (empty || !stores) {
    KernelBuilder b(name, config);
    b.describe(empty ? fmt::format("{}: no elements (sizes [{}])", name, fmt::join(spec.sizes, ", "))
                     : fmt::format("{}: no stores", name));
    b.Halt();
    return b.finish(1);
  }
  if (spec.matmul) {
    if (std::any_of(spec.nodes.begin(), spec.nodes.end(),
                    [](const FusedNode& node) { return node.op == FusedOpcode::Argument; }))
      throw Unsupported(fmt::format("fused kernel {}: an Argument in a GEMM template's epilogue", name));
    return emit_fused_gemm(spec, config, name);
  }
  if (!spec.segments.empty() && spec.reduced_dims == 1) return fused::emit_looped_rows(spec, config, name);
  try {
    return FusedEmitter(spec, config, name).build();
  } catch (const fused::RowTooLong&) {
    return fused::emit_looped_rows(spec, config, name);
  }
}

}  // namespace npusim::emitter
