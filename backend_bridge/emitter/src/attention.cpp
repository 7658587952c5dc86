// Fused attention. Blocks are B x B (B no larger than the systolic array, so that S = Q K^T has B columns and P V
// contracts over B rows); the head dimension is split into chunks of the array's rows and the value dimension into
// chunks of its columns, each chunk a contiguous tile in the scratchpad. The emitter unrolls the key-block body
// twice (full blocks, then the ragged last one) so that every row length in a broadcast is a constant; query blocks
// are spread over the cores. Causal masking skips key blocks right of the diagonal and masks the diagonal block with
// a B x B triangle held in the program's .data.
//
// Registers: r1 arguments; r2 output, r3 log-sum-exp, r4 query, r5 key, r6 value, r7 the mask; r8 unit, r9 step
// across cores, r10 unit count; r11 head, r12 query block, r13 rows in this query block, r14 key block, r16 the last
// full key block to visit + 1; r17-r20 scratch; r21, r22 element counts; r23 query blocks; r24 DRAM pointer.
#include "npusim/emitter/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>

#include "npusim/emitter/assembly_writer.h"
#include "npusim/isa/assembler.h"

namespace npusim::emitter {
namespace {

constexpr int64_t kFloat = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The chunking of the head and value dimensions, and the largest block that fits the buffers.
struct AttentionTiling {
  bool half;  // f16 or bf16 in DRAM, staged in the scratchpad
  int64_t d_chunk, v_chunk, d_chunks, v_chunks, block = 0;

  AttentionTiling(const AttentionSpec& s, const config::ChipConfig& config)
      : half(s.type != isa::ElementType::F32),
        d_chunk(std::min<int64_t>(s.head_dim, config.core_systolic_rows)),
        v_chunk(std::min<int64_t>(s.value_dim, config.core_systolic_cols)),
        d_chunks(ceil_div(s.head_dim, d_chunk)),
        v_chunks(ceil_div(s.value_dim, v_chunk)) {
    const auto fits = [&](int64_t b) {
      return spad_bytes(b) <= static_cast<int64_t>(config.scratchpad_bytes()) &&
             (b * b + b * v_chunk) * kFloat <= static_cast<int64_t>(config.accumulator_bytes());
    };
    for (int64_t b =
             std::min<int64_t>({config.core_systolic_rows, config.core_systolic_cols, std::max(s.q_len, s.k_len)});
         b >= 1 && block == 0; --b)
      if (fits(b)) block = b;
  }
  // Bytes of scratchpad a block size needs: Q, K, V, S, O, P V, five per-row vectors, two constants, the mask;
  // for half precision, Q, K, V and O staged in 2-byte elements too.
  int64_t spad_bytes(int64_t b) const {
    const int64_t q_or_k = d_chunks * b * d_chunk, values = v_chunks * b * v_chunk;
    const int64_t staged = half ? (2 * q_or_k + 2 * values) * 2 : 0;
    return (2 * q_or_k + 3 * values + b * b + 5 * b + 2) * kFloat + b * b + staged;
  }
};

class AttentionEmitter {
 public:
  AttentionEmitter(const AttentionSpec& spec, const config::ChipConfig& config) : s_(spec) {
    const AttentionTiling tiling(spec, config);
    if (tiling.block == 0) throw Unsupported("an attention block does not fit the scratchpad and accumulator");
    block_ = tiling.block;
    half_ = tiling.half;
    bytes_ = static_cast<int64_t>(isa::element_bytes(spec.type));
    type_ = isa::type_name(spec.type);
    d_chunk_ = tiling.d_chunk;
    v_chunk_ = tiling.v_chunk;
    d_chunks_ = tiling.d_chunks;
    v_chunks_ = tiling.v_chunks;
    // Scratchpad layout.
    q_ = 0;
    k_ = q_ + d_chunks_ * block_ * d_chunk_ * kFloat;
    v_ = k_ + d_chunks_ * block_ * d_chunk_ * kFloat;
    s_tile_ = v_ + v_chunks_ * block_ * v_chunk_ * kFloat;
    o_ = s_tile_ + block_ * block_ * kFloat;
    product_ = o_ + v_chunks_ * block_ * v_chunk_ * kFloat;
    max_ = product_ + v_chunks_ * block_ * v_chunk_ * kFloat;
    new_max_ = max_ + block_ * kFloat;
    sum_ = new_max_ + block_ * kFloat;
    correction_ = sum_ + block_ * kFloat;
    partial_ = correction_ + block_ * kFloat;
    scale_ = partial_ + block_ * kFloat;
    minus_infinity_ = scale_ + kFloat;
    mask_ = minus_infinity_ + kFloat;
    staging_ = mask_ + block_ * block_;  // Q, K and V staged at half their f32 tiles' offsets, then O
    staging_o_ = staging_ + (s_tile_ - q_) / 2;
    scores_acc_ = 0;
    product_acc_ = block_ * block_ * kFloat;
  }

  std::string emit() {
    w_.comment(fmt::format("attention_{}: {} heads, {} queries x {} keys, head dim {}, value dim {}{}, block {}", type_,
                           s_.heads, s_.q_len, s_.k_len, s_.head_dim, s_.value_dim, s_.causal ? ", causal" : "",
                           block_));
    const int64_t q_blocks = ceil_div(s_.q_len, block_), full_k_blocks = s_.k_len / block_;
    for (int k = 0; k < 5; ++k) w_.line("ld r{}, {}(r1)", 2 + k, 8 * k);
    w_.line("la r7, mask");
    w_.line("csrr r8, coreid");
    w_.line("csrr r9, ncores");
    w_.load_constant(10, s_.heads * q_blocks);
    w_.load_constant(23, q_blocks);
    w_.line("li r17, 1");
    spad(18, scale_);
    w_.line("vfill.f32 r18, r17, {}", std::bit_cast<int32_t>(s_.scale));
    spad(18, minus_infinity_);
    w_.line("vfill.f32 r18, r17, {}", std::bit_cast<int32_t>(-std::numeric_limits<float>::infinity()));
    w_.line("bgeu r8, r10, done");
    w_.label("unit");
    w_.line("divu r11, r8, r23");
    w_.line("remu r12, r8, r23");
    // Rows in this query block: min(B, q_len - q0).
    w_.load_constant(17, block_);
    w_.line("mul r18, r12, r17");
    w_.load_constant(19, s_.q_len);
    w_.line("sub r13, r19, r18");
    w_.line("bltu r13, r17, short_block");
    w_.line("addi r13, r17, 0");
    w_.label("short_block");
    load_rows(4, q_, s_.q_len, s_.head_dim, d_chunk_, d_chunks_, 12, 13);
    if (half_) {
      w_.line("fence");
      widen_rows(q_, s_.head_dim, d_chunk_, d_chunks_, 13);
    }
    w_.line("vfill.f32 r{}, r13, {}", spad(18, max_), std::bit_cast<int32_t>(-std::numeric_limits<float>::infinity()));
    spad(18, sum_);
    w_.line("vfill.f32 r18, r13, 0");
    for (int64_t c = 0; c < v_chunks_; ++c) {
      count(21, width(c, s_.value_dim, v_chunk_));
      spad(18, o_ + c * block_ * v_chunk_ * kFloat);
      w_.line("vfill.f32 r18, r21, 0");
    }
    // Full key blocks 0 .. r16 - 1: all of them, or up to the diagonal block when causal.
    w_.load_constant(16, full_k_blocks);
    if (s_.causal) {
      w_.line("addi r17, r12, 1");
      w_.line("bgeu r17, r16, all_full");
      w_.line("addi r16, r17, 0");
      w_.label("all_full");
    }
    w_.line("li r14, 0");
    w_.line("beq r14, r16, full_done");
    w_.label("full_block");
    key_block(block_, "full");
    w_.line("addi r14, r14, 1");
    w_.line("bltu r14, r16, full_block");
    w_.label("full_done");
    if (s_.k_len % block_ != 0) {
      // The ragged last key block, unless it is right of the diagonal.
      if (s_.causal) {
        w_.load_constant(17, full_k_blocks);
        w_.line("bltu r12, r17, tail_done");
      }
      w_.load_constant(14, full_k_blocks);
      key_block(s_.k_len % block_, "tail");
      w_.label("tail_done");
    }
    finish_rows();
    w_.line("add r8, r8, r9");
    w_.line("bltu r8, r10, unit");
    w_.label("done");
    w_.line("fence");
    w_.line("halt");
    emit_mask();
    return w_.text();
  }

  int64_t block() const { return block_; }

 private:
  static int64_t width(int64_t chunk, int64_t total, int64_t size) { return std::min(size, total - chunk * size); }

  // reg = a scratchpad address; returns reg for use in a format.
  int spad(int reg, int64_t address) {
    w_.load_constant(reg, address);
    return reg;
  }
  // reg = rows (r13) x a constant row length.
  void count(int reg, int64_t row_length) {
    w_.load_constant(reg, row_length);
    w_.line("mul r{0}, r13, r{0}", reg);
  }

  // Where an f32 tile at `at` is staged in 2-byte elements.
  int64_t staged(int64_t at) const { return staging_ + (at - q_) / 2; }

  // Loads `rows_reg` rows of block `block_reg` of a [heads][length][dim] tensor at r{base}, head r11, as chunks of
  // `chunk` columns into the scratchpad at `at` (half precision: into its staging, for widen_rows).
  void load_rows(int base, int64_t at, int64_t length, int64_t dim, int64_t chunk, int64_t chunks, int block_reg,
                 int rows_reg) {
    w_.load_constant(17, length * dim * bytes_);
    w_.line("mul r24, r11, r17");
    w_.load_constant(17, block_ * dim * bytes_);
    w_.line("mul r17, r{}, r17", block_reg);
    w_.line("add r24, r24, r17");
    w_.line("add r24, r24, r{}", base);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t tile = at + c * block_ * chunk * kFloat;
      w_.line("addi r17, r24, {}", c * chunk * bytes_);
      w_.load_constant(19, width(c, dim, chunk));
      spad(20, half_ ? staged(tile) : tile);
      w_.line("dma.ld2.b{} r20, r17, r19, r{}, {}", bytes_ * 8, rows_reg, dim * bytes_);
    }
  }

  // The staged half-precision chunks of a load_rows, widened into their f32 tiles (after a fence).
  void widen_rows(int64_t at, int64_t dim, int64_t chunk, int64_t chunks, int rows_reg) {
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t tile = at + c * block_ * chunk * kFloat;
      w_.load_constant(21, width(c, dim, chunk));
      w_.line("mul r21, r{}, r21", rows_reg);
      w_.line("vcvt.f32.{} r{}, r{}, r21", type_, spad(20, tile), spad(18, staged(tile)));
    }
  }

  // One key block of `keys` keys (a constant), block index r14.
  void key_block(int64_t keys, const std::string& tag) {
    w_.load_constant(15, keys);
    load_rows(5, k_, s_.k_len, s_.head_dim, d_chunk_, d_chunks_, 14, 15);
    load_rows(6, v_, s_.k_len, s_.value_dim, v_chunk_, v_chunks_, 14, 15);
    w_.line("fence");
    if (half_) {
      widen_rows(k_, s_.head_dim, d_chunk_, d_chunks_, 15);
      widen_rows(v_, s_.value_dim, v_chunk_, v_chunks_, 15);
      w_.line("fence");
    }
    // S = Q K^T, the head dimension in chunks accumulated in the accumulator.
    for (int64_t c = 0; c < d_chunks_; ++c) {
      w_.load_constant(19, width(c, s_.head_dim, d_chunk_));
      w_.line("mx.ldwt.f32 r{}, r19, r15", spad(20, k_ + c * block_ * d_chunk_ * kFloat));
      w_.line("mx.mac.f32 r{}, r{}, r13, {}", spad(17, scores_acc_), spad(20, q_ + c * block_ * d_chunk_ * kFloat),
              c == 0 ? 0 : 1);
    }
    count(21, keys);
    w_.line("mx.st.f32 r{}, r{}, r21", spad(20, s_tile_), spad(17, scores_acc_));
    w_.line("fence");
    w_.line("vmul.f32 r20, r20, r{}, r21, 1", spad(18, scale_));
    if (s_.causal) {
      w_.line("bne r14, r12, {}_unmasked", tag);
      w_.load_constant(17, keys);
      w_.line("dma.ld2.b8 r{}, r7, r17, r13, {}", spad(18, mask_), mask_row_bytes());
      w_.line("fence");
      w_.line("vsel.f32 r20, r18, r{}, r21, 1", spad(19, minus_infinity_));
      w_.label(tag + "_unmasked");
    }
    // The online softmax: the new row maximum, the old sums' correction exp(m - m'), P = exp(S - m').
    const int per_key_row = static_cast<int>((keys << 2) | 3);
    w_.line("vrmax.f32 r{}, r20, r13, r15", spad(17, partial_));
    w_.line("vmax.f32 r{}, r{}, r17, r13", spad(18, new_max_), spad(19, max_));
    w_.line("vsub.f32 r{}, r19, r18, r13", spad(22, correction_));
    w_.line("vexp.f32 r22, r22, r13");
    w_.line("vsub.f32 r20, r20, r18, r21, {}", per_key_row);
    w_.line("vexp.f32 r20, r20, r21");
    w_.line("vrsum.f32 r17, r20, r13, r15");
    w_.line("vmul.f32 r{0}, r{0}, r22, r13", spad(24, sum_));
    w_.line("vadd.f32 r24, r24, r17, r13");
    w_.line("vmov.f32 r19, r18, r13");
    w_.line("fence");
    // O = O * correction + P V, per value chunk.
    for (int64_t c = 0; c < v_chunks_; ++c) {
      const int64_t columns = width(c, s_.value_dim, v_chunk_);
      w_.load_constant(19, columns);
      w_.line("mx.ldw.f32 r{}, r15, r19", spad(18, v_ + c * block_ * v_chunk_ * kFloat));
      w_.line("mx.mac.f32 r{}, r20, r13, 0", spad(17, product_acc_));
      count(21, columns);
      w_.line("mx.st.f32 r{}, r17, r21", spad(18, product_ + c * block_ * v_chunk_ * kFloat));
    }
    w_.line("fence");
    for (int64_t c = 0; c < v_chunks_; ++c) {
      const int64_t columns = width(c, s_.value_dim, v_chunk_);
      count(21, columns);
      spad(18, o_ + c * block_ * v_chunk_ * kFloat);
      w_.line("vmul.f32 r18, r18, r22, r21, {}", static_cast<int>((columns << 2) | 3));
      w_.line("vadd.f32 r18, r18, r{}, r21", spad(19, product_ + c * block_ * v_chunk_ * kFloat));
    }
    w_.line("fence");
  }

  // O /= the row sums; log-sum-exp = m + log(sum); both stored.
  void finish_rows() {
    for (int64_t c = 0; c < v_chunks_; ++c) {
      const int64_t columns = width(c, s_.value_dim, v_chunk_);
      count(21, columns);
      spad(18, o_ + c * block_ * v_chunk_ * kFloat);
      w_.line("vdiv.f32 r18, r18, r{}, r21, {}", spad(19, sum_), static_cast<int>((columns << 2) | 3));
    }
    w_.line("vlog.f32 r19, r19, r13");
    w_.line("vadd.f32 r19, r19, r{}, r13", spad(18, max_));
    w_.line("fence");
    if (half_) {  // O rounded once into its staging
      for (int64_t c = 0; c < v_chunks_; ++c) {
        count(21, width(c, s_.value_dim, v_chunk_));
        w_.line("vcvt.{}.f32 r{}, r{}, r21", type_, spad(20, staging_o_ + c * block_ * v_chunk_ * 2),
                spad(18, o_ + c * block_ * v_chunk_ * kFloat));
      }
      w_.line("fence");
    }
    // Output rows: head r11, block r12, row length value_dim.
    w_.load_constant(17, s_.q_len * s_.value_dim * bytes_);
    w_.line("mul r24, r11, r17");
    w_.load_constant(17, block_ * s_.value_dim * bytes_);
    w_.line("mul r17, r12, r17");
    w_.line("add r24, r24, r17");
    w_.line("add r24, r24, r2");
    for (int64_t c = 0; c < v_chunks_; ++c) {
      const int64_t tile = half_ ? staging_o_ + c * block_ * v_chunk_ * 2 : o_ + c * block_ * v_chunk_ * kFloat;
      w_.line("addi r17, r24, {}", c * v_chunk_ * bytes_);
      w_.load_constant(20, width(c, s_.value_dim, v_chunk_));
      w_.line("dma.st2.b{} r17, r{}, r20, r13, {}", bytes_ * 8, spad(18, tile), s_.value_dim * bytes_);
    }
    w_.load_constant(17, s_.q_len * kFloat);
    w_.line("mul r24, r11, r17");
    w_.load_constant(17, block_ * kFloat);
    w_.line("mul r17, r12, r17");
    w_.line("add r24, r24, r17");
    w_.line("add r24, r24, r3");
    w_.line("dma.st.b32 r24, r19, r13, 4");
    w_.line("fence");
  }

  // Each data statement is padded to 8 bytes, so a row of the mask (one statement) takes a whole number of words.
  int64_t mask_row_bytes() const { return ceil_div(block_, 8) * 8; }

  // mask[i][j] = 1 where key j is right of query i, B rows of B bytes.
  void emit_mask() {
    w_.line(".data");
    w_.label("mask");
    for (int64_t i = 0; i < block_; ++i) {
      std::string row;
      for (int64_t j = 0; j < block_; ++j) row += fmt::format("{}{}", j == 0 ? "" : ", ", j > i ? 1 : 0);
      w_.line(".byte {}", row);
    }
  }

  AttentionSpec s_;
  bool half_ = false;
  int64_t bytes_ = kFloat;
  std::string_view type_;
  int64_t staging_ = 0, staging_o_ = 0;
  int64_t block_ = 1, d_chunk_ = 1, v_chunk_ = 1, d_chunks_ = 1, v_chunks_ = 1;
  int64_t q_ = 0, k_ = 0, v_ = 0, s_tile_ = 0, o_ = 0, product_ = 0, max_ = 0, new_max_ = 0, sum_ = 0, correction_ = 0,
          partial_ = 0, scale_ = 0, minus_infinity_ = 0, mask_ = 0, scores_acc_ = 0, product_acc_ = 0;
  AssemblyWriter w_;
};

}  // namespace

bool attention_fits(const AttentionSpec& spec, const config::ChipConfig& config) {
  return AttentionTiling(spec, config).block > 0;
}

Kernel emit_attention(const AttentionSpec& spec, const config::ChipConfig& config) {
  if (spec.heads < 1 || spec.q_len < 1 || spec.k_len < 1 || spec.head_dim < 1 || spec.value_dim < 1)
    throw std::invalid_argument("attention needs at least one head, query, key and dimension");
  AttentionEmitter emitter(spec, config);
  Kernel kernel;
  if (spec.type != isa::ElementType::F32 && spec.type != isa::ElementType::F16 && spec.type != isa::ElementType::BF16)
    throw std::invalid_argument(fmt::format("attention of {} elements", isa::type_name(spec.type)));
  kernel.name = fmt::format("attention_{}", isa::type_name(spec.type));
  kernel.words = isa::assemble(emitter.emit(), kernel.name + ".s");
  kernel.cores = std::min<int64_t>(config.chip_cores, spec.heads * ceil_div(spec.q_len, emitter.block()));
  return kernel;
}

}  // namespace npusim::emitter
