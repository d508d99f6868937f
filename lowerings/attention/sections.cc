#include "lowerings/attention/sections.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"
#include "lowerings/elementwise/elementwise.h"
#include "lowerings/rows/softmax.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The seed loads every operand of a flat section whole; a cache too long for a site has no flat section.
absl::StatusOr<Composition> Fits(absl::StatusOr<Composition> c, std::string_view what, const Target& target) {
  if (!c.ok()) return c;
  const int64_t bytes = SiteFootprint(c->sections[0], target);
  if (bytes > target.max_local_mem_bytes()) {
    return NotLowered(absl::StrCat("a three-section attention whose flat ", std::string(what),
                                   " section does not fit a site (", bytes, " bytes, ",
                                   target.max_local_mem_bytes(), " on target ", target.name(), ")"));
  }
  return c;
}

// A reduce's scaler: Tensix's reduce_tile multiplies every term by a constant tile and requires one, so the flat
// folds carry a tile of ones the body never reads (slot 0).
BufferId ScalerSlot(FlatBuild& f, const std::string& name) {
  Template& t = f.t();
  const TensorId ones = OnesTile(t, name, f.precision());
  const BufferId ones_in = t.AddBuffer("in_scaler", 1, f.precision());
  f.AddLoadToWire(t.AddLoad("load_scaler", ones, {}, 1, ones_in), ones_in);
  return ones_in;
}

// A threshold or floor of the mask: a constant column, or the value of an input slot.
struct Rhs {
  bool operand = false;
  int64_t value = 0;  // the column, or the slot
};

Pred LtRhs(const Rhs& r) { return r.operand ? Pred::LtOperand(LoopVar::kCol, static_cast<int>(r.value))
                                            : Pred::Lt(LoopVar::kCol, r.value); }
Pred GeRhs(const Rhs& r) { return r.operand ? Pred::GeOperand(LoopVar::kCol, static_cast<int>(r.value))
                                            : Pred::Ge(LoopVar::kCol, r.value); }

// Section 1: the scores, h*l of them, flat as 1 x (h*l), column c = v*l + j.
absl::StatusOr<Composition> Scores(const AttentionNames& names, const QueryHeads& heads, const HeadWidths& widths,
                                   const Cache& cache, const std::string& scores_name, const std::string& label,
                                   const Target& target) {
  const int64_t h = heads.count();
  const int64_t l = cache.attended;
  const int64_t kv = widths.kv, hd = widths.hd;
  ASSIGN_OR_RETURN(FlatBuild f, FlatBuild::On(Datapath::kFloat, target));
  RETURN_IF_ERROR(RequireFp32Accumulator("attention scores", target));
  Template& t = f.t();
  const OperandRef& q_op = names.operand(0);
  const OperandRef& k_op = names.operand(1);
  ASSIGN_OR_RETURN(const BufferId q, f.Input(q_op.name, h * hd, q_op.fill));
  ASSIGN_OR_RETURN(const BufferId k, f.Input(k_op.name, cache.rows * kv * hd, k_op.fill));
  const int64_t n = h * l;
  const int64_t cols_t = TilesOf(n, target);
  const BufferId out_buf = t.AddBuffer("scores", cols_t, f.precision());
  const int64_t ow = t.PageWidth(cols_t);
  const BufferId ones_in = ScalerSlot(f, "at_scaler");

  // The folded axis is the ROW (e over the head dimension); the flat output column is c = v*l + j, so the scores
  // come out as a flat 1 x (h*l) row.
  std::vector<Slot> slots{Slot{ones_in, ConstMap()}};
  std::vector<std::pair<int64_t, Body>> bands;
  const int64_t j_stride = kv * hd;
  for (int64_t v = 0; v < h; ++v) {
    const int64_t kvh = heads.kv_of(v);
    // q[v*hd + e]: constant along the output column, affine in the folded row.
    slots.push_back(Slot{q, ElemAccess{v * hd, {{LoopVar::kRow, 1}}, std::nullopt}});
    const int q_slot = static_cast<int>(slots.size()) - 1;
    // k[j*(kv*hd) + kvh*hd + e] with j = c - v*l.
    slots.push_back(Slot{k, ElemAccess{kvh * hd - v * l * j_stride, {{LoopVar::kCol, j_stride}, {LoopVar::kRow, 1}},
                                       std::nullopt}});
    const int k_slot = static_cast<int>(slots.size()) - 1;
    bands.push_back({(v + 1) * l, Mul(Mul(Op(q_slot), Op(k_slot)), Const(widths.scale))});
  }
  std::vector<StageId> chain;
  BufferId scored = (!cache.limit && !widths.cap) ? out_buf : f.Scratch("raw_scores", cols_t);
  chain.push_back(f.Compute("attn_scores",
                            {IterSpec{LoopVar::kRow, hd, IterKind::kReduceSum},
                             IterSpec{LoopVar::kCol, n, IterKind::kParallel}},
                            std::move(slots), PerColMap(), Banded(bands), scored));
  // ★ A SOFT CAP takes every scaled score before the mask, so a masked score stays masked.
  if (widths.cap) {
    const BufferId to = cache.limit ? f.Scratch("capped_scores", cols_t) : out_buf;
    chain.push_back(f.Compute("attn_cap", FlatSpace(n), {Slot{scored, At(0)}}, IdentMap(ow),
                              Capped(Op(0), *widths.cap), to));
    scored = to;
  }
  if (cache.limit) {
    // ★ THE MASK. Head v's position j sits at column v*l + j, so it is live iff the column is below v*l + P + r, r
    // the head's query row: one threshold per head — a constant for a literal P, else built from P once P is checked
    // to keep every row inside the cache.
    const Bound bound = *cache.limit;
    auto row_base = [&](int64_t v) { return v * l + heads.row_of(v); };
    std::vector<Slot> mslots{Slot{scored, At(0)}};
    std::vector<Rhs> below;
    std::vector<std::optional<Rhs>> floors(static_cast<size_t>(h));
    std::optional<BufferId> thr;
    const int64_t h_t = TilesOf(h, target);
    const int64_t hw = t.PageWidth(h_t);
    // Every value the index stages compute: thresholds up to (h-1)*l + rows, floors down to -W.
    const int64_t span = cache.window ? cache.window->span : 0;
    if (bound.is_operand()) {
      RETURN_IF_ERROR(RequireIndexArithmetic("an attention's computed position", target));
      ASSIGN_OR_RETURN(const Precision ix, IndexType(target, h * l + cache.rows + span));
      const OperandRef& p_op = names.operand(bound.value);
      ASSIGN_OR_RETURN(const BufferId p_in, f.InputPaged(p_op.name, 1, p_op.fill, ix, 2));
      const IndexChain checked = CheckedCount(f, p_in, BoundMax(cache.rows, heads.rows), ix);
      chain.insert(chain.end(), checked.stages.begin(), checked.stages.end());
      thr = t.AddScratchDeep("thresholds", 1, h_t, ix);
      std::vector<std::pair<int64_t, Body>> tb;
      for (int64_t v = 0; v < h; ++v) tb.push_back({v + 1, Add(Const(static_cast<double>(row_base(v))), Op(0))});
      chain.push_back(
          f.Compute("thresholds", FlatSpace(h), {Slot{checked.out, Fixed(0)}}, IdentMap(hw), Banded(tb), *thr));
      for (int64_t v = 0; v < h; ++v) {
        mslots.push_back(Slot{*thr, Fixed(v)});
        below.push_back(Rhs{true, static_cast<int64_t>(mslots.size()) - 1});
      }
      // A window keeps the last W positions below each threshold — the column also at or past it less W — and a
      // chunk of C the positions of the row's own chunk: head v attending n keeps from column v*l + floor((n-1)/C)*C,
      // n its threshold less v*l.
      if (cache.window) {
        const BufferId floor = t.AddScratchDeep("floors", 1, h_t, ix);
        Body fb;
        if (cache.window->kind == Window::Kind::kSliding) {
          fb = Sub(Op(0), Const(static_cast<double>(span)));
        } else {
          std::vector<std::pair<int64_t, Body>> cb;
          const double c = static_cast<double>(span);
          for (int64_t v = 0; v < h; ++v) {
            const double base = static_cast<double>(v * l);
            cb.push_back({v + 1, Add(Const(base), Mul(FloorDiv(Sub(Sub(Op(0), Const(base)), Const(1.0)), Const(c)),
                                                      Const(c)))});
          }
          fb = Banded(cb);
        }
        chain.push_back(f.Compute("floors", FlatSpace(h), {Slot{*thr, IdentMap(hw)}}, IdentMap(hw), fb, floor));
        for (int64_t v = 0; v < h; ++v) {
          mslots.push_back(Slot{floor, Fixed(v)});
          floors[v] = Rhs{true, static_cast<int64_t>(mslots.size()) - 1};
        }
      }
    } else {
      for (int64_t v = 0; v < h; ++v) {
        below.push_back(Rhs{false, row_base(v) + bound.value});
        // A literal P's floors are constants, kept only where they cut the band.
        if (!cache.window) continue;
        const int64_t floor = v * l + cache.window->first(bound.value + heads.row_of(v)) - 1;
        if (floor > v * l) floors[v] = Rhs{false, floor};
      }
    }
    std::vector<std::pair<int64_t, Body>> mb;
    for (int64_t v = 0; v < h; ++v) {
      const Body kept = floors[v] ? Select(GeRhs(*floors[v]), Op(0), Const(kMasked)) : Op(0);
      mb.push_back({(v + 1) * l, Select(LtRhs(below[v]), kept, Const(kMasked))});
    }
    chain.push_back(f.Compute("mask", FlatSpace(n), std::move(mslots), IdentMap(ow), Banded(mb), out_buf));
  }
  return Fits(f.Finish(scores_name, n, chain, out_buf, label, ApproxIn("attention scores", f.precision())),
              "scores", target);
}

// Section 3: the weighted V sum, ctx[v*vd + e] = sum_j p[v*l + j] * V[j*(kv*vd) + kvh*vd + e].
absl::StatusOr<Composition> Weighted(const AttentionNames& names, const QueryHeads& heads, const HeadWidths& widths,
                                     const Cache& cache, const std::string& probs_name, const std::string& label,
                                     const Target& target) {
  const int64_t h = heads.count();
  const int64_t l = cache.attended;
  const int64_t kv = widths.kv, vd = widths.vd;
  ASSIGN_OR_RETURN(FlatBuild f, FlatBuild::On(Datapath::kFloat, target));
  RETURN_IF_ERROR(RequireFp32Accumulator("an attention's weighted sum", target));
  Template& t = f.t();
  ASSIGN_OR_RETURN(const BufferId p, f.Input(probs_name, h * l, proto::Fill()));
  const OperandRef& v_op = names.operand(2);
  ASSIGN_OR_RETURN(const BufferId val, f.Input(v_op.name, cache.rows * kv * vd, v_op.fill));
  const int64_t n = h * vd;
  const BufferId out_buf = t.AddBuffer("out", TilesOf(n, target), f.precision());
  const BufferId ones_in = ScalerSlot(f, "wv_scaler");
  // The folded axis is the ROW (j over the cache); the flat output column is c = v*vd + e.
  std::vector<Slot> slots{Slot{ones_in, ConstMap()}};
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t v = 0; v < h; ++v) {
    const int64_t kvh = heads.kv_of(v);
    // p[v*l + j]: constant along the output column, affine in the folded row.
    slots.push_back(Slot{p, ElemAccess{v * l, {{LoopVar::kRow, 1}}, std::nullopt}});
    const int p_slot = static_cast<int>(slots.size()) - 1;
    // V[j*(kv*vd) + kvh*vd + e] with e = c - v*vd.
    slots.push_back(Slot{val, ElemAccess{kvh * vd - v * vd, {{LoopVar::kRow, kv * vd}, {LoopVar::kCol, 1}},
                                         std::nullopt}});
    const int v_slot = static_cast<int>(slots.size()) - 1;
    bands.push_back({(v + 1) * vd, Mul(Op(p_slot), Op(v_slot))});
  }
  const StageId s = f.Compute(
      "attn_weighted",
      {IterSpec{LoopVar::kRow, l, IterKind::kReduceSum}, IterSpec{LoopVar::kCol, n, IterKind::kParallel}},
      std::move(slots), PerColMap(), Banded(bands), out_buf);
  return Fits(f.Finish(names.out, n, {s}, out_buf, label, ApproxIn("attention weighted sum", f.precision())),
              "weighted sum", target);
}

}  // namespace

absl::StatusOr<Composition> AttentionSections(const AttentionNames& names, const QueryHeads& heads,
                                              const HeadWidths& widths, const Cache& cache,
                                              std::optional<int64_t> sinks, std::string_view tag,
                                              const Target& target) {
  const int64_t h = heads.count();
  const int64_t l = cache.attended;
  if (h < 1 || l < 1 || widths.hd < 1 || widths.vd < 1 || widths.kv < 1 || cache.rows < l) {
    return NotLowered("an attention with no heads, no query rows, no head dimension or an empty cache");
  }
  // Every section unrolls one band (and its input slots) per query head, and the scores are held whole.
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a three-section attention of ", h, " query heads"), "bands", h));
  RETURN_IF_ERROR(CheckedElements("attention scores (query heads x positions)", h, l).status());
  // The seed reads "K/V head" kv_of(v) whatever it is; past the last K/V head that is the next position's head 0.
  for (int64_t v = 0; v < heads.per_row; ++v) {
    if (heads.kv_of(v) >= widths.kv) {
      return NotLowered(absl::StrCat("an attention whose query heads do not group over its K/V heads — query head ", v,
                                     " of ", heads.per_row, " would read K/V head ", heads.kv_of(v), " of ",
                                     widths.kv));
    }
  }
  const std::string t(tag);
  const std::string scores_name = absl::StrCat(names.out, "_scores");
  const std::string probs_name = absl::StrCat(names.out, "_probs");
  ASSIGN_OR_RETURN(Composition score,
                   Scores(names, heads, widths, cache, scores_name, absl::StrCat(t, "_scores_", h, "x", l), target));

  // Section 2: the row softmax over each head's l scores, each head's sink in its denominator. A decode row's softmax
  // rows are its heads; a causal block's rows repeat them, so the sinks are first spread over the rows.
  std::optional<OperandRef> sink_rows;
  std::optional<Composition> spread;
  if (sinks) {
    if (heads.rows == 1) {
      sink_rows = names.operand(*sinks);
    } else {
      const std::string rows_name = absl::StrCat(names.out, "__sink_rows");
      const int64_t per_row = heads.per_row;
      ASSIGN_OR_RETURN(spread, SpreadSinks(names.operand(*sinks), per_row, rows_name, h,
                                           [per_row](int64_t v) -> std::optional<int64_t> { return v % per_row; },
                                           target));
      sink_rows = OperandRef{rows_name, proto::Fill()};
    }
  }
  ASSIGN_OR_RETURN(const Precision elem, ElemPrecision(target));
  ASSIGN_OR_RETURN(Composition softmax,
                   FlatSoftmaxRowsAt(OperandRef{scores_name, proto::Fill()}, probs_name, h, l,
                                     absl::StrCat(t, "_softmax_", h, "x", l), elem, sink_rows, target));
  ASSIGN_OR_RETURN(Composition weighted, Weighted(names, heads, widths, cache, probs_name,
                                                  absl::StrCat(t, "_wv_", h, "x", widths.vd), target));
  std::string name = score.name;
  std::vector<Composition> parts;
  parts.push_back(std::move(score));
  if (spread) parts.push_back(std::move(*spread));
  parts.push_back(std::move(softmax));
  parts.push_back(std::move(weighted));
  return ComposeSections(std::move(name), std::move(parts), target);
}

}  // namespace spatial
