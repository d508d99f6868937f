// What the gathers and row writes of seed 002 share (original lines 6925-7045, 7263-7453, 8300-8314): where row i of
// a table lives (a whole-tile row's block of tiles, a dense table's tile row and in-tile row), how a page of a row
// passes through the tile datapath, and the small bookkeeping of their specs.
#ifndef LOWERINGS_TOOLKIT_ROW_BLOCKS_H_
#define LOWERINGS_TOOLKIT_ROW_BLOCKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "proto/op.pb.h"
#include "spatial/builder.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The operands of a spec whose row index may be named: `fixed` operands, plus the index operand when `index` is
// named (its name must be the operand's). An unset index is InvalidArgument "{kind}.index is unset"; a wrong count
// the refusal "NotLowered: {kind} takes 3 operands, got 2", as OperandsOf. `in_place`: the op rewrites operand 0 (a
// row write's table), so OpSpec.out must name it; otherwise out is a name of its own.
absl::StatusOr<std::vector<OperandRef>> IndexedOperands(const proto::OpSpec& spec, std::string_view kind, int fixed,
                                                        const proto::RowIndex& index, bool in_place = false);

// A movement's tile address, with the index copy it waits on (a FIFO the movement engine retires once the address
// is resolved: every movement gets its own).
struct RowAddress {
  TileAddr addr;
  std::optional<std::pair<StageId, BufferId>> feed;
};

// The address of item i's `blk`-tile block of a whole-tile row of a flat rows x (row_t * tile) table (seed l.6939):
// a literal row is affine (kLiteralRowOutside outside [1, rows]); a named one is an IndirectTile over `index − 1`
// (stage and FIFO "row_index"), the movement's bound [0, rows − 1] its range check.
absl::StatusOr<RowAddress> RowBlockAddress(Template& t, const proto::RowIndex& index, const OperandRef& operand,
                                           int64_t rows, int64_t row_t, int64_t blk, const Target& target);

// A tile copy of one `blk`-tile page through the tile datapath (seed l.7024): stage "copy_row" into buffer "row".
// The row a flat tensor lives in (row 0 of its tiles), or with `whole_tiles` every row of the page (a matrix).
std::pair<StageId, BufferId> CopyPage(Template& t, BufferId from, int64_t blk, Precision dt, bool whole_tiles = false);

// The in-tile row of a dense row: known at compile time, or data on the integer datapath.
struct InTileRow {
  std::optional<int64_t> fixed;  // set: the literal's in-tile row
  BufferId row = 0;              // data: the buffer holding it (element 0)
  StageId stage = 0;
};

// Where row r = i − 1 of a DENSE rows x cols table lives: tile row ⌊r / tile⌋, in-tile row r mod tile (seed l.7288).
struct DenseRowAt {
  std::vector<RowAddress> tile_rows;  // one per movement
  InTileRow in_tile;
};

// The addresses of row `index` of a dense `rows`-row table of `row_t`-tile rows, for `movements` tile moves of
// `steps`. Named: each movement loads the position and computes its tile row into a FIFO of its own
// ("row_gather", "row_scatter", then "row_move"), and "in_tile_row_index" computes the in-tile row.
//
// ★ THE DIVISION STAYS IN THE ADDRESS, in the seed: an IndirectTile with elems_per_tile = tile divides r by the tile.
// Our IndirectTile has no elems_per_tile (DESIGN §3.4), so ⌊r / tile⌋ is ONE FloorDiv by a constant on the integer
// datapath — exact on integers, the same FloorDiv the seed's windowed rope computes its window with — and
// r mod tile = r − tile·⌊r / tile⌋, with no compile-time table and no extra tile moved.
absl::StatusOr<DenseRowAt> DenseRow(Template& t, const proto::RowIndex& index, const OperandRef& operand, int64_t rows,
                                    int64_t row_t, const std::vector<Term>& steps, int movements, const Target& target);

// The plan of a section that moves one tile row, row_t / blk items across it (seed l.7434).
BlockPlan TileRowPlan(int64_t row_t, int64_t blk);

// The seed's FlatBuild::finish_as: declares `out` a 1 x n Output at `precision`, stores the whole row from `out_buf`
// ("store_{out}"), wires the chain and seals the one-item section.
absl::StatusOr<Composition> FinishFlatAs(FlatBuild& b, const std::string& out, int64_t n,
                                         const std::vector<StageId>& chain, BufferId out_buf, std::string name,
                                         NumericsClaim claim, Precision precision, const Target& target);

// Approx{"{what} in {dt}"} for a float section, Exact for an integer one: a float copy is exact too, but the seed
// claims what the datapath may do.
NumericsClaim MovementClaim(std::string_view what, bool is_float, Precision dt);

// ★ A SITE HOLDS WHAT ITS BUFFERS NEED, OR THERE IS NO SECTION: `c` when every section's footprint (every buffer at its
// declared depth, the seed's site_footprint) fits the target's local memory; otherwise the refusal
// "NotLowered: a(n) {what} whose section '{name}' needs {bytes} bytes of a site's memory, more than its {cap} (target
// X)". The seed's flat forms load a table or a row whole with no size refusal; a program that cannot be placed is
// refused here instead of certified to fail.
absl::StatusOr<Composition> FitsSites(absl::StatusOr<Composition> c, std::string_view what, const Target& target);

// A spec size field: negative is InvalidArgument "{kind}.{field} is negative (-3)".
absl::Status NonNegative(std::string_view kind, std::string_view field, int64_t value);
// a x b elements (both non-negative) must be a tensor the program model holds (spatial/validate.h's
// kMaxTensorElems), else InvalidArgument: a size no target could hold is a malformed spec, and the products every
// lowering forms from it must not overflow.
absl::Status TensorSized(std::string_view kind, int64_t a, int64_t b);

}  // namespace spatial

#endif  // LOWERINGS_TOOLKIT_ROW_BLOCKS_H_
