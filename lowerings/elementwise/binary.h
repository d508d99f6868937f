// Binary row maps (seed 002's row_binary_map, blocked_binary_map, matrix_binary_map and flat_row_broadcast, as one
// op kind): C = A op B with op Add, Sub or Mul, over a 1 x n row or a rows x cols matrix, B either the same shape
// or one row broadcast down every row of A. The residual add, the SwiGLU product and a gate are this op.
#ifndef LOWERINGS_ELEMENTWISE_BINARY_H_
#define LOWERINGS_ELEMENTWISE_BINARY_H_

#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Operands [A, B]; the shape is the spec's shape_rows x shape_cols (unset: 1 x n), and B is 1 x cols when
// binary.broadcast. Forms, by shape:
//  - one row of at most RowBlockTiles: one whole-row item, section "binary_{op}_{n}";
//  - one wider row: one item per tile, "binary_{op}_{n}";
//  - a matrix: one item per tile of the tile grid, "binary_{op}_{rows}x{cols}" ("binary_{op}_row_{rows}x{cols}"
//    when B is broadcast: its tile of the item's columns, read down every row through a map with no row term).
// Float: bf16 data in a 16-bit Dst (tt-metal's eltwise binary with fp32_dest_acc off), claim "binary_{op} in
// bf16". Int: exact on the integer datapath, the inputs stored in the widest integer the target holds for which no
// a op b leaves the datapath (so the certifier can prove it); none: refused by name.
// Refusals: InvalidArgument for an unset or unknown op; the pointwise shape's and the operand count's own.
absl::StatusOr<Composition> FromBinary(const proto::OpSpec& spec, const Target& target);

// FromBinary of a checked op (binary.op set) over operands the caller names — a lowering's own intermediate
// tensors, which a spec may not name (a mixture's routed sum and its shared experts).
absl::StatusOr<Composition> BinaryOf(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                     const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ELEMENTWISE_BINARY_H_
