// The flash fold (seed 002, original lines 5180-5198, 5325-5367, 5370-6111): ONE section, one item per (query tile,
// head), the cache streaming past each item as the K blocks of a fold.
//
// ★ AN ATTENTION HEAD NEVER FITS A SITE AT REAL LENGTH, SO IT STREAMS. Each block's scores S = Q*K^T fold into a
// running softmax that never leaves the site: m' = max(m, rowmax S), a = e^(c(m - m')), P = e^(c(S - m')),
// s' = a*s + rowsum P, O' = a*O + P*V, c the score scale (the maximum of the raw scores: c > 0 keeps its position;
// capped, or with c <= 0, the scaled scores are taken first and c is 1). The rescale is the identity
// e^(x-m) = e^(x-m')*e^(m-m'), so nothing is approximated (a is the target's accurate exp, ExpAccurate, even in
// approx mode: a fast e^0 != 1 would compound over the blocks), and the epilogue's O / s is the attention. An item is
// a TILE of query rows of one head — FlashAttention-2's outer loop; one row, for a decode step.
//
// ★ A BLOCK IS kb TILE ROWS OF THE CACHE (tt-metal's k_chunk). The cache is dense tiles, rows x (kvw*hd): block b of
// K/V head x is tile rows [b*kb, (b+1)*kb)'s hd/tile tiles from x*hd, an address affine in the block. S = Q · K^T is
// one tile product (MatmulTiles, K transposed). With kb > 1 (FoldBlockTiles: only where a query tile's rows share
// their limit, or nothing is masked) the values are read whole: a position no row sees is zeroed in the block's values
// first (`live_values`), and P · V is a tile product accumulated onto the running output after it is scaled in place
// (as tt-metal's SDPA and flash_prefill.h). With kb = 1 the value product is the guarded contraction, which reads only
// each row's live positions.
//
// ★ THE RUNNING STATE KEEPS THE ACCUMULATOR'S WIDTH. m is an exponent shift: rounded to bf16 it would move every
// weight of the row by up to 1%. m, s and O are fp32 carries (depth 2: the old page and the new); only the attention
// leaves at the datapath's precision.
//
// Stages. Prologue: load_scaler, load_q, the mask's row limits (flash_mask.h), [load_tile_offsets], [load_sinks],
// init_max, init_sum, init_out*, [init_start]. Body, once per block: load_k, load_v*, [block_limit, block_floor],
// scores, [score_cap | score_scale], block_max, new_max, rescale, probs, block_sum, then either (kb > 1)
// [tile_limit, tile_floor], then per value page [live_values], rescale_out, block_out; or (kb = 1) per value page
// block_out, fold_out; then fold_sum, fold_max, [next_start]. Epilogue: normalize*, store_ctx*. One block needs no
// fold: every stage is then a prologue stage, in the same order.
//
// Numerical stability, as the seeds state it: a masked score is MASKED (geometry.h) in the block's maximum, and a
// masked probability is exactly 0 — forced, never computed, since exp(MASKED - MASKED) = 1 would pollute a row that has
// seen only masked positions (a fully masked block is then the identity: m' = m, a = 1, P = 0). The running maximum is
// the NaN-ignoring Max pool. A masked position's value never reaches the result either: the value contraction is
// live-guarded (kb = 1), or the position's value is zeroed before the product (kb > 1), so a cache slot past the
// limit holding garbage (even NaN) contributes exactly nothing. Every real row keeps
// at least one live position, whose term is e^0 = 1, so the denominator is at least 1.
#ifndef LOWERINGS_ATTENTION_FLASH_FOLD_H_
#define LOWERINGS_ATTENTION_FLASH_FOLD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "lowerings/attention/flash_mask.h"
#include "lowerings/attention/geometry.h"
#include "spatial/builder.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The fold with `pages` (1 or 2) pages in each streamed key and value page and in the output page, as a
// one-section composition. Operands: names.operand(0..2) = Q (dense rows x per_row*hd; grouped: the regrouped
// (kvw*tile) x hd matrix), K (g.rows x kvw*hd), V (g.rows x kvw*vd); the position operand when g.limit is one; the
// result names.out (rows x per_row*part, dense). With sinks the fold reads "{out}__flash_sinks" (one tile per item,
// row r's sink in element r), which flash.h's spread section writes.
//
// Section "{tag}_flash_blocks_{items}x{hd}{values}_l{l}_b{kb * tile}", values "_v{vd}_pages{first}+{count}" for a value
// part, "_v{vd}" when vd != hd. Claim "attention in {precision}". With the position an operand and more than one
// block, the fold's trip is ceil((P + T - 1) / (kb * tile * split)), admitting 1 <= P <= rows - (T - 1) (★ THE BLOCKS
// RUN TO THE POSITION: a decode step at position P streams ceil(P / (kb * tile)) blocks, not the declared
// ceil(l / (kb * tile))).
//
// Refusals: NotLowered on a tile that is not square or a geometry the fold cannot hold (heads not whole tiles, a
// query head reading a K/V head past kvw, a value part past the values, a kv_chunk FoldBlockTiles refuses, a matrix
// engine whose operand format is not the elementwise datapath's); MissingCompute without a float datapath
// (or, masked, an integer one); MissingPrecision without an fp32 accumulator or an index integer.
absl::StatusOr<Composition> FlashFoldPaged(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                           const Target& target, int64_t pages);

// Whether a block's values may be read whole (the matrix engine's P · V): the live rows of a query tile share their
// limit (a regrouped tile: heads of one query row; a decode tile: its one row), or nothing is masked. Otherwise a row's masked positions, where
// the cache may hold anything, are never read (the guarded contraction).
bool ReadsBlocksWhole(const FlashGeometry& g, int64_t tile_rows);

// The cache tile rows a block of the fold covers, of the `tiles` a part folds: g.kv_chunk's when set (NotLowered
// unless whole tile rows that divide them, within the accumulator's fp32 tiles (RowBlockTiles) and, above 1,
// ReadsBlocksWhole), else the most that divide them up to 128 positions — 1 where blocks cannot be read whole.
absl::StatusOr<int64_t> FoldBlockTiles(const FlashGeometry& g, const Target& target, int64_t tiles);

// The scale the fold's exps take: the score scale where the running maximum is of the raw scores (scale > 0, no cap:
// P = e^(scale * (S - m'))), 1 where it is of the scaled (or capped) scores. A split fold's partial maxima are in
// these units, and its combine weighs them so.
double FoldExpScale(const FlashGeometry& g);

// A running statistic's map: one value per row at column 0 of a one-tile page, or — `cols` query tiles sharing the
// page (the prefill fold, flash_prefill.h) — query tile i's row r at column i.
ElemAccess StatMap(int64_t cols, int64_t tile_cols);

// The running softmax's first state, the fold's and the split combine's alike: "init_max" (MASKED, or with `sinks`
// row r's sink, element r of the item's tile of "{out}__flash_sinks", 1 x items*tile, the tile the item's
// coordinate `sink_item` picks) and "init_sum" (0, or 1), in StatMap(cols) layout. `scale`: the maximum is kept in
// the units of scores the fold multiplies by `scale` later (the prefill fold), so a sink starts as sink / scale.
void AddSoftmaxStart(Template& t, const std::string& out, bool sinks, int64_t items, Precision precision,
                     BufferId m_run, BufferId s_run, LoopVar sink_item = LoopVar::kItemY, int64_t cols = 1,
                     double scale = 1.0);

// The fold's operand tensors, dense: Q (fi.rows x per_row*hd), K (g.rows x kvw*hd) and — unless latent, whose values
// are its keys' — V (g.rows x kvw*vd), at `precision`, each with its spec's fill; the prefill fold's alike.
struct FlashOperands {
  TensorId q = -1;
  TensorId k = -1;
  std::optional<TensorId> v;
};
absl::StatusOr<FlashOperands> AddFlashOperands(Template& t, const AttentionNames& names, const FlashGeometry& g,
                                               const FoldItems& fi, Precision precision);

// MulticastSharedPrologue (a prologue tile every item of a group reads, multicast): lowerings/toolkit/common.h.

// The running maximum's update, the fold's and the split combine's (flash_split.h) alike: stages "new_max"
// (m' = max(m_run, m_in) per row, the NaN-ignoring pool; `scaler` the reduce engine's ones tile) and "rescale"
// (a = e^(scale * (m_run - m')), the accurate exp), into fp32 scratch, each in StatMap(cols) layout. Returns (m', a).
// `scale` is 1 where the maximum is of scaled scores, the score scale where it is of raw ones (the prefill fold).
// `sfx` ends its stages' and buffers' names (an unrolled block of the prefill fold has its own); `rows` the rows of
// the tile computed (0: all; LiveTileRows).
std::pair<BufferId, BufferId> AddMaxUpdate(Template& t, BufferId m_run, BufferId m_in, BufferId scaler,
                                           int64_t cols = 1, double scale = 1.0, std::string_view sfx = "",
                                           int64_t rows = 0);

// The output's normalization, the folds' and the split combine's alike: stage "inverse_sum", 1 / (s + floor) for
// each of `rows` rows of the sums `s` (fp32 scratch in StatMap(cols) layout: a column a query tile), so the output is
// scaled by it with one FPU multiply an element rather than a reciprocal an element on the SFPU (tt-metal's
// recip_block_inplace on the statistics).
BufferId InverseSum(Template& t, BufferId s, int64_t rows, double floor, int64_t cols = 1);

// ★ TWO PAGES WHERE THEY FIT, ONE WHERE THEY DO NOT (l.5329): the two-page fold when its site footprint fits the
// target's local memory, else the one-page fold (which computes the same values).
absl::StatusOr<Composition> FlashFold(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                      const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_FLASH_FOLD_H_
