// The GEMM loop of the matrix-product kernels (gemm_loop.cpp): C = A @ B in blocks on the matrix engine, each
// finished block handed to an epilogue between the accumulator and memory — matmul.cpp's alpha and bias, or
// fused_gemm.cpp's fused pointwise program (torch.compile's GEMM templates).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "npusim/config/chip_config.h"
#include "npusim/emitter/kernel_builder.h"

namespace npusim::emitter::gemm {

// The product's operands. Strides in elements: A[m][k] at A + a_offset + m*a_row + k*a_col, likewise B[k][n]; entry
// e of a batch starts e * a_batch (b_batch) elements on. A and B hold `type` (f32, f16 or bf16; i8 for an i32 C),
// read from the argument block's entries a_argument and b_argument.
//
// With a_run > 0, A's columns come in runs of a_run, a_run_stride elements apart: A[m][k] at A + a_offset + m*a_row
// + (k / a_run)*a_run_stride + (k % a_run)*a_col. So the patches of a convolution are read where they lie in its
// input (an implicit GEMM: a run is a kernel row's window, KW x C channels-last), not gathered by a copy first. A run
// must be a whole number of K steps (the systolic array's rows), so that no K step straddles two. A transposed A
// (a_row 1) reads its runs the same way: a convolution's weight gradient, patches^T @ dY, with K the positions of
// every image, an image a run.
struct Operands {
  isa::ElementType type = isa::ElementType::F32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int a_argument = 1, b_argument = 2;
  int64_t a_offset = 0, a_row = 0, a_col = 0, a_batch = 0;
  int64_t b_offset = 0, b_row = 0, b_col = 0, b_batch = 0;
  int64_t a_run = 0, a_run_stride = 0;
};

// A finished block, in registers the epilogue reads (and must not change): its batch entry (r0 for one product), its
// first row m0 and column n0 of C, its rows and columns (clamped at the edges of C), those columns as full sub-tiles
// and ragged columns, and its rows x columns elements. In the staging tile, as in every block-shaped tile of the
// epilogue, a block is [columns / cols][rows][cols] (cols: the systolic array's), the ragged sub-tile after the full
// ones with its own width: so the same element of C is at the same index of each, whatever the element size.
struct Block {
  R entry, m0, n0, rows, columns, full_sub_tiles, ragged_columns, outputs;
};

class Loop;

// What every finished block goes through between the accumulator and memory.
class Epilogue {
 public:
  virtual ~Epilogue() = default;
  // The type the matrix engine stores a block in into the staging tile: f32 for an epilogue computing on C, C's own
  // type for one that stores it as it is.
  virtual isa::ElementType staged_type() const = 0;
  // Scratchpad bytes per element of a block the epilogue's tiles take beyond the staging tile, and bytes of its tiles
  // whatever the block (constants, 64-byte alignment): the loop chooses its block size with these.
  virtual int64_t bytes_per_output() const = 0;
  virtual int64_t fixed_bytes() const = 0;
  // Once, after the loop's own set-up: the epilogue's tiles (loop.sets() sets of loop.block_outputs() elements), its
  // registers and constants.
  virtual void prepare(Loop& loop) = 0;
  // Each finished block, staged in loop.staging(set), goes to memory in two parts: compute (everything but the
  // stores it ends with) is emitted before the next block's K loop, store after it (before the next block is staged),
  // so that the vector engine works on this block while the matrix engine computes the next, and the store waits in the
  // DMA queue behind the next block's loads rather than ahead of them. Both use the tiles of `set` only.
  virtual void compute(Loop& loop, const Block& block, int set) = 0;
  virtual void store(Loop& loop, const Block& block, int set) = 0;
  // When the loop, and with it the builder, goes away (whether the build finished or threw): an epilogue that keeps
  // registers of that builder between calls lets go of them here, since a Reg released later would write to a
  // destroyed builder (ASan found it).
  virtual void release_registers() {}
};

class Loop {
 public:
  // Chooses the block size for the operands, the epilogue's bytes and the chip. Throws Unsupported for strides beyond
  // the DMA's immediates, or a scratchpad or accumulator that cannot hold one row of a block.
  Loop(const Operands& operands, Epilogue& epilogue, std::string name, const config::ChipConfig& config);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // The kernel: the loop over this core's blocks, each through the epilogue. Call once.
  Kernel build();

  KernelBuilder& builder();
  // The staging tiles and the epilogue's tiles come in sets() sets (two when they fit the scratchpad, else one),
  // used by consecutive blocks in turn.
  int sets() const;
  const Tile& staging(int set) const;
  int64_t block_outputs() const;  // the most elements of a block
  R one() const;                  // a register holding 1

  // dram = base + (entry * batch_stride + m0 * row_stride + n0 * column_stride) * bytes: the block's first element in
  // a view of C's shape (strides in elements of `bytes`; base may be dram).
  void point_at(R dram, R base, const Block& block, int64_t row_stride, int64_t column_stride, int64_t batch_stride,
                int64_t bytes);
  // The block between DRAM at `dram` (as point_at gives it: rows row_stride apart, columns column_stride apart) and
  // the block-shaped scratchpad tile `tile` from `spad`: the full sub-tiles as one DMA, the ragged one as another.
  // May move `dram` on.
  void move_block(bool load, R spad, const Tile& tile, R dram, const Block& block, int64_t row_stride,
                  int64_t column_stride, int64_t bytes);

  // Whether a view's stride (elements of `bytes`, in a row, a column or the batch) fits the moves' immediates.
  static bool stride_fits(int64_t stride, int64_t bytes, const config::ChipConfig& config);

 private:
  class Emitter;
  std::unique_ptr<Emitter> emitter_;
};

}  // namespace npusim::emitter::gemm
