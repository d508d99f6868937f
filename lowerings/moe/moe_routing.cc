#include "lowerings/moe/moe_routing.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/moe/moe.h"
#include "lowerings/toolkit/index.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// A 1 x n fp32 row the section reads, loaded one page deep (the section's one item fills it once).
BufferId LoadRow(Template& t, const std::string& name, int64_t n, TensorInit init, const std::string& buffer) {
  const int64_t tiles = t.TilesOf(n);
  const TensorId id = t.AddTensor(name, TensorRole::kInput, 1, n, Precision::kFp32, std::move(init));
  const BufferId buf = t.AddBufferDeep(buffer, 1, tiles, Precision::kFp32);
  t.AddLoad(absl::StrCat("load_", buffer.substr(buffer.find('_') + 1)), id, {}, tiles, buf);
  return buf;
}

// The selection row from the scores `p`: max(P + B, −1e30) with a selection bias, max(P, −1e30) for a sigmoid
// without one, P itself for a softmax — into `into`, or, when `into` is unset and nothing changes P, P's own page.
absl::StatusOr<BufferId> Selection(Template& t, const proto::MoeSpec& m,
                                   const std::optional<OperandRef>& selection_bias, BufferId p,
                                   std::optional<BufferId> into) {
  const int64_t ne = m.ne();
  const int64_t e_t = t.TilesOf(ne);
  const ElemAccess out = IdentMap(t.PageWidth(e_t));
  if (selection_bias) {
    ASSIGN_OR_RETURN(TensorInit init, InitOf(selection_bias->fill, ne));
    const BufferId b = LoadRow(t, selection_bias->name, ne, std::move(init), "in_selection_bias");
    const BufferId sel = into.value_or(t.AddScratch("selection", e_t, Precision::kFp32));
    t.AddGeneric("selection", FlatSpace(ne), {p, b}, {At(0), At(0)}, out, Max(Add(Op(0), Op(1)), Const(kMoeMasked)),
                 sel);
    return sel;
  }
  if (m.score() == proto::MoeSpec::SIGMOID) {
    const BufferId sel = into.value_or(t.AddScratch("routed", e_t, Precision::kFp32));
    t.AddGeneric("routed", FlatSpace(ne), {p}, {At(0)}, out, Max(Op(0), Const(kMoeMasked)), sel);
    return sel;
  }
  if (!into) return p;
  t.AddGeneric("scores", FlatSpace(ne), {p}, {At(0)}, out, Op(0), *into);
  return *into;
}

}  // namespace

MoeRounds MoeRounds::Begin(Template& t, int64_t rounds) {
  if (rounds <= 1) return MoeRounds{Phase::kPrologue, {}};
  t.SetPhase(Phase::kBody);
  t.Fold(rounds);
  return MoeRounds{Phase::kEpilogue, {{LoopVar::kKBlock, 1}}};
}

MoeNames MoeNames::Of(const std::string& out) {
  auto name = [&](const char* what) { return absl::StrCat(out, "__moe_", what); };
  return MoeNames{name("logits"), name("probs"), name("choosing"), name("picks"), name("weights"), name("norm"),
                  name("hidden"), name("down"), name("dense"), name("spread")};
}

absl::StatusOr<Composition> MoeGroupsSection(const proto::MoeSpec& m, const MoeNames& names,
                                             const std::optional<OperandRef>& selection_bias, const Target& target) {
  const int64_t count = m.group_count();
  const int64_t kept = m.group_kept();
  if (count > target.tile_rows()) return NotLowered("a group limit over more groups than a page has rows");
  const int64_t ne = m.ne();
  const int64_t per = ne / count;
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, ne + 1));
  RETURN_IF_ERROR(RequireIndexArithmetic("a mixture-of-experts group limit", target));
  Template t(target.tile_rows(), target.tile_cols());
  const int64_t e_t = t.TilesOf(ne);
  const int64_t ew = t.PageWidth(e_t);
  const int64_t one_w = t.PageWidth(1);
  constexpr Precision dt = Precision::kFp32;
  const BufferId p = LoadRow(t, names.probs, ne, TensorInit::External(), "in_probs");
  ASSIGN_OR_RETURN(BufferId sel, Selection(t, m, selection_bias, p, std::nullopt));

  // ★ A GROUP'S VALUE IS ITS ROW. A fold over each group's `per` scores writes group g's value on row g of its page,
  // so every stage over the groups walks rows, the arg-max over them reads row c as its column c, and the groups
  // are at most a tile's rows.
  const ElemAccess rows = Map2(0, per, 1);
  const ElemAccess own = PerRowMap(one_w);
  auto each = [&](std::optional<IterKind> pool) { return HeadSpace(count, pool ? per : 1, pool); };
  // The groups' scores are the carried row the rounds choose from.
  const BufferId left = t.AddScratchDeep("group_left", 2, 1, dt);
  AddGroupScores(t, each, sel, rows, own, per, ix, left);
  // Which experts the kept groups hold: a carried 0/1 row.
  const BufferId inside = t.AddScratchDeep("inside", 2, e_t, dt);
  t.AddGeneric("init_inside", FlatSpace(ne), {}, {}, IdentMap(ew), Const(0.0), inside);

  // ── A round a block: the best group left, its −1e30 written back, its experts [g·per, g·per + per) marked.
  const MoeRounds rounds = MoeRounds::Begin(t, kept);
  const BufferId g = t.AddScratch("group", 1, ix);
  // Group c's score, read as column c of the arg-max: row c of the page.
  t.AddGeneric("group", HeadSpace(1, count, IterKind::kReduceArgMax), {left},
               {ElemAccess{0, {{LoopVar::kCol, one_w}}, std::nullopt}}, PerRowMap(one_w), Op(0), g);
  const BufferId g_end = t.AddScratch("group_end", 1, ix);
  t.AddGeneric("group_end", FlatSpace(1), {g}, {Fixed(0)}, IdentMap(one_w), Add(Op(0), Const(1.0)), g_end);
  t.AddGeneric("group_taken", each(std::nullopt), {left, g, g_end}, {own, Fixed(0), Fixed(0)}, own,
               Add(Op(0), InsidePick(LoopVar::kRow, 1, kMoeMasked)), left);
  const Body width = Const(static_cast<double>(per));
  const BufferId from = t.AddScratch("group_from", 1, ix);
  t.AddGeneric("group_from", FlatSpace(1), {g}, {Fixed(0)}, IdentMap(one_w), Mul(Op(0), width), from);
  const BufferId to = t.AddScratch("group_to", 1, ix);
  t.AddGeneric("group_to", FlatSpace(1), {from}, {Fixed(0)}, IdentMap(one_w), Add(Op(0), width), to);
  t.AddGeneric("group_inside", FlatSpace(ne), {inside, from, to}, {At(0), Fixed(0), Fixed(0)}, IdentMap(ew),
               Add(Op(0), InsidePick(LoopVar::kCol, 1, 1.0)), inside);

  // ── sel[c] + (1 − inside[c])·(−1e30): the chosen groups are disjoint, so an expert of one keeps its selection
  // score exactly (+ 0·(−1e30)), and every other falls to −1e30.
  t.SetPhase(rounds.after);
  const BufferId chosen = t.AddBufferDeep("chosen", 1, e_t, dt);
  t.AddGeneric("chosen", FlatSpace(ne), {sel, inside}, {At(0), At(0)}, IdentMap(ew),
               Add(Op(0), Mul(Sub(Const(1.0), Op(1)), Const(kMoeMasked))), chosen);
  const TensorId out = t.AddTensor(names.choosing, TensorRole::kOutput, 1, ne, dt, TensorInit::Zero());
  t.AddStore("store_choosing", out, {}, e_t, chosen);
  WireFirstReaders(t);
  return FinishSection(t, absl::StrCat("moe_groups_", ne, "x", kept), WholeRow(e_t), dt,
                       ApproxIn("mixture-of-experts group limit", dt), target);
}

absl::StatusOr<Composition> MoeRoutingSection(const proto::MoeSpec& m, const MoeNames& names,
                                              const std::optional<OperandRef>& selection_bias, const Target& target) {
  const int64_t ne = m.ne();
  const int64_t k = m.k();
  // An expert pick is in [0, ne); its end is one past.
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, ne + 1));
  RETURN_IF_ERROR(RequireIndexArithmetic("a mixture-of-experts pick", target));
  Template t(target.tile_rows(), target.tile_cols());
  constexpr Precision dt = Precision::kFp32;
  const int64_t e_t = t.TilesOf(ne);
  const int64_t ew = t.PageWidth(e_t);
  const int64_t one_w = t.PageWidth(1);
  const BufferId p = LoadRow(t, names.probs, ne, TensorInit::External(), "in_probs");
  // The row the rounds choose from, carried: each round writes its pick's −1e30 back.
  const BufferId left = t.AddScratchDeep("left", 2, e_t, dt);
  if (m.group_count() > 0) {
    const BufferId chosen = LoadRow(t, names.choosing, ne, TensorInit::External(), "in_choosing");
    t.AddGeneric("scores", FlatSpace(ne), {chosen}, {At(0)}, IdentMap(ew), Op(0), left);
  } else {
    RETURN_IF_ERROR(Selection(t, m, selection_bias, p, left).status());
  }
  const BufferId wsum = t.AddScratchDeep("weight_sum", 2, 1, dt);
  t.AddGeneric("init_weight_sum", FlatSpace(1), {}, {}, IdentMap(one_w), Const(0.0), wsum);

  // ── A round a block: the arg-max of what is left (first maximum on ties), its −1e30 written back, its weight.
  const MoeRounds rounds = MoeRounds::Begin(t, k);
  const BufferId pick = t.AddScratch("pick", 1, ix);
  t.AddGeneric("route", HeadSpace(1, ne, IterKind::kReduceArgMax), {left}, {Map2(0, 0, 1)}, PerRowMap(one_w), Op(0),
               pick);
  const BufferId end = t.AddScratch("pick_end", 1, ix);
  t.AddGeneric("pick_end", FlatSpace(1), {pick}, {Fixed(0)}, IdentMap(one_w), Add(Op(0), Const(1.0)), end);
  // An f32 sum absorbs the score: the picked column falls to −1e30, below every score not picked.
  t.AddGeneric("picked", FlatSpace(ne), {left, pick, end}, {At(0), Fixed(0), Fixed(0)}, IdentMap(ew),
               Add(Op(0), InsidePick(LoopVar::kCol, 1, kMoeMasked)), left);
  const BufferId weight = t.AddScratch("weight", 1, dt);
  const double scale = MoeRoundScale(m);
  t.AddGeneric("weight", FlatSpace(1), {p, pick}, {WithIndirect(ConstMap(), 1, 1, ne), Fixed(0)}, IdentMap(one_w),
               scale == 1.0 ? Op(0) : Mul(Op(0), Const(scale)), weight);
  t.AddGeneric("weight_sum", FlatSpace(1), {wsum, weight}, {Fixed(0), Fixed(0)}, IdentMap(one_w), Add(Op(0), Op(1)),
               wsum);
  // "A tile per pick, so each is element 0 of the page an expert's tile gather waits on."
  const TensorId picks = t.AddTensor(names.picks, TensorRole::kOutput, 1, k * t.tile_cols(), ix, TensorInit::Zero());
  const TensorId weights =
      t.AddTensor(names.weights, TensorRole::kOutput, 1, k * t.tile_cols(), dt, TensorInit::Zero());
  t.AddStore("store_pick", picks, rounds.tile, 1, pick);
  t.AddStore("store_weight", weights, rounds.tile, 1, weight);

  // ── The renormalization's factor, once: 1 / Σ w, the sum clamped at 2^-14 where it can fall below that.
  if (m.renormalize()) {
    t.SetPhase(rounds.after);
    const BufferId inv = t.AddBufferDeep("norm", 1, 1, dt);
    t.AddGeneric("norm", FlatSpace(1), {wsum}, {Fixed(0)}, IdentMap(one_w),
                 Unary(SfpuKind::Recip(), MoeSumCanClamp(m) ? Max(Op(0), Const(kMoeSumFloor)) : Op(0)), inv);
    t.AddStore("store_norm", t.AddTensor(names.norm, TensorRole::kOutput, 1, 1, dt, TensorInit::Zero()), {}, 1, inv);
  }
  WireFirstReaders(t);
  // The row's elementwise pages (the scores, the picked mask) stream through Dst: 512 experts are 16 fp32 tiles.
  return FinishSection(t, absl::StrCat("moe_routing_", ne, "x", k), WholeRow(k), dt,
                       ApproxIn("mixture-of-experts routing", dt), target, DstPolicy::kStreamed);
}

void AddGroupScores(Template& t, const std::function<std::vector<IterSpec>(std::optional<IterKind>)>& space,
                    BufferId sel, const ElemAccess& members, const ElemAccess& own, int64_t per, Precision ix,
                    BufferId left) {
  constexpr Precision dt = Precision::kFp32;
  const BufferId best = per == 1 ? left : t.AddScratch("group_best", 1, dt);
  t.AddGeneric("group_best", space(IterKind::kReduceMax), {sel}, {members}, own, Op(0), best);
  if (per == 1) return;
  const BufferId at_best = t.AddScratch("group_at_best", 1, ix);
  t.AddGeneric("group_at_best", space(IterKind::kReduceArgMax), {sel}, {members}, own, Op(0), at_best);
  const BufferId past_best = t.AddScratch("group_past_best", 1, ix);
  t.AddGeneric("group_past_best", space(std::nullopt), {at_best}, {own}, own, Add(Op(0), Const(1.0)), past_best);
  const BufferId second = t.AddScratch("group_second", 1, dt);
  t.AddGeneric("group_second", space(IterKind::kReduceMax), {sel, at_best, past_best}, {members, own, own}, own,
               Select(Pred::GeOperand(LoopVar::kCol, 1),
                      Select(Pred::LtOperand(LoopVar::kCol, 2), Const(kMoeMasked), Op(0)), Op(0)),
               second);
  t.AddGeneric("group_score", space(std::nullopt), {best, second}, {own, own}, own, Add(Op(0), Op(1)), left);
}

Body InsidePick(LoopVar var, int lo, double value) {
  return Select(Pred::GeOperand(var, lo), Select(Pred::LtOperand(var, lo + 1), Const(value), Const(0.0)), Const(0.0));
}

Body MoeSigmoid(Body x) {
  return Unary(SfpuKind::Recip(), Add(Const(1.0), Unary(SfpuKind::Exp(), Sub(Const(0.0), std::move(x)))));
}

Body MoeGated(const proto::MoeSpec& m, Body gate, Body up) {
  if (m.act() != proto::MoeSpec::CLAMPED_SWIGLU) return Mul(Unary(SfpuKind::Silu(), std::move(gate)), std::move(up));
  const double limit = m.clamp_limit();
  const double slope = m.clamp_slope();
  Body g = Min(std::move(gate), Const(limit));
  Body u = Max(Min(std::move(up), Const(limit)), Const(-limit));
  return Mul(Mul(Unary(SfpuKind::Silu(), Mul(Const(slope), std::move(g))), Const(1.0 / slope)),
             Add(std::move(u), Const(1.0)));
}

}  // namespace spatial
