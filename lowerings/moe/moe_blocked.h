// A mixture of experts at real width (seed 002's blocked_moe, guide seed002-D §2.6-2.11): "★ ONLY THE CHOSEN
// EXPERTS' WEIGHTS MOVE, AND THEY MOVE BY TILE". Every product is the matrix engine's: a row of x (one tile high,
// row 0 live, as tt-metal pads a decode's M to a tile) against tile rows of the chosen expert's weights gathered by
// its pick, K in blocks of the fold. The partials stay at the accumulator's width; the hidden activation is packed
// to the datapath's precision, as the down projection's matrix operand must be, and so is the block's output.
#ifndef LOWERINGS_MOE_MOE_BLOCKED_H_
#define LOWERINGS_MOE_MOE_BLOCKED_H_

#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/moe/moe.h"
#include "lowerings/moe/moe_routing.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Whether the block takes the blocked form: d and dff whole tiles on a square tile (the seed's moe_blocks).
bool MoeBlocks(const proto::MoeSpec& m, const Target& target);

// "moe_router_{d}x{ne}": the router as the matmul it is, one item per tile of experts, L (+ bias) at fp32, at HiFi4
// (the router decides the experts: a truncated operand would pick as the truncation scores them).
absl::StatusOr<Composition> MoeBlockedRouter(const proto::OpSpec& spec, const MoeOperands& layout,
                                             const std::vector<OperandRef>& operands, const MoeNames& names,
                                             const Target& target);

// The experts: "moe_up_{ne}x{k}_{d}x{dff}" (an item per round and tile of the expert width: the gate and up tiles
// over K blocks of x, their biases, weighed inputs and the gated activation, into the fp32 hidden row),
// "moe_down_{ne}x{k}_{d}x{dff}" (an item per round and tile of d: the down tile, its bias), and
// "moe_combine_{k}x{d}" (an item per tile of d: Σ_r w_r·y_r, renormalized and scaled, packed once).
absl::StatusOr<Composition> MoeBlockedExperts(const proto::OpSpec& spec, const MoeOperands& layout,
                                              const std::vector<OperandRef>& operands, const MoeNames& names,
                                              const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_MOE_MOE_BLOCKED_H_
