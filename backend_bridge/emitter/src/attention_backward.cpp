// The fused attention backward (attention.h): two kernels, each recomputing P block by block from the saved
// log-sum-exp. Both have a tall block of T rows that every product streams (a multiple of the short block B, up to
// 256 rows, as the buffers and cores allow) and walk the other tensor's short blocks of B rows, B no larger than the
// systolic array (a short block is the contraction of one weight load, or its columns). Head and value dimensions are
// split into chunks of min(rows, cols) columns, each chunk a tile. The loop over short blocks is unrolled twice (full
// blocks, then the ragged last one), so that each broadcast's row length is a constant.
//  - Query: T queries, B keys: S = Q K^T (weights K^T), P = exp(scale S - lse), dP = dO V^T (weights V^T),
//    dS = P (dP - D), dQ += dS K (weights K). Causal: key blocks right of the block's last query are skipped, and
//    those at or right of its first query masked with a window of a T x T triangle (as the forward).
//  - KeyValue: T keys, B queries, everything transposed: S^T = K Q^T (weights Q^T), P^T = exp(scale S^T - lse^T)
//    (lse repeated along each row), dV += P^T dO (weights dO), dP^T = V dO^T (weights dO^T), dS^T = P^T (dP^T - D^T),
//    dK += dS^T Q (weights Q). Causal: query blocks before the key block's first key are skipped (B divides T, so
//    they see none of its keys), and those before its last key are masked with a window of a 2T x B band in .data.
// Each short block's products land in the accumulator and are added to the gradient's chunks in the scratchpad.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "attention_rows.h"
#include "npusim/emitter/attention.h"
#include "npusim/emitter/kernel_builder.h"
#include "units_across_cores.h"

namespace npusim::emitter {
namespace {

using attention_rows::ceil_div;
using attention_rows::chunked_rows;
using attention_rows::ChunkedRows;
using attention_rows::padded;
using isa::ElementType;

constexpr int64_t kFloat = 4;
constexpr ElementType kF32 = ElementType::F32;
constexpr int64_t kMostTallRows = 256;  // beyond this, fewer and larger blocks gain little

int repeated_row(int64_t length) { return static_cast<int>((length << 2) | 2); }  // broadcast b[k mod length]
int per_row(int64_t length) { return static_cast<int>((length << 2) | 3); }       // broadcast b[k / length]

// The blocks and chunks of one of the two kernels: T rows of the `tall` tensor (queries for Query, keys for
// KeyValue) against B rows of the other.
struct GradientTiling {
  int64_t chunk, d_chunk, v_chunk, d_chunks, v_chunks, tall_length, short_length, block_short = 0, block_tall = 0;
  int64_t resident = 1;  // short blocks loaded at once: the DMA's latency and setup paid once for all of them

  GradientTiling(const AttentionGradientSpec& spec, const config::ChipConfig& config) {
    const AttentionSpec& s = spec.attention;
    const bool query = spec.part == AttentionGradient::Query;
    chunk = std::min(config.core_systolic_rows, config.core_systolic_cols);
    d_chunk = std::min(s.head_dim, chunk);
    v_chunk = std::min(s.value_dim, chunk);
    d_chunks = ceil_div(s.head_dim, d_chunk);
    v_chunks = ceil_div(s.value_dim, v_chunk);
    tall_length = query ? s.q_len : s.k_len;
    short_length = query ? s.k_len : s.q_len;
    const auto fits = [&](int64_t tall, int64_t b, int64_t blocks = 1) {
      return spad_bytes(tall, b, blocks) <= static_cast<int64_t>(config.scratchpad_bytes()) &&
             acc_bytes(tall, b) <= static_cast<int64_t>(config.accumulator_bytes());
    };
    for (int64_t b = std::min(chunk, std::max(s.q_len, s.k_len)); b >= 1 && block_short == 0; --b)
      if (fits(b, b)) block_short = b;
    if (block_short == 0) return;
    const int64_t most =
        std::min(ceil_div(tall_length, block_short), std::max<int64_t>(1, kMostTallRows / block_short));
    for (int64_t blocks = most; blocks >= 1 && block_tall == 0; --blocks)
      if (fits(blocks * block_short, block_short) &&
          (blocks == 1 || s.heads * ceil_div(tall_length, blocks * block_short) >= config.chip_cores))
        block_tall = blocks * block_short;
    if (block_tall == 0) return;
    for (int64_t blocks = ceil_div(short_length, block_short); blocks > 1 && resident == 1; --blocks)
      if (fits(block_tall, block_short, blocks)) resident = blocks;
  }
  int64_t widest() const { return std::max(d_chunk, v_chunk); }
  // Tall rows: the tall tensor's chunks and its gradient's (and, for Query, dO's), two T x B matrices, a product
  // chunk, three row vectors and the mask; short rows (`blocks` short blocks of them): the other tensors' chunks and
  // two vectors.
  int64_t spad_bytes(int64_t tall, int64_t b, int64_t blocks) const {
    const auto d_rows = [&](int64_t rows) { return d_chunks * padded(rows * d_chunk * kFloat); };
    const auto v_rows = [&](int64_t rows) { return v_chunks * padded(rows * v_chunk * kFloat); };
    const int64_t matrices = 2 * (2 * padded(tall * b * kFloat) + padded(tall * widest() * kFloat));  // two sets
    const int64_t vectors = 3 * padded(tall * kFloat) + 2 * padded(blocks * b * kFloat) + padded(2 * kFloat);
    const int64_t mask = padded(tall * ceil_div(std::max(tall, b), 8) * 8);
    // Query: Q, dQ, dO tall; K, V short. KeyValue: K, dK, V, dV tall; Q, dO short.
    return 2 * d_rows(tall) + v_rows(tall) + d_rows(blocks * b) + v_rows(blocks * b) + v_rows(tall) + matrices +
           vectors + mask;
  }
  int64_t acc_bytes(int64_t tall, int64_t b) const {
    return 2 * (2 * padded(tall * b * kFloat) + padded(tall * widest() * kFloat));  // two sets
  }
};

// The argument block's entries. Query: dQ, D, query, key, value, dO, O, lse. KeyValue: dK, dV, query, key, value,
// dO, lse, D.
enum Argument : int { kOut0, kOut1, kQuery, kKey, kValue, kGradOutput, kIn0, kIn1 };

class GradientEmitter {
 public:
  GradientEmitter(const AttentionGradientSpec& spec, const config::ChipConfig& config, const GradientTiling& tiling)
      : s_(spec.attention),
        query_kernel_(spec.part == AttentionGradient::Query),
        t_(tiling),
        tall_(tiling.block_tall),
        short_(tiling.block_short),
        resident_(tiling.resident),
        b_(query_kernel_ ? "attention_backward_query_f32" : "attention_backward_key_value_f32", config) {
    const int64_t held = resident_ * short_;  // rows of the short tensors held at once
    const int64_t tall_q = query_kernel_ ? tall_ : held, tall_k = query_kernel_ ? held : tall_;
    const int64_t hpb = s_.heads_per_batch;
    q_ = chunked_rows(b_, s_.q_len, s_.head_dim, t_.d_chunk, tall_q, s_.query, hpb, "Q");
    k_ = chunked_rows(b_, s_.k_len, s_.head_dim, t_.d_chunk, tall_k, s_.key, hpb, "K");
    v_ = chunked_rows(b_, s_.k_len, s_.value_dim, t_.v_chunk, tall_k, s_.value, hpb, "V");
    grad_out_ = chunked_rows(b_, s_.q_len, s_.value_dim, t_.v_chunk, tall_q, spec.grad_output, hpb, "dO");
    // O's rows are read chunk by chunk into a product tile (row_dot_products): only where they are is needed.
    out_ = {s_.q_len, s_.value_dim, t_.v_chunk, tall_, resolved(s_.output, hpb, s_.q_len, s_.value_dim), hpb, {}, {}};
    if (query_kernel_) {
      grad_q_ = chunked_rows(b_, s_.q_len, s_.head_dim, t_.d_chunk, tall_, spec.grad_query, hpb, "dQ");
    } else {
      grad_k_ = chunked_rows(b_, s_.k_len, s_.head_dim, t_.d_chunk, tall_, spec.grad_key, hpb, "dK");
      grad_v_ = chunked_rows(b_, s_.k_len, s_.value_dim, t_.v_chunk, tall_, spec.grad_value, hpb, "dV");
    }
    for (Buffers& set : sets_) {
      set.p = b_.tile(Space::Scratchpad, tall_ * short_ * kFloat, "P");
      set.dp = b_.tile(Space::Scratchpad, tall_ * short_ * kFloat, "dP, then dS");
      set.product = b_.tile(Space::Scratchpad, tall_ * t_.widest() * kFloat, "product chunk");
      set.s_acc = b_.tile(Space::Accumulator, tall_ * short_ * kFloat, "S accumulator");
      set.dp_acc = b_.tile(Space::Accumulator, tall_ * short_ * kFloat, "dP accumulator");
      set.product_acc = b_.tile(Space::Accumulator, tall_ * t_.widest() * kFloat, "product accumulator");
    }
    lse_ = b_.tile(Space::Scratchpad, tall_q * kFloat, "log-sum-exp");
    d_ = b_.tile(Space::Scratchpad, tall_q * kFloat, "D");
    partial_ = b_.tile(Space::Scratchpad, tall_q * kFloat, "partial row sums of dO O");
    constants_ = b_.tile(Space::Scratchpad, 2 * kFloat, "scale and minus infinity");
    mask_tile_ = b_.tile(Space::Scratchpad, tall_ * mask_row_bytes(), "mask");
  }

  Kernel emit() {
    const int64_t tall_blocks = ceil_div(t_.tall_length, tall_);
    b_.describe(
        fmt::format("{}: {} heads, {} queries x {} keys, head dim {}, value dim {}{}, {} blocks of {} {} "
                    "against blocks of {}, held {} at a time",
                    b_.name(), s_.heads, s_.q_len, s_.k_len, s_.head_dim, s_.value_dim, s_.causal ? ", causal" : "",
                    tall_blocks, tall_, query_kernel_ ? "queries" : "keys", short_, resident_));
    loaded_ = b_.reg("group held");
    mask_ = b_.reg("mask in .data");
    b_.La(mask_, b_.data(mask_words()));
    attention_rows::fill_scale_and_minus_infinity(b_, constants_, s_.scale);
    Reg unit = b_.reg("unit"), blocks = b_.reg("tall blocks");
    b_.li(blocks, tall_blocks);
    const int64_t units = s_.heads * tall_blocks, cores = cores_for_units(units, b_.config());
    for_each_unit_across_cores(b_, unit, units, cores, [&] {
      head_ = b_.reg("head");
      tall_block_ = b_.reg("tall block");
      tall_rows_ = b_.reg("rows in the tall block");
      first_tall_ = b_.reg("first row of the tall block");
      b_.Divu(head_, unit, blocks);
      b_.Remu(tall_block_, unit, blocks);
      attention_rows::block_rows(b_, first_tall_, tall_rows_, tall_block_, tall_, t_.tall_length);
      if (query_kernel_)
        query_unit();
      else
        key_value_unit();
    });
    b_.Halt();
    return b_.finish(cores);
  }

 private:
  // ---- the Query kernel: a tall block of queries against every key block it sees

  void query_unit() {
    move_rows(true, kQuery, q_, tall_block_, tall_rows_);
    move_rows(true, kGradOutput, grad_out_, tall_block_, tall_rows_);
    move_vector(true, kIn1, lse_, s_.q_len, first_tall_, tall_rows_);
    row_dot_products();
    move_vector(false, kOut1, d_, s_.q_len, first_tall_, tall_rows_);
    zero(grad_q_, tall_rows_);
    b_.li(loaded_, -1);
    const int64_t full = s_.k_len / short_;
    Reg block = b_.reg("key block"), limit = b_.reg("full key blocks to visit");
    short_block_ = block;
    b_.li(limit, full);
    if (s_.causal) {  // ceil((q0 + rows) / B): the blocks holding keys 0 .. q0 + rows - 1
      Reg diagonal_end = b_.reg("blocks up to the diagonal"), size = b_.reg("block size");
      const Label all_full = b_.label();
      b_.Add(diagonal_end, first_tall_, tall_rows_);
      b_.Addi(diagonal_end, diagonal_end, short_ - 1);
      b_.li(size, short_);
      b_.Divu(diagonal_end, diagonal_end, size);
      b_.Bgeu(diagonal_end, limit, all_full);
      b_.move(limit, diagonal_end);
      b_.bind(all_full);
    }
    b_.li(block, 0);
    block_loop(block, limit,
               {[&] { query_front(short_); }, [&] { query_vector(short_); }, [&] { query_products(short_); }});
    if (s_.k_len % short_ != 0) {
      const Label tail_done = b_.label();
      if (s_.causal) {  // visited when its first key is at most q0 + rows - 1
        Reg end = b_.reg("queries up to the block's end"), first_key = b_.reg("first key");
        b_.Add(end, first_tall_, tall_rows_);
        b_.li(first_key, full * short_);
        b_.Bgeu(first_key, end, tail_done);
      }
      b_.li(block, full);
      query_front(s_.k_len % short_);
      query_vector(s_.k_len % short_);
      query_products(s_.k_len % short_);
      b_.bind(tail_done);
    }
    scale_and_store(kOut0, grad_q_, tall_rows_);
  }

  // D = rowsum(dO * O) for the tall block's queries, O's chunks loaded one by one into the product tile.
  void row_dot_products() {
    Reg d = b_.reg("D"), o = b_.reg("O chunk"), at = b_.reg("dO chunk"), partial = b_.reg("partial"),
        n = b_.reg("element count"), pointer = b_.reg("DRAM rows"), scratch = b_.reg("DRAM offset"),
        width = b_.reg("chunk width");
    b_.point(d, d_);
    b_.Vfill(kF32, d, tall_rows_, 0);
    b_.Ld(scratch, kArgumentBlock, 8 * kIn0);
    attention_rows::block_address(b_, pointer, scratch, head_, out_, tall_block_, kFloat);
    b_.point(partial, partial_);
    for (size_t c = 0; c < grad_out_.tiles.size(); ++c) {
      const int64_t columns = grad_out_.width(c);
      b_.Addi(scratch, pointer, static_cast<int64_t>(c) * t_.v_chunk * kFloat);
      b_.li(width, columns);
      b_.point(o, sets_[0].product);
      b_.DmaLoad2d32(o, scratch, width, tall_rows_, out_.layout.row * kFloat);
      count(n, tall_rows_, columns);
      b_.point(at, grad_out_.tiles[c]);
      b_.Vmul(kF32, o, o, at, n, 0);
      b_.Vrsum(kF32, partial, o, tall_rows_, width);
      b_.Vadd(kF32, d, d, partial, tall_rows_, 0);
    }
  }

  // A key block's products that need no vector result (S = Q K^T, dP = dO V^T), into the current set: `keys` keys
  // (a constant), its index in short_block_.
  void query_front(int64_t keys) {
    Reg keys_reg = b_.reg("keys"), within = b_.reg("block within the group");
    hold_group(within, s_.k_len, [&](R group, R rows) {
      move_rows(true, kKey, k_, group, rows);
      move_rows(true, kValue, v_, group, rows);
    });
    b_.li(keys_reg, keys);
    short_block_product(k_, q_, sets_[set_].s_acc, sets_[set_].p, within, keys_reg, keys);
    short_block_product(v_, grad_out_, sets_[set_].dp_acc, sets_[set_].dp, within, keys_reg, keys);
  }

  // The key block's vector work: P = exp(scale S - lse) (masked), dS = P (dP - D).
  void query_vector(int64_t keys) {
    Reg p = b_.reg("P"), dp = b_.reg("dP"), at = b_.reg("operand"), n = b_.reg("element count");
    count(n, tall_rows_, keys);
    b_.point(p, sets_[set_].p);
    b_.point(at, constants_);
    b_.Vmul(kF32, p, p, at, n, 1);
    if (s_.causal) {  // keys at or right of the block's first query: the triangle's window from column k0 - q0
      const Label unmasked = b_.label();
      Reg window = b_.reg("mask window");
      b_.li(window, short_);
      b_.Mul(window, short_block_, window);
      b_.Bltu(window, first_tall_, unmasked);
      b_.Sub(window, window, first_tall_);
      b_.Add(window, window, mask_);
      attention_rows::hide_masked_scores(b_, p, window, tall_rows_, keys, mask_row_bytes(), mask_tile_, constants_, n);
      b_.bind(unmasked);
    }
    b_.point(at, lse_);
    b_.Vsub(kF32, p, p, at, n, per_row(keys));
    b_.Vexp(kF32, p, p, n);
    b_.point(dp, sets_[set_].dp);
    b_.point(at, d_);
    b_.Vsub(kF32, dp, dp, at, n, per_row(keys));
    b_.Vmul(kF32, dp, dp, p, n, 0);
  }

  // The key block's products that need the vector work: dQ += dS K.
  void query_products(int64_t keys) {
    Reg keys_reg = b_.reg("keys"), within = b_.reg("block within the group"), ds = b_.reg("dS"), at = b_.reg("operand"),
        width = b_.reg("chunk width");
    within_group(within);
    b_.li(keys_reg, keys);
    b_.point(ds, sets_[set_].dp);
    for (size_t c = 0; c < k_.tiles.size(); ++c) {
      b_.li(width, k_.width(c));
      point_within(at, k_.tiles[c], within, k_.width(c));
      b_.MatrixLoadWeights(kF32, at, keys_reg, width);
      accumulate_product(ds, tall_rows_, grad_q_.tiles[c], k_.width(c));
    }
  }

  // ---- the KeyValue kernel: a tall block of keys against every query block that sees it

  void key_value_unit() {
    move_rows(true, kKey, k_, tall_block_, tall_rows_);
    move_rows(true, kValue, v_, tall_block_, tall_rows_);
    zero(grad_k_, tall_rows_);
    zero(grad_v_, tall_rows_);
    b_.li(loaded_, -1);
    const int64_t full = s_.q_len / short_;
    Reg block = b_.reg("query block"), limit = b_.reg("full query blocks");
    short_block_ = block;
    b_.li(limit, full);
    b_.li(block, 0);
    if (s_.causal) {  // from the block holding the first key (B divides T): those before it see none of the keys
      Reg size = b_.reg("block size");
      b_.li(size, short_);
      b_.Divu(block, first_tall_, size);
    }
    block_loop(
        block, limit,
        {[&] { key_value_front(short_); }, [&] { key_value_vector(short_); }, [&] { key_value_products(short_); }});
    if (s_.q_len % short_ != 0) {
      const Label tail_done = b_.label();
      if (s_.causal) {  // visited when its first query is at or after the first key
        Reg first_query = b_.reg("first query");
        b_.li(first_query, full * short_);
        b_.Bltu(first_query, first_tall_, tail_done);
      }
      b_.li(block, full);
      key_value_front(s_.q_len % short_);
      key_value_vector(s_.q_len % short_);
      key_value_products(s_.q_len % short_);
      b_.bind(tail_done);
    }
    scale_and_store(kOut0, grad_k_, tall_rows_);
    move_rows(false, kOut1, grad_v_, tall_block_, tall_rows_);
  }

  // A query block's products that need no vector result (S^T = K Q^T, dP^T = V dO^T), into the current set:
  // `queries` queries (a constant), index short_block_.
  void key_value_front(int64_t queries) {
    Reg queries_reg = b_.reg("queries"), within = b_.reg("block within the group");
    hold_group(within, s_.q_len, [&](R group, R rows) {
      move_rows(true, kQuery, q_, group, rows);
      move_rows(true, kGradOutput, grad_out_, group, rows);
      Reg first = b_.reg("first query of the group");
      b_.li(first, resident_ * short_);
      b_.Mul(first, group, first);
      move_vector(true, kIn0, lse_, s_.q_len, first, rows);
      move_vector(true, kIn1, d_, s_.q_len, first, rows);
    });
    b_.li(queries_reg, queries);
    short_block_product(q_, k_, sets_[set_].s_acc, sets_[set_].p, within, queries_reg, queries);
    short_block_product(grad_out_, v_, sets_[set_].dp_acc, sets_[set_].dp, within, queries_reg, queries);
  }

  // The query block's vector work: P^T = exp(scale S^T - lse^T) (masked), dS^T = P^T (dP^T - D^T).
  void key_value_vector(int64_t queries) {
    Reg first_query = b_.reg("first query"), within = b_.reg("block within the group");
    within_group(within);
    b_.li(first_query, short_);
    b_.Mul(first_query, short_block_, first_query);
    Reg p = b_.reg("P^T"), dp = b_.reg("dP^T"), at = b_.reg("operand"), n = b_.reg("element count");
    count(n, tall_rows_, queries);
    b_.point(p, sets_[set_].p);
    b_.point(at, constants_);
    b_.Vmul(kF32, p, p, at, n, 1);
    if (s_.causal) {  // queries q0 - k0 = t < T after the first key: rows T - t .. of the band, key r hidden from
                      // query c where r - c > t
      const Label unmasked = b_.label();
      Reg window = b_.reg("mask window"), band = b_.reg("band rows");
      b_.Sub(window, first_query, first_tall_);
      b_.li(band, tall_);
      b_.Bgeu(window, band, unmasked);
      b_.Sub(window, band, window);
      b_.li(band, mask_row_bytes());
      b_.Mul(window, window, band);
      b_.Add(window, window, mask_);
      attention_rows::hide_masked_scores(b_, p, window, tall_rows_, queries, mask_row_bytes(), mask_tile_, constants_,
                                         n);
      b_.bind(unmasked);
    }
    point_within(at, lse_, within, 1);
    b_.Vsub(kF32, p, p, at, n, repeated_row(queries));
    b_.Vexp(kF32, p, p, n);
    b_.point(dp, sets_[set_].dp);
    point_within(at, d_, within, 1);
    b_.Vsub(kF32, dp, dp, at, n, repeated_row(queries));
    b_.Vmul(kF32, dp, dp, p, n, 0);
  }

  // The query block's products that need the vector work: dV += P^T dO, dK += dS^T Q.
  void key_value_products(int64_t queries) {
    Reg queries_reg = b_.reg("queries"), within = b_.reg("block within the group"), p = b_.reg("P^T"),
        ds = b_.reg("dS^T"), at = b_.reg("operand"), width = b_.reg("chunk width");
    within_group(within);
    b_.li(queries_reg, queries);
    b_.point(p, sets_[set_].p);
    b_.point(ds, sets_[set_].dp);
    for (size_t c = 0; c < grad_out_.tiles.size(); ++c) {
      b_.li(width, grad_out_.width(c));
      point_within(at, grad_out_.tiles[c], within, grad_out_.width(c));
      b_.MatrixLoadWeights(kF32, at, queries_reg, width);
      accumulate_product(p, tall_rows_, grad_v_.tiles[c], grad_out_.width(c));
    }
    for (size_t c = 0; c < q_.tiles.size(); ++c) {
      b_.li(width, q_.width(c));
      point_within(at, q_.tiles[c], within, q_.width(c));
      b_.MatrixLoadWeights(kF32, at, queries_reg, width);
      accumulate_product(ds, tall_rows_, grad_k_.tiles[c], q_.width(c));
    }
  }

  // ---- shared steps

  // A short block in three steps: the products that need no vector result, the vector work, the products that
  // need it (with their sums into the gradients).
  struct BlockSteps {
    std::function<void()> front, vector, products;
  };

  // Short blocks block .. limit - 1 (each step emits one, its index in short_block_), the loop unrolled twice so that
  // consecutive blocks use the two buffer sets. A sync makes an engine wait for everything another was given so far,
  // and the engines run their queues in order; so when every short block is held at once (no group is reloaded
  // under a block still in use), the loop is software pipelined: this block's vector work is issued, then the next
  // block's front, then this block's products, and the matrix engine computes the next block's S and dP while the
  // vector engine works on this one.
  void block_loop(R block, R limit, const BlockSteps& steps) {
    const Label loop = b_.label(), done = b_.label();
    const bool pipelined = resident_ >= ceil_div(t_.short_length, short_);
    b_.Bgeu(block, limit, done);
    short_block_ = block;
    set_ = 0;
    if (pipelined) steps.front();
    b_.bind(loop);
    for (int set : {0, 1}) {
      set_ = set;
      if (!pipelined) steps.front();
      steps.vector();
      if (pipelined) {  // the next block's front, in the other set
        const Label last = b_.label();
        Reg next = b_.reg("next block");
        b_.Addi(next, block, 1);
        b_.Bgeu(next, limit, last);
        short_block_ = next;
        set_ = 1 - set;
        steps.front();
        short_block_ = block;
        set_ = set;
        b_.bind(last);
      }
      steps.products();
      b_.Addi(block, block, 1);
      if (set == 0)
        b_.Bgeu(block, limit, done);
      else
        b_.Bltu(block, limit, loop);
    }
    set_ = 0;
    b_.bind(done);
  }

  // result = the tall block's rows x the short block's rows transposed (`count` of them, `short_rows` a constant),
  // summed over their chunks in the accumulator: S = Q K^T, dP = dO V^T, or transposed, S^T = K Q^T, dP^T = V dO^T.
  void short_block_product(const ChunkedRows& short_tensor, const ChunkedRows& tall_tensor, const Tile& accumulator,
                           const Tile& result, R within, R short_count, int64_t short_rows) {
    Reg acc = b_.reg("accumulator"), at = b_.reg("operand"), width = b_.reg("chunk width"), n = b_.reg("element count");
    b_.point(acc, accumulator);
    for (size_t c = 0; c < short_tensor.tiles.size(); ++c) {
      b_.li(width, short_tensor.width(c));
      point_within(at, short_tensor.tiles[c], within, short_tensor.width(c));
      b_.MatrixLoadWeightsTransposed(kF32, at, width, short_count);
      b_.point(at, tall_tensor.tiles[c]);
      b_.MatrixMultiply(kF32, acc, at, tall_rows_, c == 0 ? 0 : 1);
    }
    count(n, tall_rows_, short_rows);
    b_.point(at, result);
    b_.MatrixStore(kF32, at, acc, n);
  }

  // The short tensors are held `resident_` short blocks at a time (a group): loads the group of block short_block_
  // with `load(group, rows)` unless it is the one held, and sets `within` to the block's index in its group.
  template <typename Load>
  void hold_group(R within, int64_t length, Load&& load) {
    Reg group = b_.reg("group");
    const Label held = b_.label();
    b_.li(within, resident_);
    b_.Divu(group, short_block_, within);
    b_.Remu(within, short_block_, within);
    b_.Beq(group, loaded_, held);
    {  // rows: min(resident x B, length - first row of the group)
      Reg rows = b_.reg("rows of the group"), most = b_.reg("rows of a group"), all = b_.reg("length");
      const Label short_group = b_.label();
      b_.li(most, resident_ * short_);
      b_.Mul(rows, group, most);
      b_.li(all, length);
      b_.Sub(rows, all, rows);
      b_.Bltu(rows, most, short_group);
      b_.move(rows, most);
      b_.bind(short_group);
      load(group, rows);
    }
    b_.move(loaded_, group);
    b_.bind(held);
  }

  // within = the index of block short_block_ in its group.
  void within_group(R within) {
    b_.li(within, resident_);
    b_.Remu(within, short_block_, within);
  }

  // `at` = the address of row within x B of the group's tile (rows of `row_elements` floats).
  void point_within(R at, const Tile& tile, R within, int64_t row_elements) {
    Reg offset = b_.reg("offset in the group");
    b_.li(offset, short_ * row_elements * kFloat);
    b_.Mul(offset, within, offset);
    b_.point(at, tile);
    b_.Add(at, at, offset);
    b_.bind(at, tile);
  }

  // The loaded weights times `rows` rows of `input`, added to the gradient chunk `gradient` (`columns` wide).
  void accumulate_product(R input, R rows, const Tile& gradient, int64_t columns) {
    Reg acc = b_.reg("accumulator"), product = b_.reg("product"), to = b_.reg("gradient chunk"),
        n = b_.reg("element count");
    b_.point(acc, sets_[set_].product_acc);
    b_.MatrixMultiply(kF32, acc, input, rows, 0);
    count(n, rows, columns);
    b_.point(product, sets_[set_].product);
    b_.MatrixStore(kF32, product, acc, n);
    b_.point(to, gradient);
    b_.Vadd(kF32, to, to, product, n, 0);
  }

  void zero(const ChunkedRows& gradient, R rows) {
    Reg at = b_.reg("gradient chunk"), n = b_.reg("element count");
    for (size_t c = 0; c < gradient.tiles.size(); ++c) {
      count(n, rows, gradient.width(c));
      b_.point(at, gradient.tiles[c]);
      b_.Vfill(kF32, at, n, 0);
    }
  }

  // gradient *= scale, then stored (the chain rule through S = scale Q K^T).
  void scale_and_store(int base, const ChunkedRows& gradient, R rows) {
    Reg at = b_.reg("gradient chunk"), scale = b_.reg("scale"), n = b_.reg("element count");
    b_.point(scale, constants_);
    for (size_t c = 0; c < gradient.tiles.size(); ++c) {
      count(n, rows, gradient.width(c));
      b_.point(at, gradient.tiles[c]);
      b_.Vmul(kF32, at, at, scale, n, 1);
    }
    move_rows(false, base, gradient, tall_block_, rows);
  }

  // Rows of the tensor at entry `argument` of the argument block.
  void move_rows(bool load, int argument, const ChunkedRows& tensor, R block, R rows) {
    Reg base = b_.reg("tensor");
    b_.Ld(base, kArgumentBlock, 8 * argument);
    attention_rows::move_rows(b_, load, base, head_, tensor, block, rows, kFloat);
  }

  // `count` floats of the [heads][length] vector at entry `argument`, from element `first` of head head_, either way.
  void move_vector(bool load, int argument, const Tile& tile, int64_t length, R first, R count) {
    Reg pointer = b_.reg("DRAM vector"), scratch = b_.reg("DRAM offset"), at = b_.reg("vector tile");
    b_.li(scratch, length);
    b_.Mul(pointer, head_, scratch);
    b_.Add(pointer, pointer, first);
    b_.Slli(pointer, pointer, 2);
    b_.Ld(scratch, kArgumentBlock, 8 * argument);
    b_.Add(pointer, pointer, scratch);
    b_.point(at, tile);
    if (load)
      b_.DmaLoad32(at, pointer, count, kFloat);
    else
      b_.DmaStore32(pointer, at, count, kFloat);
  }

  // reg = rows x a constant row length.
  void count(R reg, R rows, int64_t row_length) {
    b_.li(reg, row_length);
    b_.Mul(reg, rows, reg);
  }

  // Mask rows are padded to whole words: Query's T x T triangle, KeyValue's 2T x B band.
  int64_t mask_row_bytes() const { return ceil_div(query_kernel_ ? tall_ : short_, 8) * 8; }

  std::vector<uint64_t> mask_words() const {
    if (query_kernel_)  // key j right of query i
      return attention_rows::mask_words(tall_, tall_, mask_row_bytes(), [](int64_t i, int64_t j) { return j > i; });
    // row a of the band, at T - t for queries t after the first key: key a - (T - t) hidden from query c when
    // a - (T - t) - c > t, that is a - c > T
    const int64_t tall = tall_;
    return attention_rows::mask_words(2 * tall_, short_, mask_row_bytes(),
                                      [tall](int64_t a, int64_t c) { return a - c > tall; });
  }

  AttentionSpec s_;
  bool query_kernel_;
  GradientTiling t_;
  int64_t tall_, short_, resident_;
  KernelBuilder b_;
  ChunkedRows q_, k_, v_, grad_out_, out_, grad_q_, grad_k_, grad_v_;
  // Two sets of a short block's matrices, alternating between blocks, so that one block's products on the matrix
  // engine overlap the other's vector work (the builder orders each set's tiles; the sets are independent).
  struct Buffers {
    Tile p, dp, product, s_acc, dp_acc, product_acc;
  };
  Buffers sets_[2];
  int set_ = 0;  // the set the short block being emitted uses
  Tile lse_, d_, partial_, constants_, mask_tile_;
  // Held for the whole kernel: the mask's address; per unit: its head, tall block, first row and rows; per short
  // block: its index. Argument pointers are loaded from the argument block where used.
  Reg mask_, head_, tall_block_, tall_rows_, first_tall_;
  Reg loaded_;       // the group of short blocks held (-1: none yet in this unit)
  R short_block_{};  // the register holding the index of the short block being emitted
};

}  // namespace

bool attention_gradient_fits(const AttentionSpec& spec, const config::ChipConfig& config) {
  for (AttentionGradient part : {AttentionGradient::Query, AttentionGradient::KeyValue})
    if (GradientTiling({spec, part}, config).block_tall == 0) return false;
  return true;
}

Kernel emit_attention_gradient(const AttentionGradientSpec& spec, const config::ChipConfig& config) {
  const AttentionSpec& s = spec.attention;
  if (s.heads < 1 || s.q_len < 1 || s.k_len < 1 || s.head_dim < 1 || s.value_dim < 1)
    throw std::invalid_argument("attention needs at least one head, query, key and dimension");
  if (s.type != ElementType::F32)
    throw std::invalid_argument(fmt::format("the attention backward kernels take f32, not {}", isa::type_name(s.type)));
  const GradientTiling tiling(spec, config);
  if (tiling.block_tall == 0)
    throw Unsupported("an attention backward block does not fit the scratchpad and accumulator");
  return GradientEmitter(spec, config, tiling).emit();
}

}  // namespace npusim::emitter
