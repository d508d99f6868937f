// The row writes of seed 002 (original lines 7135-7261, 7455-8168, 8789-8971): the KV-cache append, `set row i of T
// to S` for one row or a block of `count` rows, into a flat table, a table of whole-tile rows, or a dense matrix.
//
// ★ THE TABLE IS `State`, NOT AN `Output`: the step updates it IN PLACE. The section reads and writes the table where
// it lies (Composition.state_order declares the read, then the write), and every row it does not write carries the
// value it came in with.
#ifndef LOWERINGS_GATHERS_ROW_WRITES_H_
#define LOWERINGS_GATHERS_ROW_WRITES_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Set rows [index, index + count) of T to S. Operands [T, S] (literal index) or [T, S, i] (named: i a one-element
// operand holding the 1-based first row); OpSpec.out must name T (the write is in place: the result IS the table).
//   dense: T is a rows x cols matrix — one row ("set_row_{rows}x{cols}_dense") or a block appended at a data
//     position ("set_row_{rows}x{cols}_block{count}_dense", whole-tile rows only);
//   cols whole tiles: T is flat and exactly the block's tiles are stored, an item per RowBlock of them;
//   otherwise the flat table is rewritten whole, one band of its columns replaced.
// S is 1 x count*cols (dense block: count x cols). Claim Approx("row write in bf16") / ("row block write") for a
// float table, Exact for an integer one.
absl::StatusOr<Composition> FromSetRow(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_GATHERS_ROW_WRITES_H_
