#include "lowerings/moe/moe_prefill.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/moe/moe_blocked.h"
#include "lowerings/rows/softmax.h"
#include "lowerings/toolkit/k_blocks.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

constexpr Precision kF32 = Precision::kFp32;

// The shape every section shares: T tokens in T_t tile rows, the widths in tiles, and the up section's hidden
// blocks: n_c tiles (a divisor of dff's tiles up to 4, the gate and up pages' Dst width), nj of them an expert.
struct Dense {
  int64_t tokens, rows_t, d_t, f_t, e_t, n_c, nj;
};

// The row maps of a token tile's pages: (token r, expert e) of an e_t-tile page, and token r's one value.
struct RowMaps {
  ElemAccess row, per_row;
  int64_t tr, ew, one_w;
  std::vector<IterSpec> Space(int64_t cols, std::optional<IterKind> pool = std::nullopt) const {
    return HeadSpace(tr, cols, pool);
  }
};

RowMaps MapsOf(const Template& t, const Dense& g) {
  const int64_t ew = t.PageWidth(g.e_t), one_w = t.PageWidth(1);
  return RowMaps{IdentMap(ew), PerRowMap(one_w), t.tile_rows(), ew, one_w};
}

// The scores P of a token tile's rows, at fp32 (★ THE ROUTER DECIDES THE EXPERTS, moe.h): the softmax or the
// sigmoid of the router's logits, a row a token.
BufferId AddRowScores(Template& t, const proto::MoeSpec& m, const MoeNames& names, const Dense& g) {
  const int64_t ne = m.ne();
  const RowMaps r = MapsOf(t, g);
  const TensorId lt = t.AddTensor(names.logits, TensorRole::kInput, g.tokens, ne, kF32, TensorInit::External());
  const BufferId l = t.AddBufferDeep("in_logits", 1, g.e_t, kF32);
  t.AddLoad("load_logits", lt, {{LoopVar::kItemY, g.e_t}}, g.e_t, l);
  const BufferId p = t.AddScratch("probs", g.e_t, kF32);
  if (m.score() == proto::MoeSpec::SOFTMAX) {
    // The row softmax's one chain (softmax.h), the rows a token tile's; the reductions take no scaler tile, as the
    // decode's routing reductions take none.
    const RowSoftmax rs = AddRowSoftmax(t, l, r.tr, ne, r.ew, kF32, std::nullopt);
    t.AddGeneric("probs", r.Space(ne), {rs.ex, rs.inv}, {r.row, r.per_row}, r.row, Mul(Op(0), Op(1)), p);
  } else {
    t.AddGeneric("probs", r.Space(ne), {l}, {r.row}, r.row, MoeSigmoid(Op(0)), p);
  }
  return p;
}

// What the rounds choose by, into `into` (moe_routing.h's selection, a row a token): max(P + B, −1e30) with a
// selection bias (one row for every token), max(P, −1e30) for a sigmoid without one, P for a softmax.
absl::Status AddRowSelection(Template& t, const proto::MoeSpec& m, const MoeOperands& layout,
                             const std::vector<OperandRef>& operands, const Dense& g, BufferId p, BufferId into) {
  const int64_t ne = m.ne();
  const RowMaps r = MapsOf(t, g);
  std::vector<BufferId> ins{p};
  std::vector<ElemAccess> maps{r.row};
  Body sel = Op(0);
  if (layout.selection_bias >= 0) {
    const OperandRef& b = operands[layout.selection_bias];
    ASSIGN_OR_RETURN(TensorInit init, InitOf(b.fill, ne));
    const TensorId bt = t.AddTensor(b.name, TensorRole::kInput, 1, ne, kF32, std::move(init));
    const BufferId bias = t.AddBufferDeep("in_selection_bias", 1, g.e_t, kF32);
    t.AddLoad("load_selection_bias", bt, {}, g.e_t, bias);
    ins.push_back(bias);
    maps.push_back(At(0));
    sel = Max(Add(Op(0), Op(1)), Const(kMoeMasked));
  } else if (m.score() == proto::MoeSpec::SIGMOID) {
    sel = Max(Op(0), Const(kMoeMasked));
  }
  t.AddGeneric("scores", r.Space(ne), std::move(ins), std::move(maps), r.row, std::move(sel), into);
  return absl::OkStatus();
}

// "moe_groups_{T}x{ne}x{kept}": the group limit of a token tile's rows, as the decode's (moe_routing.h) takes it a
// row a token: each group scored by its two best selection scores, kept rounds (the fold) each choosing a row's best
// group left, and the selection scores of the chosen groups' experts kept, −1e30 elsewhere. ★ A GROUP IS A COLUMN
// OF ITS ROW: the groups of token r are columns of row r of one tile (the decode's are rows: it has one token), so
// a group's members are a third axis.
absl::StatusOr<Section> GroupsSection(const proto::MoeSpec& m, const MoeOperands& layout,
                                      const std::vector<OperandRef>& operands, const MoeNames& names, const Dense& g,
                                      const Target& target) {
  const int64_t ne = m.ne(), count = m.group_count(), kept = m.group_kept(), per = ne / count;
  if (count > target.tile_cols()) {
    return NotLowered(absl::StrCat("a group limit over a prefill's tokens with more groups (", count,
                                   ") than a tile has columns"));
  }
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, ne + 1));
  RETURN_IF_ERROR(RequireIndexArithmetic("a mixture-of-experts group limit", target));
  Template t(target.tile_rows(), target.tile_cols());
  const RowMaps r = MapsOf(t, g);
  const BufferId p = AddRowScores(t, m, names, g);
  const BufferId sel = t.AddScratch("selection", g.e_t, kF32);
  RETURN_IF_ERROR(AddRowSelection(t, m, layout, operands, g, p, sel));
  // (token, group) spaces: member c of group k of row r is column k·per + c; group k's value column k of row r.
  auto groups = [&](std::optional<IterKind> pool) {
    return std::vector<IterSpec>{{LoopVar::kRow, r.tr},
                                 {LoopVar::kK, count},
                                 {LoopVar::kCol, pool ? per : 1, pool.value_or(IterKind::kParallel)}};
  };
  const ElemAccess members{0, {{LoopVar::kRow, r.ew}, {LoopVar::kK, per}, {LoopVar::kCol, 1}}, std::nullopt};
  const ElemAccess own{0, {{LoopVar::kRow, r.one_w}, {LoopVar::kK, 1}}, std::nullopt};
  const BufferId left = t.AddScratchDeep("group_left", 2, 1, kF32);
  AddGroupScores(t, groups, sel, members, own, per, ix, left);
  // Which experts each row's kept groups hold: a carried 0/1 page.
  const BufferId inside = t.AddScratchDeep("inside", 2, g.e_t, kF32);
  t.AddGeneric("init_inside", r.Space(ne), {}, {}, r.row, Const(0.0), inside);

  // ── A round a block: each row's best group left, its −1e30 written back, its experts [k·per, k·per + per) marked.
  const MoeRounds rounds = MoeRounds::Begin(t, kept);
  const ElemAccess group_row = IdentMap(r.one_w);
  const BufferId pick = t.AddScratch("group", 1, ix);
  t.AddGeneric("group", r.Space(count, IterKind::kReduceArgMax), {left}, {group_row}, r.per_row, Op(0), pick);
  const BufferId end = t.AddScratch("group_end", 1, ix);
  t.AddGeneric("group_end", r.Space(1), {pick}, {r.per_row}, r.per_row, Add(Op(0), Const(1.0)), end);
  t.AddGeneric("group_taken", r.Space(count), {left, pick, end}, {group_row, r.per_row, r.per_row}, group_row,
               Add(Op(0), InsidePick(LoopVar::kCol, 1, kMoeMasked)), left);
  const Body width = Const(static_cast<double>(per));
  const BufferId from = t.AddScratch("group_from", 1, ix);
  t.AddGeneric("group_from", r.Space(1), {pick}, {r.per_row}, r.per_row, Mul(Op(0), width), from);
  const BufferId to = t.AddScratch("group_to", 1, ix);
  t.AddGeneric("group_to", r.Space(1), {from}, {r.per_row}, r.per_row, Add(Op(0), width), to);
  t.AddGeneric("group_inside", r.Space(ne), {inside, from, to}, {r.row, r.per_row, r.per_row}, r.row,
               Add(Op(0), InsidePick(LoopVar::kCol, 1, 1.0)), inside);

  // ── sel + (1 − inside)·(−1e30), as the decode's: the kept groups' experts keep their selection scores exactly.
  t.SetPhase(rounds.after);
  const BufferId chosen = t.AddBufferDeep("chosen", 1, g.e_t, kF32);
  t.AddGeneric("chosen", r.Space(ne), {sel, inside}, {r.row, r.row}, r.row,
               Add(Op(0), Mul(Sub(Const(1.0), Op(1)), Const(kMoeMasked))), chosen);
  const TensorId out = t.AddTensor(names.choosing, TensorRole::kOutput, g.tokens, ne, kF32, TensorInit::Zero());
  t.AddStore("store_choosing", out, {{LoopVar::kItemY, g.e_t}}, g.e_t, chosen);
  WireFirstReaders(t);
  ASSIGN_OR_RETURN(Composition c,
                   FinishSection(t, absl::StrCat("moe_groups_", g.tokens, "x", ne, "x", kept),
                                 TokenTilesInner(g.rows_t, 1, g.e_t), kF32,
                                 ApproxIn("mixture-of-experts group limit", kF32), target, DstPolicy::kStreamed));
  return std::move(c.sections[0]);
}

// "moe_route_{T}x{ne}x{k}": a token tile's rows, each routed as the decode routes its one token (moe_routing.h).
absl::StatusOr<Section> RouteSection(const proto::MoeSpec& m, const MoeOperands& layout,
                                     const std::vector<OperandRef>& operands, const MoeNames& names, const Dense& g,
                                     const Target& target) {
  const int64_t ne = m.ne(), k = m.k();
  // An expert pick is in [0, ne); its end is one past.
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, ne + 1));
  RETURN_IF_ERROR(RequireIndexArithmetic("a mixture-of-experts pick", target));
  Template t(target.tile_rows(), target.tile_cols());
  const RowMaps maps = MapsOf(t, g);
  const ElemAccess row = maps.row, per_row = maps.per_row;
  auto rows = [&](int64_t cols, std::optional<IterKind> pool = std::nullopt) { return maps.Space(cols, pool); };
  const BufferId p = AddRowScores(t, m, names, g);
  // The row the rounds choose from, carried: the selection, or under a group limit the groups section's row.
  const BufferId left = t.AddScratchDeep("left", 2, g.e_t, kF32);
  if (m.group_count() > 0) {
    const TensorId ct = t.AddTensor(names.choosing, TensorRole::kInput, g.tokens, ne, kF32, TensorInit::External());
    const BufferId chosen_groups = t.AddBufferDeep("in_choosing", 1, g.e_t, kF32);
    t.AddLoad("load_choosing", ct, {{LoopVar::kItemY, g.e_t}}, g.e_t, chosen_groups);
    t.AddGeneric("scores", rows(ne), {chosen_groups}, {row}, row, Op(0), left);
  } else {
    RETURN_IF_ERROR(AddRowSelection(t, m, layout, operands, g, p, left));
  }
  // Which experts each token chose: a carried 0/1 page.
  const BufferId chosen = t.AddScratchDeep("chosen", 2, g.e_t, kF32);
  t.AddGeneric("init_chosen", rows(ne), {}, {}, row, Const(0.0), chosen);

  // ── A round a block: each row's arg-max of what is left (first maximum on ties), its −1e30 written back, marked.
  const MoeRounds rounds = MoeRounds::Begin(t, k);
  const BufferId pick = t.AddScratch("pick", 1, ix);
  t.AddGeneric("route", rows(ne, IterKind::kReduceArgMax), {left}, {row}, per_row, Op(0), pick);
  const BufferId end = t.AddScratch("pick_end", 1, ix);
  t.AddGeneric("pick_end", rows(1), {pick}, {per_row}, per_row, Add(Op(0), Const(1.0)), end);
  t.AddGeneric("picked", rows(ne), {left, pick, end}, {row, per_row, per_row}, row,
               Add(Op(0), InsidePick(LoopVar::kCol, 1, kMoeMasked)), left);
  t.AddGeneric("chosen", rows(ne), {chosen, pick, end}, {row, per_row, per_row}, row,
               Add(Op(0), InsidePick(LoopVar::kCol, 1, 1.0)), chosen);

  // ── The dense weights, once: P where chosen (· the routed scale when nothing renormalizes), else 0; renormalized
  // by 1 / max(Σ w, 2^-14) (the floor where the sum can fall below it) and scaled.
  t.SetPhase(rounds.after);
  const double round_scale = MoeRoundScale(m);
  Body raw = Mul(Op(0), Op(1));
  if (round_scale != 1.0) raw = Mul(std::move(raw), Const(round_scale));
  const BufferId w = t.AddBufferDeep("dense", 1, g.e_t, kF32);
  if (!m.renormalize()) {
    t.AddGeneric("dense", rows(ne), {chosen, p}, {row, row}, row, std::move(raw), w);
  } else {
    const BufferId unscaled = t.AddScratch("chosen_probs", g.e_t, kF32);
    t.AddGeneric("chosen_probs", rows(ne), {chosen, p}, {row, row}, row, std::move(raw), unscaled);
    const BufferId wsum = t.AddScratch("weight_sum", 1, kF32);
    t.AddGeneric("weight_sum", rows(ne, IterKind::kReduceSum), {unscaled}, {row}, per_row, Op(0), wsum);
    const BufferId norm = t.AddScratch("norm", 1, kF32);
    t.AddGeneric("norm", rows(1), {wsum}, {per_row}, per_row,
                 Unary(SfpuKind::Recip(), MoeSumCanClamp(m) ? Max(Op(0), Const(kMoeSumFloor)) : Op(0)), norm);
    Body scaled = Mul(Op(0), Op(1));
    if (m.scale() != 0.0) scaled = Mul(std::move(scaled), Const(m.scale()));
    t.AddGeneric("dense", rows(ne), {unscaled, norm}, {row, per_row}, row, std::move(scaled), w);
  }
  const TensorId dt = t.AddTensor(names.dense, TensorRole::kOutput, g.tokens, ne, kF32, TensorInit::Zero());
  t.AddStore("store_dense", dt, {{LoopVar::kItemY, g.e_t}}, g.e_t, w);
  WireFirstReaders(t);
  // The rows' elementwise pages stream through Dst (Qwen3-Next's 512 experts are 16 fp32 tiles a row).
  ASSIGN_OR_RETURN(Composition c,
                   FinishSection(t, absl::StrCat("moe_route_", g.tokens, "x", ne, "x", k),
                                 TokenTilesInner(g.rows_t, 1, g.e_t), kF32, ApproxIn("mixture-of-experts routing", kF32), target, DstPolicy::kStreamed));
  return std::move(c.sections[0]);
}

// "moe_spread_{T}x{ne}": expert tile ITEM_X of token tile ITEM_Y, each of its TC experts' weight columns broadcast
// into a tile of its own, stored nj times (the up section's item (y, b·nj + j) reads copy j: one affine address).
absl::StatusOr<Section> SpreadSection(const proto::MoeSpec& m, const MoeNames& names, const Dense& g,
                                      const Target& target) {
  const int64_t ne = m.ne();
  Template t(target.tile_rows(), target.tile_cols());
  const int64_t tr = t.tile_rows(), tc = t.tile_cols();
  const TensorId dt = t.AddTensor(names.dense, TensorRole::kInput, g.tokens, ne, kF32, TensorInit::External());
  const BufferId w = t.AddBuffer("in_dense", 1, kF32);
  t.AddLoad("load_dense", dt, {{LoopVar::kItemY, g.e_t}, {LoopVar::kItemX, 1}}, 1, w);
  const BufferId s = t.AddBuffer("spread", tc, kF32);
  // Element (r, e) of the tile to row r, every column, of tile e of the page.
  t.AddGeneric("spread", {{LoopVar::kRow, tr}, {LoopVar::kK, tc}, {LoopVar::kCol, tc}}, {w},
               {ElemAccess{0, {{LoopVar::kRow, tc}, {LoopVar::kK, 1}}, std::nullopt}},
               ElemAccess{0, {{LoopVar::kRow, tc * tc}, {LoopVar::kK, tc}, {LoopVar::kCol, 1}}, std::nullopt},
               Op(0), s);
  const TensorId st =
      t.AddTensor(names.spread, TensorRole::kOutput, g.tokens, ne * g.nj * tc, kF32, TensorInit::Zero());
  for (int64_t j = 0; j < g.nj; ++j) {
    // Expert e = ITEM_X·TC + i's copy j is tile e·nj + j of the token tile's row.
    t.AddStorePattern(
        absl::StrCat("store_spread_", j), st,
        AccessPattern{TileAddr{j, {{LoopVar::kItemY, ne * g.nj}, {LoopVar::kItemX, tc * g.nj}}, std::nullopt}, 1, tc,
                      g.nj, 1},
        s);
  }
  WireFirstReaders(t);
  ASSIGN_OR_RETURN(Composition c, FinishSection(t, absl::StrCat("moe_spread_", g.tokens, "x", ne),
                                                TokenTilesInner(g.rows_t, g.e_t, tc), kF32,
                                                ApproxIn("mixture-of-experts weights", kF32), target,
                                                DstPolicy::kStreamed));
  return std::move(c.sections[0]);
}

// "moe_dense_up_...": item (token tile ITEM_Y, ITEM_X = b·nj + j) folds x's tile row against rows [j·n_c, +n_c)
// tiles of expert b's gate and up slabs, K block by block, then takes the biases, the gated activation and the
// token's weight, into tiles [ITEM_X·n_c, +n_c) of the token tile's hidden row.
absl::StatusOr<Section> UpSection(const proto::OpSpec& spec, const MoeOperands& layout,
                                  const std::vector<OperandRef>& operands, const MoeNames& names, const Dense& g,
                                  Precision elem, const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  const int64_t d = m.d(), dff = m.dff(), ne = m.ne();
  Template t(target.tile_rows(), target.tile_cols());
  const int64_t tr = t.tile_rows(), tc = t.tile_cols(), kb = KBlock(g.d_t);
  ASSIGN_OR_RETURN(TensorInit x_init, InitOf(operands[0].fill, g.tokens * d));
  const TensorId x = t.AddTensor(operands[0].name, TensorRole::kInput, g.tokens, d, elem, std::move(x_init));
  std::vector<KOperand> ops{KOperand{.name = "x", .tensor = x, .page = t.AddBuffer("in_x", kb, elem),
                                     .steps = {{LoopVar::kItemY, g.d_t}}, .k_step = kb, .block_w = kb,
                                     .multicast = LoopVar::kItemX}};
  // Expert b's gate (or up) row o is row b·dff + o of an (ne·dff) x d table: the item's n_c tile rows start at
  // tile row (b·nj + j)·n_c = ITEM_X·n_c.
  for (int i = 0; i < 2; ++i) {
    const char* part = i == 0 ? "gate" : "up";
    ASSIGN_OR_RETURN(TensorInit init, InitOf(operands[2 + i].fill, ne * dff * d));
    const TensorId w = t.AddTensor(operands[2 + i].name, TensorRole::kInput, ne * dff, d, elem, std::move(init));
    ops.push_back(KOperand{.name = part, .tensor = w,
                           .page = t.AddBuffer(absl::StrCat("in_", part), g.n_c * kb, elem),
                           .steps = {{LoopVar::kItemX, g.n_c * g.d_t}}, .k_step = kb, .block_h = g.n_c,
                           .block_w = kb, .pitch = g.d_t, .multicast = LoopVar::kItemY});
  }
  const BufferId gate = t.AddScratch("gate", g.n_c, Precision::kFp32);
  const BufferId up = t.AddScratch("up", g.n_c, Precision::kFp32);
  t.SetPhase(AddKBlocked(t, g.d_t / kb, kb, ops,
                         {KProduct{"gate", 0, 1, true, MathFidelity::kDefault, gate, g.n_c},
                          KProduct{"up", 0, 2, true, MathFidelity::kDefault, up, g.n_c}},
                         ne, Precision::kInt32));
  const int64_t hw = t.PageWidth(g.n_c);
  std::vector<BufferId> ins{gate, up};
  std::vector<ElemAccess> maps{IdentMap(hw), IdentMap(hw)};
  Body terms[2] = {Op(0), Op(1)};
  const int bias_at[2] = {layout.gate_bias, layout.up_bias};
  for (int i = 0; i < 2; ++i) {
    if (bias_at[i] < 0) continue;
    const char* part = i == 0 ? "gate_bias" : "up_bias";
    ASSIGN_OR_RETURN(TensorInit init, InitOf(operands[bias_at[i]].fill, ne * dff));
    const TensorId bt = t.AddTensor(operands[bias_at[i]].name, TensorRole::kInput, 1, ne * dff, elem, std::move(init));
    const BufferId bias = t.AddBuffer(absl::StrCat("in_", part), g.n_c, elem);
    t.AddLoad(absl::StrCat("load_", part), bt, {{LoopVar::kItemX, g.n_c}}, g.n_c, bias);
    ins.push_back(bias);
    maps.push_back(At(0));  // the bias row, for every token's row
    terms[i] = Add(terms[i], Op(static_cast<int>(ins.size()) - 1));
  }
  const TensorId st =
      t.AddTensor(names.spread, TensorRole::kInput, g.tokens, ne * g.nj * tc, kF32, TensorInit::External());
  const BufferId weight = t.AddBuffer("in_weight", 1, kF32);
  t.AddLoad("load_weight", st, {{LoopVar::kItemY, ne * g.nj}, {LoopVar::kItemX, 1}}, 1, weight);
  ins.push_back(weight);
  maps.push_back(PerRowMap(tc));  // token r's weight for the item's expert
  const int w_slot = static_cast<int>(ins.size()) - 1;
  // The down projection's operand is packed to the datapath's precision (moe_blocked.h), after the weight.
  const BufferId hidden = t.AddBuffer("hidden", g.n_c, elem);
  t.AddGeneric("hidden", HeadSpace(tr, hw), std::move(ins), std::move(maps), IdentMap(hw),
               Mul(MoeGated(m, terms[0], terms[1]), Op(w_slot)), hidden);
  const TensorId ht = t.AddTensor(names.hidden, TensorRole::kOutput, g.tokens, ne * dff, elem, TensorInit::Zero());
  t.AddStore("store_hidden", ht, {{LoopVar::kItemY, ne * g.f_t}, {LoopVar::kItemX, g.n_c}}, g.n_c, hidden);
  WireFirstReaders(t);
  ASSIGN_OR_RETURN(Composition c,
                   FinishSection(t, absl::StrCat("moe_dense_up_", g.tokens, "x", ne, "_", d, "x", dff),
                                 TokenTilesInner(g.rows_t, ne * g.nj, g.n_c), Precision::kFp32,
                                 ApproxIn("mixture-of-experts gate/up and SwiGLU", elem), target));
  return std::move(c.sections[0]);
}

// "moe_dense_down_...": item (token tile ITEM_Y, output tile ITEM_X) folds the experts, block b its hidden tile row
// against expert b's down rows; with down biases, Σ_b w_b·bias_b beside it; packed into out.
absl::StatusOr<Section> DownSection(const proto::OpSpec& spec, const MoeOperands& layout,
                                    const std::vector<OperandRef>& operands, const MoeNames& names, const Dense& g,
                                    Precision elem, const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  const int64_t d = m.d(), dff = m.dff(), ne = m.ne();
  Template t(target.tile_rows(), target.tile_cols());
  const int64_t tr = t.tile_rows(), tc = t.tile_cols();
  const TensorId ht = t.AddTensor(names.hidden, TensorRole::kInput, g.tokens, ne * dff, elem, TensorInit::External());
  ASSIGN_OR_RETURN(TensorInit init, InitOf(operands[4].fill, ne * d * dff));
  // Expert b's down row o is row b·d + o of an (ne·d) x dff table: tile row b·d_t + ITEM_X.
  const TensorId wd = t.AddTensor(operands[4].name, TensorRole::kInput, ne * d, dff, elem, std::move(init));
  std::vector<KOperand> ops{
      KOperand{.name = "hidden", .tensor = ht, .page = t.AddBuffer("in_hidden", g.f_t, elem),
               .steps = {{LoopVar::kItemY, ne * g.f_t}}, .k_step = g.f_t, .block_w = g.f_t,
               .multicast = LoopVar::kItemX},
      KOperand{.name = "down", .tensor = wd, .page = t.AddBuffer("in_down", g.f_t, elem),
               .steps = {{LoopVar::kItemX, g.f_t}}, .k_step = g.d_t * g.f_t, .block_w = g.f_t,
               .multicast = LoopVar::kItemY}};
  const BufferId down = t.AddScratch("down", 1, kF32);
  // With down biases: Σ_b w[t, b]·bias_b[o], a carried tile beside the products (copy 0 of b's spread weights).
  std::optional<BufferId> biased;
  std::function<void(int64_t, bool, const std::string&)> after;
  if (layout.down_bias >= 0) {
    ASSIGN_OR_RETURN(TensorInit b_init, InitOf(operands[layout.down_bias].fill, ne * d));
    const TensorId bt =
        t.AddTensor(operands[layout.down_bias].name, TensorRole::kInput, 1, ne * d, elem, std::move(b_init));
    const TensorId st =
        t.AddTensor(names.spread, TensorRole::kInput, g.tokens, ne * g.nj * tc, kF32, TensorInit::External());
    const BufferId bias = t.AddBuffer("in_down_bias", 1, elem);
    const BufferId weight = t.AddBuffer("in_weight", 1, kF32);
    biased = t.AddScratchDeep("bias_sum", 2, 1, kF32);
    after = [&t, bt, st, bias, weight, biased, ne, g, tc, tr](int64_t block, bool body, const std::string& suffix) {
      std::vector<Term> b_steps{{LoopVar::kItemX, 1}}, w_steps{{LoopVar::kItemY, ne * g.nj}};
      if (body) {
        b_steps.push_back({LoopVar::kKBlock, g.d_t});
        w_steps.push_back({LoopVar::kKBlock, g.nj});
      }
      t.AddLoadPattern(absl::StrCat("load_down_bias", suffix), bt,
                       AccessPattern{TileAddr{block * g.d_t, std::move(b_steps), std::nullopt}, 1, 1, 1, 1}, bias);
      t.AddLoadPattern(absl::StrCat("load_weight", suffix), st,
                       AccessPattern{TileAddr{block * g.nj, std::move(w_steps), std::nullopt}, 1, 1, 1, 1}, weight);
      // The weight is row r's (column 0 of its tile), the bias row 0's, for every row.
      std::vector<BufferId> ins{weight, bias};
      std::vector<ElemAccess> maps{PerRowMap(tc), At(0)};
      Body term = Mul(Op(0), Op(1));
      if (block > 0) {
        ins.push_back(*biased);
        maps.push_back(IdentMap(tc));
        term = Add(Op(2), std::move(term));
      }
      t.AddGeneric(absl::StrCat("bias_sum", suffix), TileSpace(tr, tc), std::move(ins), std::move(maps),
                   IdentMap(tc), std::move(term), *biased);
    };
  }
  t.SetPhase(AddKBlocked(t, ne, g.f_t, ops, {KProduct{"down", 0, 1, true, MathFidelity::kDefault, down}}, ne,
                         Precision::kInt32, after));
  std::vector<BufferId> ins{down};
  std::vector<ElemAccess> maps{IdentMap(tc)};
  Body body = Op(0);
  if (biased) {
    ins.push_back(*biased);
    maps.push_back(IdentMap(tc));
    body = Add(Op(0), Op(1));
  }
  const BufferId y = t.AddBuffer("out", 1, elem);
  t.AddGeneric("out", TileSpace(tr, tc), std::move(ins), std::move(maps), IdentMap(tc), std::move(body), y);
  const TensorId result = t.AddTensor(spec.out(), TensorRole::kOutput, g.tokens, d, elem, TensorInit::Zero());
  t.AddStore(absl::StrCat("store_", spec.out()), result, {{LoopVar::kItemY, g.d_t}, {LoopVar::kItemX, 1}}, 1, y);
  WireFirstReaders(t);
  ASSIGN_OR_RETURN(Composition c,
                   FinishSection(t, absl::StrCat("moe_dense_down_", g.tokens, "x", ne, "_", d, "x", dff),
                                 TokenTilesInner(g.rows_t, g.d_t, 1), Precision::kFp32,
                                 ApproxIn("mixture-of-experts down projection", elem), target));
  return std::move(c.sections[0]);
}

}  // namespace

absl::StatusOr<Composition> MoePrefill(const proto::OpSpec& spec, const MoeOperands& layout,
                                       const std::vector<OperandRef>& operands, const MoeNames& names,
                                       const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  const int64_t tokens = m.tokens();
  if (!MoeBlocks(m, target)) {
    return NotLowered(absl::StrCat("a mixture of experts over a prefill's ", tokens, " tokens whose widths (d ", m.d(),
                                   ", dff ", m.dff(), ") are not whole tiles of a square tile"));
  }
  if (m.ne() % target.tile_cols() != 0) {
    return NotLowered(absl::StrCat("a mixture of experts over a prefill's ", tokens, " tokens whose ", m.ne(),
                                   " experts are not whole tiles of ", target.tile_cols()));
  }
  if (m.weigh_inputs()) {
    return NotLowered(absl::StrCat("weighed inputs over a prefill's ", tokens, " tokens (the dense form weighs the "
                                   "hidden rows)"));
  }
  ASSIGN_OR_RETURN(Precision elem, ElemPrecision(target));
  Dense g;
  g.tokens = tokens;
  g.rows_t = CeilDiv(tokens, target.tile_rows());
  g.d_t = TilesOf(m.d(), target);
  g.f_t = TilesOf(m.dff(), target);
  g.e_t = TilesOf(m.ne(), target);
  g.n_c = KBlock(g.f_t, 4);
  g.nj = g.f_t / g.n_c;
  RETURN_IF_ERROR(WorkItemBudget("a prefill mixture's gate/up section",
                                 CheckedProduct({g.rows_t, m.ne(), g.nj})));
  RETURN_IF_ERROR(WorkItemBudget("a prefill mixture's down section", CheckedMul(g.rows_t, g.d_t)));
  ASSIGN_OR_RETURN(Composition c, MoeBlockedRouter(spec, layout, operands, names, target));
  std::vector<absl::StatusOr<Section>> parts;
  if (m.group_count() > 0) parts.push_back(GroupsSection(m, layout, operands, names, g, target));
  parts.push_back(RouteSection(m, layout, operands, names, g, target));
  parts.push_back(SpreadSection(m, names, g, target));
  parts.push_back(UpSection(spec, layout, operands, names, g, elem, target));
  parts.push_back(DownSection(spec, layout, operands, names, g, elem, target));
  for (absl::StatusOr<Section>& part : parts) {
    RETURN_IF_ERROR(part.status());
    c.sections.push_back(*std::move(part));
  }
  return c;
}

absl::StatusOr<Composition> MoePrefillSharedGate(const OperandRef& x_op, const OperandRef& w_op,
                                                 const std::string& routed, const std::string& shared,
                                                 const std::string& weight, const std::string& out, int64_t tokens,
                                                 int64_t d, const Target& target) {
  ASSIGN_OR_RETURN(Precision elem, ElemPrecision(target));
  const int64_t tr = target.tile_rows(), tc = target.tile_cols();
  const int64_t rows_t = CeilDiv(tokens, tr), d_t = TilesOf(d, target);
  Composition c;
  {
    // ★ THE GATE IS A SCORE: each row's x·w at fp32, then its sigmoid; the weight leaves at the datapath's precision,
    // as the add that reads it takes its operands (moe.h's one-token gate, a row a token).
    Template t(tr, tc);
    ASSIGN_OR_RETURN(TensorInit x_init, InitOf(x_op.fill, tokens * d));
    ASSIGN_OR_RETURN(TensorInit w_init, InitOf(w_op.fill, d));
    const TensorId xt = t.AddTensor(x_op.name, TensorRole::kInput, tokens, d, elem, std::move(x_init));
    const TensorId wt = t.AddTensor(w_op.name, TensorRole::kInput, 1, d, elem, std::move(w_init));
    const BufferId x = t.AddBuffer("in_x", d_t, elem);
    t.AddLoad("load_x", xt, {{LoopVar::kItemY, d_t}}, d_t, x);
    const BufferId w = t.AddBufferDeep("in_gate_w", 1, d_t, elem);
    t.AddLoad("load_gate_w", wt, {}, d_t, w);
    const BufferId logit = t.AddScratch("shared_gate_logit", 1, kF32);
    t.AddGeneric("shared_gate_logit", HeadSpace(tr, d, IterKind::kReduceSum), {x, w},
                 {IdentMap(t.PageWidth(d_t)), At(0)}, PerRowMap(tc), Mul(Op(0), Op(1)), logit);
    const BufferId s = t.AddBuffer("shared_weight", 1, elem);
    t.AddGeneric("shared_gate_sigmoid", HeadSpace(tr, 1), {logit}, {PerRowMap(tc)}, PerRowMap(tc),
                 MoeSigmoid(Op(0)), s);
    const TensorId st = t.AddTensor(weight, TensorRole::kOutput, tokens, tc, elem, TensorInit::Zero());
    t.AddStore("store_shared_weight", st, {{LoopVar::kItemY, 1}}, 1, s);
    WireFirstReaders(t);
    ASSIGN_OR_RETURN(Composition g, FinishSection(t, absl::StrCat("moe_shared_gate_", tokens, "x", d),
                                                  TokenTilesInner(rows_t, 1, 1), kF32,
                                                  ApproxIn("moe shared expert gate", kF32), target));
    c.sections.push_back(std::move(g.sections[0]));
  }
  {
    Template t(tr, tc);
    const std::vector<Term> tile{{LoopVar::kItemY, d_t}, {LoopVar::kItemX, 1}};
    std::vector<BufferId> ins;
    for (const std::string& name : {routed, shared}) {
      const TensorId id = t.AddTensor(name, TensorRole::kInput, tokens, d, elem, TensorInit::External());
      ins.push_back(t.AddBuffer(absl::StrCat("in_", name.substr(name.rfind('_') + 1)), 1, elem));
      t.AddLoad(absl::StrCat("load_", name.substr(name.rfind('_') + 1)), id, tile, 1, ins.back());
    }
    const TensorId st = t.AddTensor(weight, TensorRole::kInput, tokens, tc, elem, TensorInit::External());
    ins.push_back(t.AddBuffer("in_weight", 1, elem));
    t.AddLoad("load_weight", st, {{LoopVar::kItemY, 1}}, 1, ins.back());
    const BufferId y = t.AddBuffer("out", 1, elem);
    t.AddGeneric("shared_gated_add", TileSpace(tr, tc), ins, {IdentMap(tc), IdentMap(tc), PerRowMap(tc)},
                 IdentMap(tc), Add(Op(0), Mul(Op(2), Op(1))), y);
    const TensorId ot = t.AddTensor(out, TensorRole::kOutput, tokens, d, elem, TensorInit::Zero());
    t.AddStore(absl::StrCat("store_", out), ot, tile, 1, y);
    WireFirstReaders(t);
    ASSIGN_OR_RETURN(Composition a, FinishSection(t, absl::StrCat("moe_shared_gated_add_", tokens, "x", d),
                                                  TokenTilesInner(rows_t, d_t, 1), AccFor(elem),
                                                  ApproxIn("moe shared expert's gated add", elem), target));
    c.sections.push_back(std::move(a.sections[0]));
  }
  return c;
}

}  // namespace spatial
