// Mixture of experts (seed 002's from_moe, guide seed002-D §2.1-2.4): route x to its top k of ne experts and combine
// their gated FFNs by the router's weights,
//
//   L = x·Wr (+ router bias)           the router logits, 1 x ne
//   P = softmax(L) | sigmoid(L)        the scores
//   S = max(P (+ selection bias), −1e30), then the group limit      what the rounds choose by (a NaN never wins)
//   b_1..b_k                           k arg-max rounds over S, each masking the earlier picks (first max on ties)
//   w_r = P[b_r] (· scale when nothing renormalizes)
//   y_r = down_b(act(gate_b·x_r (+bg), up_b·x_r (+bu))) (+bd),  x_r = w_r·x when weigh_inputs, else x
//   out = Σ_r w_r·y_r (or Σ_r y_r when the inputs took the weights)  [/ max(Σ_r w_r, 2^-14) · scale when renormalize]
//
// ★ ONLY THE CHOSEN EXPERTS' RUNS MOVE — THAT IS WHAT THE GATHER IS FOR. A chip that computed every expert and
// weighed the unchosen ones by zero would stream all ne experts' weights to use k of them.
#ifndef LOWERINGS_MOE_MOE_H_
#define LOWERINGS_MOE_MOE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The score a masked expert (an earlier pick, a group not kept, a NaN) takes: below every real score, and absorbed
// by nothing a score adds to it.
inline constexpr double kMoeMasked = -1e30;
// llama.cpp's clamp on a renormalizing sum (build_moe_ffn): 2^-14.
inline constexpr double kMoeSumFloor = 6.103515625e-5;

// The operand layout (seed MoeOperands::of): [x, Wr, Wg, Wu, Wd], then each present optional operand in the order
// router bias, gate bias, up bias, down bias, selection bias, then the shared experts' gate, up and down tables
// (d x shared_dff, d x shared_dff, shared_dff x d), then with shared_gate its gate vector (d). A position is -1
// when the operand is absent.
//  x 1 x d; Wr d x ne (Wr[t·ne + e]); Wg, Wu (ne·dff) x d (expert b's row o at (b·dff + o)·d); Wd (ne·d) x dff;
//  router and selection biases ne; gate and up biases ne·dff (expert b's at b·dff); down bias ne·d.
struct MoeOperands {
  int router_bias = -1;
  int gate_bias = -1;
  int up_bias = -1;
  int down_bias = -1;
  int selection_bias = -1;
  int shared_gate = -1;  // then shared_gate + 1 (up) and + 2 (down)
  int shared_weight = -1;  // the shared expert's gate vector w (d), after the shared down table
  int count = 5;
};

// The spec checked, shared by the lowering and the reference so both refuse alike: a negative size, an unset or
// unknown score or act, a clamp on a plain SwiGLU or a clamped one without a positive finite limit and slope, a
// group limit that does not divide the experts or keeps none or more than there are, a scale that is negative or
// not finite, and a wrong operand count are InvalidArgument naming the field; the seed's two refusals are NotLowered
// word for word ("a mixture-of-experts block with no width, no experts, or more chosen experts than there are"; "a
// mixture whose renormalized weights scale its experts' inputs — each round is weighed as it is picked"), and
// "a shared expert beside a clamped SwiGLU — the shared experts are a plain SwiGLU".
absl::StatusOr<MoeOperands> CheckMoe(const proto::OpSpec& spec);

// Whether a renormalizing sum can fall below kMoeSumFloor, so the clamp is written (seed MoeSpec::sum_can_clamp):
// a sigmoid's k scores can be as small as they like; a softmax's top k sum to at least k / ne.
bool MoeSumCanClamp(const proto::MoeSpec& m);

// The weight a round reads from P[pick]: times the routed scale when nothing renormalizes after.
double MoeRoundScale(const proto::MoeSpec& m);

// OpSpec.moe. The flat form, four sections (five under a group limit), every one a single whole-row item:
//  "moe_router_{d}x{ne}"       L at fp32 — ★ THE ROUTER DECIDES THE EXPERTS, SO ITS LOGITS AND SCORES STAY AT THE
//                              ACCUMULATOR'S WIDTH;
//  "moe_softmax_{ne}" or "moe_sigmoid_{ne}"   P at fp32;
//  "moe_groups_{ne}x{kept}"    the group limit's selection row (moe_routing.h);
//  "moe_routing_{ne}x{k}"      the k picks and weights, a round a block of the fold (moe_routing.h);
//  "moe_{ne}x{k}_{d}x{dff}"    the experts, a round a block, each gathering its chosen expert's runs (moe_experts.h);
// or, where d and dff are whole tiles (moe_blocked.h), the router as a matmul ("moe_router_{d}x{ne}", an item per
// tile of experts) and the experts by tile: "moe_up_...", "moe_down_..." and "moe_combine_{k}x{d}".
// With shared experts the routed sum is "{out}__moe_routed", and the shared SwiGLU follows as the kinds it is made
// of: two matmuls, a SiLU, a product, the down matmul, and the add into the result. With shared_gate the add is
// "moe_shared_gated_add_{d}" (routed + sigmoid(x . w) * shared), after "moe_shared_gate_{d}" (the sigmoid computed
// at fp32, "{out}__moe_shared_weight" at the datapath's precision).
// Internal tensors "{out}__moe_*" (MoeNames). Refusals: CheckMoe's; "a group limit over more groups than a page
// has rows"; the target's missing datapaths; a section that does not fit a site.
absl::StatusOr<Composition> FromMoe(const proto::OpSpec& spec, const Target& target);

// A prefill's routing as a choice the simulator's comparison can follow (SimOptions.choices): the dense weights
// ("{routed}__moe_dense", T x ne, 0 where not chosen) and the logits whose order chooses them
// ("{routed}__moe_logits": the softmax and the sigmoid keep it), {routed} the op's result, or "{out}__moe_routed"
// beside a shared expert. nullopt for a decode step (its picks are a table, not a row of weights) and where the
// choice is not the logits' order (a selection bias, a group limit).
struct MoeChoice {
  std::string dense;
  std::string logits;
};
std::optional<MoeChoice> MoeChoiceOf(const proto::OpSpec& spec);

}  // namespace spatial

#endif  // LOWERINGS_MOE_MOE_H_
