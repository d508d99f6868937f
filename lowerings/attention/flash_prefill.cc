#include "lowerings/attention/flash_prefill.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/flash_fold.h"
#include "lowerings/attention/flash_mask.h"
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

// The last query row's limit: every position a block reads lies below it.
int64_t LastLimit(const FlashGeometry& g) { return g.limit ? g.limit->value + g.q.rows - 1 : g.l; }

// x soft-capped at c, as the fold caps it (flash_fold.cc): 2c*sigmoid(2x/c) - c.
Body Capped(Body x, double c) {
  Body sigmoid = Unary(SfpuKind::Recip(), Add(Const(1.0), Unary(SfpuKind::Exp(), Mul(x, Const(-2.0 / c)))));
  return Sub(Mul(Const(2.0 * c), sigmoid), Const(c));
}

// The query tiles one section takes: enough heads' items to fill the grid (a section of fewer items than sites
// leaves sites idle through every block), and at most 32 sections.
int64_t QueryRange(int64_t tiles_q, int64_t per_row, int64_t sites) {
  return std::min(tiles_q, std::max<int64_t>({1, CeilDiv(sites, per_row), CeilDiv(tiles_q, 32)}));
}

struct Range {
  int64_t first = 0;  // query tiles [first, last)
  int64_t last = 0;
  int64_t blocks = 1;
};

absl::StatusOr<Composition> PrefillSection(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                           const Target& target, int64_t kb, const Range& range) {
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const FoldItems fi = FoldItemsOf(g, tr);
  const int64_t head_t = g.hd / tw;
  const int64_t width_t = fi.per_row * head_t;
  const int64_t v_t = g.vd / tw;
  const int64_t vt = RowBlock(v_t, target);
  const int64_t nv = v_t / vt;
  const int64_t out_width_t = fi.per_row * v_t;
  auto part = [nv](const std::string& name, int64_t j) { return nv == 1 ? name : absl::StrCat(name, j); };
  const int64_t blocks = range.blocks;
  const bool fold = blocks > 1;
  const Phase body_phase = fold ? Phase::kBody : Phase::kPrologue;
  const Phase epilogue_phase = fold ? Phase::kEpilogue : Phase::kPrologue;
  ASSIGN_OR_RETURN(const Precision precision, ElemPrecision(target));
  const Precision acc = Precision::kFp32;
  const Precision mat = *target.matrix_in();
  const bool masked = g.limit.has_value() || g.l % tr != 0;
  if (masked) RETURN_IF_ERROR(DatapathPrecision(Datapath::kInt, target).status());
  ASSIGN_OR_RETURN(const Precision ix, target.index_precision_for(g.rows + fi.tiles_q * tr));
  const OperandRef& q_op = names.operand(0);
  const OperandRef& k_op = names.operand(1);
  const OperandRef& v_op = names.operand(2);
  const int64_t w1 = tw;
  const int64_t wk = kb * tw;  // a block's positions: the scores' and the probabilities' plane
  const int64_t wd = vt * tw;

  Template t(tr, tw);
  const TensorId scaler = OnesTile(t, absl::StrCat(names.out, "__flash_scaler"), precision);
  ASSIGN_OR_RETURN(const int64_t q_elems, CheckedElements("flash queries", fi.rows, fi.per_row * g.hd));
  ASSIGN_OR_RETURN(const int64_t k_elems, CheckedElements("flash keys", g.rows, CheckedMul(g.kvw, g.hd)));
  ASSIGN_OR_RETURN(const int64_t v_elems, CheckedElements("flash values", g.rows, CheckedMul(g.kvw, g.vd)));
  ASSIGN_OR_RETURN(TensorInit q_init, InitOf(q_op.fill, q_elems));
  ASSIGN_OR_RETURN(TensorInit k_init, InitOf(k_op.fill, k_elems));
  ASSIGN_OR_RETURN(TensorInit v_init, InitOf(v_op.fill, v_elems));
  const TensorId q = t.AddTensor(q_op.name, TensorRole::kInput, fi.rows, fi.per_row * g.hd, precision,
                                 std::move(q_init));
  const TensorId k = t.AddTensor(k_op.name, TensorRole::kInput, g.rows, g.kvw * g.hd, precision, std::move(k_init));
  const TensorId v = t.AddTensor(v_op.name, TensorRole::kInput, g.rows, g.kvw * g.vd, precision, std::move(v_init));
  const TensorId c = t.AddTensor(names.out, TensorRole::kOutput, fi.rows, fi.per_row * g.vd, precision,
                                 TensorInit::Zero());

  // ── The prologue, once per item: the scaler, the query tile, each row's limit, the empty softmax.
  const BufferId sc_in = t.AddBufferDeep("in_scaler", 1, 1, precision);
  const BufferId q_in = t.AddBufferDeep("in_q", 1, head_t, precision);
  t.AddLoadBlockAt("load_scaler", scaler, 0, {}, {}, sc_in);
  t.AddLoadBlockAt("load_q", q, 0, {{LoopVar::kItemY, head_t}}, {.w = head_t, .pitch = width_t}, q_in);
  ASSIGN_OR_RETURN(FoldMask mask, AddRowLimits(t, names, g, fi, blocks, ix));
  const BufferId m_run = t.AddScratchDeep("run_max", 2, 1, acc);
  const BufferId s_run = t.AddScratchDeep("run_sum", 2, 1, acc);
  std::vector<BufferId> o_runs;
  for (int64_t j = 0; j < nv; ++j) o_runs.push_back(t.AddScratchDeep(part("run_out", j), 2, vt, acc));
  AddSoftmaxStart(t, names.out, g.sinks.has_value(), fi.items, precision, m_run, s_run);
  for (int64_t j = 0; j < nv; ++j) {
    t.AddGeneric(part("init_out", j), HeadSpace(tr, wd), {}, {}, IdentMap(wd), Const(0.0), o_runs[j]);
  }

  // ── The body, once per block: block b of K/V head x is tile rows [b*kb, (b+1)*kb) of the cache from tile
  // x * head_t, the same block for every item of the head (multicast along ITEM_Y).
  t.SetPhase(body_phase);
  if (fold) t.Fold(blocks);
  const BufferId k_in = t.AddBufferDeep("in_k", 2, kb * head_t, precision);
  std::vector<BufferId> v_ins;
  for (int64_t j = 0; j < nv; ++j) v_ins.push_back(t.AddBufferDeep(part("in_v", j), 2, kb * vt, precision));
  auto cache_block = [&](const std::string& name, TensorId tensor, int64_t base, int64_t cols, int64_t head,
                         int64_t stride, BufferId into) {
    std::vector<Term> steps{{LoopVar::kItemX, head}};
    if (fold) steps.push_back({LoopVar::kKBlock, kb * stride});
    const StageId load = t.AddLoadPattern(
        name, tensor, AccessPattern{TileAddr{base, std::move(steps), std::nullopt}, kb, cols, 1, stride}, into);
    t.SetMulticast(load, LoopVar::kItemY);
  };
  cache_block("load_k", k, 0, head_t, head_t, g.kvw * head_t, k_in);
  for (int64_t j = 0; j < nv; ++j) cache_block(part("load_v", j), v, j * vt, vt, v_t, g.kvw * v_t, v_ins[j]);
  AddBlockLimits(t, mask, g, blocks * kb, ix);

  // S = Q · K^T: the query tile's head_t tiles against the block's kb x head_t tiles, kb score tiles side by side.
  const BufferId s_buf = t.AddScratchDeep("scores", 1, kb, acc);
  t.AddMatmul("scores", MatmulTiles{.m_tiles = 1, .n_tiles = kb, .k_tiles = head_t, .transpose_b = true}, q_in, k_in,
              s_buf);
  // The scaled score, and — capped — the cap of it before the mask, as the fold takes it.
  BufferId scored = s_buf;
  double scale = g.scale;
  if (g.cap) {
    scored = t.AddScratchDeep("capped_scores", 1, kb, acc);
    t.AddGeneric("score_cap", HeadSpace(tr, wk), {s_buf}, {IdentMap(wk)}, IdentMap(wk),
                 Capped(Mul(Op(0), Const(g.scale)), *g.cap), scored);
    scale = 1.0;
  }
  auto scaled = [scale](Body x) { return scale == 1.0 ? x : Mul(x, Const(scale)); };
  const BufferId m_blk = t.AddScratchDeep("block_max", 1, 1, acc);
  {
    std::vector<BufferId> ins{scored, sc_in};
    std::vector<ElemAccess> maps{IdentMap(wk), ConstMap()};
    AddLimitSlots(mask, ins, maps, PerRowMap(w1));
    t.AddGeneric("block_max", HeadSpace(tr, wk, IterKind::kReduceMax), ins, maps, PerRowMap(w1),
                 Live(mask, LoopVar::kCol, scaled(Op(0)), Const(kMasked), 2), m_blk);
  }
  const auto [m_new, alpha] = AddMaxUpdate(t, m_run, m_blk, sc_in);
  // P = e^(scale*S - m') where live, exactly 0 where masked, packed for the value product.
  const BufferId p_buf = t.AddScratchDeep("probs", 1, kb, mat);
  {
    std::vector<BufferId> ins{scored, m_new};
    std::vector<ElemAccess> maps{IdentMap(wk), PerRowMap(w1)};
    AddLimitSlots(mask, ins, maps, PerRowMap(w1));
    t.AddGeneric("probs", HeadSpace(tr, wk), ins, maps, IdentMap(wk),
                 Live(mask, LoopVar::kCol, Unary(g.probs_exp, Sub(scaled(Op(0)), Op(1))), Const(0.0), 2), p_buf);
  }
  // The sum of the probabilities the value product weighs, as packed.
  const BufferId l_blk = t.AddScratchDeep("block_sum", 1, 1, acc);
  t.AddGeneric("block_sum", HeadSpace(tr, wk, IterKind::kReduceSum), {p_buf, sc_in}, {IdentMap(wk), ConstMap()},
               PerRowMap(w1), Op(0), l_blk);
  // O_b = P · V, a value page at a time: the block's kb probability tiles against its kb x vt value tiles.
  std::vector<BufferId> o_blks;
  for (int64_t j = 0; j < nv; ++j) {
    const BufferId o_blk = t.AddScratchDeep(part("block_out", j), 1, vt, acc);
    t.AddMatmul(part("block_out", j), MatmulTiles{.m_tiles = 1, .n_tiles = vt, .k_tiles = kb}, p_buf, v_ins[j],
                o_blk);
    o_blks.push_back(o_blk);
  }
  t.AddGeneric("fold_sum", HeadSpace(tr, 1), {s_run, alpha, l_blk}, {PerRowMap(w1), PerRowMap(w1), PerRowMap(w1)},
               IdentMap(w1), Add(Mul(Op(0), Op(1)), Op(2)), s_run);
  for (int64_t j = 0; j < nv; ++j) {
    t.AddGeneric(part("fold_out", j), HeadSpace(tr, wd), {o_runs[j], alpha, o_blks[j]},
                 {IdentMap(wd), PerRowMap(w1), IdentMap(wd)}, IdentMap(wd), Add(Mul(Op(0), Op(1)), Op(2)), o_runs[j]);
  }
  t.AddGeneric("fold_max", HeadSpace(tr, 1), {m_run, m_new}, {PerRowMap(w1), PerRowMap(w1)}, IdentMap(w1), Op(1),
               m_run);
  AddNextStart(t, mask, blocks * kb, kb * tr);

  // ── The epilogue, once per item: O / s into the item's tile of the dense result.
  t.SetPhase(epilogue_phase);
  for (int64_t j = 0; j < nv; ++j) {
    const BufferId out = t.AddBufferDeep(part("out", j), 2, vt, precision);
    t.AddGeneric(part("normalize", j), HeadSpace(tr, wd), {o_runs[j], s_run}, {IdentMap(wd), PerRowMap(w1)},
                 IdentMap(wd), Mul(Op(0), Unary(SfpuKind::Recip(), Op(1))), out);
    t.AddStoreBlock(part("store_ctx", j), c, j * vt, {{LoopVar::kItemY, v_t}}, {.w = vt, .pitch = out_width_t}, out);
  }
  WireFirstReaders(t);

  std::vector<WorkItem> items;
  for (int64_t qt = range.first; qt < range.last; ++qt) {
    for (int64_t h = 0; h < fi.per_row; ++h) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = qt * fi.per_row + h,
                               .x = g.q.kv_of(h), .out = TileRect{.row0_t = qt, .col0_t = h * v_t, .w_t = v_t}});
    }
  }
  // No placement grid: the items go round robin, so the items of a K/V head that run together sit on many sites.
  t.SetPlan(BlockPlan{.per_site_n = v_t, .grid_y = 0, .grid_x = 0, .num_blocks = blocks, .osw = vt});
  const std::string values = g.vd != g.hd ? absl::StrCat("_v", g.vd) : "";
  return FinishSection(t,
                       absl::StrCat(std::string(tag), "_flash_prefill_", fi.items, "x", g.hd, values, "_l", g.l, "_kb",
                                    kb, "_q", range.first, "to", range.last - 1),
                       std::move(items), acc, ApproxIn("attention", precision), target);
}

}  // namespace

bool PrefillFoldApplies(const FlashGeometry& g, const Target& target) {
  if (target.tile_rows() != target.tile_cols() || !FlashApplies(g.hd, g.vd, target)) return false;
  if (g.grouped || g.split != 1 || g.latent || g.v_part || g.q.rows < 2 || g.window) return false;
  if (g.limit && g.limit->is_operand()) return false;
  if (g.kvw < 1 || g.q.per_row < 1 || g.q.group < 1 || g.q.kv_of(g.q.per_row - 1) >= g.kvw) return false;
  if (g.limit && g.limit->value < 1) return false;
  // No cached position past the last row's limit: the value product reads every position of a block.
  if (LastLimit(g) != g.rows) return false;
  const std::optional<Precision> mat = target.matrix_in();
  absl::StatusOr<Precision> elem = ElemPrecision(target);
  return mat && elem.ok() && *mat == *elem && RequireFp32Accumulator("", target).ok();
}

absl::StatusOr<Composition> PrefillFold(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                        const Target& target) {
  if (!PrefillFoldApplies(g, target)) return NotLowered("a prefill fold of this attention (flash_prefill.h)");
  const int64_t tr = target.tile_rows();
  const FoldItems fi = FoldItemsOf(g, tr);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a flash fold of ", g.q.rows, " x ", g.q.per_row, " query heads"),
                                 fi.items));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a flash fold of ", g.q.rows, " x ", g.q.per_row, " query heads"),
                              CheckedMul(fi.items, target.tile_cols())));
  const int64_t rows_t = CeilDiv(g.rows, tr);
  const int64_t per_q = g.limit ? QueryRange(fi.tiles_q, fi.per_row, target.sites()) : fi.tiles_q;
  // The widest block that divides the cache's tile rows (so no block reads past it), fits an accumulator page, and
  // whose section fits a site.
  for (int64_t kb = std::min(rows_t, RowBlockTiles(target)); kb >= 1; --kb) {
    if (rows_t % kb != 0) continue;
    std::vector<Composition> parts;
    bool fits = true;
    for (int64_t first = 0; first < fi.tiles_q && fits; first += per_q) {
      Range r{.first = first, .last = std::min(fi.tiles_q, first + per_q)};
      // The range's last row sees the positions below its limit: the blocks that cover them.
      const int64_t last_row = std::min(r.last * tr, g.q.rows) - 1;
      const int64_t limit = g.limit ? g.limit->value + last_row : g.l;
      r.blocks = CeilDiv(limit, kb * tr);
      ASSIGN_OR_RETURN(Composition s, PrefillSection(names, g, tag, target, kb, r));
      fits = FitSectionToSite(s.sections[0], target) &&
             !ExceedsCircularBuffers(s.sections[0], target.proto().num_cbs());
      parts.push_back(std::move(s));
    }
    if (!fits) continue;
    std::string name = parts.front().name;
    return ComposeSections(std::move(name), std::move(parts), target);
  }
  return NotLowered("a prefill fold whose narrowest block does not fit a site");
}

}  // namespace spatial
