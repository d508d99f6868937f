// The experts of a mixture (seed 002's from_moe section 3 and ExpertTable, guide seed002-D §2.3-2.4): k rounds, a
// block of the fold each, that gather their chosen expert's runs of the weight tables and accumulate its weighted
// FFN output, then the combine.
#ifndef LOWERINGS_MOE_MOE_EXPERTS_H_
#define LOWERINGS_MOE_MOE_EXPERTS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/moe/moe.h"
#include "lowerings/moe/moe_routing.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Section "moe_{ne}x{k}_{d}x{dff}" over one whole-row item: reads the routing's picks and weights (and its norm when
// renormalized) and the spec's operands (`layout` says where each is), writes the spec's result (1 x d at the float
// datapath's precision).
absl::StatusOr<Composition> MoeExpertsSection(const proto::OpSpec& spec, const MoeOperands& layout,
                                              const std::vector<OperandRef>& operands, const MoeNames& names,
                                              const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_MOE_MOE_EXPERTS_H_
