// The matmul kernel, output-stationary in the accumulator. C is cut into blocks of mt x nb that the accumulator
// holds whole; the cores take blocks in turn. For one block, each K step loads an mt x kt block of A and a kt x nb
// block of B (kt = the systolic array's rows) into one of two scratchpad slots, so the DMA engine fills the next
// slot while the matrix engine works on this one; the matrix engine then runs the array over the nb / cols
// weight sub-tiles of B, each multiplying the same A block into its own part of the accumulator. Blocks are as
// square as the accumulator allows, which keeps DRAM traffic low and puts many MACs behind each instruction.
//
// Scratchpad and accumulator layouts, sub-tile major so that each sub-tile is one contiguous tile:
//   A block [mt][kt]; B block [nb / cols][kt][cols] (or [nb][kt] when B is transposed, for mx.ldwt);
//   C block [nb / cols][mt][cols] in the accumulator and in the scratchpad staging area.
// A ragged last sub-tile (nb not a multiple of cols) follows the full ones with its own width.
// A batch of products numbers the blocks of all its entries in turn, so they share the cores and the pipeline.
//
// The scalar unit issues in program order, and a product's sub-tiles fill the matrix queue: so each step's loads are
// issued one step ahead, before the current step's products (a load cursor of its own runs through this core's
// blocks and K steps), or the DMA engine would idle behind a full matrix queue.
//
// Engines are ordered by semaphores, not fences:
//   0  K-step blocks loaded (DMA → matrix)    1  K-step slot free (matrix → DMA; posted twice at the start)
//   2  C block staged (matrix → DMA)          3  C staging free (DMA → matrix; posted once at the start)
#include "npusim/emitter/matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

// Registers. r1 holds the argument block (C, A, B addresses).
constexpr int kC = 2, kA = 3, kB = 4;
constexpr int kBlock = 5, kCoreStride = 6;  // this core's block index, and the step between its blocks
constexpr int kM0 = 7, kMt = 8, kN0 = 9, kNb = 10, kK0 = 11, kKt = 12;
constexpr int kDram = 13, kScratch = 14, kScratch2 = 15;
constexpr int kSlot = 16;                   // the K-step slot being multiplied (A block, then B block)
constexpr int kColumn = 18, kColumns = 19;  // sub-tile loop: first column in the block, and its width
constexpr int kWeights = 20, kAcc = 21, kBlockB = 22;
constexpr int kFullSubTiles = 23, kRaggedColumns = 24, kOne = 26, kSubTileCols = 27;
// The load cursor: the block and K step loaded next, the slot they go to, and that block's and step's sizes.
constexpr int kLoadBlock = 28, kLoadK0 = 29, kLoadSlot = 30, kLoadMt = 31, kLoadNb = 17, kLoadKt = 25;
constexpr int64_t kAccumulatorBytes = 4;  // f32 accumulators (i32 for i8 operands)

class MatmulEmitter {
 public:
  MatmulEmitter(const MatmulSpec& spec, const config::ChipConfig& config)
      : spec_(spec),
        bytes_(static_cast<int64_t>(isa::element_bytes(spec.type))),
        out_bytes_(static_cast<int64_t>(isa::element_bytes(spec.output_type.value_or(spec.type)))),
        type_(isa::type_name(spec.type)),
        out_type_(isa::type_name(spec.output_type.value_or(spec.type))) {
    tile_k_ = config.core_systolic_rows;
    sub_cols_ = config.core_systolic_cols;
    const int64_t spad = static_cast<int64_t>(config.scratchpad_bytes());
    const int64_t acc = static_cast<int64_t>(config.accumulator_bytes()) / kAccumulatorBytes;
    const int64_t sub_tiles = (spec.n + sub_cols_ - 1) / sub_cols_;
    // nb as many sub-tiles as make the block about square (or as wide as the accumulator allows for short A), with
    // the two B slots within half the scratchpad; then mt as tall as the accumulator and scratchpad allow.
    const int64_t side = std::min(spec.m, std::max<int64_t>(1, static_cast<int64_t>(std::sqrt(acc))));
    int64_t block_sub_tiles = std::clamp<int64_t>(acc / (side * sub_cols_), 1, sub_tiles);
    block_sub_tiles = std::min(block_sub_tiles, std::max<int64_t>(1, spad / (4 * tile_k_ * sub_cols_ * bytes_)));
    // Two A slots of mt x kt and two B slots of kt x nb operand elements, and the C staging of mt x nb outputs.
    const auto tallest = [&](int64_t nb) {
      return std::min(
          {spec.m, acc / nb, (spad - 2 * tile_k_ * nb * bytes_) / (2 * tile_k_ * bytes_ + nb * out_bytes_)});
    };
    block_n_ = block_sub_tiles * sub_cols_;
    block_m_ = tallest(block_n_);
    // Enough blocks for every core: narrower first, then shorter.
    const auto blocks = [&] { return spec.batch * ceil_div(spec.m, block_m_) * ceil_div(spec.n, block_n_); };
    while (blocks() < config.chip_cores && (block_sub_tiles > 1 || block_m_ > 1)) {
      if (block_sub_tiles > 1) {
        block_sub_tiles = (block_sub_tiles + 1) / 2;
        block_n_ = block_sub_tiles * sub_cols_;
        block_m_ = tallest(block_n_);
      } else {
        block_m_ = (block_m_ + 1) / 2;
      }
    }
    if (block_m_ < 1) throw Unsupported("the scratchpad or accumulator cannot hold one row of a matmul block");
    for (int64_t stride : {spec.a_row, spec.a_col, spec.b_row, spec.b_col, spec.c_row, spec.c_col})
      if (stride * std::max(bytes_, out_bytes_) * sub_cols_ > INT32_MAX || stride < 0)
        throw Unsupported(fmt::format("matmul stride {} does not fit a DMA immediate", stride));
    // B is read along whichever of its dimensions is contiguous; mx.ldwt takes the transposed layout.
    b_transposed_ = spec.b_row < spec.b_col;
  }

  std::string emit() {
    w_.comment(fmt::format("matmul_{}: {} x [{} x {}] @ [{} x {}], blocks m {} n {}, k steps {}, sub-tiles {} wide{}",
                           type_, spec_.batch, spec_.m, spec_.k, spec_.k, spec_.n, block_m_, block_n_, tile_k_,
                           sub_cols_, b_transposed_ ? ", B transposed" : ""));
    w_.line("ld r{}, 0(r1)", kC);
    w_.line("ld r{}, 8(r1)", kA);
    w_.line("ld r{}, 16(r1)", kB);
    w_.line("li r{}, 0", kSlot);
    w_.line("li r{}, 0", kLoadSlot);
    w_.line("li r{}, 1", kOne);
    w_.load_constant(kSubTileCols, sub_cols_);
    w_.line("dma.dim 3, r{}, r0", kOne);  // tiles here have at most three dimensions
    w_.line("sem.post.mx 1");
    w_.line("sem.post.mx 1");
    w_.line("sem.post.dma 3");

    const std::string next = w_.new_label("block"), done = w_.new_label("done");
    w_.line("csrr r{}, coreid", kBlock);
    w_.line("csrr r{}, ncores", kCoreStride);
    w_.line("addi r{}, r{}, 0", kLoadBlock, kBlock);
    w_.line("li r{}, 0", kLoadK0);
    emit_load_next_step();
    w_.load_constant(kScratch, blocks());
    w_.line("bgeu r{}, r{}, {}", kBlock, kScratch, done);
    w_.label(next);
    locate_block(kBlock, kMt, kNb);

    const std::string k_step = w_.new_label("k_step");
    w_.line("li r{}, 0", kK0);
    w_.label(k_step);
    clamp(kKt, tile_k_, spec_.k, kK0);
    emit_load_next_step();
    emit_multiply_sub_tiles();
    w_.add_constant(kK0, tile_k_, kScratch);
    w_.load_constant(kScratch, spec_.k);
    w_.line("bltu r{}, r{}, {}", kK0, kScratch, k_step);
    emit_store_block();

    w_.line("add r{0}, r{0}, r{1}", kBlock, kCoreStride);
    w_.load_constant(kScratch, blocks());
    w_.line("bltu r{}, r{}, {}", kBlock, kScratch, next);
    w_.label(done);
    w_.line("halt");
    return w_.text();
  }

 private:
  static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
  int64_t blocks_n() const { return ceil_div(spec_.n, block_n_); }
  int64_t entry_blocks() const { return ceil_div(spec_.m, block_m_) * blocks_n(); }
  int64_t blocks() const { return spec_.batch * entry_blocks(); }
  int64_t slot_bytes() const { return (block_m_ + block_n_) * tile_k_ * bytes_; }

  // For the block numbered in `block` (within its batch entry: b = block % entry_blocks): kM0 = (b / blocks_n) *
  // block_m and kN0 = (b % blocks_n) * block_n, its sizes `mt` and `nb` clamped at the edges, and nb in
  // kFullSubTiles full sub-tiles and kRaggedColumns more.
  void locate_block(int block, int mt, int nb) {
    int within_entry = block;
    if (spec_.batch > 1) {
      w_.load_constant(kScratch, entry_blocks());
      w_.line("remu r{}, r{}, r{}", kM0, block, kScratch);
      within_entry = kM0;
    }
    w_.load_constant(kScratch, blocks_n());
    w_.line("remu r{}, r{}, r{}", kN0, within_entry, kScratch);
    w_.line("divu r{}, r{}, r{}", kM0, within_entry, kScratch);
    scale(kM0, block_m_);
    scale(kN0, block_n_);
    clamp(mt, block_m_, spec_.m, kM0);
    clamp(nb, block_n_, spec_.n, kN0);
    w_.line("divu r{}, r{}, r{}", kFullSubTiles, nb, kSubTileCols);
    w_.line("mul r{}, r{}, r{}", kScratch, kFullSubTiles, kSubTileCols);
    w_.line("sub r{}, r{}, r{}", kRaggedColumns, nb, kScratch);
  }

  void scale(int reg, int64_t factor) {
    w_.load_constant(kScratch, factor);
    w_.line("mul r{0}, r{0}, r{1}", reg, kScratch);
  }

  // size = min(tile, total - position), for a constant total or (clamp_to) one in a register.
  void clamp(int size, int64_t tile, int64_t total, int position) {
    w_.load_constant(kScratch2, total);
    clamp_to(size, tile, kScratch2, position);
  }
  void clamp_to(int size, int64_t tile, int total, int position) {
    const std::string sized = w_.new_label("sized");
    w_.line("sub r{}, r{}, r{}", kScratch, total, position);
    w_.load_constant(size, tile);
    w_.line("bgeu r{}, r{}, {}", kScratch, size, sized);
    w_.line("addi r{}, r{}, 0", size, kScratch);
    w_.label(sized);
  }

  // kDram = base + row * row_stride + column * column_stride, plus the batch entry of `block` times batch_stride
  // (strides in elements of `bytes`).
  void point_at(int base, int row, int64_t row_stride, int column, int64_t column_stride, int64_t bytes, int block,
                int64_t batch_stride) {
    w_.load_constant(kScratch, row_stride * bytes);
    w_.line("mul r{0}, r{0}, r{1}", kScratch, row);
    w_.load_constant(kScratch2, column_stride * bytes);
    w_.line("mul r{0}, r{0}, r{1}", kScratch2, column);
    w_.line("add r{}, r{}, r{}", kDram, base, kScratch);
    w_.line("add r{0}, r{0}, r{1}", kDram, kScratch2);
    if (spec_.batch == 1 || batch_stride == 0) return;
    w_.load_constant(kScratch2, entry_blocks());
    w_.line("divu r{}, r{}, r{}", kScratch, block, kScratch2);
    w_.load_constant(kScratch2, batch_stride * bytes);
    w_.line("mul r{0}, r{0}, r{1}", kScratch, kScratch2);
    w_.line("add r{0}, r{0}, r{1}", kDram, kScratch);
  }

  // One 3-D DMA between DRAM at kDram and the packed scratchpad tile at `spad`: `inner` elements element_stride
  // apart, in `rows` rows row_stride apart, in `planes` planes plane_stride apart (strides in elements of `bytes`).
  void move(bool load, int spad, int inner, int64_t element_stride, int rows, int64_t row_stride, int planes,
            int64_t plane_stride, int64_t bytes) {
    w_.load_constant(kScratch, row_stride * bytes);
    w_.line("dma.dim 1, r{}, r{}", rows, kScratch);
    w_.load_constant(kScratch, plane_stride * bytes);
    w_.line("dma.dim 2, r{}, r{}", planes, kScratch);
    if (load)
      w_.line("dma.ld4.b{} r{}, r{}, r{}, {}", 8 * bytes, spad, kDram, inner, element_stride * bytes);
    else
      w_.line("dma.st4.b{} r{}, r{}, r{}, {}", 8 * bytes, kDram, spad, inner, element_stride * bytes);
  }

  // The sub-tile-major tile of `rows` x nb between DRAM at kDram (rows row_stride apart, columns column_stride
  // apart) and the scratchpad at `spad`: the full sub-tiles as one DMA, the ragged one as another.
  void move_sub_tiles(bool load, int spad, int rows, int64_t row_stride, int64_t column_stride, int64_t bytes) {
    const std::string full_done = w_.new_label("full_done"), ragged_done = w_.new_label("ragged_done");
    w_.line("beq r{}, r0, {}", kFullSubTiles, full_done);
    move(load, spad, kSubTileCols, column_stride, rows, row_stride, kFullSubTiles, sub_cols_ * column_stride, bytes);
    w_.label(full_done);
    w_.line("beq r{}, r0, {}", kRaggedColumns, ragged_done);
    // The ragged sub-tile starts full * cols columns in: full * cols * rows elements into the scratchpad tile.
    w_.line("mul r{}, r{}, r{}", kScratch, kFullSubTiles, kSubTileCols);
    w_.load_constant(kScratch2, column_stride * bytes);
    w_.line("mul r{0}, r{0}, r{1}", kScratch2, kScratch);
    w_.line("add r{0}, r{0}, r{1}", kDram, kScratch2);
    w_.line("mul r{0}, r{0}, r{1}", kScratch, rows);
    w_.line("slli r{0}, r{0}, {1}", kScratch, std::countr_zero(static_cast<uint64_t>(bytes)));
    w_.line("add r{}, r{}, r{}", kWeights, spad, kScratch);  // kWeights is free outside the sub-tile loop
    move(load, kWeights, kRaggedColumns, column_stride, rows, row_stride, kOne, 0, bytes);
    w_.label(ragged_done);
  }

  // If the load cursor is on a block of this core's, the DMA engine fills the free slot with that K step's A block
  // and B block; the cursor then moves to the next K step, or to this core's next block.
  void emit_load_next_step() {
    const std::string none = w_.new_label("loaded");
    w_.load_constant(kScratch, blocks());
    w_.line("bgeu r{}, r{}, {}", kLoadBlock, kScratch, none);
    locate_block(kLoadBlock, kLoadMt, kLoadNb);
    clamp(kLoadKt, tile_k_, spec_.k, kLoadK0);
    w_.line("sem.wait.dma 1");
    point_at(kA, kM0, spec_.a_row, kLoadK0, spec_.a_col, bytes_, kLoadBlock, spec_.a_batch);
    move(true, kLoadSlot, kLoadKt, spec_.a_col, kLoadMt, spec_.a_row, kOne, 0, bytes_);
    w_.load_constant(kScratch, block_m_ * tile_k_ * bytes_);
    w_.line("add r{}, r{}, r{}", kAcc, kLoadSlot, kScratch);  // kAcc is free outside the sub-tile loop
    point_at(kB, kLoadK0, spec_.b_row, kN0, spec_.b_col, bytes_, kLoadBlock, spec_.b_batch);
    if (b_transposed_)
      move(true, kAcc, kLoadKt, spec_.b_row, kLoadNb, spec_.b_col, kOne, 0, bytes_);
    else
      move_sub_tiles(true, kAcc, kLoadKt, spec_.b_row, spec_.b_col, bytes_);
    w_.line("sem.post.dma 0");
    w_.load_constant(kScratch, slot_bytes());
    w_.line("xor r{0}, r{0}, r{1}", kLoadSlot, kScratch);
    w_.add_constant(kLoadK0, tile_k_, kScratch);
    w_.load_constant(kScratch, spec_.k);
    w_.line("bltu r{}, r{}, {}", kLoadK0, kScratch, none);
    w_.line("li r{}, 0", kLoadK0);
    w_.line("add r{0}, r{0}, r{1}", kLoadBlock, kCoreStride);
    w_.label(none);
  }

  // The matrix engine runs each weight sub-tile of the B block against the A block, into the sub-tile's part of the
  // accumulator (overwriting at the first K step, accumulating after), then frees the slot.
  void emit_multiply_sub_tiles() {
    w_.line("sem.wait.mx 0");
    w_.load_constant(kScratch, block_m_ * tile_k_ * bytes_);
    w_.line("add r{}, r{}, r{}", kBlockB, kSlot, kScratch);
    const std::string sub_tile = w_.new_label("sub_tile"), accumulate = w_.new_label("accumulate"),
                      multiplied = w_.new_label("multiplied");
    w_.line("li r{}, 0", kColumn);
    w_.label(sub_tile);
    clamp_to(kColumns, sub_cols_, kNb, kColumn);
    w_.line("mul r{}, r{}, r{}", kWeights, kColumn, kKt);
    w_.line("slli r{0}, r{0}, {1}", kWeights, std::countr_zero(static_cast<uint64_t>(bytes_)));
    w_.line("add r{0}, r{0}, r{1}", kWeights, kBlockB);
    w_.line("{}.{} r{}, r{}, r{}", b_transposed_ ? "mx.ldwt" : "mx.ldw", type_, kWeights, kKt, kColumns);
    w_.line("mul r{}, r{}, r{}", kAcc, kColumn, kMt);
    w_.line("slli r{0}, r{0}, {1}", kAcc, std::countr_zero(static_cast<uint64_t>(kAccumulatorBytes)));
    w_.line("bne r{}, r0, {}", kK0, accumulate);
    w_.line("mx.mac.{} r{}, r{}, r{}, 0", type_, kAcc, kSlot, kMt);
    w_.line("jal r0, {}", multiplied);
    w_.label(accumulate);
    w_.line("mx.mac.{} r{}, r{}, r{}, 1", type_, kAcc, kSlot, kMt);
    w_.label(multiplied);
    w_.line("add r{0}, r{0}, r{1}", kColumn, kSubTileCols);
    w_.line("bltu r{}, r{}, {}", kColumn, kNb, sub_tile);
    w_.line("sem.post.mx 1");
    w_.load_constant(kScratch, slot_bytes());
    w_.line("xor r{0}, r{0}, r{1}", kSlot, kScratch);
  }

  // The staging area follows the two K-step slots; kAcc is free here.
  void emit_store_block() {
    locate_block(kBlock, kMt, kNb);  // the load cursor moved kM0, kN0 and the sub-tile counts on
    w_.line("mul r{}, r{}, r{}", kScratch2, kMt, kNb);
    w_.load_constant(kAcc, 2 * slot_bytes());
    w_.line("sem.wait.mx 3");
    w_.line("mx.st.{} r{}, r0, r{}", out_type_, kAcc, kScratch2);  // rounds each f32 accumulator once
    w_.line("sem.post.mx 2");
    w_.line("sem.wait.dma 2");
    point_at(kC, kM0, spec_.c_row, kN0, spec_.c_col, out_bytes_, kBlock, spec_.c_batch);
    move_sub_tiles(false, kAcc, kMt, spec_.c_row, spec_.c_col, out_bytes_);
    w_.line("sem.post.dma 3");
  }

  MatmulSpec spec_;
  int64_t bytes_, out_bytes_;         // per element of A and B, and of C
  std::string_view type_, out_type_;  // their types' mnemonic suffixes
  int64_t tile_k_ = 0, sub_cols_ = 0, block_m_ = 0, block_n_ = 0;
  bool b_transposed_ = false;
  AssemblyWriter w_;
};

}  // namespace

Kernel emit_matmul(const MatmulSpec& spec, const config::ChipConfig& config) {
  if (spec.m < 1 || spec.k < 1 || spec.n < 1 || spec.batch < 1)
    throw std::invalid_argument(fmt::format("matmul of {} x [{} x {}] @ [{} x {}] has an empty dimension", spec.batch,
                                            spec.m, spec.k, spec.k, spec.n));
  Kernel kernel;
  const bool integer = spec.type == isa::ElementType::I8 && spec.output_type == isa::ElementType::I32;
  if (!isa::is_float(spec.type) && !integer)
    throw std::invalid_argument(fmt::format("matmul of {} operands; the kernel takes f32, f16 or bf16, or i8 into i32",
                                            isa::type_name(spec.type)));
  kernel.name = fmt::format("matmul_{}", isa::type_name(spec.type));
  kernel.words = isa::assemble(MatmulEmitter(spec, config).emit(), kernel.name + ".s");
  kernel.cores = config.chip_cores;  // the block shares come from csrr ncores
  return kernel;
}

}  // namespace npusim::emitter
