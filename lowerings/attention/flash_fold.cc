#include "lowerings/attention/flash_fold.h"

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash_mask.h"
#include "lowerings/attention/flash_split.h"
#include "lowerings/elementwise/elementwise.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "passes/fit_site.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/semantics/footprint.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The most copies of a split fold's tables (one a part): a target has far fewer DRAM channels, so past this the
// copies would only take memory.
constexpr int64_t kMaxTableCopies = 64;

ElemAccess Terms(std::vector<Term> terms) { return ElemAccess{0, std::move(terms), std::nullopt}; }

// [ROW r, COL c, K k reduced by Sum]: a contraction into an r x c page.
std::vector<IterSpec> Contract(int64_t r, int64_t c, int64_t k) {
  return {{LoopVar::kRow, r, IterKind::kParallel},
          {LoopVar::kCol, c, IterKind::kParallel},
          {LoopVar::kK, k, IterKind::kReduceSum}};
}

absl::Status CheckGeometry(const FlashGeometry& g, const Target& target) {
  if (target.tile_rows() != target.tile_cols()) {
    return NotLowered(
        "a flash attention fold on a tile that is not square — a block's positions are its scores' columns");
  }
  if (!FlashApplies(g.hd, g.vd, target)) return NotLowered("a flash attention fold whose heads are not whole tiles");
  if (g.kvw < 1 || g.rows < 1 || g.l < 1 || g.l > g.rows || g.q.rows < 1 || g.q.per_row < 1 || g.q.group < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a flash geometry of ", g.q.rows, " x ", g.q.per_row,
                                                   " query heads, ", g.kvw, " K/V heads and ", g.l, " of ", g.rows,
                                                   " positions"));
  }
  if (!g.grouped && g.q.kv_of(g.q.per_row - 1) >= g.kvw) {
    return NotLowered(
        "a query head whose K/V head is past the cache's heads (query heads that do not divide among "
        "the K/V heads)");
  }
  if (g.grouped && g.q.rows != 1) return NotLowered("a regrouped fold of more than one query row");
  if (g.latent && (g.vd > g.hd || g.kvw != 1)) {
    return NotLowered("a latent fold whose values are wider than its keys, or of more than one latent cache");
  }
  if (g.limit && g.limit->is_operand() && BoundMax(g.rows, g.q.rows) < 1) {
    return NotLowered("a block of query rows longer than its cache — no position admits every row");
  }
  if (g.limit && !g.limit->is_operand() && (g.limit->value < 1 || g.limit->value + (g.q.rows - 1) > g.rows)) {
    return LiteralPositionOutsideCache(g.limit->value, g.q.rows, g.rows);
  }
  if (g.window && g.window->span < 1)
    return NotLowered("a window of no positions — every row's softmax would be empty");
  if (g.cap && !(*g.cap > 0.0 || *g.cap < 0.0)) return absl::InvalidArgumentError("a soft cap of zero");
  if (g.split > 1) {
    const int64_t nb = CeilDiv(g.l, target.tile_rows());
    // An item's K/V head must be affine in its query tile (flash_split.h's SplitsCache).
    if (!SplitsCache(g, target.tile_rows()) || nb % g.split != 0 || nb / g.split < 2) {
      return NotLowered(absl::StrCat("a split fold of ", g.split, " parts over ", nb,
                                     " blocks that is not one query tile of a K/V head whose parts fold two or "
                                     "more blocks each"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool ReadsBlocksWhole(const FlashGeometry& g, int64_t tile_rows) {
  return g.grouped || g.q.rows == 1 || !(g.limit.has_value() || g.l % tile_rows != 0 || g.window.has_value());
}

absl::StatusOr<int64_t> FoldBlockTiles(const FlashGeometry& g, const Target& target, int64_t tiles) {
  const int64_t tr = target.tile_rows();
  const int64_t most = std::min(RowBlockTiles(target), std::max<int64_t>(1, tiles));
  if (g.kv_chunk > 0) {
    const int64_t kb = g.kv_chunk / tr;
    if (g.kv_chunk % tr != 0 || tiles % kb != 0 || kb > most || (kb > 1 && !ReadsBlocksWhole(g, tr))) {
      return NotLowered(absl::StrCat(
          "a flash fold in blocks of ", g.kv_chunk, " positions over ", tiles, " tile rows of ", tr,
          " (a block is whole tile rows that divide them, at most the accumulator's ", RowBlockTiles(target),
          " tiles, and more than one only where a query tile's rows share their limit)"));
    }
    return kb;
  }
  if (!ReadsBlocksWhole(g, tr)) return 1;
  // ★ 128 POSITIONS A BLOCK, tt-metal's decode k_chunk_size up to position 1024 (sdpa_test_utils.get_chunk_size):
  // the per-block chain runs a quarter as often as one tile row's on Wormhole, and a run-time position reads at most
  // a block past itself. Measured on Qwen3-8B's decode (wormhole_n150, cache 32768): 4 tile rows beat 8 at position
  // 1024 (47 k against 63 k cycles, the wider block reading twice what it needs) and tie at 4096 and 16384.
  for (int64_t d = std::min(most, std::max<int64_t>(1, 128 / tr)); d > 1; --d) {
    if (tiles % d == 0) return d;
  }
  return 1;
}

double FoldExpScale(const FlashGeometry& g) { return g.cap.has_value() || !(g.scale > 0.0) ? 1.0 : g.scale; }

ElemAccess StatMap(int64_t cols, int64_t tile_cols) {
  return cols == 1 ? PerRowMap(tile_cols) : Terms({{LoopVar::kRow, tile_cols}, {LoopVar::kCol, 1}});
}

void AddSoftmaxStart(Template& t, const std::string& out, bool sinks, int64_t items, Precision precision,
                     BufferId m_run, BufferId s_run, LoopVar sink_item, int64_t cols, double scale) {
  const int64_t tr = t.tile_rows();
  const int64_t tw = t.tile_cols();
  // The whole page at once for one query tile (the fold's form), the (row, query tile) points for several.
  const std::vector<IterSpec> space = cols == 1 ? HeadSpace(tr, tw) : HeadSpace(tr, cols);
  const ElemAccess at = cols == 1 ? IdentMap(tw) : StatMap(cols, tw);
  if (!sinks) {
    t.AddGeneric("init_max", space, {}, {}, at, Const(kMasked), m_run);
  } else {
    const TensorId sinks_t = t.AddTensor(absl::StrCat(out, "__flash_sinks"), TensorRole::kInput, 1, items * tw,
                                         precision, TensorInit::External());
    const BufferId sk_in = t.AddBufferDeep("in_sinks", 1, 1, precision);
    t.AddLoadBlockAt("load_sinks", sinks_t, 0, {{sink_item, 1}}, {}, sk_in);
    // Row r's sink is element r of the item's tile.
    t.AddGeneric("init_max", space, {sk_in}, {Terms({{LoopVar::kRow, 1}})}, at,
                 scale == 1.0 ? Op(0) : Mul(Op(0), Const(1.0 / scale)), m_run);
  }
  t.AddGeneric("init_sum", space, {}, {}, at, Const(sinks ? 1.0 : 0.0), s_run);
}

absl::StatusOr<FlashOperands> AddFlashOperands(Template& t, const AttentionNames& names, const FlashGeometry& g,
                                               const FoldItems& fi, Precision precision) {
  const OperandRef& q_op = names.operand(0);
  const OperandRef& k_op = names.operand(1);
  const OperandRef& v_op = names.operand(2);
  ASSIGN_OR_RETURN(const int64_t q_elems, CheckedElements("flash queries", fi.rows, CheckedMul(fi.per_row, g.hd)));
  const int64_t width = fi.per_row * g.hd;  // checked just above
  ASSIGN_OR_RETURN(const int64_t k_elems, CheckedElements("flash keys", g.rows, CheckedMul(g.kvw, g.hd)));
  ASSIGN_OR_RETURN(const int64_t v_elems, CheckedElements("flash values", g.rows, CheckedMul(g.kvw, g.vd)));
  ASSIGN_OR_RETURN(TensorInit q_init, InitOf(q_op.fill, q_elems));
  ASSIGN_OR_RETURN(TensorInit k_init, InitOf(k_op.fill, k_elems));
  FlashOperands ops;
  ops.q = t.AddTensor(q_op.name, TensorRole::kInput, fi.rows, width, precision, std::move(q_init));
  const Precision kv = g.kv_precision.value_or(precision);
  ops.k = t.AddTensor(k_op.name, TensorRole::kInput, g.rows, g.kvw * g.hd, kv, std::move(k_init));
  if (!g.latent) {
    ASSIGN_OR_RETURN(TensorInit v_init, InitOf(v_op.fill, v_elems));
    ops.v = t.AddTensor(v_op.name, TensorRole::kInput, g.rows, g.kvw * g.vd, kv, std::move(v_init));
  }
  return ops;
}

std::pair<BufferId, BufferId> AddMaxUpdate(Template& t, BufferId m_run, BufferId m_in, BufferId scaler,
                                           int64_t cols, double scale, std::string_view suffix, int64_t rows) {
  const std::string sfx(suffix);  // absl::StrCat here takes no string_view
  const int64_t tr = rows > 0 ? rows : t.tile_rows();
  const int64_t w1 = t.tile_cols();
  const ElemAccess stat = StatMap(cols, w1);
  // m'[r] = max(m[r], m_in[r]), the NaN-ignoring pool over the pair (K picks which, for several query tiles).
  const BufferId m_new = t.AddScratchDeep(absl::StrCat("new_max", sfx), 1, 1, Precision::kFp32);
  const LoopVar pair = cols == 1 ? LoopVar::kCol : LoopVar::kK;
  std::vector<IterSpec> pool{{LoopVar::kRow, tr, IterKind::kParallel}};
  if (cols > 1) pool.push_back({LoopVar::kCol, cols, IterKind::kParallel});
  pool.push_back({pair, 2, IterKind::kReduceMax});
  t.AddGeneric(absl::StrCat("new_max", sfx), pool, {m_run, m_in, scaler}, {stat, stat, ConstMap()}, stat,
               Select(Pred::Lt(pair, 1), Op(0), Op(1)), m_new);
  // a[r] = e^(scale * (m[r] - m'[r])), by the target's ACCURATE exp whatever its approx mode (as tt-metal's
  // rescale): the fast exp has e^0 != 1 (0.9785 for Schraudolph), which would shrink the earlier blocks once per block.
  const Body gap = Sub(Op(0), Op(1));
  const BufferId alpha = t.AddScratchDeep(absl::StrCat("rescale", sfx), 1, 1, Precision::kFp32);
  t.AddGeneric(absl::StrCat("rescale", sfx), HeadSpace(tr, cols), {m_run, m_new}, {stat, stat},
               cols == 1 ? IdentMap(w1) : stat,
               Unary(SfpuKind::ExpAccurate(), scale == 1.0 ? gap : Mul(gap, Const(scale))), alpha);
  return {m_new, alpha};
}

BufferId InverseSum(Template& t, BufferId s, int64_t rows, double floor, int64_t cols) {
  const ElemAccess stat = StatMap(cols, t.tile_cols());
  const BufferId inv = t.AddScratchDeep("inverse_sum", 1, 1, Precision::kFp32);
  t.AddGeneric("inverse_sum", HeadSpace(rows, cols), {s}, {stat}, stat,
               Unary(SfpuKind::Recip(), floor == 0.0 ? Op(0) : Add(Op(0), Const(floor))), inv);
  return inv;
}

absl::StatusOr<Composition> FlashFoldPaged(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                           const Target& target, int64_t pages) {
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const FoldItems fi = FoldItemsOf(g, tr);
  RETURN_IF_ERROR(CheckGeometry(g, target));
  const int64_t qr = LiveTileRows(g, fi, tr);
  const int64_t head_t = g.hd / tw;
  const int64_t width_t = fi.per_row * head_t;
  // ★ THE VALUES FOLD AN ACCUMULATOR PAGE AT A TIME. A row's running output is vd wide; past a page it is nv blocks
  // of vt tiles, each its own carry, block product, update and normalization, all sharing one row's scores, maximum
  // and sum.
  const int64_t v_t = g.vd / tw;
  const int64_t vt = RowBlock(v_t, target);
  const int64_t j0 = g.v_part ? g.v_part->first : 0;
  const int64_t nv = g.v_part ? g.v_part->second : v_t / vt;
  if (j0 < 0 || nv < 1 || (j0 + nv) * vt > v_t) return NotLowered("a value part past the values");
  const int64_t part_t = nv * vt;
  // Each value page is its own carry, product, update and normalization, unrolled; each item one query tile of a
  // head. Both are checked before a stage or an item is built.
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a flash fold of values ", g.vd, " wide"), "value pages", nv));
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a flash fold of ", g.q.rows, " x ", g.q.per_row, " query heads"),
                                 CheckedMul(fi.items, g.split)));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a flash fold of ", g.q.rows, " x ", g.q.per_row, " query heads"),
                              CheckedMul(fi.items, tw)));
  const int64_t out_width = fi.per_row * part_t * tw;
  const int64_t out_width_t = fi.per_row * part_t;
  auto part = [nv](const std::string& name, int64_t j) { return nv == 1 ? name : absl::StrCat(name, j); };
  const int64_t nb = CeilDiv(g.l, tr);
  const bool masked = g.limit.has_value() || g.l % tr != 0 || g.window.has_value();
  // ★ A SPLIT FOLD DEALS THE BLOCKS ROUND ROBIN: part c folds blocks c, c + split, ...; all parts run one trip.
  const int64_t split = g.split;
  ASSIGN_OR_RETURN(const int64_t kb, FoldBlockTiles(g, target, nb / split));
  const int64_t nb_fold = nb / (split * kb);
  // One block needs no fold: the body's and the epilogue's stages run once, as prologue stages.
  const bool fold = nb_fold > 1;
  const Phase body_phase = fold ? Phase::kBody : Phase::kPrologue;
  const Phase epilogue_phase = fold ? Phase::kEpilogue : Phase::kPrologue;
  // ★ THE VALUE PRODUCT ON THE MATRIX ENGINE where no query row can see a position another row of its tile cannot:
  // its block's values are read whole (masked where no row sees them, so 0 * NaN never arises), and P · V is one
  // tile product accumulated onto the running output (tt-metal's SDPA). Else the guarded contraction below reads
  // only the live positions of each row. A value contraction given its own fidelity (pv_fidelity) is a tile product
  // wherever it can be, even over one tile row; where the rows' limits differ it cannot, and is refused.
  const bool tile_values = kb > 1 || (g.pv_fidelity != MathFidelity::kDefault && ReadsBlocksWhole(g, tr));
  if (!tile_values && g.pv_fidelity != MathFidelity::kDefault) {
    return NotLowered(
        "a per-contraction fidelity (pv_fidelity) on a flash fold whose query rows see different positions: its "
        "value contraction is guarded row by row, not a tile product");
  }

  ASSIGN_OR_RETURN(const Precision precision, ElemPrecision(target));
  RETURN_IF_ERROR(RequireFp32Accumulator("the flash fold's running softmax", target));
  const Precision acc = Precision::kFp32;
  // The tile products take the operands as they are stored: the matrix engine's format must be the datapath's.
  if (target.matrix_in() != std::optional<Precision>(precision)) {
    return NotLowered("a flash fold on a target whose matrix engine does not take its elementwise format");
  }
  if (masked) RETURN_IF_ERROR(DatapathPrecision(Datapath::kInt, target).status());
  ASSIGN_OR_RETURN(const Precision ix, target.index_precision_for(g.rows + fi.tiles_q * tr));
  const int64_t w1 = tw;
  const int64_t wd = vt * tw;

  Template t(tr, tw);
  // ★ A SPLIT FOLD'S TABLES, ONE COPY A PART, MULTICAST ALONG THE QUERY TILES. The tables (the scaler, the values'
  // tile offsets) are alike for every item; with one copy, every multicast's sender would read the same tile from one
  // DRAM channel, one after another, so each part reads its own copy (tile x) and sends it along ITEM_Y (below) —
  // a Y-multicast load is the writer's, so the reader goes from the query and the position straight to the first K
  // block (Qwen3-8B decode on wormhole_n150: 1.5 k cycles a step for the copies, 0.5 k more for the writer taking
  // them). At most kMaxTableCopies: past that the channels are covered.
  const int64_t copies = g.split > 1 && g.split <= kMaxTableCopies ? g.split : 1;  // split > 1: items are parts
  const std::vector<Term> copy_at = copies > 1 ? std::vector<Term>{{LoopVar::kItemX, 1}} : std::vector<Term>{};
  const TensorId scaler = OnesTile(t, absl::StrCat(names.out, "__flash_scaler"), precision, copies);
  // The queries and the result are DENSE — a tile row holds `tile` query rows of every head. A latent fold reads its
  // values from the keys' pages: it declares no V.
  ASSIGN_OR_RETURN(const FlashOperands ops, AddFlashOperands(t, names, g, fi, precision));
  const TensorId q = ops.q;
  const TensorId k = ops.k;
  const std::optional<TensorId> v = ops.v;
  // Split: the parts' partials are the fold's results, and the combine writes names.out.
  const TensorId c = g.split > 1 ? TensorId{-1}
                                  : t.AddTensor(names.out, TensorRole::kOutput, fi.rows, out_width, precision,
                                                TensorInit::Zero());

  // ── The prologue, once per item: the scaler, the query tile, and each row's limit.
  const BufferId sc_in = t.AddBufferDeep("in_scaler", 1, 1, precision);
  const BufferId q_in = t.AddBufferDeep("in_q", 1, head_t, precision);
  t.AddLoadBlockAt("load_scaler", scaler, 0, copy_at, {}, sc_in);
  // Item y is tile row y / per_row, head y mod per_row of the dense queries: linear tile y * head_t.
  t.AddLoadBlockAt("load_q", q, 0, {{LoopVar::kItemY, head_t}}, {.w = head_t, .pitch = width_t}, q_in);
  ASSIGN_OR_RETURN(FoldMask mask, AddRowLimits(t, names, g, fi, nb_fold, kb, ix));
  // Tile row i of a block starts at position i * tile of it: the table of those offsets, for the values' mask.
  const bool mask_values = tile_values && mask.masked;
  std::optional<BufferId> offsets;
  if (mask_values) {
    std::vector<int64_t> at(static_cast<size_t>(tw * copies), 0);
    for (int64_t copy = 0; copy < copies; ++copy) {
      for (int64_t i = 0; i < kb; ++i) at[copy * tw + i] = i * tr;
    }
    const TensorId offsets_t = t.AddTensor(absl::StrCat(names.out, "__flash_tile_offsets"), TensorRole::kParam, 1,
                                           tw * copies, ix, TensorInit::Values(std::move(at)));
    offsets = t.AddBufferDeep("in_tile_offsets", 1, 1, ix);
    t.AddLoadBlockAt("load_tile_offsets", offsets_t, 0, copy_at, {}, *offsets);
  }

  // The carried state, and its first page: the empty softmax (m = MASKED, s = 0, O = 0) — or, with sinks, each row's
  // sink as its maximum and a sum of one.
  // ★ A SINK IS THE RUNNING SOFTMAX'S FIRST TERM: every block's update carries the sink's e^(sink - m) to the end,
  // and it takes no value.
  // ★ ONE BLOCK IS THE WHOLE SOFTMAX: with no fold and no sink to start from, the block's maximum, sum and product
  // are the row's, and there is no running state to rescale (no e^(m - m'), no carries).
  // Split: the combine takes the sinks, once (a part's running state starts empty).
  const bool carried = fold || (g.sinks.has_value() && split == 1);
  // The running maximum's units: the raw scores' (the scale rides the exp), or the scaled scores' (see the scores).
  const double scale = FoldExpScale(g);
  const bool prescaled = g.cap.has_value() || scale != g.scale;
  BufferId m_run = -1, s_run = -1;
  std::vector<BufferId> o_runs;
  if (carried) {
    m_run = t.AddScratchDeep("run_max", 2, 1, acc);
    s_run = t.AddScratchDeep("run_sum", 2, 1, acc);
    for (int64_t j = 0; j < nv; ++j) o_runs.push_back(t.AddScratchDeep(part("run_out", j), 2, vt, acc));
    AddSoftmaxStart(t, names.out, g.sinks.has_value() && split == 1, fi.items, precision, m_run, s_run,
                    LoopVar::kItemY, 1, scale);
    for (int64_t j = 0; j < nv; ++j) {
      t.AddGeneric(part("init_out", j), HeadSpace(qr, vt * tw), {}, {}, IdentMap(wd), Const(0.0), o_runs[j]);
    }
  }

  // ── The body, once per block: block b of K/V head x is tile rows [b*kb, (b+1)*kb) of the cache from tile
  // x * head_t.
  t.SetPhase(body_phase);
  if (fold) t.Fold(nb_fold);
  const Precision kv = g.kv_precision.value_or(precision);
  const BufferId k_in = t.AddBufferDeep("in_k", pages, kb * head_t, kv);
  std::vector<BufferId> v_ins;
  if (!g.latent) {
    for (int64_t j = 0; j < nv; ++j) v_ins.push_back(t.AddBufferDeep(part("in_v", j), pages, kb * vt, kv));
  }
  // Block b of K/V head x: kb tile rows of `cols` tiles from tile `base` of the head's run of `head` tiles in a row
  // of `stride`.
  // ★ A GROUP TALLER THAN A TILE READS ITS CACHE ONCE: its items' blocks are the same (they vary with the K/V head,
  // item x, alone), so the machine reads each block once and multicasts it along the group's query tiles.
  const bool shared = g.grouped && GroupTiles(g, tr) > 1;
  // Split: item (y, c) is query tile y's part c, reading K/V head y (or the one cache) from block c.
  auto cache_block = [&](const std::string& name, TensorId tensor, int64_t base, int64_t cols, int64_t head,
                         int64_t stride, BufferId into) {
    std::vector<Term> steps;
    if (split == 1) {
      steps.push_back({LoopVar::kItemX, head});
    } else {
      if (g.kvw != 1) steps.push_back({LoopVar::kItemY, head});
      steps.push_back({LoopVar::kItemX, kb * stride});
    }
    if (fold) steps.push_back({LoopVar::kKBlock, split * kb * stride});
    const StageId load = t.AddLoadPattern(
        name, tensor, AccessPattern{TileAddr{base, std::move(steps), std::nullopt}, kb, cols, 1, stride}, into);
    if (shared) t.SetMulticast(load, LoopVar::kItemY);
  };
  cache_block("load_k", k, 0, head_t, head_t, g.kvw * head_t, k_in);
  for (size_t j = 0; j < v_ins.size(); ++j) {
    cache_block(part("load_v", j), *v, (j0 + j) * vt, vt, v_t, g.kvw * v_t, v_ins[j]);
  }
  AddBlockLimits(t, mask, g, nb, ix);

  // S = Q · K^T: the tile's rows against the block's kb tile rows of positions, one tile product (square tiles: a
  // block's position p is its scores' column p).
  // ★ THE MAXIMUM OF THE RAW SCORES, THE SCALE IN THE EXP (as the prefill fold, tt-metal's SDPA): with scale > 0
  // the maximum's position is the scaled one's, so m is kept in the scores' units and P = e^(scale * (S - m')),
  // a = e^(scale * (m - m')). Capped (or with a scale that is not positive) the scaled scores are taken first and the
  // exp's scale is 1. A soft cap takes every scaled score before the block's maximum and the mask, so a masked score
  // stays masked.
  const int64_t wb = kb * tw;
  BufferId s_buf = t.AddScratchDeep("scores", 1, kb, acc);
  t.AddMatmul("scores",
              MatmulTiles{.m_tiles = 1, .n_tiles = kb, .k_tiles = head_t, .transpose_b = true,
                          .fidelity = g.qk_fidelity},
              q_in, k_in, s_buf);
  if (prescaled) {
    const BufferId scaled = t.AddScratchDeep(g.cap ? "capped_scores" : "scaled_scores", 1, kb, acc);
    const Body x = Mul(Op(0), Const(g.scale));
    t.AddGeneric(g.cap ? "score_cap" : "score_scale", HeadSpace(qr, wb), {s_buf}, {IdentMap(wb)}, IdentMap(wb),
                 g.cap ? Capped(x, *g.cap) : x, scaled);
    s_buf = scaled;
  }
  // m_b[r] = max over the block's live positions (MASKED where none is live).
  const BufferId m_blk = t.AddScratchDeep("block_max", 1, 1, acc);
  {
    std::vector<BufferId> ins{s_buf, sc_in};
    std::vector<ElemAccess> maps{IdentMap(wb), ConstMap()};
    AddLimitSlots(mask, ins, maps, PerRowMap(w1));
    t.AddGeneric("block_max", HeadSpace(qr, wb, IterKind::kReduceMax), ins, maps, PerRowMap(w1),
                 Live(mask, LoopVar::kCol, Op(0), Const(kMasked), 2), m_blk);
  }
  BufferId m_new = m_blk, alpha = -1;
  if (carried) std::tie(m_new, alpha) = AddMaxUpdate(t, m_run, m_blk, sc_in, 1, scale, "", qr);
  // P[r, j] = e^(scale * (S[r, j] - m'[r])) where live, exactly 0 where masked.
  // Packed to the matrix engine's operand format for the value product (tt-metal packs P to bf16); the sum is of
  // the probabilities as packed, the ones the product weighs.
  const BufferId p_buf = t.AddScratchDeep("probs", 1, kb, precision);
  {
    std::vector<BufferId> ins{s_buf, m_new};
    std::vector<ElemAccess> maps{IdentMap(wb), PerRowMap(w1)};
    AddLimitSlots(mask, ins, maps, PerRowMap(w1));
    const Body gap = Sub(Op(0), Op(1));
    t.AddGeneric("probs", HeadSpace(qr, wb), ins, maps, IdentMap(wb),
                 Live(mask, LoopVar::kCol, Unary(g.probs_exp, scale == 1.0 ? gap : Mul(gap, Const(scale))),
                      Const(0.0), 2),
                 p_buf);
  }
  const BufferId l_blk = t.AddScratchDeep("block_sum", 1, 1, acc);
  t.AddGeneric("block_sum", HeadSpace(qr, wb, IterKind::kReduceSum), {p_buf, sc_in}, {IdentMap(wb), ConstMap()},
               PerRowMap(w1), Op(0), l_blk);
  if (tile_values) {
    // A block's value page: kb x vt tiles side by side, position i * tile + r at row r of tile row i, (r, i, e) at
    // r * kb * wd + i * wd + e. Latent: value page j is columns [(j0 + j) * wd, ...) of the key page's tile rows.
    const ElemAccess block_values{0, {{LoopVar::kRow, kb * wd}, {LoopVar::kK, wd}, {LoopVar::kCol, 1}}, std::nullopt};
    auto latent_values = [&](int64_t j) {
      return ElemAccess{(j0 + j) * wd, {{LoopVar::kRow, kb * g.hd}, {LoopVar::kK, g.hd}, {LoopVar::kCol, 1}},
                        std::nullopt};
    };
    // ★ A POSITION NO ROW SEES IS ZEROED BEFORE THE PRODUCT: the tile's live rows share their limit and floor (a
    // regrouped tile's rows are heads of one query row; a decode tile has one), so tile row i of the block keeps the
    // rows r with floor - i * tile <= r < limit - i * tile. A latent fold copies its values out of the key page here
    // too.
    std::optional<BufferId> tile_lim, tile_floor;
    auto per_tile_row = [&](const std::string& name, BufferId bound) {
      const BufferId b = t.AddScratchDeep(name, 1, 1, ix);
      t.AddGeneric(name, FlatSpace(kb), {bound, *offsets}, {Fixed(0), At(0)}, At(0), Sub(Op(0), Op(1)), b);
      return b;
    };
    if (mask_values) {
      tile_lim = per_tile_row("tile_limit", *mask.lim);
      if (mask.floor) tile_floor = per_tile_row("tile_floor", *mask.floor);
    }
    for (int64_t j = 0; j < nv; ++j) {
      BufferId values = g.latent ? k_in : v_ins[j];
      if (mask_values || g.latent) {
        const BufferId live = t.AddScratchDeep(part("live_values", j), 1, kb * vt, precision);
        std::vector<BufferId> ins{values};
        std::vector<ElemAccess> maps{g.latent ? latent_values(j) : block_values};
        Body keep = Op(0);
        if (tile_lim) {
          ins.push_back(*tile_lim);
          maps.push_back(ElemAccess{0, {{LoopVar::kK, 1}}, std::nullopt});  // tile row i's bound
          if (tile_floor) {
            ins.push_back(*tile_floor);
            maps.push_back(maps.back());
            keep = Select(Pred::GeOperand(LoopVar::kRow, 2), keep, Const(0.0));
          }
          keep = Select(Pred::LtOperand(LoopVar::kRow, 1), keep, Const(0.0));
        }
        t.AddGeneric(part("live_values", j),
                     {{LoopVar::kRow, tr, IterKind::kParallel}, {LoopVar::kK, kb, IterKind::kParallel},
                      {LoopVar::kCol, wd, IterKind::kParallel}},
                     ins, maps, block_values, keep, live);
        values = live;
      }
      // O' = a * O + P · V: the running output scaled in place, then the block's product accumulated onto it.
      if (!carried) {
        o_runs.push_back(t.AddScratchDeep(part("block_out", j), 1, vt, acc));
      } else {
        t.AddGeneric(part("rescale_out", j), HeadSpace(qr, wd), {o_runs[j], alpha}, {IdentMap(wd), PerRowMap(w1)},
                     IdentMap(wd), Mul(Op(0), Op(1)), o_runs[j]);
      }
      t.AddMatmul(part("block_out", j),
                  MatmulTiles{.m_tiles = 1, .n_tiles = vt, .k_tiles = kb, .accumulate = carried,
                              .fidelity = g.pv_fidelity},
                  p_buf, values,
                  o_runs[j]);
    }
  } else {
    // O_b[r, e] = sum_j P[r, j] * V[j, e] over the row's live positions — one guarded contraction a value page.
    for (int64_t j = 0; j < nv; ++j) {
      const BufferId o_blk = t.AddScratchDeep(part("block_out", j), 1, vt, acc);
      std::vector<BufferId> ins{p_buf, g.latent ? k_in : v_ins[j]};
      std::vector<ElemAccess> maps{
          Terms({{LoopVar::kRow, w1}, {LoopVar::kK, 1}}),
          g.latent ? ElemAccess{(j0 + j) * wd, {{LoopVar::kK, g.hd}, {LoopVar::kCol, 1}}, std::nullopt}
                   : Terms({{LoopVar::kK, wd}, {LoopVar::kCol, 1}})};
      AddLimitSlots(mask, ins, maps, PerRowMap(w1));
      t.AddGeneric(part("block_out", j), Contract(qr, vt * tw, tr), ins, maps, IdentMap(wd),
                   Live(mask, LoopVar::kK, Mul(Op(0), Op(1)), Const(0.0), 2), o_blk);
      if (!carried) {
        o_runs.push_back(o_blk);
        continue;
      }
      t.AddGeneric(part("fold_out", j), HeadSpace(qr, vt * tw), {o_runs[j], alpha, o_blk},
                   {IdentMap(wd), PerRowMap(w1), IdentMap(wd)}, IdentMap(wd), Add(Mul(Op(0), Op(1)), Op(2)),
                   o_runs[j]);
    }
  }
  // The updates, each reading the carry it writes: the block folds into the running state. Every read of m comes
  // before fold_max rewrites it. One block: its statistics are the row's.
  if (carried) {
    t.AddGeneric("fold_sum", HeadSpace(qr, 1), {s_run, alpha, l_blk}, {PerRowMap(w1), PerRowMap(w1), PerRowMap(w1)},
                 IdentMap(w1), Add(Mul(Op(0), Op(1)), Op(2)), s_run);
    t.AddGeneric("fold_max", HeadSpace(qr, 1), {m_run, m_new}, {PerRowMap(w1), PerRowMap(w1)}, IdentMap(w1), Op(1),
                 m_run);
  } else {
    m_run = m_blk;
    s_run = l_blk;
  }
  AddNextStart(t, mask, nb, split * kb * tr);

  // ── The epilogue, once per item: the attention, into the item's tile of the dense result. The value rounds from
  // fp32 to the datapath here, once. Split: the part's running state as it stands, at fp32, for the combine.
  t.SetPhase(epilogue_phase);
  if (split > 1) {
    const FlashPartials parts = FlashPartialsOf(names.out);
    // Part (y, c) is tile row c * tiles_q + y of each partial.
    // ★ A PART'S OUTPUT IS NORMALIZED BY ITS OWN SUM (flash-decoding's partial): bounded like an attention's, so
    // the combine weighs it by s_c. A part that saw no live position has s = 0 and O = 0; its denominator is
    // s + 1e-30 (seed 001's positive denominator), which leaves every live part's s >= 1 exactly as it is.
    const BufferId inv_sum = InverseSum(t, s_run, qr, kPartSumFloor);
    auto store_part = [&](const std::string& name, TensorId tensor, int64_t row_t, BufferId from, int64_t base,
                          int64_t width_t, Precision at) {
      const BufferId buf = t.AddBufferDeep(absl::StrCat("out_", name), pages, width_t, at);
      const int64_t w = width_t * tw;
      t.AddGeneric(absl::StrCat("normalize_", name), HeadSpace(qr, w), {from, inv_sum}, {IdentMap(w), PerRowMap(w1)},
                   IdentMap(w), Mul(Op(0), Op(1)), buf);
      t.AddStoreBlock(absl::StrCat("store_", name), tensor, base,
                      {{LoopVar::kItemY, row_t}, {LoopVar::kItemX, fi.tiles_q * row_t}}, {.w = width_t, .pitch = row_t},
                      buf);
    };
    auto partial = [&](const std::string& name, int64_t cols, Precision at) {
      return t.AddTensor(name, TensorRole::kOutput, split * fi.tiles_q * tr, cols, at, TensorInit::Zero());
    };
    // Ô_c on the datapath (FlashPartialOutPrecision). The output first: the items' rects are in it.
    const Precision o_at = FlashPartialOutPrecision(precision);
    const TensorId o_part = partial(parts.out, out_width, o_at);
    for (int64_t j = 0; j < nv; ++j) {
      store_part(part("part_out", j), o_part, out_width_t, o_runs[j], j * vt, vt, o_at);
    }
    // m_c and s_c in one tile of the datapath's format (FlashPartials.stats), each as a pair (flash_split.h): hi is
    // the value as a page of that format holds it, lo the rest, rounded as the stats page packs it.
    const BufferId hi = t.AddScratchDeep("part_stats_hi", 1, 1, precision);
    t.AddGeneric("part_stats_hi", HeadSpace(qr, 2), {m_run, s_run}, {PerRowMap(w1), PerRowMap(w1)}, IdentMap(w1),
                 Select(Pred::Lt(LoopVar::kCol, 1), Op(0), Op(1)), hi);
    const BufferId stats = t.AddBufferDeep("out_part_stats", pages, 1, precision);
    const ElemAccess s_hi{1, {{LoopVar::kRow, w1}}, std::nullopt};
    t.AddGeneric("pack_part_stats", HeadSpace(qr, kPartSumLoCol + 1), {m_run, s_run, hi, hi},
                 {PerRowMap(w1), PerRowMap(w1), PerRowMap(w1), s_hi}, IdentMap(w1),
                 Select(Pred::Lt(LoopVar::kCol, kPartMaxLoCol), Op(2),
                        Select(Pred::Lt(LoopVar::kCol, kPartSumHiCol), Sub(Op(0), Op(2)),
                               Select(Pred::Lt(LoopVar::kCol, kPartSumLoCol), Op(3), Sub(Op(1), Op(3))))),
                 stats);
    t.AddStoreBlock("store_part_stats", partial(parts.stats, tw, precision), 0,
                    {{LoopVar::kItemY, 1}, {LoopVar::kItemX, fi.tiles_q}}, {.w = 1, .pitch = 1}, stats);
  }
  if (split == 1) {
    const BufferId inv_sum = InverseSum(t, s_run, qr, 0.0);
    for (int64_t j = 0; j < nv; ++j) {
      const BufferId out = t.AddBufferDeep(part("out", j), pages, vt, precision);
      t.AddGeneric(part("normalize", j), HeadSpace(qr, vt * tw), {o_runs[j], inv_sum}, {IdentMap(wd), PerRowMap(w1)},
                   IdentMap(wd), Mul(Op(0), Op(1)), out);
      t.AddStoreBlock(part("store_ctx", j), c, j * vt, {{LoopVar::kItemY, part_t}},
                      {.w = vt, .pitch = out_width_t}, out);
    }
  }
  WireFirstReaders(t);
  // ★ A SPLIT FOLD'S PARTS SHARE THEIR PROLOGUE: every part of a query tile reads the same position and query (no
  // step on ITEM_X, the part). What a part reads of its own — its first block (part_start), its copy of the tables —
  // is the same for every query tile, so it is multicast the other way, along ITEM_Y: 64 sites reading 8 tiles queued
  // at their channels ahead of the K loads (Qwen3-8B decode, cache 32768: 1.3 k cycles a step at every position).
  if (split > 1) {
    MulticastSharedPrologue(t, LoopVar::kItemX);
    MulticastSharedPrologue(t, LoopVar::kItemY);
  }

  // Item y owns query tile y / per_row of head y mod per_row and reads K/V head kv_of(head) (grouped: query tile y,
  // of K/V head y / GroupTiles).
  // Split: item (y, c) is part c of query tile y.
  std::vector<WorkItem> items;
  for (int64_t y = 0; y < fi.items; ++y) {
    const int64_t qt = y / fi.per_row;
    const int64_t h = y % fi.per_row;
    const int64_t kv_head = g.grouped ? y / GroupTiles(g, tr) : g.q.kv_of(h);
    for (int64_t c = 0; c < split; ++c) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = y, .x = split > 1 ? c : kv_head,
                               .out = TileRect{.row0_t = c * fi.tiles_q + qt, .col0_t = h * part_t, .w_t = part_t}});
    }
  }
  // ★ THE BLOCKS RUN TO THE POSITION. Query row r sees the positions below P + r, so no row reads a block past
  // ceil((P + T - 1) / tile): every later block is masked whole, its update the identity. That count is the fold's
  // trip, read from P before the program runs, admitting exactly the P the guard does, 1 <= P <= rows - (T - 1).
  if (fold && mask.position && mask.counted) {
    t.SetTrip(Trip{.tensor = *mask.position, .elem = 0, .lo = 1, .hi = BoundMax(g.rows, g.q.rows),
                   .bias = g.q.rows - 1, .per = tr * kb * split}, nb_fold);
  }
  std::string values = g.latent ? "_latent" : "";
  if (split > 1) absl::StrAppend(&values, "_split", split);
  if (g.v_part) {
    absl::StrAppend(&values, "_v", g.vd, "_pages", g.v_part->first, "+", g.v_part->second);
  } else if (g.vd != g.hd) {
    absl::StrAppend(&values, "_v", g.vd);
  }
  // ★ THE BLOCKS ARE THE CONTRACTION'S K BLOCKS: an item's result is one tile row of the dense result; the cache's
  // ceil(l / tile) / (kb * split) blocks are what it folds over.
  t.SetPlan(BlockPlan{.per_site_n = part_t, .grid_y = fi.tiles_q, .grid_x = fi.per_row * split, .num_blocks = nb_fold,
                      .osw = part_t});
  return FinishSection(
      t, absl::StrCat(std::string(tag), "_flash_blocks_", fi.items, "x", g.hd, values, "_l", g.l, "_b", kb * tr),
      std::move(items), acc, FlashClaim(g, precision, target), target, DstPolicy::kStreamed);
}

absl::StatusOr<Composition> FlashFold(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                      const Target& target) {
  // Two pages in the streams, one where two do not fit: the fit-site pass decides (passes/fit_site.h). The widest
  // block first, narrower ones while the section outgrows the site's memory or circular buffers.
  ASSIGN_OR_RETURN(const int64_t widest, FoldBlockTiles(g, target, CeilDiv(g.l, target.tile_rows()) / g.split));
  for (int64_t kb = widest;; --kb) {
    if (widest % kb != 0) continue;
    FlashGeometry at = g;
    at.kv_chunk = kb * target.tile_rows();
    ASSIGN_OR_RETURN(Composition c, FlashFoldPaged(names, at, tag, target, 2));
    FitSectionToSite(c.sections[0], target);
    if (kb == 1 || g.kv_chunk > 0 || (SiteFootprint(c.sections[0], target) <= target.max_local_mem_bytes() &&
                    !ExceedsCircularBuffers(c.sections[0], target.proto().num_cbs()))) {
      return c;
    }
  }
}

}  // namespace spatial
