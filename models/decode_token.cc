#include "models/decode_token.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "lowerings/moe/moe.h"
#include "spatial/maps.h"  // CeilDiv
#include "spatial/precision.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<PlanRun> RunPlan(const LayerPlan& plan, const Target& target, int64_t position, SimOptions options,
                                const std::function<TensorMap(const Composition&)>& inputs_of) {
  ASSIGN_OR_RETURN(LoweredLayer lowered, LowerLayer(plan, target));
  CertifyResult cert = Certify(lowered.program, target);
  if (!cert.ok()) {
    std::string diags;
    for (const proto::Diagnostic& d : cert.diagnostics) absl::StrAppend(&diags, FormatDiagnostic(d, plan.name), "\n");
    return absl::FailedPreconditionError(absl::StrCat(diags, plan.name, " did not certify on ", target.name()));
  }
  options.timing_only = !inputs_of;
  TensorMap inputs;
  if (inputs_of) {
    inputs = inputs_of(lowered.program);
  } else {
    inputs["pos"] = TensorData{1, 1, Precision::kInt32, {static_cast<double>(position)}};
  }
  ASSIGN_OR_RETURN(SimResult r, Simulate(lowered.program, target, inputs, options));
  // ★ A PLAN'S TOTAL IS THE SUM OF ITS SECTIONS: sections run one after another, each starting when the one before
  // has finished everywhere (the barrier), so any gap or overlap is a defect of the report.
  int64_t sum = 0;
  for (const auto& s : r.report.sections()) sum += s.cycles();
  if (sum != r.report.total_cycles()) {
    return absl::InternalError(absl::StrCat("internal: ", plan.name, "'s sections' cycles sum to ", sum,
                                            " but it took ", r.report.total_cycles()));
  }
  PlanRun run{std::move(lowered), std::move(r.report)};
  // ★ WHAT THE MODEL KEEPS IN DRAM: each weight and state tensor once, in the tiles its first declaration gives it.
  const Composition& c = run.lowered.program;
  auto bytes_of = [&](const std::vector<std::string>& names) {
    int64_t total = 0;
    for (const std::string& name : names) {
      for (const Section& s : c.sections) {
        const int i = s.FindTensor(name);
        if (i < 0) continue;
        const Tensor& t = s.tensors[i];
        const int64_t tiles = CeilDiv(t.rows, c.tile_rows) * CeilDiv(t.cols, c.tile_cols);
        total += tiles * TileBytes(t.precision, c.tile_rows * c.tile_cols);
        break;
      }
    }
    return total;
  };
  run.weight_bytes = bytes_of(plan.weights);
  run.state_bytes = bytes_of(plan.state);
  return run;
}

std::vector<SimOptions::Choice> PlanChoices(const LayerPlan& plan) {
  std::vector<SimOptions::Choice> choices;
  for (const LayerOp& op : plan.ops) {
    if (std::optional<MoeChoice> c = MoeChoiceOf(op.spec)) choices.push_back({c->dense, c->logits});
  }
  return choices;
}

namespace {

// Every kind of layer's plan (made by `plan_of` for the kind's first layer) run once at `position` and counted as
// often as the model has it, then the head.
absl::StatusOr<TokenTime> ModelTime(const ModelConfig& config, int64_t position, const WeightFormats& weights,
                                    const std::function<absl::StatusOr<LayerPlan>(int64_t layer)>& plan_of,
                                    const Target& target) {
  TokenTime t;
  auto add = [&](const std::string& name, int64_t count, const LayerPlan& plan) -> absl::Status {
    ASSIGN_OR_RETURN(PlanRun run, RunPlan(plan, target, position, SimOptions{}));
    t.parts.push_back({name, count, run.report.total_cycles()});
    t.cycles += static_cast<double>(count) * static_cast<double>(run.report.total_cycles());
    t.weight_bytes += static_cast<double>(count) * static_cast<double>(run.weight_bytes);
    t.state_bytes += static_cast<double>(count) * static_cast<double>(run.state_bytes);
    if (run.report.clock_hz() > 0) t.clock_hz = run.report.clock_hz();
    return absl::OkStatus();
  };
  for (const LayerKind& k : LayerKinds(config)) {
    ASSIGN_OR_RETURN(LayerPlan plan, plan_of(k.first));
    RETURN_IF_ERROR(add(absl::StrCat("layer (", LayerKindName(k), ")"), k.count, plan));
  }
  RETURN_IF_ERROR(add("head (final norm, LM head)", 1, HeadPlan(config, weights)));
  if (t.clock_hz <= 0) return absl::InternalError("the simulation reported no clock");
  t.capacity_bytes = static_cast<double>(target.proto().dram().capacity_bytes());
  return t;
}

}  // namespace

absl::StatusOr<TokenTime> DecodeTokenTime(const ModelConfig& config, const DecodePhase& phase, const Target& target) {
  return ModelTime(
      config, phase.position, phase.weights,
      [&](int64_t layer) { return DecodeLayerPlan(config, layer, phase, target); }, target);
}

absl::StatusOr<TokenTime> PrefillTime(const ModelConfig& config, const PrefillPhase& phase, const Target& target) {
  return ModelTime(
      config, 1, phase.weights, [&](int64_t layer) { return PrefillLayerPlan(config, layer, phase, target); },
      target);
}

}  // namespace spatial
