// Fused attention. A key block has Bk keys (Bk no larger than the systolic array, so that S = Q K^T has Bk columns
// and P V contracts over Bk rows); a query block has Bq rows, a multiple of Bk as large as the scratchpad and
// accumulator allow (the rows stream through the array, so tall query blocks put many MACs behind each instruction and
// load each key block once per Bq queries). The head dimension is split into chunks of the array's rows and the value
// dimension into chunks of its columns, each chunk a tile of its own in the scratchpad. The emitter unrolls the
// key-block body twice (full blocks, then the ragged last one) so that every row length in a broadcast is a constant;
// query blocks are spread over the cores. Causal masking skips key blocks right of the query block's last row and
// masks those at or right of its first row with a window of a Bq x Bq triangle held in the program's .data (Bq being
// a multiple of Bk, such a block starts at or after the query block's first row). Each row's arithmetic is the same
// whatever Bq. The builder orders the engines by the tiles they touch; the kernel reads no DRAM it writes, so it
// needs no fence.
//
// Short keys (float32, at most kMostWholeKeyBlocks key blocks, and room for all of them beside query blocks of at
// least kLeastHeldQueryBlocks key blocks' rows): a query block holds every key block's K, V and S at once (K and V
// loaded in one move per chunk), and the softmax is exact, in passes over the key blocks: the row maximum over all
// keys, then the exponentials and their row sums, then P V summed over the key blocks in the accumulator. The online
// softmax's rescaling of O at every key block, most of its vector work, is gone.
#include "npusim/emitter/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>

#include "attention_rows.h"
#include "npusim/emitter/kernel_builder.h"
#include "units_across_cores.h"

namespace npusim::emitter {
namespace {

using attention_rows::ceil_div;
using attention_rows::ChunkedRows;
using attention_rows::padded;
using isa::ElementType;

constexpr int64_t kFloat = 4;
constexpr ElementType kF32 = ElementType::F32;

int32_t float_bits(float value) { return std::bit_cast<int32_t>(value); }

// The chunking of the head and value dimensions, and the largest blocks that fit the buffers.
struct AttentionTiling {
  static constexpr int64_t kMostQueryBlockRows = 256;  // beyond this, fewer and larger blocks gain little

  static constexpr int64_t kMostWholeKeyBlocks = 32;  // short keys: the kernel unrolls its passes per key block
  // Holding every key block takes the scratchpad tall query blocks would have: with query blocks of fewer key blocks'
  // rows than this (unless they hold all the queries), the matrix engine's weight loads serve too few rows and K and V
  // are loaded too often, and the online softmax's taller blocks win (384 keys of dimension 64 held with 16-row
  // blocks took 1.3x as long on the default chip).
  static constexpr int64_t kLeastHeldQueryBlocks = 2;

  bool half;  // f16 or bf16 in DRAM, staged in the scratchpad
  int64_t d_chunk, v_chunk, d_chunks, v_chunks, block_k = 0, block_q = 0;
  bool whole_keys = false;  // every key block held at once (the header explains)

  AttentionTiling(const AttentionSpec& s, const config::ChipConfig& config)
      : half(s.type != ElementType::F32),
        d_chunk(std::min<int64_t>(s.head_dim, config.core_systolic_rows)),
        v_chunk(std::min<int64_t>(s.value_dim, config.core_systolic_cols)),
        d_chunks(ceil_div(s.head_dim, d_chunk)),
        v_chunks(ceil_div(s.value_dim, v_chunk)) {
    // Whether `spad` bytes of tiles and the accumulators of S and P V for Bq x Bk blocks fit the core.
    const auto fits = [&](int64_t spad, int64_t bq, int64_t bk) {
      return spad <= static_cast<int64_t>(config.scratchpad_bytes()) &&
             padded(bq * bk * kFloat) + bq * v_chunk * kFloat <= static_cast<int64_t>(config.accumulator_bytes());
    };
    for (int64_t b =
             std::min<int64_t>({config.core_systolic_rows, config.core_systolic_cols, std::max(s.q_len, s.k_len)});
         b >= 1 && block_k == 0; --b)
      if (fits(spad_bytes(b, b), b, b)) block_k = b;
    if (block_k == 0) return;
    // Bq: whole key blocks' worth of rows, no more than the queries need, enough blocks for every core.
    const int64_t most = std::min(ceil_div(s.q_len, block_k), std::max<int64_t>(1, kMostQueryBlockRows / block_k));
    const auto busy = [&](int64_t blocks) {
      return blocks == 1 || s.heads * ceil_div(s.q_len, blocks * block_k) >= config.chip_cores;
    };
    if (!half && key_blocks(s.k_len) <= kMostWholeKeyBlocks) {
      const int64_t least = std::min(most, kLeastHeldQueryBlocks);
      for (int64_t blocks = most; blocks >= least && block_q == 0; --blocks)
        if (fits(whole_keys_spad_bytes(blocks * block_k, s.k_len), blocks * block_k, block_k) && busy(blocks))
          block_q = blocks * block_k;
      whole_keys = block_q > 0;
    }
    for (int64_t blocks = most; blocks >= 1 && block_q == 0; --blocks)
      if (fits(spad_bytes(blocks * block_k, block_k), blocks * block_k, block_k) && busy(blocks))
        block_q = blocks * block_k;
  }
  int64_t key_blocks(int64_t k_len) const { return ceil_div(k_len, block_k); }
  // Bytes of scratchpad the tiles of Bq x Bk blocks take: Q, O and P V of Bq rows, K and V of Bk rows, S, and the rest
  // (rest_bytes); for half precision, Q, K, V and O staged in 2-byte elements too.
  int64_t spad_bytes(int64_t bq, int64_t bk) const {
    const auto staged_q_or_k = [&](int64_t rows) { return d_chunks * padded(rows * d_chunk * 2); };
    const auto staged_values = [&](int64_t rows) { return v_chunks * padded(rows * v_chunk * 2); };
    const int64_t staged = half ? staged_q_or_k(bq) + staged_q_or_k(bk) + staged_values(bk) + staged_values(bq) : 0;
    return q_or_k_bytes(bq) + q_or_k_bytes(bk) + values_bytes(bk) + 2 * values_bytes(bq) + padded(bq * bk * kFloat) +
           rest_bytes(bq, bk) + staged;
  }
  // With whole keys (float32): Q and O of Bq rows, K and V of every key, an S of Bq x Bk per key block, and the rest.
  int64_t whole_keys_spad_bytes(int64_t bq, int64_t k_len) const {
    return q_or_k_bytes(bq) + q_or_k_bytes(k_len) + values_bytes(k_len) + values_bytes(bq) +
           key_blocks(k_len) * padded(bq * block_k * kFloat) + rest_bytes(bq, block_k);
  }
  // The f32 chunk tiles of `rows` rows of Q or K, of V or O.
  int64_t q_or_k_bytes(int64_t rows) const { return d_chunks * padded(rows * d_chunk * kFloat); }
  int64_t values_bytes(int64_t rows) const { return v_chunks * padded(rows * v_chunk * kFloat); }
  // Five per-row vectors, two constants and the mask.
  int64_t rest_bytes(int64_t bq, int64_t bk) const {
    return 5 * padded(bq * kFloat) + padded(2 * kFloat) + padded(bq * bk);
  }
};

class AttentionEmitter {
 public:
  AttentionEmitter(const AttentionSpec& spec, const config::ChipConfig& config, const AttentionTiling& tiling,
                   const std::string& name)
      : s_(spec),
        half_(tiling.half),
        bytes_(static_cast<int64_t>(isa::element_bytes(spec.type))),
        block_q_(tiling.block_q),
        block_k_(tiling.block_k),
        whole_keys_(tiling.whole_keys),
        b_(name, config) {
    using attention_rows::chunked_rows;
    const int64_t hpb = s_.heads_per_batch, keys_held = whole_keys_ ? s_.k_len : block_k_;
    q_ = chunked_rows(b_, s_.q_len, s_.head_dim, tiling.d_chunk, block_q_, s_.query, hpb, "Q");
    k_ = chunked_rows(b_, s_.k_len, s_.head_dim, tiling.d_chunk, keys_held, s_.key, hpb, "K");
    v_ = chunked_rows(b_, s_.k_len, s_.value_dim, tiling.v_chunk, keys_held, s_.value, hpb, "V");
    o_ = chunked_rows(b_, s_.q_len, s_.value_dim, tiling.v_chunk, block_q_, s_.output, hpb, "O");
    if (whole_keys_) {
      for (int64_t j = 0; j < tiling.key_blocks(s_.k_len); ++j)
        block_scores_.push_back(b_.tile(Space::Scratchpad, block_q_ * block_k_ * kFloat, fmt::format("S {}", j)));
    } else {
      scores_ = b_.tile(Space::Scratchpad, block_q_ * block_k_ * kFloat, "S");
      product_ = chunked_rows(b_, s_.q_len, s_.value_dim, tiling.v_chunk, block_q_, {}, hpb, "P V");
    }
    max_ = b_.tile(Space::Scratchpad, block_q_ * kFloat, "row maximum");
    new_max_ = b_.tile(Space::Scratchpad, block_q_ * kFloat, "new row maximum");
    sum_ = b_.tile(Space::Scratchpad, block_q_ * kFloat, "row sum");
    correction_ = b_.tile(Space::Scratchpad, block_q_ * kFloat, "correction");
    partial_ = b_.tile(Space::Scratchpad, block_q_ * kFloat, "block row maximum or sum");
    constants_ = b_.tile(Space::Scratchpad, 2 * kFloat, "scale and minus infinity");
    mask_tile_ = b_.tile(Space::Scratchpad, block_q_ * block_k_, "mask");
    if (half_)
      for (ChunkedRows* rows : {&q_, &k_, &v_, &o_})
        for (size_t c = 0; c < rows->tiles.size(); ++c)
          rows->staged.push_back(b_.tile(Space::Scratchpad, rows->block * rows->chunk * 2, "staged"));
    scores_acc_ = b_.tile(Space::Accumulator, block_q_ * block_k_ * kFloat, "S accumulator");
    product_acc_ = b_.tile(Space::Accumulator, block_q_ * tiling.v_chunk * kFloat, "P V accumulator");
  }

  Kernel emit() {
    b_.describe(fmt::format(
        "attention_{}: {} heads, {} queries x {} keys, head dim {}, value dim {}{}, blocks of {} queries and {} keys{}",
        isa::type_name(s_.type), s_.heads, s_.q_len, s_.k_len, s_.head_dim, s_.value_dim, s_.causal ? ", causal" : "",
        block_q_, block_k_, whole_keys_ ? ", every key block held (exact softmax)" : ""));
    const int64_t q_blocks = ceil_div(s_.q_len, block_q_), full_k_blocks = s_.k_len / block_k_;
    output_ = b_.reg("output");
    lse_ = b_.reg("log-sum-exp");
    query_ = b_.reg("query");
    key_ = b_.reg("key");
    value_ = b_.reg("value");
    b_.Ld(output_, kArgumentBlock, 0);
    b_.Ld(lse_, kArgumentBlock, 8);
    b_.Ld(query_, kArgumentBlock, 16);
    b_.Ld(key_, kArgumentBlock, 24);
    b_.Ld(value_, kArgumentBlock, 32);
    mask_ = b_.reg("mask in .data");
    b_.La(mask_, b_.data(mask_words()));
    Reg unit = b_.reg("unit"), blocks = b_.reg("query blocks");
    b_.li(blocks, q_blocks);
    attention_rows::fill_scale_and_minus_infinity(b_, constants_, s_.scale);
    const int64_t units = s_.heads * q_blocks, cores = cores_for_units(units, b_.config());
    for_each_unit_across_cores(b_, unit, units, cores, [&] {
      head_ = b_.reg("head");
      q_block_ = b_.reg("query block");
      rows_ = b_.reg("rows in the query block");
      b_.Divu(head_, unit, blocks);
      b_.Remu(q_block_, unit, blocks);
      first_query_ = b_.reg("first query");
      attention_rows::block_rows(b_, first_query_, rows_, q_block_, block_q_, s_.q_len);
      load_rows(query_, q_, q_block_, rows_);
      if (half_) widen_rows(q_, rows_);
      if (whole_keys_) {
        whole_key_blocks();
      } else {
        start_rows();
        key_blocks(full_k_blocks);
      }
      finish_rows();
    });
    b_.Halt();
    return b_.finish(cores);
  }

 private:
  // reg = rows x a constant row length.
  void count(R reg, int64_t row_length) {
    b_.li(reg, row_length);
    b_.Mul(reg, rows_, reg);
  }

  // The running maximum at minus infinity, the running sum and O at zero.
  void start_rows() {
    Reg at = b_.reg("row vector"), n = b_.reg("element count");
    b_.point(at, max_);
    b_.Vfill(kF32, at, rows_, float_bits(-std::numeric_limits<float>::infinity()));
    b_.point(at, sum_);
    b_.Vfill(kF32, at, rows_, 0);
    for (size_t c = 0; c < o_.tiles.size(); ++c) {
      count(n, o_.width(c));
      b_.point(at, o_.tiles[c]);
      b_.Vfill(kF32, at, n, 0);
    }
  }

  // Short keys: every key's K and V loaded at once; then S of each key block (scaled, masked) and the row maximum
  // over all of them; P = exp(S - m) and the row sums; O = the sum over the key blocks of P V, accumulated in the
  // accumulator. When causal, a key block right of the query block's last row is skipped in every pass (block 0
  // never is: each row sees key 0).
  void whole_key_blocks() {
    keys_ = b_.reg("keys");
    {
      Reg first_block = b_.reg("key block 0");
      b_.li(first_block, 0);
      b_.li(keys_, s_.k_len);
      load_rows(key_, k_, first_block, keys_);
      load_rows(value_, v_, first_block, keys_);
    }
    Reg max = b_.reg("row maximum"), partial = b_.reg("block row maximum or sum"),
        end = b_.reg("queries up to the block's end");
    b_.point(max, max_);
    b_.Vfill(kF32, max, rows_, float_bits(-std::numeric_limits<float>::infinity()));
    b_.point(partial, partial_);
    b_.Add(end, first_query_, rows_);
    const int64_t blocks = static_cast<int64_t>(block_scores_.size());
    const auto keys_in = [&](int64_t j) { return std::min(block_k_, s_.k_len - j * block_k_); };
    // Runs `body` for each key block, skipping (when causal) those starting at or right of `end`.
    const auto each_block = [&](const auto& body) {
      for (int64_t j = 0; j < blocks; ++j) {
        const Label skipped = b_.label();
        if (s_.causal && j > 0) {
          Reg first_key = b_.reg("first key");
          b_.li(first_key, j * block_k_);
          b_.Bgeu(first_key, end, skipped);
        }
        b_.li(keys_, keys_in(j));
        body(j, keys_in(j));
        b_.bind(skipped);
      }
    };
    each_block([&](int64_t j, int64_t keys) {
      Reg scores = b_.reg("S"), n = b_.reg("element count");
      scaled_scores(scores, n, block_scores_[j], j * block_k_, keys,
                    [&](R first_key) { b_.li(first_key, j * block_k_); });
      b_.Vrmax(kF32, partial, scores, rows_, keys_);
      b_.Vmax(kF32, max, max, partial, rows_);
    });
    Reg n = b_.reg("element count"), at = b_.reg("operand"), sum = b_.reg("row sum");
    b_.point(sum, sum_);
    b_.Vfill(kF32, sum, rows_, 0);
    each_block([&](int64_t j, int64_t keys) {
      count(n, keys);
      b_.point(at, block_scores_[j]);
      b_.Vsub(kF32, at, at, max, n, static_cast<int>((keys << 2) | 3));
      b_.Vexp(kF32, at, at, n);
      b_.Vrsum(kF32, partial, at, rows_, keys_);
      b_.Vadd(kF32, sum, sum, partial, rows_);
    });
    Reg acc = b_.reg("accumulator"), width = b_.reg("chunk width"), p = b_.reg("P");
    for (size_t c = 0; c < v_.tiles.size(); ++c) {
      b_.point(acc, product_acc_);
      each_block([&](int64_t j, int64_t) {
        b_.li(width, v_.width(c));
        b_.point(at, v_.tiles[c], j * block_k_ * v_.width(c) * kFloat);
        b_.MatrixLoadWeights(kF32, at, keys_, width);
        b_.point(p, block_scores_[j]);
        b_.MatrixMultiply(kF32, acc, p, rows_, j == 0 ? 0 : 1);
      });
      count(n, v_.width(c));
      b_.point(at, o_.tiles[c]);
      b_.MatrixStore(kF32, at, acc, n);
    }
  }

  // S of a key block (`keys` keys, keys_ holding them) whose K rows start at row `first_row` of the K tiles, into
  // `tile`: Q K^T (the head dimension in chunks accumulated in the accumulator), scaled, and when causal masked. Leaves
  // `scores` pointing at the tile and `n` holding its element count. `first_key` puts the block's first key in the
  // register it is given: keys at or right of the query block's first row (the block starts there or after it, Bq
  // being a multiple of Bk) take the triangle's window from column k0 - q0.
  void scaled_scores(R scores, R n, const Tile& tile, int64_t first_row, int64_t keys,
                     const std::function<void(R)>& first_key) {
    Reg acc = b_.reg("accumulator"), at = b_.reg("operand"), width = b_.reg("chunk width");
    b_.point(acc, scores_acc_);
    for (size_t c = 0; c < k_.tiles.size(); ++c) {
      b_.li(width, k_.width(c));
      b_.point(at, k_.tiles[c], first_row * k_.width(c) * kFloat);
      b_.MatrixLoadWeightsTransposed(kF32, at, width, keys_);
      b_.point(at, q_.tiles[c]);
      b_.MatrixMultiply(kF32, acc, at, rows_, c == 0 ? 0 : 1);
    }
    count(n, keys);
    b_.point(scores, tile);
    b_.MatrixStore(kF32, scores, acc, n);
    b_.point(at, constants_);  // the scale
    b_.Vmul(kF32, scores, scores, at, n, 1);
    if (!s_.causal) return;
    const Label unmasked = b_.label();
    Reg window = b_.reg("mask window");
    first_key(window);
    b_.Bltu(window, first_query_, unmasked);
    b_.Sub(window, window, first_query_);
    b_.Add(window, window, mask_);
    attention_rows::hide_masked_scores(b_, scores, window, rows_, keys, mask_row_bytes(), mask_tile_, constants_, n);
    b_.bind(unmasked);
  }

  // Full key blocks 0 .. limit - 1 (all of them, or, when causal, those starting at or left of the query block's
  // last row), then the ragged last one unless it starts right of that row.
  void key_blocks(int64_t full_k_blocks) {
    key_block_ = b_.reg("key block");
    keys_ = b_.reg("keys in the key block");
    {
      Reg limit = b_.reg("full key blocks to visit");
      b_.li(limit, full_k_blocks);
      if (s_.causal) {
        // ceil((q0 + rows) / Bk): the blocks holding keys 0 .. q0 + rows - 1.
        Reg diagonal_end = b_.reg("blocks up to the diagonal"), block = b_.reg("block");
        const Label all_full = b_.label();
        b_.Add(diagonal_end, first_query_, rows_);
        b_.Addi(diagonal_end, diagonal_end, block_k_ - 1);
        b_.li(block, block_k_);
        b_.Divu(diagonal_end, diagonal_end, block);
        b_.Bgeu(diagonal_end, limit, all_full);
        b_.move(limit, diagonal_end);
        b_.bind(all_full);
      }
      const Label full_block = b_.label(), full_done = b_.label();
      b_.li(key_block_, 0);
      b_.Beq(key_block_, limit, full_done);
      b_.bind(full_block);
      key_block(block_k_);
      b_.Addi(key_block_, key_block_, 1);
      b_.Bltu(key_block_, limit, full_block);
      b_.bind(full_done);
    }
    if (s_.k_len % block_k_ == 0) return;
    const Label tail_done = b_.label();
    if (s_.causal) {  // visited when its first key, full_k_blocks * Bk, is at most q0 + rows - 1
      Reg end = b_.reg("queries up to the block's end"), first_key = b_.reg("first key");
      b_.Add(end, first_query_, rows_);
      b_.li(first_key, full_k_blocks * block_k_);
      b_.Bgeu(first_key, end, tail_done);
    }
    b_.li(key_block_, full_k_blocks);
    key_block(s_.k_len % block_k_);
    b_.bind(tail_done);
  }

  // Loads `rows` rows of block `block` of `tensor` (at `base`, head head_) as its chunks (half precision: into their
  // staging, for widen_rows).
  void load_rows(R base, const ChunkedRows& tensor, R block, R rows) { move_rows(true, base, tensor, block, rows); }

  // Moves those rows between DRAM and the chunks (half precision: their staging tiles), either way.
  void move_rows(bool load, R base, const ChunkedRows& tensor, R block, R rows) {
    attention_rows::move_rows(b_, load, base, head_, tensor, block, rows, bytes_);
  }

  // The staged half-precision chunks of a load_rows, widened into their f32 tiles.
  void widen_rows(const ChunkedRows& tensor, R rows) {
    Reg n = b_.reg("element count"), to = b_.reg("f32 chunk"), from = b_.reg("staged chunk");
    for (size_t c = 0; c < tensor.tiles.size(); ++c) {
      b_.li(n, tensor.width(c));
      b_.Mul(n, rows, n);
      b_.point(to, tensor.tiles[c]);
      b_.point(from, tensor.staged[c]);
      b_.Vcvt(kF32, s_.type, to, from, n);
    }
  }

  // One key block of `keys` keys (a constant), block index key_block_.
  void key_block(int64_t keys) {
    b_.li(keys_, keys);
    load_rows(key_, k_, key_block_, keys_);
    load_rows(value_, v_, key_block_, keys_);
    if (half_) {
      widen_rows(k_, keys_);
      widen_rows(v_, keys_);
    }
    Reg scores = b_.reg("S"), n = b_.reg("element count");
    scaled_scores(scores, n, scores_, 0, keys, [&](R first_key) {
      b_.li(first_key, block_k_);
      b_.Mul(first_key, key_block_, first_key);
    });
    // The online softmax: the new row maximum, the old sums' correction exp(m - m'), P = exp(S - m').
    Reg partial = b_.reg("block row maximum or sum"), new_max = b_.reg("new row maximum"), max = b_.reg("row maximum"),
        correction = b_.reg("correction"), sum = b_.reg("row sum");
    b_.point(partial, partial_);
    b_.point(new_max, new_max_);
    b_.point(max, max_);
    b_.point(correction, correction_);
    b_.point(sum, sum_);
    const int per_key_row = static_cast<int>((keys << 2) | 3);
    b_.Vrmax(kF32, partial, scores, rows_, keys_);
    b_.Vmax(kF32, new_max, max, partial, rows_);
    b_.Vsub(kF32, correction, max, new_max, rows_);
    b_.Vexp(kF32, correction, correction, rows_);
    b_.Vsub(kF32, scores, scores, new_max, n, per_key_row);
    b_.Vexp(kF32, scores, scores, n);
    b_.Vrsum(kF32, partial, scores, rows_, keys_);
    b_.Vmul(kF32, sum, sum, correction, rows_);
    b_.Vadd(kF32, sum, sum, partial, rows_);
    b_.Vmov(kF32, max, new_max, rows_);
    // O = O * correction + P V, per value chunk.
    Reg acc = b_.reg("accumulator"), at = b_.reg("operand"), width = b_.reg("chunk width");
    b_.point(acc, product_acc_);
    for (size_t c = 0; c < v_.tiles.size(); ++c) {
      b_.li(width, v_.width(c));
      b_.point(at, v_.tiles[c]);
      b_.MatrixLoadWeights(kF32, at, keys_, width);
      b_.MatrixMultiply(kF32, acc, scores, rows_, 0);
      count(n, v_.width(c));
      b_.point(at, product_.tiles[c]);
      b_.MatrixStore(kF32, at, acc, n);
    }
    Reg o = b_.reg("O chunk");
    for (size_t c = 0; c < o_.tiles.size(); ++c) {
      const int64_t columns = o_.width(c);
      count(n, columns);
      b_.point(o, o_.tiles[c]);
      b_.Vmul(kF32, o, o, correction, n, static_cast<int>((columns << 2) | 3));
      b_.point(at, product_.tiles[c]);
      b_.Vadd(kF32, o, o, at, n);
    }
  }

  // O /= the row sums; log-sum-exp = m + log(sum); both stored.
  void finish_rows() {
    Reg n = b_.reg("element count"), o = b_.reg("O chunk"), sum = b_.reg("row sum"), max = b_.reg("row maximum");
    b_.point(sum, sum_);
    for (size_t c = 0; c < o_.tiles.size(); ++c) {
      const int64_t columns = o_.width(c);
      count(n, columns);
      b_.point(o, o_.tiles[c]);
      b_.Vdiv(kF32, o, o, sum, n, static_cast<int>((columns << 2) | 3));
    }
    b_.Vlog(kF32, sum, sum, rows_);
    b_.point(max, max_);
    b_.Vadd(kF32, sum, sum, max, rows_);
    if (half_) {  // O rounded once into its staging
      Reg staged = b_.reg("staged O chunk");
      for (size_t c = 0; c < o_.tiles.size(); ++c) {
        count(n, o_.width(c));
        b_.point(staged, o_.staged[c]);
        b_.point(o, o_.tiles[c]);
        b_.Vcvt(s_.type, kF32, staged, o, n);
      }
    }
    // Output rows: head head_, block q_block_, row length value_dim; then each row's log-sum-exp.
    move_rows(false, output_, o_, q_block_, rows_);
    Reg pointer = b_.reg("DRAM rows"), scratch = b_.reg("DRAM offset");
    b_.li(scratch, s_.q_len * kFloat);
    b_.Mul(pointer, head_, scratch);
    b_.li(scratch, block_q_ * kFloat);
    b_.Mul(scratch, q_block_, scratch);
    b_.Add(pointer, pointer, scratch);
    b_.Add(pointer, pointer, lse_);
    b_.DmaStore32(pointer, sum, rows_, kFloat);
  }

  // Rows of the mask are padded to whole words.
  int64_t mask_row_bytes() const { return ceil_div(block_q_, 8) * 8; }

  // mask[i][j] = 1 where key j is right of query i, Bq rows of Bq bytes.
  std::vector<uint64_t> mask_words() const {
    return attention_rows::mask_words(block_q_, block_q_, mask_row_bytes(), [](int64_t i, int64_t j) { return j > i; });
  }

  AttentionSpec s_;
  bool half_;
  int64_t bytes_, block_q_, block_k_;
  bool whole_keys_;
  KernelBuilder b_;
  ChunkedRows q_, k_, v_, o_, product_;  // product_: the online softmax's P V (not with whole keys)
  Tile scores_, max_, new_max_, sum_, correction_, partial_, constants_, mask_tile_, scores_acc_, product_acc_;
  std::vector<Tile> block_scores_;  // with whole keys: each key block's S
  // Held for the whole kernel: the argument pointers, the mask's address; per query block: its head, index, first
  // row and rows; per key block: its index and keys.
  Reg output_, lse_, query_, key_, value_, mask_, head_, q_block_, first_query_, rows_, key_block_, keys_;
};

}  // namespace

bool attention_fits(const AttentionSpec& spec, const config::ChipConfig& config) {
  return AttentionTiling(spec, config).block_q > 0;
}

Kernel emit_attention(const AttentionSpec& spec, const config::ChipConfig& config) {
  if (spec.heads < 1 || spec.q_len < 1 || spec.k_len < 1 || spec.head_dim < 1 || spec.value_dim < 1)
    throw std::invalid_argument("attention needs at least one head, query, key and dimension");
  const AttentionTiling tiling(spec, config);
  if (tiling.block_q == 0) throw Unsupported("an attention block does not fit the scratchpad and accumulator");
  if (spec.type != ElementType::F32 && spec.type != ElementType::F16 && spec.type != ElementType::BF16)
    throw std::invalid_argument(fmt::format("attention of {} elements", isa::type_name(spec.type)));
  return AttentionEmitter(spec, config, tiling, fmt::format("attention_{}", isa::type_name(spec.type))).emit();
}

}  // namespace npusim::emitter
