#include "lowerings/moe/moe.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/elementwise/binary.h"
#include "lowerings/elementwise/elementwise.h"
#include "lowerings/elementwise/map_forms.h"
#include "lowerings/matmul/matmul.h"
#include "lowerings/moe/moe_blocked.h"
#include "lowerings/moe/moe_experts.h"
#include "lowerings/moe/moe_prefill.h"
#include "lowerings/moe/moe_routing.h"
#include "lowerings/rows/softmax.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/row_blocks.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// L[e] = Σ_t x[t]·Wr[t·ne + e] (+ B[e]) at fp32: "moe_router_{d}x{ne}". X and Wr are read as the datapath stores
// them — X is one tensor, so one datatype, in every section of the block.
absl::StatusOr<Composition> Router(const proto::OpSpec& spec, const MoeOperands& layout,
                                   const std::vector<OperandRef>& ops, const std::string& logits,
                                   const Target& target) {
  const proto::MoeSpec& m = spec.moe();
  const int64_t d = m.d(), ne = m.ne();
  ASSIGN_OR_RETURN(FlatBuild f, FlatBuild::On(Datapath::kFloat, target));
  Template& t = f.t();
  ASSIGN_OR_RETURN(BufferId x, f.Input(ops[0].name, d, ops[0].fill));
  ASSIGN_OR_RETURN(BufferId wr, f.Input(ops[1].name, d * ne, ops[1].fill));
  const int64_t e_t = TilesOf(ne, target);
  const BufferId out_buf = t.AddBuffer("logits", e_t, Precision::kFp32);
  // A router bias adds after the product: the product lands in its own page first.
  const BufferId product = layout.router_bias >= 0 ? t.AddScratch("router_product", e_t, Precision::kFp32) : out_buf;
  std::vector<StageId> chain{
      f.Compute("router", {{LoopVar::kRow, d, IterKind::kReduceSum}, {LoopVar::kCol, ne}},
                {Slot{x, ElemAccess{0, {{LoopVar::kRow, 1}}, std::nullopt}}, Slot{wr, Map2(0, ne, 1)}}, PerColMap(),
                Mul(Op(0), Op(1)), product)};
  if (layout.router_bias >= 0) {
    const OperandRef& b = ops[layout.router_bias];
    ASSIGN_OR_RETURN(BufferId bias, f.InputPaged(b.name, ne, b.fill, Precision::kFp32, 2));
    chain.push_back(f.Compute("router_bias", FlatSpace(ne), {Slot{product, At(0)}, Slot{bias, At(0)}},
                              IdentMap(t.PageWidth(e_t)), Add(Op(0), Op(1)), out_buf));
  }
  return FinishFlatAs(f, logits, ne, chain, out_buf, absl::StrCat("moe_router_", d, "x", ne),
                      ApproxIn("moe router", Precision::kFp32), Precision::kFp32, target);
}

// P[e] = sigmoid(L[e]) at fp32: "moe_sigmoid_{ne}".
absl::StatusOr<Composition> Sigmoid(const std::string& logits, const std::string& probs, int64_t ne,
                                    const Target& target) {
  FlatBuild f = FlatBuild::At(Precision::kFp32, target);
  ASSIGN_OR_RETURN(BufferId l, f.Input(logits, ne, proto::Fill()));
  const int64_t e_t = TilesOf(ne, target);
  const BufferId out = f.t().AddBuffer("probs", e_t, Precision::kFp32);
  const StageId s = f.Compute(
      "sigmoid", FlatSpace(ne), {Slot{l, At(0)}}, IdentMap(f.t().PageWidth(e_t)),
      MoeSigmoid(Op(0)), out);
  return f.Finish(probs, ne, {s}, out, absl::StrCat("moe_sigmoid_", ne), ApproxIn("moe router sigmoid",
                                                                                  Precision::kFp32));
}

// ★ QWEN3-NEXT'S SHARED EXPERT IS GATED PER TOKEN: s = sigmoid(x . w), one scalar at fp32 (the router's width: it
// is a score), "moe_shared_gate_{d}".
absl::StatusOr<Composition> SharedGate(const proto::Operand& x_op, const proto::Operand& w_op,
                                       const std::string& weight, int64_t d, const Target& target) {
  ASSIGN_OR_RETURN(FlatBuild f, FlatBuild::On(Datapath::kFloat, target));
  ASSIGN_OR_RETURN(BufferId x, f.Input(x_op.name(), d, x_op.fill()));
  ASSIGN_OR_RETURN(BufferId w, f.Input(w_op.name(), d, w_op.fill()));
  const BufferId logit = f.t().AddScratch("shared_gate_logit", 1, Precision::kFp32);
  const BufferId out = f.t().AddBuffer("shared_weight", 1, Precision::kFp32);
  const ElemAccess down{0, {{LoopVar::kRow, 1}}, std::nullopt};
  std::vector<StageId> chain{
      f.Compute("shared_gate_logit", {{LoopVar::kRow, d, IterKind::kReduceSum}, {LoopVar::kCol, 1}},
                {Slot{x, down}, Slot{w, down}}, PerColMap(), Mul(Op(0), Op(1)), logit),
      f.Compute("shared_gate_sigmoid", FlatSpace(1), {Slot{logit, At(0)}}, IdentMap(f.t().PageWidth(1)),
                MoeSigmoid(Op(0)), out)};
  // The weight leaves at the datapath's precision, as the add that reads it takes its operands.
  ASSIGN_OR_RETURN(const Precision p, DatapathPrecision(Datapath::kFloat, target));
  return FinishFlatAs(f, weight, 1, chain, out, absl::StrCat("moe_shared_gate_", d),
                      ApproxIn("moe shared expert gate", Precision::kFp32), p, target);
}

// out = routed + s * shared, the gate's scalar read by every element: "moe_shared_gated_add_{d}", the binary
// add's forms (a row wider than a site streams a tile an item).
absl::StatusOr<Composition> SharedGatedAdd(const std::string& routed, const std::string& shared,
                                           const std::string& weight, const std::string& out, int64_t d,
                                           const Target& target) {
  ASSIGN_OR_RETURN(const Precision p, DatapathPrecision(Datapath::kFloat, target));
  const Body body = Add(Op(0), Mul(Op(1), Op(2)));
  return PointwiseMap("moe_shared_gated_add", "shared_gated_add", p, MapAccFor(p, p, target), body,
                      {MapOperand{.ref = {routed, proto::Fill()}, .in = p, .label = "routed"},
                       MapOperand{.ref = {shared, proto::Fill()}, .in = p, .label = "shared"},
                       MapOperand{.ref = {weight, proto::Fill()}, .in = p, .label = "weight", .scalar = true}},
                      out, 1, d, target);
}

}  // namespace

absl::StatusOr<MoeOperands> CheckMoe(const proto::OpSpec& spec) {
  const proto::MoeSpec& m = spec.moe();
  RETURN_IF_ERROR(NonNegative("moe", "d", m.d()));
  RETURN_IF_ERROR(NonNegative("moe", "dff", m.dff()));
  RETURN_IF_ERROR(NonNegative("moe", "ne", m.ne()));
  RETURN_IF_ERROR(NonNegative("moe", "k", m.k()));
  RETURN_IF_ERROR(NonNegative("moe", "group_count", m.group_count()));
  RETURN_IF_ERROR(NonNegative("moe", "group_kept", m.group_kept()));
  RETURN_IF_ERROR(NonNegative("moe", "shared_dff", m.shared_dff()));
  RETURN_IF_ERROR(NonNegative("moe", "tokens", m.tokens()));
  if (m.score() != proto::MoeSpec::SOFTMAX && m.score() != proto::MoeSpec::SIGMOID) {
    return Invalid(absl::StrCat("moe.score is ", m.score() == 0 ? "unset" : "not a score", " (",
                                static_cast<int>(m.score()), "): SOFTMAX or SIGMOID"));
  }
  if (m.act() != proto::MoeSpec::SWIGLU && m.act() != proto::MoeSpec::CLAMPED_SWIGLU) {
    return Invalid(absl::StrCat("moe.act is ", m.act() == 0 ? "unset" : "not an activation", " (",
                                static_cast<int>(m.act()), "): SWIGLU or CLAMPED_SWIGLU"));
  }
  if (m.act() == proto::MoeSpec::CLAMPED_SWIGLU) {
    for (const auto& [field, v] : {std::pair{"clamp_limit", m.clamp_limit()}, {"clamp_slope", m.clamp_slope()}}) {
      if (!(std::isfinite(v) && v > 0.0)) {
        return Invalid(absl::StrCat("moe.", field, " is ", v, ": a clamped SwiGLU needs a positive finite one"));
      }
    }
  } else if (m.clamp_limit() != 0.0 || m.clamp_slope() != 0.0) {
    return Invalid("moe.clamp_limit and clamp_slope are set, but moe.act is SWIGLU: they belong to CLAMPED_SWIGLU");
  }
  if (!std::isfinite(m.scale()) || m.scale() < 0.0) {
    return Invalid(absl::StrCat("moe.scale is ", m.scale(), ": the routed scale is finite and positive (0: none)"));
  }
  if (m.d() == 0 || m.dff() == 0 || m.ne() == 0 || m.k() == 0 || m.k() > m.ne()) {
    return NotLowered("a mixture-of-experts block with no width, no experts, or more chosen experts than there are");
  }
  if (m.weigh_inputs() && m.renormalize()) {
    return NotLowered(
        "a mixture whose renormalized weights scale its experts' inputs — each round is weighed as it is picked");
  }
  if (m.shared_dff() > 0 && m.act() == proto::MoeSpec::CLAMPED_SWIGLU) {
    return NotLowered("a shared expert beside a clamped SwiGLU — the shared experts are a plain SwiGLU");
  }
  if (m.group_count() == 0 && m.group_kept() != 0) {
    return Invalid(absl::StrCat("moe.group_kept is ", m.group_kept(), " without a group_count"));
  }
  if (m.group_count() > 0) {
    if (m.ne() % m.group_count() != 0) {
      return Invalid(absl::StrCat("moe.group_count ", m.group_count(), " does not divide moe.ne ", m.ne()));
    }
    if (m.group_kept() < 1 || m.group_kept() > m.group_count()) {
      return Invalid(absl::StrCat("moe.group_kept is ", m.group_kept(), ": a group limit keeps 1 to group_count (",
                                  m.group_count(), ") groups"));
    }
  }
  MoeOperands layout;
  int next = 5;
  auto take = [&](bool present, int& at) {
    if (present) at = next++;
  };
  take(m.router_bias(), layout.router_bias);
  take(m.gate_bias(), layout.gate_bias);
  take(m.up_bias(), layout.up_bias);
  take(m.down_bias(), layout.down_bias);
  take(m.selection_bias(), layout.selection_bias);
  take(m.shared_dff() > 0, layout.shared_gate);
  if (layout.shared_gate >= 0) next += 2;
  if (m.shared_gate() && m.shared_dff() == 0) return Invalid("moe.shared_gate is set without a shared_dff");
  take(m.shared_gate(), layout.shared_weight);
  layout.count = next;
  return layout;
}

bool MoeSumCanClamp(const proto::MoeSpec& m) {
  // A softmax's top k sum to at least k / ne, so the floor binds only where ne > k·2^14.
  return m.score() == proto::MoeSpec::SIGMOID || m.ne() / m.k() > 16384;
}

double MoeRoundScale(const proto::MoeSpec& m) {
  return m.scale() != 0.0 && !m.renormalize() ? m.scale() : 1.0;
}

// The routed experts alone, into spec.out().
absl::StatusOr<Composition> RoutedMoe(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(MoeOperands layout, CheckMoe(spec));
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "moe", layout.count));
  const proto::MoeSpec& m = spec.moe();
  RETURN_IF_ERROR(RequireFp32Accumulator("a mixture-of-experts router", target));
  const MoeNames names = MoeNames::Of(spec.out());
  std::optional<OperandRef> selection;
  if (layout.selection_bias >= 0) selection = ops[layout.selection_bias];
  // ★ THE ROUTER DECIDES THE EXPERTS, SO ITS LOGITS AND SCORES STAY AT THE ACCUMULATOR'S WIDTH: two experts whose
  // scores differ by less than the datapath's rounding would otherwise be picked as the datapath rounds them, not
  // as the model scores them.
  // ★ ONLY THE CHOSEN EXPERTS' WEIGHTS MOVE, AND THEY MOVE BY TILE: widths in whole tiles take the blocked form.
  if (m.tokens() > 1) {
    ASSIGN_OR_RETURN(Composition c, MoePrefill(spec, layout, ops, names, target));
    c.name = absl::StrCat("moe_", m.tokens(), "x", m.ne(), "x", m.k(), "_", m.d(), "x", m.dff());
    return FitsSites(std::move(c), "mixture of experts", target);
  }
  const bool blocked = MoeBlocks(m, target);
  ASSIGN_OR_RETURN(Composition c, blocked ? MoeBlockedRouter(spec, layout, ops, names, target)
                                          : Router(spec, layout, ops, names.logits, target));
  c.name = absl::StrCat("moe_", m.ne(), "x", m.k(), "_", m.d(), "x", m.dff());
  std::vector<absl::StatusOr<Composition>> parts;
  // The scores' exponentials stream through Dst (DstPolicy::kStreamed): Qwen3-Next's 512 experts are 16 fp32 tiles
  // a row, twice what Dst holds, and tt-metal's softmax takes such a row a Dst block at a time.
  parts.push_back(m.score() == proto::MoeSpec::SOFTMAX
                      ? FlatSoftmaxRowsAt(OperandRef{names.logits, proto::Fill()}, names.probs, 1, m.ne(),
                                          absl::StrCat("moe_softmax_", m.ne()), Precision::kFp32, std::nullopt,
                                          target, DstPolicy::kStreamed)
                      : Sigmoid(names.logits, names.probs, m.ne(), target));
  if (m.group_count() > 0) parts.push_back(MoeGroupsSection(m, names, selection, target));
  parts.push_back(MoeRoutingSection(m, names, selection, target));
  parts.push_back(blocked ? MoeBlockedExperts(spec, layout, ops, names, target)
                          : MoeExpertsSection(spec, layout, ops, names, target));
  for (absl::StatusOr<Composition>& part : parts) {
    RETURN_IF_ERROR(part.status());
    for (Section& s : part->sections) c.sections.push_back(std::move(s));
  }
  return FitsSites(std::move(c), "mixture of experts", target);
}

std::optional<MoeChoice> MoeChoiceOf(const proto::OpSpec& spec) {
  if (spec.kind_case() != proto::OpSpec::kMoe) return std::nullopt;
  const proto::MoeSpec& m = spec.moe();
  if (m.tokens() <= 1 || m.selection_bias() || m.group_count() > 0) return std::nullopt;
  const std::string routed = m.shared_dff() > 0 ? absl::StrCat(spec.out(), "__moe_routed") : spec.out();
  const MoeNames names = MoeNames::Of(routed);
  return MoeChoice{names.dense, names.logits};
}

// ★ A SHARED EXPERT IS A DENSE FFN BESIDE THE ROUTED ONES: every token runs it and adds it unweighted, so it is
// the kinds it is made of, each lowered, certified and checked on its own: gate and up matmuls, the SiLU, the
// product, the down matmul, and the add of the routed sum.
absl::StatusOr<Composition> FromMoe(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(MoeOperands layout, CheckMoe(spec));
  const proto::MoeSpec& m = spec.moe();
  if (layout.shared_gate < 0) return RoutedMoe(spec, target);
  const int64_t rows = std::max<int64_t>(m.tokens(), 1);
  RETURN_IF_ERROR(OperandsOf(spec, "moe", layout.count).status());
  const std::string& out = spec.out();
  auto internal = [&](const char* part) { return absl::StrCat(out, "__moe_", part); };
  proto::OpSpec routed = spec;
  routed.set_out(internal("routed"));
  for (int i = 0; i < (m.shared_gate() ? 4 : 3); ++i) routed.mutable_operands()->RemoveLast();
  routed.mutable_moe()->set_shared_dff(0);
  routed.mutable_moe()->set_shared_gate(false);
  ASSIGN_OR_RETURN(Composition c, RoutedMoe(routed, target));
  c.name = absl::StrCat(c.name, "_shared", m.shared_dff());

  auto op = [&](const std::string& result, std::vector<proto::Operand> operands) {
    proto::OpSpec o;
    o.set_out(result);
    for (proto::Operand& operand : operands) *o.add_operands() = std::move(operand);
    return o;
  };
  // A prefill's pointwise ops are rows x n (OpSpec.shape_rows): a row a token.
  auto shaped = [rows](proto::OpSpec& o, int64_t n) {
    if (rows == 1) return;
    o.set_shape_rows(rows);
    o.set_shape_cols(n);
  };
  auto named = [](const std::string& name) {
    proto::Operand o;
    o.set_name(name);
    return o;
  };
  const proto::Operand& x = spec.operands(0);
  auto matmul = [&](const std::string& result, proto::Operand a, const proto::Operand& b, int64_t k, int64_t n) {
    proto::OpSpec o = op(result, {std::move(a), b});
    o.mutable_matmul()->set_m(rows);
    o.mutable_matmul()->set_k(k);
    o.mutable_matmul()->set_n(n);
    return FromMatmul(o, target);
  };
  auto binary = [&](const std::string& result, proto::BinarySpec::Op kind, const std::string& a,
                    const std::string& b, int64_t n) {
    proto::OpSpec o = op(result, {});
    o.mutable_binary()->set_op(kind);
    o.mutable_binary()->set_n(rows * n);
    shaped(o, n);
    return BinaryOf(o, {OperandRef{a, proto::Fill()}, OperandRef{b, proto::Fill()}}, target);
  };
  const int64_t d = m.d(), sdff = m.shared_dff();
  proto::OpSpec silu = op(internal("shared_act"), {named(internal("shared_gate"))});
  silu.mutable_silu()->set_n(rows * sdff);
  shaped(silu, sdff);
  std::vector<absl::StatusOr<Composition>> parts;
  parts.push_back(matmul(internal("shared_gate"), x, spec.operands(layout.shared_gate), d, sdff));
  parts.push_back(matmul(internal("shared_up"), x, spec.operands(layout.shared_gate + 1), d, sdff));
  parts.push_back(FromSilu(silu, target));
  parts.push_back(binary(internal("shared_hidden"), proto::BinarySpec::MUL, internal("shared_act"),
                         internal("shared_up"), sdff));
  parts.push_back(
      matmul(internal("shared"), named(internal("shared_hidden")), spec.operands(layout.shared_gate + 2), sdff, d));
  if (m.shared_gate() && rows > 1) {
    parts.push_back(MoePrefillSharedGate(OperandRef{x.name(), x.fill()},
                                         OperandRef{spec.operands(layout.shared_weight).name(),
                                                    spec.operands(layout.shared_weight).fill()},
                                         internal("routed"), internal("shared"), internal("shared_weight"), out, rows,
                                         d, target));
  } else if (m.shared_gate()) {
    parts.push_back(SharedGate(x, spec.operands(layout.shared_weight), internal("shared_weight"), d, target));
    parts.push_back(SharedGatedAdd(internal("routed"), internal("shared"), internal("shared_weight"), out, d, target));
  } else {
    parts.push_back(binary(out, proto::BinarySpec::ADD, internal("routed"), internal("shared"), d));
  }
  for (absl::StatusOr<Composition>& part : parts) {
    RETURN_IF_ERROR(part.status());
    for (Section& sec : part->sections) c.sections.push_back(std::move(sec));
  }
  return FitsSites(std::move(c), "mixture of experts", target);
}

}  // namespace spatial
