#include "lowerings/attention/grouped_decode.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/flash_split.h"
#include "lowerings/attention/relayout.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "passes/fit_site.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// Section 1 with `pages` pages in its streamed buffers: item (y, c) loads column tile c of each of K/V head y's
// `group` query heads — group tiles of the flat row, head_t apart, one page — and writes them as rows 0 .. group - 1
// of tile (y, c) of the regrouped matrix, reading row j, column e at j*tile + e of the page.
// ★ AN ITEM PER OUTPUT TILE, NOT PER K/V HEAD: each item's tiles are its own (no tile is written by two), and the
// regroup is a site's link time — an item per K/V head read group * head_t tiles through one link (Qwen3-8B's decode:
// 16 tiles on 8 of 64 sites, 1,749 cycles), an item per tile reads group.
absl::StatusOr<Composition> Regroup(const OperandRef& q_op, const std::string& grouped_q, const FlashGeometry& g,
                                    std::string_view tag, Precision precision, const Target& target, int64_t pages) {
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const int64_t kv = g.kvw;
  const int64_t group = g.q.group;
  const int64_t head_t = g.hd / tw;
  const int64_t heads_t = group * head_t;
  const int64_t row_t = g.q.per_row * head_t;
  Template t(tr, tw);
  ASSIGN_OR_RETURN(TensorInit q_init, InitOf(q_op.fill, g.q.per_row * g.hd));
  const TensorId q = t.AddTensor(q_op.name, TensorRole::kInput, 1, g.q.per_row * g.hd, precision, std::move(q_init));
  const TensorId gq = t.AddTensor(grouped_q, TensorRole::kOutput, kv * tr, g.hd, precision, TensorInit::Zero());
  const BufferId in = t.AddBufferDeep("in_heads", pages, group, precision);
  const BufferId out = t.AddBufferDeep("out", pages, 1, precision);
  const StageId load = t.AddLoadPattern(
      "load_heads", q,
      AccessPattern{TileAddr{0, {{LoopVar::kItemY, heads_t}, {LoopVar::kItemX, 1}}, std::nullopt}, 1, group, head_t,
                    row_t},
      in);
  // The rows past the group are zero: lazily, so they read nothing of the page.
  const StageId s = t.AddGeneric("regroup", HeadSpace(tr, tw), {in}, {Map2(0, tw, 1)}, IdentMap(tw),
                                 Select(Pred::Lt(LoopVar::kRow, group), Op(0), Const(0.0)), out);
  const StageId st =
      t.AddStoreBlock("store_groups", gq, 0, {{LoopVar::kItemY, head_t}, {LoopVar::kItemX, 1}}, {.pitch = head_t}, out);
  t.AddEdge(load, in, s);
  t.AddEdge(s, out, st);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a grouped decode of ", kv, " K/V heads"), CheckedMul(kv, head_t)));
  std::vector<WorkItem> items;
  for (int64_t y = 0; y < kv; ++y) {
    for (int64_t c = 0; c < head_t; ++c) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = y, .x = c,
                               .out = TileRect{.row0_t = y, .col0_t = c, .w_t = 1}});
    }
  }
  t.SetPlan(BlockPlan{.per_site_n = 1, .grid_y = kv, .grid_x = head_t, .osw = 1});
  return FinishSection(t, absl::StrCat(std::string(tag), "_gqa_groups_", kv, "x", group), std::move(items),
                       AccFor(precision), NumericsClaim::Exact(), target);
}

}  // namespace

absl::StatusOr<Composition> GroupedDecodeAttention(const AttentionNames& names, const FlashGeometry& g,
                                                   std::string_view tag, const Target& target) {
  const int64_t tr = target.tile_rows();
  if (tr != target.tile_cols()) return NotLowered("a grouped decode attention on a tile that is not square");
  if (g.q.rows != 1 || g.q.group < 2 || g.q.group > tr) {
    return NotLowered(
        "a grouped decode attention of more than one query row, or of a group of one or taller than a "
        "tile");
  }
  if (!FlashApplies(g.hd, g.vd, target) || g.q.per_row != g.kvw * g.q.group) {
    return NotLowered(
        "a grouped decode attention whose heads are not whole tiles or do not divide among its K/V "
        "heads");
  }
  if (RowNeedsBlocking(std::max(g.hd, g.vd), target)) {
    return NotLowered("a grouped decode attention whose head is wider than an accumulator page");
  }
  ASSIGN_OR_RETURN(const Precision precision, ElemPrecision(target));
  const std::string grouped_q = absl::StrCat(names.out, "__gqa_q");
  const std::string grouped_ctx = absl::StrCat(names.out, "__gqa_ctx");
  const int64_t budget = target.max_local_mem_bytes();
  auto fits = [&](Composition c) -> absl::StatusOr<Composition> {
    if (SiteFootprint(c.sections[0], target) <= budget) return c;
    return NotLowered("a regrouping of one K/V head's query heads does not fit a site");
  };

  // ★ TWO PAGES WHERE THEY FIT, ONE WHERE THEY DO NOT.
  ASSIGN_OR_RETURN(Composition regroup, Regroup(names.operand(0), grouped_q, g, tag, precision, target, 2));
  FitSectionToSite(regroup.sections[0], target);  // passes/fit_site.h
  ASSIGN_OR_RETURN(regroup, fits(std::move(regroup)));

  FlashGeometry grouped = g;
  grouped.grouped = true;
  grouped.split = DecodeSplit(grouped, target);
  // ★ SPLIT, THE COMBINE WRITES THE FLAT ROW ITSELF (FlashGeometry.ungroup_out): no relayout section after it.
  grouped.ungroup_out = grouped.split > 1;
  const AttentionNames fold_names =
      names.WithOut(grouped.ungroup_out ? names.out : grouped_ctx).WithOperand(0, grouped_q);
  ASSIGN_OR_RETURN(Composition fold, FlashAttention(fold_names, grouped, tag, target));
  std::vector<Composition> parts;
  parts.push_back(std::move(regroup));
  if (grouped.ungroup_out) {
    parts.push_back(std::move(fold));
    std::string name = parts.back().name;
    return ComposeSections(std::move(name), std::move(parts), target);
  }

  // Query head v is row v mod group of tile row v / group.
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a grouped decode of ", g.q.per_row, " query heads"), g.q.per_row));
  std::vector<int64_t> picks;
  for (int64_t v = 0; v < g.q.per_row; ++v) picks.push_back((v / g.q.group) * tr + v % g.q.group);
  ASSIGN_OR_RETURN(Composition ungroup, RelayoutDensePicksToRows(OperandRef{grouped_ctx, proto::Fill()}, names.out,
                                                                 g.kvw * tr, picks, g.vd, precision, target));
  ASSIGN_OR_RETURN(ungroup, fits(std::move(ungroup)));

  std::string name = fold.name;
  parts.push_back(std::move(fold));
  parts.push_back(std::move(ungroup));
  return ComposeSections(std::move(name), std::move(parts), target);
}

absl::StatusOr<Composition> FlashFormAttention(const AttentionNames& names, const FlashGeometry& g,
                                               std::string_view tag, const Target& target) {
  if (g.q.rows == 1 && g.q.group > 1 && g.q.group <= target.tile_rows() &&
      !RowNeedsBlocking(std::max(g.hd, g.vd), target)) {
    absl::StatusOr<Composition> grouped = GroupedDecodeAttention(names, g, tag, target);
    if (grouped.ok()) return grouped;
  }
  return FlashAttention(names, g, tag, target);
}

}  // namespace spatial
