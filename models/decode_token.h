// A decode step of a whole model, timed (issue #15): each plan (a layer, the head) lowered, certified and
// simulated timing-only, and the token's time as every kind of layer times its count plus the head. Shared by
// `spatial model` and the published-figure runner (bench/fidelity/llm_decode_fidelity.cc).
#ifndef MODELS_DECODE_TOKEN_H_
#define MODELS_DECODE_TOKEN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/layer.h"
#include "proto/report.pb.h"
#include "sim/simulate.h"

namespace spatial {

struct PlanRun {
  LoweredLayer lowered;
  proto::SimReport report;
};

// `plan` lowered for `target`, certified (a diagnostic is FailedPrecondition listing them) and simulated with
// `options` at position `position` (the run's pos). Timing only unless `inputs_of` is given: then it makes the run's
// inputs from the lowered program, and the run computes values (with the options' numerics and VM comparison).
// The report's total is checked to equal the sum of its sections (Internal otherwise).
absl::StatusOr<PlanRun> RunPlan(const LayerPlan& plan, const Target& target, int64_t position, SimOptions options,
                                const std::function<TensorMap(const Composition&)>& inputs_of = nullptr);

struct TokenPart {
  std::string name;  // "layer (dense MLP)", "layer (sliding attention, mixture of experts)", "head (final norm, ...)"
  int64_t count = 0;
  int64_t cycles = 0;  // one of them
};

struct TokenTime {
  std::vector<TokenPart> parts;
  double cycles = 0;    // the token: the parts' cycles times their counts
  double clock_hz = 0;  // the target's
  double ms() const { return cycles / clock_hz * 1e3; }
  double tokens_per_s() const { return clock_hz / cycles; }
};

// One token's decode through every layer of `config` and the head, at `phase` on `target`: each kind of layer
// (LayerKinds) simulated once. Batch 1; no embedding lookup, sampling or host time.
absl::StatusOr<TokenTime> DecodeTokenTime(const ModelConfig& config, const DecodePhase& phase, const Target& target);

// The time to the first token: a prefill of phase.tokens through every layer, then the head on the last token's row
// (the LM head reads one row: the logits of the tokens before it are not needed).
absl::StatusOr<TokenTime> PrefillTime(const ModelConfig& config, const PrefillPhase& phase, const Target& target);

}  // namespace spatial

#endif  // MODELS_DECODE_TOKEN_H_
