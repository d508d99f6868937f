// The gathers of seed 002 (original lines 6495-7133 and 8170-8298): a row of a table (the embedding lookup) and a
// block of rows of it, by a literal or a named (run-time) 1-based index.
//
// ★ THE ROW IS DATA. A named index is an operand: an index past the table (or below 1) FAULTS in the evaluator,
// exactly where every tier's run-time check fails, naming the stage and the value — never wrapped into somebody
// else's row. A literal outside the table is refused at lowering (there is no section to lower).
#ifndef LOWERINGS_GATHERS_GATHERS_H_
#define LOWERINGS_GATHERS_GATHERS_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// x = row `index` of T. Operands [T] (literal) or [T, i] (named: i a one-element operand named by index.named).
//   dense: T is a rows x cols matrix, a tile row holding `tile` rows — "row_gather_{rows}x{cols}_dense";
//   cols whole tiles: T is flat 1 x rows*cols and exactly the row's tiles move, an item per RowBlock of them;
//   otherwise the table is loaded whole and the row gathered by one Generic.
// Result: 1 x cols, "row_gather_{rows}x{cols}". Claim Approx("row gather in bf16") for a float table, Exact for an
// integer one (its values at the index integer its fill needs).
absl::StatusOr<Composition> FromRowGather(const proto::OpSpec& spec, const Target& target);

// X = rows I of T: row k of X is row I[k] (1-based) of a flat rows x cols table. Operands [T, I] (I: 1 x count).
// Whole-tile rows: item (k, b) moves row I[k]'s b-th block of tiles; narrower rows: the table and the block are held
// whole by one item (refused when either is wider than a page). A table laid out as a matrix is refused.
// Result 1 x count*cols, "rows_gather_{count}x{rows}x{cols}".
absl::StatusOr<Composition> FromRowsGather(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_GATHERS_GATHERS_H_
