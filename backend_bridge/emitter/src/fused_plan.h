// A fused kernel's dataflow program (fused.h) planned once into steps over scratchpad slots, for whichever loop walks
// the tiles: the row kernel (fused.cpp) over the tiles of its iteration space, the GEMM epilogue (fused_gemm.cpp) over
// the blocks of a matrix product. The plan knows the tiles only by their shape (rows, or rows x row length).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "npusim/emitter/fused.h"
#include "npusim/emitter/gather.h"

namespace npusim::emitter::fused {

// A value's place: a slot of the plan, a slot of the scalar tile, the staged block of the kernel's matrix product
// (f32, in the tile the walker gives for it), or a slot of the argument tile (an Argument's value, loaded per tile).
struct Ref {
  enum class Kind : uint8_t { None, Slot, Scalar, Product, Argument } kind = Kind::None;
  int index = -1;
};

// A step's count: rows (per-row values), rows x row length (Full), one row length (Pattern: a value that varies
// along the row but is the same in every row, as layer norm's weight, which a full step reads as a repeating row), or
// one element (One: a value the same at every point computed from loads, as an optimizer's bias correction from its
// step counter, computed once per tile and read as a scalar).
enum class Shape : uint8_t { Row, Full, Pattern, One };

// One step of a tile: a vector instruction over slots, (access >= 0) a DMA of an access to or from a slot (by the
// indices in `index` when it is a Gather's or ScatterAdd's, an indexed load's run length in `immediate`), or
// (argument >= 0) a DMA of an Argument's value from its entry of the argument block: into its argument slot (first;
// with an immediate n > 0, the n whole entries from this one into the argument slots from first), or repeated over
// every element of a slot of `shape` (first a Slot) where a full tile of the value is needed.
// A vcheck's bound is its immediate; a vtr's immediate is r, for a transpose of the tile's elements as (count / r) x r.
// A vrand's or vrandn's `random` is its Random node, whose key and first position the walker reads into registers.
struct Step {
  isa::Opcode opcode{};
  isa::ElementType type = isa::ElementType::F32, source = isa::ElementType::F32;  // source: vcvt's
  Ref destination, first, second;
  Shape shape = Shape::Row;
  int64_t immediate = 0;  // a binary instruction's broadcast mode, vfill's value
  int access = -1;        // loads, then stores
  Ref index;              // an indexed DMA's (dma.ldx, dma.stxadd) i64 element indices
  int argument = -1;      // the entry of the argument block
  int random = -1;        // a Random node
  int node = -1;          // the node whose value the step computes (-1: the arguments' loads, once per tile)
};

struct Slot {
  Shape shape = Shape::Row;
  int64_t element_bytes = 1;
  bool busy = false;
  bool kept = false;  // a looped row's reduction result: never reused
};

// A reduction over looped rows (see Plan's `looped_rows`): its result's slot, which starts each row as the
// combination's identity and takes each chunk's partial result by `combine` (vadd, vmax, vmin). The index of an
// extremum carries the extremum itself (`slot`) and its index (`index`, i64, from 0), and counts the chunk's first
// element in `offset` (i64, from 0).
struct Carry {
  int node = -1;
  Ref slot;
  isa::ElementType type = isa::ElementType::F32;
  isa::Opcode combine = isa::Opcode::Vadd;
  int64_t identity = 0;  // vfill's immediate
  Ref index, offset;
};

inline constexpr int64_t kScalarBytes = 8;  // a slot of the scalar tile holds any element type

class Plan {
 public:
  // Plans the live nodes of a valid spec. `row_length` is the elements of a row (1 when nothing is reduced);
  // store_varies_along_rows[k] says whether store k writes different elements along a row. A Product node's value is
  // Ref::Kind::Product (rounded by vcvt into a slot when of f16/bf16). Throws Unsupported naming the node for an
  // operation the vector engine lacks.
  //
  // With `looped_rows`, a tile is one row walked in chunks of at most `row_length` elements (fused_looped.h): each
  // reduction's value is a Carry (a slot of its own, never reused), its step reduces the chunk into a temporary that
  // the carry then combines, and no value is a Pattern (a chunk is one row). Every step names its node, so that the
  // walker can run each pass over the row with the steps its values need.
  Plan(const FusedSpec& spec, int64_t row_length, const std::vector<char>& store_varies_along_rows,
       bool looped_rows = false);

  const std::vector<Step>& steps() const { return steps_; }
  const std::vector<Slot>& slots() const { return slots_; }
  const std::vector<Carry>& carries() const { return carries_; }
  bool has_scalars() const { return !scalars_.empty(); }
  // The argument tile: one kScalarBytes slot per Argument node, loaded by the plan's first steps on every tile.
  bool has_arguments() const { return arguments_ > 0; }
  int64_t argument_tile_bytes() const { return kScalarBytes * arguments_; }
  // Bytes of the scalar tile: one kScalarBytes slot per constant, and one more to round f16/bf16 constants through.
  int64_t scalar_tile_bytes() const { return kScalarBytes * (static_cast<int64_t>(scalars_.size()) + 1); }
  // The bytes of a slot's tile of `rows` rows, 64-byte aligned.
  int64_t slot_bytes(const Slot& slot, int64_t rows) const;

  // Fills the scalar tile with the constants (at kernel start); `one` holds 1, `first` and `second` are scratch.
  void fill_scalars(KernelBuilder& b, const Tile& scalar_tile, R one, R first, R second) const;

 private:
  bool constant(int node) const { return spec_.nodes[node].op == FusedOpcode::Constant; }
  // A constant or an argument: one value at every point, read with broadcast mode 1.
  bool scalar_node(int node) const { return constant(node) || spec_.nodes[node].op == FusedOpcode::Argument; }
  Shape shape_of(int node) const {
    if (uniform_[node] && !scalar_node(node)) return Shape::One;
    if (row_length_ == 1 || per_row_[node]) return Shape::Row;
    return same_every_row_[node] && !looped_rows_ ? Shape::Pattern : Shape::Full;
  }
  isa::ElementType type_of(int node) const { return spec_.nodes[node].type; }
  int64_t per_row_broadcast() const { return 3 + (row_length_ << 2); }
  int64_t repeating_row_broadcast() const { return 2 + (row_length_ << 2); }
  int64_t broadcast_mode(int node) const;
  std::vector<char> invariant_over(size_t first, size_t last) const;
  std::vector<char> same_in_every_row() const;
  std::vector<char> uniform_values() const;
  Ref scalar(int node) const {
    return constant(node) ? Ref{Ref::Kind::Scalar, scalar_index_.at(node)}
                          : Ref{Ref::Kind::Argument, argument_index_.at(node)};
  }
  Ref value(int node) const { return values_[node]; }
  std::pair<Ref, int64_t> second_source(int node, Shape shape) const;

  [[noreturn]] void unsupported(const std::string& what) const;
  void check_type(isa::Opcode opcode, isa::ElementType type) const;

  void vector(isa::Opcode opcode, isa::ElementType type, Ref destination, Ref first, Ref second, Shape shape,
              int64_t immediate = 0);
  void convert(isa::ElementType to, isa::ElementType from, Ref destination, Ref source, Shape shape);
  void dma(int access, Ref slot, Shape shape, Ref index = {});
  Ref allocate(Shape shape, isa::ElementType type, bool kept = false);
  Ref temporary(Shape shape, isa::ElementType type);
  void release(Ref ref);
  void fill(Ref destination, Shape shape, int node);
  void broadcast(Ref destination, Shape shape, int node);
  Ref tile(int node, Shape shape, Ref into = {});

  void plan();
  void load_arguments_together();
  void plan_node(int i);
  void plan_binary(int i);
  void plan_multiply_add(int i);
  void plan_looped_reduction(int i, Ref input);
  void plan_looped_index(int i, Ref input);
  Ref not_one();

  const FusedSpec& spec_;
  int64_t row_length_;
  bool looped_rows_;
  std::vector<char> per_row_, same_every_row_, uniform_, store_varies_along_rows_;
  int node_ = 0;  // the node being planned, for errors
  std::vector<Step> steps_;
  std::vector<Slot> slots_;
  std::vector<Ref> values_, temporaries_;
  std::map<int, int> scalar_index_;    // constant node -> scalar slot
  std::map<int, int> argument_index_;  // argument node -> argument slot
  int64_t arguments_ = 0;
  std::vector<std::pair<isa::ElementType, double>> scalars_;  // the scalar tile's constants
  std::optional<int> not_one_;                                // the u8 1 that Not xors with
  std::vector<Carry> carries_;
};

}  // namespace npusim::emitter::fused
