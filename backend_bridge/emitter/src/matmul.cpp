// The matmul kernel. For each M tile, the whole K extent of A (a panel of mt x K) is loaded into the scratchpad
// once, as K/kt blocks of mt x kt; then for each N tile the K loop streams kt x nt tiles of B through two
// buffers, so the DMA engine loads the next B tile while the matrix engine multiplies the current one. Tile sizes
// are clamped at run time for the edges. The engines are ordered by semaphores, not fences:
//   0  B tile loaded (DMA → matrix)          1  B buffer free (matrix → DMA; posted twice at the start)
//   2  C tile in the scratchpad (matrix → DMA)  3  C buffer free (DMA → matrix; posted once at the start)
//   4  A panel loaded (DMA → matrix)         5  A panel free (matrix → DMA; posted once at the start)
//
// Registers: r1 arguments; r2 C, r3 A, r4 B; r5 n0, r6 nt, r7 m0, r8 mt, r9 k0, r10 kt; r11 row counter,
// r12 DRAM pointer, r13 scratchpad pointer, r14/r15 scratch; r16 mt*nt; r17 tile step across cores;
// r20 A panel, r21 current B buffer, r22 C tile, r23 A block of this K step, r24 B buffer toggle (B0 ^ B1).
// The shares come from csrr coreid/ncores, so the kernel must be launched on every core of the chip
// (launch_matmul does); each core computes its share of the output tiles.
#include "npusim/emitter/matmul.h"

#include <fmt/format.h>

#include <algorithm>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

constexpr int kC = 2, kA = 3, kB = 4;
constexpr int kN0 = 5, kNt = 6, kM0 = 7, kMt = 8, kK0 = 9, kKt = 10;
constexpr int kRows = 11, kDram = 12, kSpad = 13, kScratch = 14, kScratch2 = 15, kTileElements = 16, kCoreStride = 17;
constexpr int kSpadA = 20, kSpadB = 21, kSpadC = 22, kBlockA = 23, kToggleB = 24;
constexpr int64_t kFloat = 4;

class MatmulEmitter {
 public:
  MatmulEmitter(const MatmulSpec& spec, const config::ChipConfig& config) : spec_(spec) {
    tile_k_ = config.core_systolic_rows;
    tile_n_ = config.core_systolic_cols;
    const int64_t spad_floats = static_cast<int64_t>(config.scratchpad_bytes()) / kFloat;
    const int64_t acc_floats = static_cast<int64_t>(config.accumulator_bytes()) / kFloat;
    k_blocks_ = (spec.k + tile_k_ - 1) / tile_k_;
    // The scratchpad holds the A panel (mt x K, in whole kt blocks), two B tiles and the C tile (mt x nt).
    tile_m_ = std::min(
        {(spad_floats - 2 * tile_k_ * tile_n_) / (k_blocks_ * tile_k_ + tile_n_), acc_floats / tile_n_, spec.m});
    if (tile_m_ < 1) throw Unsupported("the scratchpad or accumulator cannot hold one row of a matmul tile");
    for (int64_t stride : {spec.a_row, spec.a_col, spec.b_row, spec.b_col, spec.c_row, spec.c_col})
      if (stride * kFloat > INT32_MAX || stride < 0)
        throw Unsupported(fmt::format("matmul stride {} does not fit a DMA immediate", stride));
    // B is loaded row by row along whichever of its dimensions is contiguous; mx.ldwt takes the transposed layout.
    b_transposed_ = spec.b_row < spec.b_col;
  }

  std::string emit() {
    w_.comment(fmt::format("matmul_f32: [{} x {}] @ [{} x {}], tiles m {} k {} n {}{}", spec_.m, spec_.k, spec_.k,
                           spec_.n, tile_m_, tile_k_, tile_n_, b_transposed_ ? ", B transposed" : ""));
    w_.line("ld r{}, 0(r1)", kC);
    w_.line("ld r{}, 8(r1)", kA);
    w_.line("ld r{}, 16(r1)", kB);
    const int64_t panel_bytes = tile_m_ * k_blocks_ * tile_k_ * kFloat, b_bytes = tile_k_ * tile_n_ * kFloat;
    w_.line("li r{}, 0", kSpadA);
    w_.load_constant(kSpadB, panel_bytes);
    w_.load_constant(kToggleB, panel_bytes ^ (panel_bytes + b_bytes));
    w_.load_constant(kSpadC, panel_bytes + 2 * b_bytes);
    w_.line("sem.post.mx 1");
    w_.line("sem.post.mx 1");
    w_.line("sem.post.dma 3");
    w_.line("sem.post.mx 5");
    // The cores share out whichever of the N and M tile loops has more tiles.
    const bool split_n = (spec_.n + tile_n_ - 1) / tile_n_ >= (spec_.m + tile_m_ - 1) / tile_m_;
    loop(
        kM0, kMt, spec_.m, tile_m_,
        [&] {
          emit_load_panel();
          loop(
              kN0, kNt, spec_.n, tile_n_,
              [&] {
                w_.line("li r{}, 0", kBlockA);
                loop(kK0, kKt, spec_.k, tile_k_, [&] { emit_k_step(); });
                emit_store_tile();
              },
              split_n);
          w_.line("sem.post.mx 5");
        },
        !split_n);
    w_.line("halt");
    return w_.text();
  }

 private:
  // for (position = 0; position < total; position += tile) { size = min(tile, total - position); body }
  // With `across_cores`, core c of n takes tiles c, c + n, c + 2n, ... (a core may get none).
  template <typename Body>
  void loop(int position, int size, int64_t total, int64_t tile, Body body, bool across_cores = false) {
    const std::string top = w_.new_label("loop"), clamped = w_.new_label("sized"), done = w_.new_label("done");
    if (across_cores) {
      w_.line("csrr r{}, coreid", position);
      w_.load_constant(kScratch, tile);
      w_.line("mul r{0}, r{0}, r{1}", position, kScratch);
      w_.line("csrr r{}, ncores", kCoreStride);
      w_.line("mul r{0}, r{0}, r{1}", kCoreStride, kScratch);
      w_.load_constant(kScratch, total);
      w_.line("bgeu r{}, r{}, {}", position, kScratch, done);
    } else {
      w_.line("li r{}, 0", position);
    }
    w_.label(top);
    w_.load_constant(kScratch, total);
    w_.line("sub r{0}, r{0}, r{1}", kScratch, position);
    w_.load_constant(size, tile);
    w_.line("bgeu r{}, r{}, {}", kScratch, size, clamped);
    w_.line("addi r{}, r{}, 0", size, kScratch);
    w_.label(clamped);
    body();
    if (across_cores)
      w_.line("add r{0}, r{0}, r{1}", position, kCoreStride);
    else
      w_.add_constant(position, tile, kScratch);
    w_.load_constant(kScratch, total);
    w_.line("bltu r{}, r{}, {}", position, kScratch, top);
    if (across_cores) w_.label(done);
  }

  // kDram = base + row * row_stride + column * column_stride (strides in elements).
  void point_at(int base, int row, int64_t row_stride, int column, int64_t column_stride) {
    w_.load_constant(kScratch, row_stride * kFloat);
    w_.line("mul r{0}, r{0}, r{1}", kScratch, row);
    w_.load_constant(kScratch2, column_stride * kFloat);
    w_.line("mul r{0}, r{0}, r{1}", kScratch2, column);
    w_.line("add r{}, r{}, r{}", kDram, base, kScratch);
    w_.line("add r{0}, r{0}, r{1}", kDram, kScratch2);
  }

  // `rows` rows of `length` elements between DRAM at kDram (rows row_stride apart) and the scratchpad tile at `spad`
  // (packed rows): one 2-D DMA when rows are contiguous, else one DMA per row gathering (or scattering) with
  // `element_stride`.
  void move_rows(bool load, int spad, int rows, int length, int64_t element_stride, int64_t row_stride) {
    if (element_stride == 1) {  // contiguous rows: one 2-D DMA moves the whole tile
      if (load)
        w_.line("dma.ld2.b32 r{}, r{}, r{}, r{}, {}", spad, kDram, length, rows, row_stride * kFloat);
      else
        w_.line("dma.st2.b32 r{}, r{}, r{}, r{}, {}", kDram, spad, length, rows, row_stride * kFloat);
      return;
    }
    const std::string top = w_.new_label("rows");
    w_.line("addi r{}, r{}, 0", kSpad, spad);
    w_.line("addi r{}, r{}, 0", kRows, rows);
    w_.label(top);
    if (load)
      w_.line("dma.ld.b32 r{}, r{}, r{}, {}", kSpad, kDram, length, element_stride * kFloat);
    else
      w_.line("dma.st.b32 r{}, r{}, r{}, {}", kDram, kSpad, length, element_stride * kFloat);
    w_.line("slli r{}, r{}, 2", kScratch, length);
    w_.line("add r{0}, r{0}, r{1}", kSpad, kScratch);
    w_.add_constant(kDram, row_stride * kFloat, kScratch);
    w_.line("addi r{0}, r{0}, -1", kRows);
    w_.line("bne r{}, r0, {}", kRows, top);
  }

  // The A panel of this M tile: one mt x kt block per K step, each kt x mt_max apart in the scratchpad.
  void emit_load_panel() {
    w_.line("sem.wait.dma 5");
    w_.line("li r{}, 0", kBlockA);
    loop(kK0, kKt, spec_.k, tile_k_, [&] {
      point_at(kA, kM0, spec_.a_row, kK0, spec_.a_col);
      move_rows(true, kBlockA, kMt, kKt, spec_.a_col, spec_.a_row);
      w_.add_constant(kBlockA, tile_m_ * tile_k_ * kFloat, kScratch);
    });
    w_.line("sem.post.dma 4");
    w_.line("sem.wait.mx 4");
  }

  // One K step: load the B tile into the free buffer, then multiply it with this step's A block, accumulating
  // after the first step.
  void emit_k_step() {
    w_.line("sem.wait.dma 1");
    point_at(kB, kK0, spec_.b_row, kN0, spec_.b_col);
    if (b_transposed_)
      move_rows(true, kSpadB, kNt, kKt, spec_.b_row, spec_.b_col);
    else
      move_rows(true, kSpadB, kKt, kNt, spec_.b_col, spec_.b_row);
    w_.line("sem.post.dma 0");
    w_.line("sem.wait.mx 0");
    w_.line("{} r{}, r{}, r{}", b_transposed_ ? "mx.ldwt.f32" : "mx.ldw.f32", kSpadB, kKt, kNt);
    const std::string accumulate = w_.new_label("accumulate"), multiplied = w_.new_label("multiplied");
    w_.line("bne r{}, r0, {}", kK0, accumulate);
    w_.line("mx.mac.f32 r0, r{}, r{}, 0", kBlockA, kMt);
    w_.line("jal r0, {}", multiplied);
    w_.label(accumulate);
    w_.line("mx.mac.f32 r0, r{}, r{}, 1", kBlockA, kMt);
    w_.label(multiplied);
    w_.line("sem.post.mx 1");
    w_.line("xor r{0}, r{0}, r{1}", kSpadB, kToggleB);
    w_.add_constant(kBlockA, tile_m_ * tile_k_ * kFloat, kScratch);
  }

  void emit_store_tile() {
    w_.line("mul r{}, r{}, r{}", kTileElements, kMt, kNt);
    w_.line("sem.wait.mx 3");
    w_.line("mx.st.f32 r{}, r0, r{}", kSpadC, kTileElements);
    w_.line("sem.post.mx 2");
    w_.line("sem.wait.dma 2");
    point_at(kC, kM0, spec_.c_row, kN0, spec_.c_col);
    move_rows(false, kSpadC, kMt, kNt, spec_.c_col, spec_.c_row);
    w_.line("sem.post.dma 3");
  }

  MatmulSpec spec_;
  int64_t tile_m_ = 0, tile_k_ = 0, tile_n_ = 0, k_blocks_ = 0;
  bool b_transposed_ = false;
  AssemblyWriter w_;
};

}  // namespace

Kernel emit_matmul(const MatmulSpec& spec, const config::ChipConfig& config) {
  if (spec.m < 1 || spec.k < 1 || spec.n < 1)
    throw std::invalid_argument(
        fmt::format("matmul of [{} x {}] @ [{} x {}] has an empty dimension", spec.m, spec.k, spec.k, spec.n));
  Kernel kernel;
  kernel.name = "matmul_f32";
  kernel.assembly = MatmulEmitter(spec, config).emit();
  kernel.words = isa::assemble(kernel.assembly, kernel.name + ".s");
  kernel.cores = config.chip_cores;  // the tile shares come from csrr ncores
  return kernel;
}

}  // namespace npusim::emitter
