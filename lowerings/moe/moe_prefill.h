// A mixture of experts over a prefill's T tokens (MoeSpec.tokens > 1): the dense form.
//
// ★ AT A PREFILL EVERY EXPERT'S WEIGHTS MOVE ANYWAY. T tokens of k picks each choose T·k experts, and at T = 128,
// k = 8 of 128 experts the chance that an expert goes unchosen is (1 − 8/128)^128 ≈ e^-8: the whole table is read
// whatever the schedule. So every expert runs every token, its hidden rows weighed by the token's routing weight (0
// where the token did not choose it), as tt-metal's Mixtral does (models/demos/t3000/mixtral8x7b/tt/mixtral_moe.py:
// each device's expert over every token, times the token's weight, zero for the unchosen); the weights stream once,
// the matrix engine does ne / k times the chosen work. The routing itself is the decode's, a row a token: the same
// scores, the same rounds, the same ties.
//
// Sections (T_t token tiles; the widths whole tiles, the experts whole tiles of experts):
//  "moe_router_{T}x{d}x{ne}"      L = x·Wr (+ bias) at fp32, an item per (token tile, expert tile)  (moe_blocked.h)
//  "moe_groups_{T}x{ne}x{kept}"   under a group limit, an item per token tile: each row's groups, the kept rounds
//                                 (the fold), the chosen groups' selection scores, "{out}__moe_choosing" (T x ne);
//  "moe_route_{T}x{ne}x{k}"       an item per token tile: the scores (softmax or sigmoid) of its rows, the
//                                 selection, k rounds (the fold) each picking a row's arg-max, then the dense weights
//                                 w[t, e] = P[t, e]·[e chosen] renormalized and scaled, "{out}__moe_dense" (T x ne);
//  "moe_spread_{T}x{ne}"          an item per (token tile, expert tile): each expert's weight column as a tile of its
//                                 own, nj copies (one per hidden block of the up section), "{out}__moe_spread";
//  "moe_dense_up_{T}x{ne}_{d}x{dff}"   an item per (token tile, expert b, hidden block j of n_c tiles): x's tile row
//                                 against b's gate and up rows, K blocks of the fold, the biases, the gated
//                                 activation times the token's weight, packed into the hidden rows (T x ne·dff);
//  "moe_dense_down_{T}x{ne}_{d}x{dff}" an item per (token tile, output tile): a fold over the experts, each block
//                                 b's hidden tile row against b's down rows (and w·b's down bias), packed into out.
// The gate/up rows and down rows are the same for every token tile (multicast along ITEM_Y), x's and the hidden's
// tile rows the same for every item of a token tile (multicast along ITEM_X).
//
// Refusals (NotLowered): widths that are not whole tiles of a square tile, experts that are not whole tiles, more
// groups than a tile has columns, weighed inputs at a prefill (not yet), and the budgets of items and pages.
#ifndef LOWERINGS_MOE_MOE_PREFILL_H_
#define LOWERINGS_MOE_MOE_PREFILL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/moe/moe.h"
#include "lowerings/moe/moe_routing.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The routed experts of a prefill, the router's section first, into spec.out() (T x d at the datapath's
// precision). `layout` and `operands` are CheckMoe's and OperandsOf's.
absl::StatusOr<Composition> MoePrefill(const proto::OpSpec& spec, const MoeOperands& layout,
                                       const std::vector<OperandRef>& operands, const MoeNames& names,
                                       const Target& target);

// Qwen3-Next's gated shared expert over a prefill's T tokens: out = routed + sigmoid(x·w)·shared, a weight a token.
// "moe_shared_gate_{T}x{d}" (an item per token tile: each row's dot product at fp32, its sigmoid, into `weight`,
// T x TC, column 0 a row's) then "moe_shared_gated_add_{T}x{d}" (an item per tile of the result).
absl::StatusOr<Composition> MoePrefillSharedGate(const OperandRef& x, const OperandRef& w, const std::string& routed,
                                                 const std::string& shared, const std::string& weight,
                                                 const std::string& out, int64_t tokens, int64_t d,
                                                 const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_MOE_MOE_PREFILL_H_
