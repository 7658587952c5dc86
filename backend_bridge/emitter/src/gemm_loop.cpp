// The GEMM loop (gemm_loop.h), output-stationary in the accumulator. C is cut into blocks of mt x nb that the
// accumulator holds whole; the cores take blocks in turn. For one block, each K step loads an mt x kt block of A and a
// kt x nb block of B (kt = the systolic array's rows) into one of two scratchpad slots, so the DMA engine fills the
// next slot while the matrix engine works on this one; the matrix engine then runs the array over the nb / cols weight
// sub-tiles of B, each multiplying the same A block into its own part of the accumulator. Blocks are as square as the
// accumulator allows, which keeps DRAM traffic low and puts many MACs behind each instruction. The finished block is
// stored from the accumulator to a staging tile and goes to the epilogue, which takes it to memory.
//
// Scratchpad and accumulator layouts, sub-tile major so that each sub-tile is one contiguous tile (kl: a load's K, its
// steps' kt in turn):
//   A blocks [kl / kt][mt][kt]; B blocks [nb / cols][kl][cols] (or [kl / kt][nb][kt] when B is transposed, for
//   mx.ldwt);
//   C block [nb / cols][mt][cols] in the accumulator, the staging tile and the epilogue's block-shaped tiles.
// A transposed A (contiguous along M, as in a linear layer's weight gradient X^T @ dY) would cost a DRAM transaction
// per element read in rows: it arrives as [kl][mt] in runs of mt elements, into a third part of the slot, and a vtr
// per K step on the vector engine puts it right, so that a K step's slot is loaded DMA → vector → matrix.
// A ragged last sub-tile (nb not a multiple of cols) follows the full ones with its own width.
// A batch of products numbers the blocks of all its entries in turn, so they share the cores and the pipeline.
//
// The scalar unit issues in program order, and a product's sub-tiles fill the matrix queue: so each load is issued
// one load ahead, before the current load's products (a load cursor of its own runs through this core's blocks and
// their loads), or the DMA engine would idle behind a full matrix queue. The two K-step slots are chosen by a
// register, so they are an unordered tile ordered by two semaphores of the kernel's own (slot loaded: DMA → matrix;
// slot free: matrix → DMA); the builder orders everything else (accumulator, staging, the epilogue's tiles) by the
// tiles touched.
#include "gemm_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "npusim/emitter/matmul.h"

namespace npusim::emitter::gemm {
namespace {

constexpr int64_t kAccumulatorBytes = 4;  // f32 accumulators (i32 for i8 operands)
using isa::ElementType;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

isa::Opcode dma_4d(bool load, int64_t bytes) {
  using enum isa::Opcode;
  static constexpr isa::Opcode loads[] = {DmaLoad4d8, DmaLoad4d16, DmaLoad4d32, DmaLoad4d64};
  static constexpr isa::Opcode stores[] = {DmaStore4d8, DmaStore4d16, DmaStore4d32, DmaStore4d64};
  const int size = std::countr_zero(static_cast<uint64_t>(bytes));
  return load ? loads[size] : stores[size];
}

}  // namespace

class Loop::Emitter {
 public:
  Emitter(const Operands& spec, Epilogue& epilogue, std::string name, const config::ChipConfig& config)
      : spec_(spec),
        bytes_(static_cast<int64_t>(isa::element_bytes(spec.type))),
        epilogue_(epilogue),
        b_(std::move(name), config) {
    tile_k_ = config.core_systolic_rows;
    sub_cols_ = config.core_systolic_cols;
    a_transposed_ = spec.m > 1 && spec.k > 1 && spec.a_row == 1 && spec.a_col > 1;
    // Two sets of staging and epilogue tiles when they leave the blocks as large as one set does (the accumulator, not
    // the scratchpad, bounds them); else one. Measured on the default chip, gelu(linear) [256 x 128] @ [128 x 512]:
    // blocks of 52 rows with two sets took 100.6k cycles, of 86 rows with one 96.9k (more B traffic and weight loads
    // cost more than the vector engine waiting for the previous block's store; two sets of 86 x 64, as tall and
    // narrower, 116.1k, the DMA engine then busiest with twice the A traffic in shorter runs).
    const int64_t single_rows = choose_blocks(config, 1) ? block_m_ : 0;
    if (!choose_blocks(config, 2) || block_m_ < single_rows) choose_blocks(config, 1);
    if (block_m_ < 1) throw Unsupported("the scratchpad or accumulator cannot hold one row of a matmul block");
    choose_steps(config);
    for (int64_t stride : {spec.a_row, spec.a_col, spec.b_row, spec.b_col})
      if (!stride_fits(stride, bytes_, config))
        throw Unsupported(fmt::format("matmul stride {} does not fit a DMA immediate", stride));
    if (spec.a_run > 0 && (!reads_columns_in_runs(spec.a_run, config) || spec.k % spec.a_run != 0))
      throw Unsupported(fmt::format("A's columns in runs of {} (K {}) need runs of whole K steps of {}", spec.a_run,
                                    spec.k, tile_k_));
    // B is read along whichever of its dimensions is contiguous; mx.ldwt takes the transposed layout.
    b_transposed_ = spec.b_row < spec.b_col;
  }
  // The epilogue outlives the loop (it is built first); registers it kept from prepare() go back before b_ goes.
  ~Emitter() { epilogue_.release_registers(); }

  // The scratchpad bytes for the slots, the staging tiles and the epilogue's tiles with `sets` sets of the last two:
  // whole tiles are 64-byte aligned, so that much per tile is kept out (slots, staging, bias, scalars), and what the
  // epilogue takes whatever the block.
  int64_t scratchpad_budget(const config::ChipConfig& config, int sets) const {
    return static_cast<int64_t>(config.scratchpad_bytes()) - 64 * (5 + sets) - sets * epilogue_.fixed_bytes();
  }
  // Bytes per output of the staging and epilogue tiles, all sets.
  int64_t staged_bytes_per_output(int sets) const {
    return sets * (static_cast<int64_t>(isa::element_bytes(epilogue_.staged_type())) + epilogue_.bytes_per_output());
  }

  // The block size for `sets` sets of staging and epilogue tiles; false when not one row fits.
  bool choose_blocks(const config::ChipConfig& config, int sets) {
    sets_ = sets;
    const int64_t spad = scratchpad_budget(config, sets);
    const int64_t acc = static_cast<int64_t>(config.accumulator_bytes()) / kAccumulatorBytes;
    const int64_t sub_tiles = ceil_div(spec_.n, sub_cols_);
    // nb as many sub-tiles as make the block about square (or as wide as the accumulator allows for short A), with
    // the two B slots within half the scratchpad; then mt as tall as the accumulator and scratchpad allow.
    const int64_t side = std::min(spec_.m, std::max<int64_t>(1, static_cast<int64_t>(std::sqrt(acc))));
    int64_t block_sub_tiles = std::clamp<int64_t>(acc / (side * sub_cols_), 1, sub_tiles);
    block_sub_tiles = std::min(block_sub_tiles, std::max<int64_t>(1, spad / (4 * tile_k_ * sub_cols_ * bytes_)));
    // Two A slots of mt x kt (and two of its transposed arrival) and two B slots of kt x nb operand elements, the
    // staging of mt x nb outputs and the epilogue's tiles of as many, per set.
    const int64_t staged = staged_bytes_per_output(sets);
    const auto tallest = [&](int64_t nb) {
      return std::min(
          {spec_.m, acc / nb, (spad - 2 * tile_k_ * nb * bytes_) / (2 * a_parts() * tile_k_ * bytes_ + nb * staged)});
    };
    // Output-stationary: a block is one tile of outputs the PEs hold (R rows, one sub-tile), so that its K steps
    // follow each other on the array and it drains once.
    const bool output_stationary = config.output_stationary();
    if (output_stationary) block_sub_tiles = 1;
    block_n_ = block_sub_tiles * sub_cols_;
    block_m_ = output_stationary ? std::min(tallest(block_n_), config.core_systolic_rows) : tallest(block_n_);
    // Enough blocks for every core: narrower first, then shorter.
    const auto blocks = [&] { return spec_.batch * ceil_div(spec_.m, block_m_) * ceil_div(spec_.n, block_n_); };
    while (blocks() < config.chip_cores && (block_sub_tiles > 1 || block_m_ > 1)) {
      if (block_sub_tiles > 1) {
        block_sub_tiles = (block_sub_tiles + 1) / 2;
        block_n_ = block_sub_tiles * sub_cols_;
        block_m_ = tallest(block_n_);
      } else {
        block_m_ = (block_m_ + 1) / 2;
      }
    }
    if (block_m_ < 1) return false;
    block_m_ = ceil_div(spec_.m, ceil_div(spec_.m, block_m_));  // as many rows in each block
    return true;
  }

  // K steps per load. Each DMA waits out the DRAM's latency and the DMA engine runs one at a time, so where one K
  // step's loads take longer than its products (estimated below from the chip's figures: blocks of few rows or
  // columns, such as a convolution's weight gradient, K the positions of every image and M and N the channels), the
  // matrix engine waits on latency: on the default chip a [16 x 8192] @ [8192 x 144] product took 2.7x its MACs'
  // cycles, and a [27 x 8192] @ [8192 x 16] 12.5x (its K step's A rows, 32 KiB apart, all in one DRAM channel). A load
  // of several K steps, up to kLoadBytes within the scratchpad the blocks leave, waits once for all of them and reads
  // longer runs: 1.36x and 6.9x faster. Where the products take longer, one step a load keeps the pipeline's start
  // short (grouping there cost GPT-2's step 0.8 %). Only whole K steps are grouped (K a multiple of kt: a ragged step
  // would need DMAs of its own, which took back what grouping saves), and a load never straddles two of A's runs.
  static constexpr int64_t kLoadBytes = 64 * 1024;
  void choose_steps(const config::ChipConfig& config) {
    steps_ = 1;
    load_k_ = tile_k_;
    const int64_t total_steps = spec_.k / tile_k_;
    if (spec_.k % tile_k_ != 0 || total_steps < 2) return;
    const int64_t step_bytes = (a_parts() * block_m_ + block_n_) * tile_k_ * bytes_;  // one slot's, per K step
    // A step's two DMAs at this core's share of the bandwidth, against its products: a sub-tile's rows stream
    // through the array after its weights.
    const double bytes_per_cycle = config.dram_bandwidth_gbps / config.chip_clock_ghz / config.chip_cores;
    const double latency =
        static_cast<double>(config.core_dma_setup_cycles) + config.dram_latency_ns * config.chip_clock_ghz;
    const double dma_cycles = 2 * latency + static_cast<double>(step_bytes) / bytes_per_cycle;
    const double matrix_cycles = static_cast<double>(ceil_div(block_n_, sub_cols_) * (block_m_ + tile_k_));
    if (dma_cycles <= matrix_cycles) return;
    const int64_t free = scratchpad_budget(config, sets_) - block_outputs() * staged_bytes_per_output(sets_);
    steps_ =
        std::clamp<int64_t>(std::min({kLoadBytes / step_bytes, free / (2 * step_bytes), total_steps}), 1, total_steps);
    const int64_t run_steps = spec_.a_run / tile_k_;
    while (run_steps > 0 && run_steps % steps_ != 0) --steps_;
    load_k_ = steps_ * tile_k_;
  }

  Kernel build(Loop& loop) {
    b_.describe(
        fmt::format("{} x [{} x {}] @ [{} x {}], blocks m {} n {}, k steps {} ({} a load), sub-tiles {} wide{}, {} "
                    "set{} of staging and epilogue tiles",
                    spec_.batch, spec_.m, spec_.k, spec_.k, spec_.n, block_m_, block_n_, tile_k_, steps_, sub_cols_,
                    a_transposed_   ? (b_transposed_ ? ", A and B transposed" : ", A transposed")
                    : b_transposed_ ? ", B transposed"
                                    : "",
                    sets_, sets_ > 1 ? "s" : ""));
    allocate_tiles();
    a_ = b_.reg("A");
    bm_ = b_.reg("B");
    b_.Ld(a_, kArgumentBlock, 8 * spec_.a_argument);
    b_.add_constant(a_, spec_.a_offset * bytes_);
    b_.Ld(bm_, kArgumentBlock, 8 * spec_.b_argument);
    b_.add_constant(bm_, spec_.b_offset * bytes_);
    one_ = b_.reg("one");
    sub_tile_cols_ = b_.reg("sub-tile columns");
    slot_ = b_.reg("K-step slot");
    load_slot_ = b_.reg("slot loaded next");
    b_.point(slot_, slots_);
    b_.point(load_slot_, slots_);
    b_.li(one_, 1);
    b_.li(sub_tile_cols_, sub_cols_);
    b_.DmaDim(3, one_, kZero);  // tiles here have at most three dimensions
    loaded_ = b_.semaphore();
    free_ = b_.semaphore();
    if (a_transposed_) arrived_ = b_.semaphore();
    b_.SemPostMatrix(free_);
    b_.SemPostMatrix(free_);
    epilogue_.prepare(loop);

    block_ = b_.reg("block");
    core_stride_ = b_.reg("core stride");
    load_block_ = b_.reg("block loaded next");
    load_k0_ = b_.reg("K step loaded next");
    previous_ = b_.reg("previous block");
    const Label next = b_.label(), last_in_first_set = b_.label(), done = b_.label();
    b_.Csrr(block_, isa::Csr::CoreId);
    b_.Csrr(core_stride_, isa::Csr::CoreCount);
    b_.move(load_block_, block_);
    b_.li(load_k0_, 0);
    emit_load_next_step();
    {
      Reg blocks = b_.reg("blocks");
      b_.li(blocks, this->blocks());
      b_.Bgeu(block_, blocks, done);
      b_.move(previous_, blocks);  // none yet
    }
    // Unrolled by two, so that each half stages into its own set's tiles and finishes the previous block from the
    // other's: the builder then orders each set by its own tiles.
    b_.bind(next);
    emit_block(loop, 0, /*first_may_be_none=*/true);
    {
      Reg blocks = b_.reg("blocks");
      b_.li(blocks, this->blocks());
      b_.Bgeu(block_, blocks, last_in_first_set);
    }
    emit_block(loop, 1, /*first_may_be_none=*/false);
    {
      Reg blocks = b_.reg("blocks");
      b_.li(blocks, this->blocks());
      b_.Bltu(block_, blocks, next);
    }
    emit_epilogue(loop, set_of(1), true);
    emit_epilogue(loop, set_of(1), false);
    b_.Jal(kZero, done);
    b_.bind(last_in_first_set);
    emit_epilogue(loop, set_of(0), true);
    emit_epilogue(loop, set_of(0), false);
    b_.bind(done);
    b_.Halt();
    return b_.finish(b_.config().chip_cores);  // the block shares come from csrr ncores
  }

  KernelBuilder& builder() { return b_; }
  int sets() const { return sets_; }
  const Tile& staging(int set) const { return staging_.at(set); }
  int64_t block_outputs() const { return block_m_ * block_n_; }
  R one() const { return one_; }

  // Loop::point_at: the batch entry in a register.
  void point_at(R dram, R base, const Block& block, int64_t row_stride, int64_t column_stride, int64_t batch_stride,
                int64_t bytes) {
    point_at(dram, base, block.m0, row_stride, block.n0, column_stride, bytes, kZero, 0);
    if (spec_.batch == 1 || batch_stride == 0) return;
    Reg scratch = b_.reg("scratch");
    b_.li(scratch, batch_stride * bytes);
    b_.Mul(scratch, scratch, block.entry);
    b_.Add(dram, dram, scratch);
  }
  void move_block(bool load, R spad, const Tile& tile, R dram, const Block& block, int64_t row_stride,
                  int64_t column_stride, int64_t bytes) {
    move_sub_tiles(load, spad, tile, dram, block.full_sub_tiles, block.ragged_columns, block.rows, row_stride,
                   column_stride, bytes);
  }

 private:
  int64_t blocks_n() const { return ceil_div(spec_.n, block_n_); }
  int64_t entry_blocks() const { return ceil_div(spec_.m, block_m_) * blocks_n(); }
  int64_t blocks() const { return spec_.batch * entry_blocks(); }
  // The A block's parts of a slot: itself, and its transposed arrival when A is transposed.
  int64_t a_parts() const { return a_transposed_ ? 2 : 1; }
  // A slot: a load's A blocks, its B blocks, then (A transposed) A's arrival [kl][mt]; each part sized for the
  // tallest block and a full load.
  int64_t slot_bytes() const { return (a_parts() * block_m_ + block_n_) * load_k_ * bytes_; }
  int64_t b_part() const { return block_m_ * load_k_ * bytes_; }                     // the B blocks' offset in a slot
  int64_t arrival_part() const { return (block_m_ + block_n_) * load_k_ * bytes_; }  // A's arrival's

  void allocate_tiles() {
    slots_ = b_.tile(Space::Scratchpad, 2 * slot_bytes(), "K-step slots", /*ordered=*/false);
    accumulator_ = b_.tile(Space::Accumulator, block_outputs() * kAccumulatorBytes, "C block");
    for (int set = 0; set < sets_; ++set)
      staging_.push_back(b_.tile(Space::Scratchpad,
                                 block_outputs() * static_cast<int64_t>(isa::element_bytes(epilogue_.staged_type())),
                                 fmt::format("C staging {}", set)));
  }

  // Where a block lies: its first row and column, and its width in full sub-tiles and ragged columns.
  struct BlockPosition {
    Reg m0, n0, full_sub_tiles, ragged_columns;
  };

  // For the block numbered in `block` (within its batch entry: b = block % entry_blocks): m0 = (b / blocks_n) *
  // block_m and n0 = (b % blocks_n) * block_n, its sizes `mt` and `nb` clamped at the edges, and nb in full sub-tiles
  // and ragged columns.
  BlockPosition locate_block(R block, R mt, R nb) {
    BlockPosition p{b_.reg("block row"), b_.reg("block column"), b_.reg("full sub-tiles"), b_.reg("ragged columns")};
    Reg scratch = b_.reg("scratch");
    R within_entry = block;
    if (spec_.batch > 1) {
      b_.li(scratch, entry_blocks());
      b_.Remu(p.m0, block, scratch);
      within_entry = p.m0;
    }
    b_.li(scratch, blocks_n());
    b_.Remu(p.n0, within_entry, scratch);
    b_.Divu(p.m0, within_entry, scratch);
    b_.mul_constant(p.m0, block_m_);
    b_.mul_constant(p.n0, block_n_);
    clamp(mt, block_m_, spec_.m, p.m0);
    clamp(nb, block_n_, spec_.n, p.n0);
    b_.Divu(p.full_sub_tiles, nb, sub_tile_cols_);
    b_.Mul(scratch, p.full_sub_tiles, sub_tile_cols_);
    b_.Sub(p.ragged_columns, nb, scratch);
    return p;
  }

  // size = min(tile, total - position), for a constant total or (clamp_to) one in a register.
  void clamp(R size, int64_t tile, int64_t total, R position) {
    Reg total_register = b_.reg("total");
    b_.li(total_register, total);
    clamp_to(size, tile, total_register, position);
  }
  void clamp_to(R size, int64_t tile, R total, R position) {
    const Label sized = b_.label();
    Reg left = b_.reg("left");
    b_.Sub(left, total, position);
    b_.li(size, tile);
    b_.Bgeu(left, size, sized);
    b_.move(size, left);
    b_.bind(sized);
  }

  // dram = base + row * row_stride + column * column_stride, plus the batch entry of `block` times batch_stride
  // (strides in elements of `bytes`).
  void point_at(R dram, R base, R row, int64_t row_stride, R column, int64_t column_stride, int64_t bytes, R block,
                int64_t batch_stride) {
    Reg scratch = b_.reg("scratch");
    b_.li(scratch, row_stride * bytes);
    b_.Mul(scratch, scratch, row);
    b_.Add(dram, base, scratch);
    b_.li(scratch, column_stride * bytes);
    b_.Mul(scratch, scratch, column);
    b_.Add(dram, dram, scratch);
    if (spec_.batch == 1 || batch_stride == 0) return;
    Reg entry = b_.reg("batch entry");
    b_.li(scratch, entry_blocks());
    b_.Divu(entry, block, scratch);
    b_.li(scratch, batch_stride * bytes);
    b_.Mul(entry, entry, scratch);
    b_.Add(dram, dram, entry);
  }

  // A's K-step block of the block at row m0, at load_k0_: within its run when A's columns come in runs.
  void point_at_a(R dram, R m0) {
    if (spec_.a_run == 0) {
      point_at(dram, a_, m0, spec_.a_row, load_k0_, spec_.a_col, bytes_, load_block_, spec_.a_batch);
      return;
    }
    Reg run = b_.reg("run"), within = b_.reg("column in the run"), scratch = b_.reg("scratch");
    b_.li(scratch, spec_.a_run);
    b_.Divu(run, load_k0_, scratch);
    b_.Remu(within, load_k0_, scratch);
    point_at(dram, a_, m0, spec_.a_row, within, spec_.a_col, bytes_, load_block_, spec_.a_batch);
    b_.li(scratch, spec_.a_run_stride * bytes_);
    b_.Mul(run, run, scratch);
    b_.Add(dram, dram, run);
  }

  // One 3-D DMA between DRAM at `dram` and the packed scratchpad tile at `spad`: `inner` elements element_stride
  // apart, in `rows` rows row_stride apart, in `planes` planes plane_stride apart (strides in elements of `bytes`).
  void move(bool load, R spad, R dram, R inner, int64_t element_stride, R rows, int64_t row_stride, R planes,
            int64_t plane_stride, int64_t bytes) {
    Reg stride = b_.reg("dma stride");
    b_.li(stride, row_stride * bytes);
    b_.DmaDim(1, rows, stride);
    b_.li(stride, plane_stride * bytes);
    b_.DmaDim(2, planes, stride);
    if (load)
      b_.emit(dma_4d(true, bytes), {spad, dram, inner, element_stride * bytes});
    else
      b_.emit(dma_4d(false, bytes), {dram, spad, inner, element_stride * bytes});
  }

  // A load's K of `kl` elements (k_stride apart) in `rows` rows (row_stride apart) into the scratchpad at `spad` as
  // planes [K step][rows][kt], one DMA (a load of one step: one plane of kl, which may be short).
  void move_k_planes(R spad, R dram, R kl, int64_t k_stride, R rows, int64_t row_stride) {
    if (steps_ == 1) {
      move(true, spad, dram, kl, k_stride, rows, row_stride, one_, 0, bytes_);
      return;
    }
    Reg kt = b_.reg("K step size"), planes = b_.reg("K steps");
    b_.li(kt, tile_k_);
    b_.Divu(planes, kl, kt);
    move(true, spad, dram, kt, k_stride, rows, row_stride, planes, tile_k_ * k_stride, bytes_);
  }

  // The sub-tile-major tile of `rows` x nb between DRAM at `dram` (rows row_stride apart, columns column_stride
  // apart) and the scratchpad tile `tile` from `spad`: the full sub-tiles as one DMA, the ragged one as another. May
  // move `dram` on.
  void move_sub_tiles(bool load, R spad, const Tile& tile, R dram, R full_sub_tiles, R ragged_columns, R rows,
                      int64_t row_stride, int64_t column_stride, int64_t bytes) {
    const Label full_done = b_.label(), ragged_done = b_.label();
    b_.Beq(full_sub_tiles, kZero, full_done);
    move(load, spad, dram, sub_tile_cols_, column_stride, rows, row_stride, full_sub_tiles, sub_cols_ * column_stride,
         bytes);
    b_.bind(full_done);
    b_.Beq(ragged_columns, kZero, ragged_done);
    {
      // The ragged sub-tile starts full * cols columns in (`dram` moves there): full * cols * rows elements into the
      // scratchpad tile.
      Reg ragged_spad = b_.reg("ragged sub-tile"), scratch = b_.reg("scratch");
      b_.Mul(ragged_spad, full_sub_tiles, sub_tile_cols_);
      b_.li(scratch, column_stride * bytes);
      b_.Mul(scratch, scratch, ragged_spad);
      b_.Add(dram, dram, scratch);
      b_.Mul(ragged_spad, ragged_spad, rows);
      b_.Slli(ragged_spad, ragged_spad, std::countr_zero(static_cast<uint64_t>(bytes)));
      b_.Add(ragged_spad, spad, ragged_spad);
      b_.bind(ragged_spad, tile);
      move(load, ragged_spad, dram, ragged_columns, column_stride, rows, row_stride, one_, 0, bytes);
    }
    b_.bind(ragged_done);
  }

  // If the load cursor is on a block of this core's, the DMA engine fills the free slot with that load's A and B
  // blocks; the cursor then moves to the next load, or to this core's next block.
  void emit_load_next_step() {
    const Label none = b_.label();
    {
      Reg blocks = b_.reg("blocks");
      b_.li(blocks, this->blocks());
      b_.Bgeu(load_block_, blocks, none);
    }
    {
      Reg mt = b_.reg("loaded block rows"), nb = b_.reg("loaded block columns"), kl = b_.reg("loaded K");
      BlockPosition p = locate_block(load_block_, mt, nb);
      // B's DMA needs the block's width as a register when B is transposed, else as full sub-tiles and ragged columns.
      if (b_transposed_) {
        p.full_sub_tiles = Reg();
        p.ragged_columns = Reg();
      } else {
        nb = Reg();
      }
      clamp(kl, load_k_, spec_.k, load_k0_);
      b_.SemWaitDma(free_);
      Reg a_arrival;
      {
        Reg dram = b_.reg("DRAM");
        point_at_a(dram, p.m0);
        p.m0 = Reg();  // B needs the block's columns only: one register more for its ragged sub-tile
        b_.bind(load_slot_, slots_);
        if (a_transposed_) {
          a_arrival = b_.reg("A arrival");
          b_.li(a_arrival, arrival_part());
          b_.Add(a_arrival, load_slot_, a_arrival);
          b_.bind(a_arrival, slots_);
          move(true, a_arrival, dram, mt, spec_.a_row, kl, spec_.a_col, one_, 0, bytes_);
        } else {
          move_k_planes(load_slot_, dram, kl, spec_.a_col, mt, spec_.a_row);
        }
        Reg b_block = b_.reg("B block");
        b_.li(b_block, b_part());
        b_.Add(b_block, load_slot_, b_block);
        b_.bind(b_block, slots_);
        point_at(dram, bm_, load_k0_, spec_.b_row, p.n0, spec_.b_col, bytes_, load_block_, spec_.b_batch);
        if (b_transposed_)
          move_k_planes(b_block, dram, kl, spec_.b_row, nb, spec_.b_col);
        else
          move_sub_tiles(true, b_block, slots_, dram, p.full_sub_tiles, p.ragged_columns, kl, spec_.b_row, spec_.b_col,
                         bytes_);
      }
      p = BlockPosition{};  // the vtr below needs registers more
      if (a_transposed_) {
        // Each step's [kt][mt] → [mt][kt]; the vector engine waits here for the arrival, behind whatever epilogue it
        // has queued.
        b_.SemPostDma(arrived_);
        b_.SemWaitVector(arrived_);
        if (steps_ > 1) {
          Reg step_k = b_.reg("K in the load"), kt = b_.reg("K step size"), to = b_.reg("A step"),
              from = b_.reg("arrived step");
          const Label step = b_.label();
          b_.li(step_k, 0);
          b_.bind(step);
          clamp_to(kt, tile_k_, kl, step_k);
          b_.Mul(to, step_k, mt);
          b_.Slli(to, to, std::countr_zero(static_cast<uint64_t>(bytes_)));
          b_.Add(from, a_arrival, to);
          b_.Add(to, load_slot_, to);
          b_.bind(to, slots_);
          b_.bind(from, slots_);
          b_.Vtr(spec_.type, to, from, kt, mt);
          b_.add_constant(step_k, tile_k_);
          b_.Bltu(step_k, kl, step);
        } else {
          b_.Vtr(spec_.type, load_slot_, a_arrival, kl, mt);
        }
        b_.SemPostVector(loaded_);
      } else {
        b_.SemPostDma(loaded_);
      }
    }
    toggle_slot(load_slot_);
    b_.add_constant(load_k0_, load_k_);
    Reg k = b_.reg("K");
    b_.li(k, spec_.k);
    b_.Bltu(load_k0_, k, none);
    b_.li(load_k0_, 0);
    b_.Add(load_block_, load_block_, core_stride_);
    b_.bind(none);
  }

  // Flips a slot register between the two slots.
  void toggle_slot(R slot) {
    Reg flip = b_.reg("slot flip");
    b_.li(flip, slots_.address ^ (slots_.address + slot_bytes()));
    b_.Xor(slot, slot, flip);
    b_.bind(slot, slots_);
  }

  // For each K step of the load in the slot, the matrix engine runs each weight sub-tile of its B block against its
  // A block, into the sub-tile's part of the accumulator (overwriting at the first K step, accumulating after); then
  // it frees the slot. `kl`: the load's K.
  void emit_multiply_sub_tiles(R k0, R kl, R mt, R nb) {
    b_.SemWaitMatrix(loaded_);
    Reg block_b = b_.reg("B block"), kt = b_.reg("K step size"), step_k = b_.reg("K in the load");
    b_.li(block_b, b_part());
    b_.Add(block_b, slot_, block_b);
    const Label step = b_.label(), sub_tile = b_.label(), accumulate = b_.label(), multiplied = b_.label();
    b_.li(step_k, 0);
    b_.bind(step);
    clamp_to(kt, tile_k_, kl, step_k);  // a load of one step may be short
    {
      Reg a_block = b_.reg("A block"), column = b_.reg("column"), columns = b_.reg("columns");
      Reg weights = b_.reg("weights"), acc = b_.reg("accumulator"), first = b_.reg("first K step");
      // The step's A block [mt][kt] is step_k * mt elements in; whether it is the product's first K step.
      b_.Mul(a_block, step_k, mt);
      b_.Slli(a_block, a_block, std::countr_zero(static_cast<uint64_t>(bytes_)));
      b_.Add(a_block, slot_, a_block);
      b_.bind(a_block, slots_);
      b_.Or(first, k0, step_k);
      b_.li(column, 0);
      b_.bind(sub_tile);
      clamp_to(columns, sub_cols_, nb, column);
      if (b_transposed_) {
        // [kl / kt][nb][kt]: the step's nb x kt from step_k * nb, the sub-tile's column * kt in.
        b_.Mul(weights, step_k, nb);
        Reg scratch = b_.reg("scratch");
        b_.Mul(scratch, column, kt);
        b_.Add(weights, weights, scratch);
      } else {
        // [nb / cols][kl][cols]: the sub-tile's from column * kl, the step's kt x columns from step_k * columns in.
        b_.Mul(weights, column, kl);
        Reg scratch = b_.reg("scratch");
        b_.Mul(scratch, step_k, columns);
        b_.Add(weights, weights, scratch);
      }
      b_.Slli(weights, weights, std::countr_zero(static_cast<uint64_t>(bytes_)));
      b_.Add(weights, weights, block_b);
      b_.bind(weights, slots_);
      if (b_transposed_)
        b_.MatrixLoadWeightsTransposed(spec_.type, weights, kt, columns);
      else
        b_.MatrixLoadWeights(spec_.type, weights, kt, columns);
      b_.Mul(acc, column, mt);
      b_.Slli(acc, acc, std::countr_zero(static_cast<uint64_t>(kAccumulatorBytes)));
      b_.add_constant(acc, accumulator_.address);
      b_.bind(acc, accumulator_);
      b_.Bne(first, kZero, accumulate);
      b_.MatrixMultiply(spec_.type, acc, a_block, mt, 0);
      b_.Jal(kZero, multiplied);
      b_.bind(accumulate);
      b_.MatrixMultiply(spec_.type, acc, a_block, mt, 1);
      b_.bind(multiplied);
      b_.Add(column, column, sub_tile_cols_);
      b_.Bltu(column, nb, sub_tile);
    }
    b_.Add(step_k, step_k, kt);
    b_.Bltu(step_k, kl, step);
    b_.SemPostMatrix(free_);
    toggle_slot(slot_);
  }

  int set_of(int half) const { return half % sets_; }

  // One block of this core's, staged into set_of(half); around its K loop, the previous block (when there is one: in
  // the first half it may be none) is computed on and stored from the other set.
  void emit_block(Loop& loop, int half, bool first_may_be_none) {
    const int previous_set = set_of(half + 1);
    const auto around = [&](bool compute) {
      const Label none = b_.label();
      if (first_may_be_none) {
        Reg blocks = b_.reg("blocks");
        b_.li(blocks, this->blocks());
        b_.Bgeu(previous_, blocks, none);
      }
      emit_epilogue(loop, previous_set, compute);
      b_.bind(none);
    };
    around(true);
    {
      Reg k0 = b_.reg("load's K"), mt = b_.reg("block rows"), nb = b_.reg("block columns");
      locate_block(block_, mt, nb);  // for the block's size
      const Label k_step = b_.label();
      b_.li(k0, 0);
      b_.bind(k_step);
      emit_load_next_step();
      {
        Reg kl = b_.reg("load size");  // after the next load, which needs every register it can have
        clamp(kl, load_k_, spec_.k, k0);
        emit_multiply_sub_tiles(k0, kl, mt, nb);
      }
      b_.add_constant(k0, load_k_);
      Reg total = b_.reg("K");
      b_.li(total, spec_.k);
      b_.Bltu(k0, total, k_step);
    }
    around(false);  // before the staging, which may be the same set's (one set) and may be what is stored
    emit_stage_block(set_of(half));
    b_.move(previous_, block_);
    b_.Add(block_, block_, core_stride_);
  }

  // The accumulator goes to the set's staging tile, in the epilogue's staged type.
  void emit_stage_block(int set) {
    Reg mt = b_.reg("block rows"), nb = b_.reg("block columns");
    locate_block(block_, mt, nb);  // the load cursor moved on the block registers
    Reg outputs = b_.reg("outputs"), staging = b_.reg("staging"), acc = b_.reg("accumulator");
    b_.Mul(outputs, mt, nb);
    b_.point(staging, staging_[set]);
    b_.point(acc, accumulator_);
    b_.MatrixStore(epilogue_.staged_type(), staging, acc, outputs);
  }

  // The epilogue's compute or store part of the previous block, staged in `set`.
  void emit_epilogue(Loop& loop, int set, bool compute) {
    Reg mt = b_.reg("block rows"), nb = b_.reg("block columns");
    const BlockPosition p = locate_block(previous_, mt, nb);
    Reg outputs = b_.reg("outputs");
    b_.Mul(outputs, mt, nb);
    Reg entry;
    if (spec_.batch > 1) {
      entry = b_.reg("batch entry");
      b_.li(entry, entry_blocks());
      b_.Divu(entry, previous_, entry);
    }
    const Block block{
        spec_.batch > 1 ? R(entry) : kZero, p.m0, p.n0, mt, nb, p.full_sub_tiles, p.ragged_columns, outputs};
    if (compute)
      epilogue_.compute(loop, block, set);
    else
      epilogue_.store(loop, block, set);
  }

  Operands spec_;
  int64_t bytes_;  // per element of A and B
  Epilogue& epilogue_;
  int64_t tile_k_ = 0, sub_cols_ = 0, block_m_ = 0, block_n_ = 0;
  int64_t steps_ = 1, load_k_ = 0;  // K steps per load, and the K elements of a full load
  bool a_transposed_ = false, b_transposed_ = false;
  KernelBuilder b_;
  int sets_ = 1;
  Tile slots_, accumulator_;
  std::vector<Tile> staging_;  // one per set
  // Semaphores: a K-step slot loaded (DMA → matrix, or vector → matrix after the vtr of a transposed A), a slot free
  // (matrix → DMA), a transposed A arrived (DMA → vector).
  int loaded_ = 0, free_ = 0, arrived_ = 0;
  Reg a_, bm_, one_, sub_tile_cols_, slot_, load_slot_, block_, core_stride_, load_block_, load_k0_, previous_;
};

Loop::Loop(const Operands& operands, Epilogue& epilogue, std::string name, const config::ChipConfig& config)
    : emitter_(std::make_unique<Emitter>(operands, epilogue, std::move(name), config)) {}
Loop::~Loop() = default;
Kernel Loop::build() { return emitter_->build(*this); }
KernelBuilder& Loop::builder() { return emitter_->builder(); }
int Loop::sets() const { return emitter_->sets(); }
const Tile& Loop::staging(int set) const { return emitter_->staging(set); }
int64_t Loop::block_outputs() const { return emitter_->block_outputs(); }
R Loop::one() const { return emitter_->one(); }
void Loop::point_at(R dram, R base, const Block& block, int64_t row_stride, int64_t column_stride, int64_t batch_stride,
                    int64_t bytes) {
  emitter_->point_at(dram, base, block, row_stride, column_stride, batch_stride, bytes);
}
void Loop::move_block(bool load, R spad, const Tile& tile, R dram, const Block& block, int64_t row_stride,
                      int64_t column_stride, int64_t bytes) {
  emitter_->move_block(load, spad, tile, dram, block, row_stride, column_stride, bytes);
}
bool Loop::stride_fits(int64_t stride, int64_t bytes, const config::ChipConfig& config) {
  return stride >= 0 && stride * bytes * config.core_systolic_cols <= INT32_MAX;
}

}  // namespace npusim::emitter::gemm
