// Relayouts between flat rows (1 x rows*cols, the composition's activation layout) and DENSE matrices (rows x cols,
// the flash form's and the chunked recurrences' layout) — seed 002, original lines 4654-4943 and 5102-5178. The
// picking relayout of a dense matrix's rows (relayout_dense_picks_to_rows) is relayout.h's; these are the rest.
//
// ★ A PAGE IS A FLAT ROW-MAJOR PLANE, SO A RELAYOUT IS AN AFFINE MAP. Item (R, b) of a rows-to-dense relayout loads
// the flat tiles dense tile row R holds — its h rows' blk-tile segments, row_t tiles apart — as ONE page of h*blk
// tiles side by side, and writes out(y, c) = in[y*(blk*tile) + c]: row y of the tile row is the page's y-th segment.
// Every item of a section loads the same h rows, so rows that are not whole tile rows take TWO sections — the whole
// tile rows, then the last tile row's rows mod tile rows — each writing its own tiles of the result (a part of it, so
// each declares it State: updated in part). A row that is not whole tiles has no segments of its own; then a tile row
// of rows is one contiguous flat run, loaded whole: out(y, c) = in[y*cols + c] below rows and cols, zero past them.
//
// Every section is pure movement: claim Exact, at the moved precision `dt`, folding at its accumulator (fp32 for a
// float dt, the integer itself for an integer one — SectionAcc).
#ifndef LOWERINGS_ATTENTION_RELAYOUT_ROWS_H_
#define LOWERINGS_ATTENTION_RELAYOUT_ROWS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "spatial/precision.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// `to` — a DENSE rows x cols matrix at `dt` — from `from`, the same matrix as flat rows (Input 1 x rows*cols).
// Sections "relayout_dense_{rows}x{cols}_rows{first}": one (`to` an Output) when the rows are at most a tile or whole
// tile rows, else two (`to` State, written in part). Whole-tile rows: one item per blk-tile block of a tile row, blk
// the widest divisor of row_t within the accumulator whose section fits a site (built and measured, so the sizing
// cannot disagree with the section it sizes). Narrow rows: one item per tile row.
// Refusals: NotLowered("a relayout of one tile row of flat rows does not fit a site"); NotLowered("a block of rows
// whose relayout into a matrix is neither whole tiles across nor a tile row of narrow rows one page holds");
// MissingPrecision / MissingCompute when the target cannot fold `dt` (SectionAcc).
absl::StatusOr<Composition> RelayoutRowsToDense(const OperandRef& from, const std::string& to, int64_t rows,
                                                int64_t cols, Precision dt, const Target& target);

// `to` (Output 1 x rows*cols) — the flat rows of `from`, a DENSE rows x cols matrix: RelayoutDensePicksToRows of every
// row in order when cols is whole tiles (relayout.h), else RelayoutSmallDenseToRows.
absl::StatusOr<Composition> RelayoutDenseToRows(const OperandRef& from, const std::string& to, int64_t rows,
                                                int64_t cols, Precision dt, const Target& target);

// RelayoutDenseToRows for a matrix whose rows are not whole tiles: it must be one small tile row, loaded whole, and
// flat element C = y*cols + c is dense page element (y, c), at plane offset C + y*(W - cols) — a map affine within
// row y's band of cols columns. Section "relayout_rows_{rows}x{cols}", one item. Refused, NotLowered("a matrix whose
// relayout into flat rows is neither whole tiles across nor one small tile row"), past a tile's rows or a page.
absl::StatusOr<Composition> RelayoutSmallDenseToRows(const OperandRef& from, const std::string& to, int64_t rows,
                                                     int64_t cols, Precision dt, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_RELAYOUT_ROWS_H_
