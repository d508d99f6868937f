// t = argmax(X) + 1 (seed 002, original lines 8316-8787): the first maximum of a row, 1-based — the decode step's
// "argmax of logits" — as one ArgMax fold, or, for a row wider than a site holds, block scans and a merge tree.
//
// Ties go to the lowest position and NaN follows the seed's scan exactly: the scan is seeded with item 1 and moved
// only by a strictly greater item, so a NaN never moves it — and a NaN at item 1 is never replaced (the answer is 1).
#ifndef LOWERINGS_GATHERS_ARGMAX_H_
#define LOWERINGS_GATHERS_ARGMAX_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Operands [X] (1 x n, float or integer as ArgMaxSpec.float says); the result is OpSpec.out, 1 x 1 at the index
// integer. A row of at most RowBlockTiles tiles is one section "argmax_{n}"; a wider one is the sections
// "argmax_blocks_{n}_b{blk}", then "argmax_merge{L}_f{fan}" per level of the merge tree (partials
// "{out}__argmax_part{L}", the blocks' table "{out}__argmax_blocks"). Claim Exact.
absl::StatusOr<Composition> FromArgMax(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_GATHERS_ARGMAX_H_
