// Tables and heads (seed 002, original lines 1308-1462 and 1534-1715): data movement on flat 1 x n activations.
// Each is pure movement, so its claim is Exact. Operands in the seed's order; the result is OpSpec.out.
//
// ★ A 2-D VIEW IS A BAND, NOT A RESHAPE: a per-head structure is a range of the flat column axis, one Select per
// band. ★ AT WHOLE-TILE WIDTHS A SLICE AND A JOIN ARE TILE MOVES: each item moves one block of the result, and only
// that block's operand tiles leave memory.
#ifndef LOWERINGS_TABLES_TABLES_H_
#define LOWERINGS_TABLES_TABLES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Kt[j*rows + i] = X[i*cols + j] over the flat rows*cols input [X]: `cols` bands of one affine read each (a vector,
// rows == 1 or cols == 1, is one plain read). `float` picks the datapath (an integer transpose rides the integer
// one). No column blocking: a transpose wider than the accumulator is refused (AccTilesExceeded).
// Section "transpose_{rows}x{cols}".
absl::StatusOr<Composition> FromTranspose(const proto::OpSpec& spec, const Target& target);

// P = the `width` elements from `from` of every `every` of X (operand [X], n elements): group g's part lands at
// [g*width, (g+1)*width). Whole-tile every/from/width: a tile copy, one item per block of the part,
// "head_slice_{groups}x{width}_of_{every}_tiled". Otherwise one band per group through the column-blocked
// pointwise stage, "head_slice_{groups}x{width}_of_{every}". rows > 1: X and P are rows x n/rows matrices (the
// tiled form, "..._tiled_rows{rows}"); NotLowered unless a row is whole groups of whole-tile parts.
absl::StatusOr<Composition> FromHeadSlice(const proto::OpSpec& spec, const Target& target);

// J = A joined with B across `heads` heads (operands [A (rows*wa), B (rows*wb)]): unit u (row u / heads, head
// u mod heads) holds its wa/heads elements of A then its wb/heads of B. Whole-tile parts: a table-driven tile move,
// "join_{rows}x{heads}_{ha}+{hb}_tiled". Otherwise two bands per unit, column-blocked, "join_{rows}x{heads}_{ha}+{hb}".
// dense: A, B and J are rows x wa, rows x wb and rows x (wa + wb) matrices ("..._tiled_dense"); NotLowered unless
// both per-head parts are whole tiles.
absl::StatusOr<Composition> FromJoin(const proto::OpSpec& spec, const Target& target);

// FromJoin's whole-tile form, for callers that join their own sections' results (the flash attention's value pages):
// A (1 x rows*heads*ha) joined with B (1 x rows*heads*hb) into `out_name`, ha and hb whole tiles; `dense`: A, B and
// the result are rows x heads*ha, rows x heads*hb and rows x heads*(ha+hb) matrices.
absl::StatusOr<Composition> TileJoin(const OperandRef& a_op, const OperandRef& b_op, const std::string& out_name,
                                     int64_t rows, int64_t heads, int64_t ha, int64_t hb, const Target& target,
                                     bool dense = false);

}  // namespace spatial

#endif  // LOWERINGS_TABLES_TABLES_H_
