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
  // What the plan keeps in DRAM: its weights and its carried state (the caches), as the program declares them
  // (whole tiles at their precision: bfp8_b 1088 B a tile, bf16 2048).
  int64_t weight_bytes = 0;
  int64_t state_bytes = 0;
};

// `plan` lowered for `target`, certified (a diagnostic is FailedPrecondition listing them) and simulated with
// `options` at position `position` (the run's pos). Timing only unless `inputs_of` is given: then it makes the run's
// inputs from the lowered program, and the run computes values (with the options' numerics and VM comparison).
// The report's total is checked to equal the sum of its sections (Internal otherwise).
absl::StatusOr<PlanRun> RunPlan(const LayerPlan& plan, const Target& target, int64_t position, SimOptions options,
                                const std::function<TensorMap(const Composition&)>& inputs_of = nullptr);

// The discrete choices of `plan` the simulator's VM comparison follows (SimOptions.choices): each prefill mixture's
// routing whose choice is its logits' order (MoeChoiceOf). With them, --values checks each mixture's routing as a
// choice (a near tie may go either way) and everything after it given the machine's choice.
std::vector<SimOptions::Choice> PlanChoices(const LayerPlan& plan);

struct TokenPart {
  std::string name;  // "layer (dense MLP)", "layer (sliding attention, mixture of experts)", "head (final norm, ...)"
  int64_t count = 0;
  int64_t cycles = 0;  // one of them
};

struct TokenTime {
  std::vector<TokenPart> parts;
  double cycles = 0;    // the token: the parts' cycles times their counts
  double clock_hz = 0;  // the target's
  // The whole model's weights and caches in DRAM (each part's times its count), and the card's capacity (0: the
  // target does not give it).
  double weight_bytes = 0, state_bytes = 0, capacity_bytes = 0;
  bool fits() const { return capacity_bytes <= 0 || weight_bytes + state_bytes <= capacity_bytes; }
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
