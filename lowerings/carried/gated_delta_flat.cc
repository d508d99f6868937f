// Row r of the flat Gated DeltaNet (seed 002, original lines 3363-3694) — its prediction, its memory update and its
// output — reading the row's operands in place: row r of Q and K from element r·hk·d, of V and Z from r·hv·d, of B and
// A from r·hv. A one-row step is row 0 of itself.
//
// ★ THREE SECTIONS, BECAUSE THE MEMORY IS READ ONCE AND WRITTEN ONCE. Section 1 reads S to form the prediction u;
// section 2 writes the new S from the old one and u; section 3 reads the new S to form the output. Each boundary is a
// barrier, so "read the old memory, then write, then read the new one" is enforced rather than hoped for, and
// StaleStateRead catches any scheduler that tries otherwise. Fusing them would make a wrong answer indistinguishable
// from a right one.
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/carried/gated_delta.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The memory is carried state: declared State before FlatBuild::Input loads it (the first declaration of a name wins),
// so every load of it is a read and the update's store a write, in the composition's declared order.
absl::StatusOr<BufferId> MemoryInput(FlatBuild& f, const OperandRef& st, int64_t s_len) {
  ASSIGN_OR_RETURN(TensorInit init, InitOf(st.fill, s_len));
  f.t().AddTensor(st.name, TensorRole::kState, 1, s_len, f.precision(), std::move(init));
  return f.Input(st.name, s_len, st.fill);
}

// The reduce engine's scaler operand, loaded and wired to its first reader (Tensix's reduce_tile requires one).
BufferId Scaler(FlatBuild& f, const std::string& name) {
  const TensorId ones = OnesTile(f.t(), name, f.precision());
  const BufferId in = f.t().AddBuffer("in_scaler", 1, f.precision());
  f.AddLoadToWire(f.t().AddLoad("load_scaler", ones, {}, 1, in), in);
  return in;
}

// The seed's row_scale_chain: square -> fold each head's row -> transform, one scalar per head at h·one_w.
struct HeadScale {
  std::vector<StageId> chain;
  BufferId scale;
  int64_t one_w;
};

HeadScale RowScaleChain(FlatBuild& f, BufferId x, int64_t rows, int64_t cols, SfpuKind xform, const Target& target) {
  Template& t = f.t();
  const TensorId ones = OnesTile(t, "row_scaler", f.precision());
  const BufferId ones_in = t.AddBuffer("in_row_scaler", 1, f.precision());
  f.AddLoadToWire(t.AddLoad("load_row_scaler", ones, {}, 1, ones_in), ones_in);
  const int64_t sq_t = TilesOf(cols, target);
  const int64_t sqw = t.PageWidth(sq_t);
  const BufferId xsq = f.Scratch("xsq", sq_t);
  // The square reads the FLAT row through a 2-D space whose row is the head, into the rows x cols plane the fold reads.
  const StageId s1 = f.Compute("square", HeadSpace(rows, cols), {Slot{x, Map2(0, cols, 1)}, Slot{x, Map2(0, cols, 1)}},
                               IdentMap(sqw), Mul(Op(0), Op(1)), xsq);
  const int64_t one_w = t.PageWidth(1);
  const BufferId ssum = f.Scratch("row_sum", 1);
  const StageId s2 = f.Compute("reduce_rows", HeadSpace(rows, cols, IterKind::kReduceSum),
                               {Slot{xsq, Map2(0, sqw, 1)}, Slot{ones_in, ConstMap()}}, PerRowMap(one_w), Op(0), ssum);
  const BufferId scale = f.Scratch("row_scale", 1);
  const StageId s3 = f.Compute("row_xform", HeadSpace(rows, target.tile_cols()), {Slot{ssum, PerRowMap(one_w)}},
                               PerRowMap(one_w), Unary(xform, Op(0)), scale);
  return HeadScale{{s1, s2, s3}, scale, one_w};
}

// ★ THE FOLD IS ON THE ROW, THE ANSWER IS ON THE COLUMN. Folding the row axis writes the result DOWN every row of its
// column, so row 0 of column c holds it — exactly the flat 1 x n layout the next section reads. Folding the column axis
// instead leaves one value per ROW, and a flat reader would see only the first of them.
std::vector<IterSpec> FoldedRows(int64_t d, int64_t n) {
  return {{LoopVar::kRow, d, IterKind::kReduceSum}, {LoopVar::kCol, n, IterKind::kParallel}};
}

}  // namespace

absl::StatusOr<Composition> FlatGatedDeltaRow(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t r,
                                              const Target& target) {
  const int64_t hv = spec.hv(), hk = spec.hk(), d = spec.d(), rows = spec.rows();
  const int64_t s_len = hv * d * d;
  const int64_t out_len = hv * d;
  const int64_t qk_at = r * hk * d, v_at = r * out_len, h_at = r * hv;
  // The per-head norm folds the hv x d plane of one tile-high page (the seed's implicit limit).
  if (hv > target.tile_rows()) {
    return NotLowered(absl::StrCat("a flat gated delta over ", hv, " value heads, more than a tile's ",
                                   target.tile_rows(), " rows"));
  }
  const std::string tag = rows == 1 ? "" : absl::StrCat("_row", r);
  const std::string o_name = rows == 1 ? names.out : absl::StrCat(names.out, "__o", r);
  const std::string u_name = rows == 1 ? absl::StrCat(names.out, "_u") : absl::StrCat(names.out, "_u", r);
  const OperandRef &q = names.ops[0], &k = names.ops[1], &v = names.ops[2], &z = names.ops[3];
  const OperandRef &b = names.ops[4], &a = names.ops[5], &st = names.ops[6], &gn = names.ops[7];
  ASSIGN_OR_RETURN(int64_t eps_nano, EpsNano("gated_delta", spec.eps()));
  const std::string what = absl::StrCat("gated delta over ", rows, " rows");

  // ── Section 1: u[h·d + a] = Σ_b S[h·d² + a·d + b]·k[(h mod hk)·d + b], the prediction from the memory BEFORE it is
  // updated. The head and the row a ride the flat output column through per-head bands.
  ASSIGN_OR_RETURN(FlatBuild f1, FlatBuild::On(Datapath::kFloat, target));
  ASSIGN_OR_RETURN(BufferId s1_in, MemoryInput(f1, st, s_len));
  ASSIGN_OR_RETURN(BufferId k1_in, f1.Input(k.name, rows * hk * d, k.fill));
  const int64_t o_t = TilesOf(out_len, target);
  const BufferId u_buf = f1.t().AddBuffer("u", o_t, f1.precision());
  std::vector<Slot> slots{Slot{Scaler(f1, "gd_scaler"), ConstMap()},
                          // S[h·d² + a·d + b] with a = c − h·d is c·d + b — the per-head term cancels, so the memory is
                          // read by ONE map for every head.
                          Slot{s1_in, ElemAccess{0, {{LoopVar::kCol, d}, {LoopVar::kRow, 1}}, std::nullopt}}};
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t h = 0; h < hv; ++h) {
    // k[(h mod hk)·d + b] — constant along the output column, affine in the folded row.
    slots.push_back(Slot{k1_in, ElemAccess{(h % hk) * d + qk_at, {{LoopVar::kRow, 1}}, std::nullopt}});
    bands.push_back({(h + 1) * d, Mul(Op(1), Op(static_cast<int>(slots.size()) - 1))});
  }
  const StageId sp = f1.Compute("gd_predict", FoldedRows(d, out_len), std::move(slots), PerColMap(), Banded(bands),
                                u_buf);
  ASSIGN_OR_RETURN(Composition predict,
                   FitSite(f1.Finish(u_name, out_len, {sp}, u_buf, absl::StrCat("gd_predict_", hv, "x", d, tag),
                                     ApproxIn("gated-delta prediction", f1.precision())),
                           what, target));

  // ── Section 2: the rank-1 memory update S[h, a, j] = α_h·S[h, a, j] + coef[h, a]·k[h, j] with
  // coef[h, a] = β_h·(v[h·d + a] − α_h·u[h·d + a]).
  ASSIGN_OR_RETURN(FlatBuild f2, FlatBuild::On(Datapath::kFloat, target));
  ASSIGN_OR_RETURN(BufferId s2_in, MemoryInput(f2, st, s_len));
  ASSIGN_OR_RETURN(BufferId u_in, f2.Input(u_name, out_len, proto::Fill()));
  ASSIGN_OR_RETURN(BufferId v_in, f2.Input(v.name, rows * out_len, v.fill));
  ASSIGN_OR_RETURN(BufferId k2_in, f2.Input(k.name, rows * hk * d, k.fill));
  ASSIGN_OR_RETURN(BufferId al_in, f2.Input(a.name, rows * hv, a.fill));
  ASSIGN_OR_RETURN(BufferId be_in, f2.Input(b.name, rows * hv, b.fill));
  const int64_t s_t = TilesOf(s_len, target);
  const BufferId state_buf = f2.t().AddBuffer("state", s_t, f2.precision());
  // The flat state column is c = h·d² + a·d + j. Inside head h's band, a = (c − h·d²) / d and j = (c − h·d²) % d —
  // NEITHER is affine, so the head's band is split further into d ROW bands, one per a, inside which both are affine
  // again: a wide body rather than a deep one.
  slots = {Slot{s2_in, At(0)}};
  bands.clear();
  for (int64_t h = 0; h < hv; ++h) {
    const int64_t hb = h * d * d;
    slots.push_back(Slot{al_in, Fixed(h + h_at)});
    const int a_slot = static_cast<int>(slots.size()) - 1;
    slots.push_back(Slot{be_in, Fixed(h + h_at)});
    const int b_slot = a_slot + 1;
    for (int64_t row = 0; row < d; ++row) {
      const int64_t row_base = hb + row * d;
      slots.push_back(Slot{v_in, Fixed(h * d + row + v_at)});  // v[h·d + a] and u[h·d + a]: fixed in the row band
      slots.push_back(Slot{u_in, Fixed(h * d + row)});
      slots.push_back(Slot{k2_in, At((h % hk) * d + qk_at - row_base)});  // k[(h mod hk)·d + j], j = c − row_base
      const int k_slot = static_cast<int>(slots.size()) - 1;
      Body coef = Mul(Op(b_slot), Sub(Op(k_slot - 2), Mul(Op(a_slot), Op(k_slot - 1))));
      bands.push_back({row_base + d, Add(Mul(Op(a_slot), Op(0)), Mul(coef, Op(k_slot)))});
    }
  }
  const StageId su = f2.Compute("gd_update", FlatSpace(s_len), std::move(slots), IdentMap(f2.t().PageWidth(s_t)),
                                Banded(bands), state_buf);
  ASSIGN_OR_RETURN(Composition update,
                   FitSite(f2.Finish(st.name, s_len, {su}, state_buf, absl::StrCat("gd_update_", hv, "x", d, tag),
                                     ApproxIn("gated-delta memory update", f2.precision())),
                           what, target));

  // ── Section 3: o = S_new·q / √d, RMSNorm over the head, scaled by GN, gated by gate(z).
  ASSIGN_OR_RETURN(FlatBuild f3, FlatBuild::On(Datapath::kFloat, target));
  ASSIGN_OR_RETURN(BufferId s3_in, MemoryInput(f3, st, s_len));
  ASSIGN_OR_RETURN(BufferId q_in, f3.Input(q.name, rows * hk * d, q.fill));
  ASSIGN_OR_RETURN(BufferId z_in, f3.Input(z.name, rows * out_len, z.fill));
  ASSIGN_OR_RETURN(BufferId gn_in, f3.Input(gn.name, d, gn.fill));
  const BufferId out_buf = f3.t().AddBuffer("out", o_t, f3.precision());
  const BufferId ovec = f3.Scratch("gd_o", o_t);
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
  slots = {Slot{Scaler(f3, "gd_scaler"), ConstMap()},
           Slot{s3_in, ElemAccess{0, {{LoopVar::kCol, d}, {LoopVar::kRow, 1}}, std::nullopt}}};
  bands.clear();
  for (int64_t h = 0; h < hv; ++h) {
    slots.push_back(Slot{q_in, ElemAccess{(h % hk) * d + qk_at, {{LoopVar::kRow, 1}}, std::nullopt}});
    bands.push_back({(h + 1) * d, Mul(Mul(Op(1), Op(static_cast<int>(slots.size()) - 1)), Const(inv_sqrt_d))});
  }
  const StageId sr = f3.Compute("gd_read", FoldedRows(d, out_len), std::move(slots), PerColMap(), Banded(bands), ovec);
  // The per-head RMSNorm of the ungated output (the divide by d rides inside the transform), then weight and gate.
  HeadScale norm = RowScaleChain(f3, ovec, hv, d, SfpuKind::Rsqrt(eps_nano, d), target);
  std::vector<StageId> chain{sr};
  chain.insert(chain.end(), norm.chain.begin(), norm.chain.end());
  slots = {Slot{ovec, At(0)}, Slot{z_in, At(v_at)}};
  bands.clear();
  for (int64_t h = 0; h < hv; ++h) {
    slots.push_back(Slot{norm.scale, Fixed(h * norm.one_w)});
    slots.push_back(Slot{gn_in, At(-h * d)});
    const int g = static_cast<int>(slots.size()) - 1;
    bands.push_back({(h + 1) * d, Mul(Mul(Op(g), Mul(Op(0), Op(g - 1))), DeltaGate(spec.gate(), Op(1)))});
  }
  chain.push_back(f3.Compute("gd_gate", FlatSpace(out_len), std::move(slots), IdentMap(f3.t().PageWidth(o_t)),
                             Banded(bands), out_buf));
  ASSIGN_OR_RETURN(Composition read,
                   FitSite(f3.Finish(o_name, out_len, chain, out_buf, absl::StrCat("gd_read_", hv, "x", d, tag),
                                     ApproxIn("gated-delta output", f3.precision())),
                           what, target));
  std::vector<Composition> parts;
  parts.push_back(std::move(predict));
  parts.push_back(std::move(update));
  parts.push_back(std::move(read));
  return ComposeSections(absl::StrCat("gd_predict_", hv, "x", d, tag), std::move(parts), target);
}

}  // namespace spatial
