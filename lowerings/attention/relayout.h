// Relayouts from a DENSE matrix to flat rows (seed 002, original lines 4925-5100), as the attention forms need them:
// the grouped decode attention's ungrouping of its regrouped result.
//
// ★ A PAGE IS A FLAT ROW-MAJOR PLANE, SO A RELAYOUT IS AN AFFINE MAP. Item (y, b) is flat row y's b-th blk-tile
// segment: it fetches the dense tile row holding row picks[y] through an IndirectTile, lifts the in-tile row
// picks[y] mod tile out of the page through an IndirectTerm, and writes the segment where flat row y holds it. Both
// numbers come from a compile-time table, two tiles per row, so the section is the same for every row count.
#ifndef LOWERINGS_ATTENTION_RELAYOUT_H_
#define LOWERINGS_ATTENTION_RELAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "spatial/precision.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// `to` (Output, 1 x picks.size()*cols) — flat row y is row picks[y] of `from` (Input, a dense rows x cols matrix
// whose rows are whole tiles), at precision `dt`. Tables "{to}__row_at" (per row: its dense tile row, then its
// in-tile row, one tile each). Section "relayout_rows_{rows}x{cols}" when the picks are every row in order, else
// "relayout_rows_{n}_of_{rows}x{cols}"; claim Exact. Refused (NotLowered) when cols is not whole tiles or a pick is
// outside the matrix; MissingPrecision when no index integer holds the tile rows.
absl::StatusOr<Composition> RelayoutDensePicksToRows(const OperandRef& from, const std::string& to, int64_t rows,
                                                     const std::vector<int64_t>& picks, int64_t cols, Precision dt,
                                                     const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_RELAYOUT_H_
