#include "lowerings/attention/flash_split.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash_fold.h"
#include "lowerings/attention/flash_mask.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "passes/fit_site.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

Precision FlashPartialOutPrecision(Precision datapath) { return datapath; }

FlashPartials FlashPartialsOf(const std::string& out) {
  return FlashPartials{absl::StrCat(out, "__flash_part_stats"), absl::StrCat(out, "__flash_part_out")};
}

bool SplitsCache(const FlashGeometry& g, int64_t tile_rows) {
  if (g.v_part) return false;
  if (g.grouped) return g.q.rows == 1 && (g.kvw == 1 || GroupTiles(g, tile_rows) == 1);
  // One head: a decode row, or one query tile of rows that all see every position (each part's rows then share
  // their blocks).
  return g.q.per_row == 1 && g.kvw == 1 &&
         (g.q.rows == 1 || (g.q.rows <= tile_rows && !g.limit && !g.window));
}

int64_t DecodeSplit(const FlashGeometry& g, const Target& target) {
  const int64_t tr = target.tile_rows();
  if (!SplitsCache(g, tr)) return 1;
  const int64_t nb = CeilDiv(g.l, tr);
  // ★ ONE BLOCK NEEDS NO PARTS: a fold of one block carries no running state, so parts would only add the combine
  // (one head's 32 rows over 128 positions on wormhole_n150: 9,244 cycles whole, 10,240 in two parts).
  if (const absl::StatusOr<int64_t> whole = FoldBlockTiles(g, target, nb); whole.ok() && *whole >= nb) return 1;
  const int64_t items = FoldItemsOf(g, tr).items;
  // A block the spec sets (kv_chunk) divides every part's tile rows.
  const int64_t kb = g.kv_chunk > 0 && g.kv_chunk % tr == 0 ? g.kv_chunk / tr : 1;
  int64_t best = 1;
  // A part's weight is a column of the combine's one weight tile, the sink's too: s + 1 <= a tile's columns.
  for (int64_t s = 2; s * 2 <= nb && items * s <= target.sites() && s + 1 <= target.tile_cols(); ++s) {
    if (nb % s == 0 && (nb / s) % kb == 0) best = s;
  }
  return best;
}

absl::StatusOr<Composition> CombineParts(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                         const Target& target) {
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const FoldItems fi = FoldItemsOf(g, tr);
  // The parts' live rows only (the fold's: LiveTileRows); the padding stays zero.
  const int64_t qr = LiveTileRows(g, fi, tr);
  const int64_t split = g.split;
  if (split < 2 || fi.per_row != 1) return NotLowered("a combine of fewer than two parts, or of ungrouped heads");
  ASSIGN_OR_RETURN(const Precision precision, ElemPrecision(target));
  const Precision acc = Precision::kFp32;
  // ★ THE COMBINE IS ELEMENTWISE IN O, so its items split the values' columns too: item (y, x) merges query tile y's
  // maxima and sums (each item of the tile alike) and its block x of vt value tiles, as many blocks as keep the
  // items within the grid's sites.
  const int64_t v_t = g.vd / tw;
  int64_t vt = RowBlock(v_t, target);
  for (int64_t w = 1; w <= vt; ++w) {
    if (v_t % w == 0 && fi.items * (v_t / w) <= target.sites()) {
      vt = w;
      break;
    }
  }
  const int64_t blocks = v_t / vt;
  const int64_t out_width_t = v_t;
  const int64_t w1 = tw;
  const int64_t wd = vt * tw;
  const FlashPartials parts = FlashPartialsOf(names.out);
  const bool sinks = g.sinks.has_value();
  // The parts' slots, and the sink's after them: a sink is one more term of the softmax, with no value.
  const int64_t terms = split + (sinks ? 1 : 0);
  if (terms > tw) return NotLowered(absl::StrCat("a combine of ", split, " parts, wider than a tile's columns"));
  // Ungrouped into the flat row: query tile y's live rows are K/V head y's group, query heads y * group + i.
  const bool flat = g.ungroup_out;
  if (flat && (!g.grouped || qr != g.q.group || fi.items * g.q.group != g.q.per_row)) {
    return NotLowered("a combine writing flat rows of a query tile that is not one K/V head's group");
  }
  const int64_t group = flat ? g.q.group : 1;

  Template t(tr, tw);
  // The scaler, a copy per value block (tile x), multicast along the query tiles (ITEM_Y): the writer's load, so the
  // reader starts on the parts' statistics at once (as the split fold's tables, flash_fold.cc).
  const int64_t copies = blocks > 1 ? blocks : 1;
  const TensorId scaler = OnesTile(t, absl::StrCat(names.out, "__flash_combine_scaler"), precision, copies);
  const int64_t part_rows = split * fi.tiles_q * tr;  // whole tile rows a part, however few rows a query tile has
  const TensorId st_t =
      t.AddTensor(parts.stats, TensorRole::kInput, part_rows, tw, precision, TensorInit::External());
  const Precision o_at = FlashPartialOutPrecision(precision);
  const TensorId o_t = t.AddTensor(parts.out, TensorRole::kInput, part_rows, g.vd, o_at, TensorInit::External());
  const TensorId c = flat ? t.AddTensor(names.out, TensorRole::kOutput, 1, g.q.per_row * g.vd, precision,
                                        TensorInit::Zero())
                          : t.AddTensor(names.out, TensorRole::kOutput, fi.rows, g.vd, precision, TensorInit::Zero());

  // ★ EVERY PART AT ONCE. Query tile y's part c is tile row c * tiles_q + y of each partial: one block of `split`
  // tile rows brings them all, so the merge needs no fold — M = max_c m_c, one exponential per part,
  // w_c = e^(m_c - M) s_c, S = sum_c w_c and O = sum_c w_c Ô_c — instead of a rescale and a part's exponential for
  // every part in turn (the fold's chain: ~28 k cycles a decode step on wormhole_n150, issue #12).
  const BufferId sc_in = t.AddBufferDeep("in_scaler", 1, 1, precision);
  t.AddLoadBlockAt("load_scaler", scaler, 0,
                   copies > 1 ? std::vector<Term>{{LoopVar::kItemX, 1}} : std::vector<Term>{}, {}, sc_in);
  auto load_parts = [&](const std::string& name, TensorId tensor, int64_t row_t, int64_t width_t, Precision at) {
    const BufferId b = t.AddBufferDeep(name, 1, split * width_t, at);
    std::vector<Term> steps{{LoopVar::kItemY, row_t}};
    if (width_t < row_t) steps.push_back({LoopVar::kItemX, width_t});
    t.AddLoadBlockAt(absl::StrCat("load_", name.substr(3)), tensor, 0, std::move(steps),
                     {.h = split, .w = width_t, .pitch = fi.tiles_q * row_t}, b);
    return b;
  };
  // The statistics first: their multicast waits for the value blocks' pages, and the values behind them on the
  // reader arrive while it does (the values first: the combine 4.5 k -> 5.8 k cycles, Qwen3-8B decode).
  const BufferId stats_in = load_parts("in_part_stats", st_t, 1, 1, precision);
  const BufferId o_in = load_parts("in_part_out", o_t, out_width_t, vt, o_at);
  std::optional<BufferId> sk_in;
  if (sinks) {
    const TensorId sinks_t = t.AddTensor(absl::StrCat(names.out, "__flash_sinks"), TensorRole::kInput, 1,
                                         fi.items * tw, precision, TensorInit::External());
    sk_in = t.AddBufferDeep("in_sinks", 1, 1, precision);
    t.AddLoadBlockAt("load_sinks", sinks_t, 0, {{LoopVar::kItemY, 1}}, {}, *sk_in);
  }
  // Part c's row r is row r of tile c of a page `split` tiles wide, its maximum's and sum's pairs in columns
  // kPartStat* (flash_split.h), each added back; a row's weights sit in its columns.
  const int64_t wm = split * tw;
  auto stat_at = [&](int64_t col) { return ElemAccess{col, {{LoopVar::kRow, wm}, {LoopVar::kK, tw}}, std::nullopt}; };
  const ElemAccess weight_at{0, {{LoopVar::kRow, w1}, {LoopVar::kK, 1}}, std::nullopt};
  const ElemAccess sink_at{0, {{LoopVar::kRow, 1}}, std::nullopt};  // row r's sink: element r of the item's tile
  // The parts' maxima are in the fold's units (FoldExpScale: raw scores, the scale riding the exps); a sink, a scaled
  // logit, joins them as sink / scale.
  const double c_exp = FoldExpScale(g);
  auto units = [&](Body x) { return c_exp == 1.0 ? x : Mul(x, Const(c_exp)); };
  // M = max over the parts (and the sink), the NaN-ignoring pool.
  const BufferId m_all = t.AddScratchDeep("combined_max", 1, 1, acc);
  {
    std::vector<BufferId> ins{stats_in, sc_in, stats_in};
    std::vector<ElemAccess> maps{stat_at(kPartMaxHiCol), ConstMap(), stat_at(kPartMaxLoCol)};
    const Body part_max = Add(Op(0), Op(2));
    Body m = part_max;
    if (sk_in) {
      ins.push_back(*sk_in);
      maps.push_back(sink_at);
      m = Select(Pred::Lt(LoopVar::kK, split), part_max, c_exp == 1.0 ? Op(3) : Mul(Op(3), Const(1.0 / c_exp)));
    }
    t.AddGeneric("combined_max", {{LoopVar::kRow, qr, IterKind::kParallel}, {LoopVar::kK, terms, IterKind::kReduceMax}},
                 ins, maps, PerRowMap(w1), m, m_all);
  }
  // w_c = e^(scale (m_c - M)) s_c by the ACCURATE exp, as the fold's rescale (a part that saw no live position has
  // m_c = MASKED and s_c = 0: weight 0); the sink's term e^(sink - M), with no value.
  const BufferId weight = t.AddScratchDeep("part_weight", 1, 1, acc);
  {
    std::vector<BufferId> ins{stats_in, m_all, stats_in, stats_in, stats_in};
    std::vector<ElemAccess> maps{stat_at(kPartMaxHiCol), PerRowMap(w1), stat_at(kPartSumHiCol),
                                 stat_at(kPartMaxLoCol), stat_at(kPartSumLoCol)};
    Body w = Mul(Unary(SfpuKind::ExpAccurate(), units(Sub(Add(Op(0), Op(3)), Op(1)))), Add(Op(2), Op(4)));
    if (sk_in) {
      ins.push_back(*sk_in);
      maps.push_back(sink_at);
      w = Select(Pred::Lt(LoopVar::kK, split), w, Unary(SfpuKind::ExpAccurate(), Sub(Op(5), units(Op(1)))));
    }
    t.AddGeneric("part_weight", {{LoopVar::kRow, qr, IterKind::kParallel}, {LoopVar::kK, terms, IterKind::kParallel}},
                 ins, maps, weight_at, w, weight);
  }
  const BufferId s_run = t.AddScratchDeep("combined_sum", 1, 1, acc);
  t.AddGeneric("combined_sum", {{LoopVar::kRow, qr, IterKind::kParallel}, {LoopVar::kK, terms, IterKind::kReduceSum}},
               {weight, sc_in}, {weight_at, ConstMap()}, PerRowMap(w1), Op(0), s_run);
  // O = sum_c w_c Ô_c over the parts' value pages.
  const BufferId o_run = t.AddScratchDeep("combined_out", 1, vt, acc);
  t.AddGeneric("combined_out",
               {{LoopVar::kRow, qr, IterKind::kParallel},
                {LoopVar::kCol, wd, IterKind::kParallel},
                {LoopVar::kK, split, IterKind::kReduceSum}},
               {weight, o_in},
               {weight_at, ElemAccess{0, {{LoopVar::kRow, split * wd}, {LoopVar::kK, wd}, {LoopVar::kCol, 1}},
                                      std::nullopt}},
               IdentMap(wd), Mul(Op(0), Op(1)), o_run);

  // O / S, rounded to the datapath once, into the query tile's row of the result.
  // ★ FLAT, ROW i OF THE GROUP IS ROW 0 OF THE PAGE'S i-TH vt TILES: the page is `group` runs of vt tiles, so the
  // normalize's element (i, e) lands at offset i * wd + e of a page group * wd wide — row 0, head i's columns — and
  // the store puts run i at query head y * group + i's tiles of the one flat row (what the relayout section after the
  // combine did, without its section: ~5.5 k cycles a Qwen3-8B decode step on wormhole_n150).
  const BufferId out = t.AddBufferDeep("out", 2, group * vt, precision);
  const BufferId inv_sum = InverseSum(t, s_run, qr, 0.0);
  t.AddGeneric("normalize", HeadSpace(qr, wd), {o_run, inv_sum}, {IdentMap(wd), PerRowMap(w1)}, IdentMap(wd),
               Mul(Op(0), Op(1)), out);
  std::vector<Term> ctx_steps{{LoopVar::kItemY, group * out_width_t}};
  if (blocks > 1) ctx_steps.push_back({LoopVar::kItemX, vt});
  t.AddStoreBlock("store_ctx", c, 0, std::move(ctx_steps),
                  {.h = group, .w = vt, .pitch = out_width_t}, out);
  WireFirstReaders(t);
  // ★ THE VALUE BLOCKS OF A QUERY TILE SHARE ITS PARTS' MAXIMA AND SUMS (no step on ITEM_X): read once and multicast,
  // not once a value block — a tile of four columns each, as many bytes as a value tile.
  if (blocks > 1) {
    MulticastSharedPrologue(t, LoopVar::kItemX);
    MulticastSharedPrologue(t, LoopVar::kItemY);
  }
  RETURN_IF_ERROR(WorkItemBudget("a split fold's combine", CheckedMul(fi.items, blocks)));
  std::vector<WorkItem> items;
  for (int64_t y = 0; y < fi.items; ++y) {
    for (int64_t x = 0; x < blocks; ++x) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = y, .x = x,
                               .out = flat ? TileRect{.col0_t = y * group * out_width_t + x * vt, .w_t = vt}
                                           : TileRect{.row0_t = y, .col0_t = x * vt, .w_t = vt}});
    }
  }
  t.SetPlan(BlockPlan{.per_site_n = vt, .grid_y = fi.tiles_q, .grid_x = blocks, .num_blocks = 1, .osw = vt});
  ASSIGN_OR_RETURN(Composition combine,
                   FinishSection(t, absl::StrCat(std::string(tag), "_flash_combine_", fi.items, "x", split, "_v", g.vd),
                                 std::move(items), acc, FlashClaim(g, precision, target), target));
  FitSectionToSite(combine.sections[0], target);
  return combine;
}

}  // namespace spatial
