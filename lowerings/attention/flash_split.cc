#include "lowerings/attention/flash_split.h"

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

FlashPartials FlashPartialsOf(const std::string& out) {
  return FlashPartials{absl::StrCat(out, "__flash_part_max"), absl::StrCat(out, "__flash_part_sum"),
                       absl::StrCat(out, "__flash_part_out")};
}

int64_t DecodeSplit(const FlashGeometry& g, const Target& target) {
  const int64_t tr = target.tile_rows();
  if (!g.grouped || g.q.rows != 1 || g.v_part || (g.kvw != 1 && GroupTiles(g, tr) != 1)) return 1;
  const int64_t nb = CeilDiv(g.l, tr);
  const int64_t items = FoldItemsOf(g, tr).items;
  int64_t best = 1;
  for (int64_t s = 2; s * 2 <= nb && items * s <= target.sites(); ++s) {
    if (nb % s == 0) best = s;
  }
  return best;
}

absl::StatusOr<Composition> CombineParts(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                         const Target& target) {
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const FoldItems fi = FoldItemsOf(g, tr);
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

  Template t(tr, tw);
  const TensorId scaler = OnesTile(t, absl::StrCat(names.out, "__flash_combine_scaler"), precision);
  const TensorId m_t = t.AddTensor(parts.max, TensorRole::kInput, split * fi.rows, tw, acc, TensorInit::External());
  const TensorId s_t = t.AddTensor(parts.sum, TensorRole::kInput, split * fi.rows, tw, acc, TensorInit::External());
  const TensorId o_t =
      t.AddTensor(parts.out, TensorRole::kInput, split * fi.rows, g.vd, acc, TensorInit::External());
  const TensorId c = t.AddTensor(names.out, TensorRole::kOutput, fi.rows, g.vd, precision, TensorInit::Zero());

  // The prologue: the empty softmax, or each row's sink as its maximum and a sum of one.
  const BufferId sc_in = t.AddBufferDeep("in_scaler", 1, 1, precision);
  t.AddLoadBlockAt("load_scaler", scaler, 0, {}, {}, sc_in);
  const BufferId m_run = t.AddScratchDeep("run_max", 2, 1, acc);
  const BufferId s_run = t.AddScratchDeep("run_sum", 2, 1, acc);
  const BufferId o_run = t.AddScratchDeep("run_out", 2, vt, acc);
  AddSoftmaxStart(t, names.out, g.sinks.has_value(), fi.items, precision, m_run, s_run);
  t.AddGeneric("init_out", HeadSpace(tr, wd), {}, {}, IdentMap(wd), Const(0.0), o_run);

  // The body, once per part c: query tile y's part c is tile row c * tiles_q + y of each partial.
  t.SetPhase(Phase::kBody);
  t.Fold(split);
  auto load_part = [&](const std::string& name, TensorId tensor, int64_t row_t, int64_t width_t) {
    const BufferId b = t.AddBufferDeep(name, 2, width_t, acc);
    std::vector<Term> steps{{LoopVar::kItemY, row_t}, {LoopVar::kKBlock, fi.tiles_q * row_t}};
    if (width_t < row_t) steps.push_back({LoopVar::kItemX, width_t});
    t.AddLoadBlockAt(absl::StrCat("load_", name.substr(3)), tensor, 0, std::move(steps),
                     {.w = width_t, .pitch = row_t}, b);
    return b;
  };
  const BufferId m_in = load_part("in_part_max", m_t, 1, 1);
  const BufferId s_in = load_part("in_part_sum", s_t, 1, 1);
  const BufferId o_in = load_part("in_part_out", o_t, out_width_t, vt);
  // M' = max(M, m_c), the fold's NaN-ignoring pool over the pair; a = e^(M - M') and b = e^(m_c - M') by the
  // ACCURATE exp, as the fold's rescale. A part that saw only masked positions has m_c = MASKED, s_c = 0 and
  // O/s = 0: its weight is 0.
  const auto [m_new, alpha] = AddMaxUpdate(t, m_run, m_in, sc_in);
  const BufferId beta = t.AddScratchDeep("part_scale", 1, 1, acc);
  t.AddGeneric("part_scale", HeadSpace(tr, 1), {m_in, m_new}, {PerRowMap(w1), PerRowMap(w1)}, IdentMap(w1),
               Unary(SfpuKind::ExpAccurate(), Sub(Op(0), Op(1))), beta);
  // w_c = e^(m_c - M') s_c: the part's weight, its normalized output's share of the sum.
  const BufferId weight = t.AddScratchDeep("part_weight", 1, 1, acc);
  t.AddGeneric("part_weight", HeadSpace(tr, 1), {beta, s_in}, {PerRowMap(w1), PerRowMap(w1)}, IdentMap(w1),
               Mul(Op(0), Op(1)), weight);
  t.AddGeneric("fold_sum", HeadSpace(tr, 1), {s_run, alpha, weight}, {PerRowMap(w1), PerRowMap(w1), PerRowMap(w1)},
               IdentMap(w1), Add(Mul(Op(0), Op(1)), Op(2)), s_run);
  t.AddGeneric("fold_out", HeadSpace(tr, wd), {o_run, alpha, o_in, weight},
               {IdentMap(wd), PerRowMap(w1), IdentMap(wd), PerRowMap(w1)}, IdentMap(wd),
               Add(Mul(Op(0), Op(1)), Mul(Op(2), Op(3))), o_run);
  t.AddGeneric("fold_max", HeadSpace(tr, 1), {m_run, m_new}, {PerRowMap(w1), PerRowMap(w1)}, IdentMap(w1), Op(1),
               m_run);

  // The epilogue: O / S, rounded to the datapath once, into the query tile's row of the result.
  t.SetPhase(Phase::kEpilogue);
  const BufferId out = t.AddBufferDeep("out", 2, vt, precision);
  t.AddGeneric("normalize", HeadSpace(tr, wd), {o_run, s_run}, {IdentMap(wd), PerRowMap(w1)}, IdentMap(wd),
               Mul(Op(0), Unary(SfpuKind::Recip(), Op(1))), out);
  std::vector<Term> ctx_steps{{LoopVar::kItemY, out_width_t}};
  if (blocks > 1) ctx_steps.push_back({LoopVar::kItemX, vt});
  t.AddStoreBlock("store_ctx", c, 0, std::move(ctx_steps), {.w = vt, .pitch = out_width_t}, out);
  WireFirstReaders(t);
  RETURN_IF_ERROR(WorkItemBudget("a split fold's combine", CheckedMul(fi.items, blocks)));
  std::vector<WorkItem> items;
  for (int64_t y = 0; y < fi.items; ++y) {
    for (int64_t x = 0; x < blocks; ++x) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = y, .x = x,
                               .out = TileRect{.row0_t = y, .col0_t = x * vt, .w_t = vt}});
    }
  }
  t.SetPlan(BlockPlan{.per_site_n = vt, .grid_y = fi.tiles_q, .grid_x = blocks, .num_blocks = split, .osw = vt});
  ASSIGN_OR_RETURN(Composition combine,
                   FinishSection(t, absl::StrCat(std::string(tag), "_flash_combine_", fi.items, "x", split, "_v", g.vd),
                                 std::move(items), acc, ApproxIn("attention", precision), target));
  FitSectionToSite(combine.sections[0], target);
  return combine;
}

}  // namespace spatial
