// The three forms of a pointwise map, shared by the unary maps (elementwise.h) and the binary row maps (binary.h):
// y = body(x0, x1, ...) over a rows x n tensor, each element from the same element of every operand (or, for an
// operand that is one broadcast row, from the same column).
#ifndef LOWERINGS_ELEMENTWISE_MAP_FORMS_H_
#define LOWERINGS_ELEMENTWISE_MAP_FORMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "spatial/body.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// One operand of a map: the spec's operand, the precision it is stored in, the label of its buffer and load in
// the per-tile forms ("x": "in_x", "load_x"), and whether it is one row read down every row of a matrix.
struct MapOperand {
  OperandRef ref;
  Precision in = Precision::kBf16;
  std::string label;
  bool row_broadcast = false;
  // One value (a 1 x 1 tensor) read by every element: a per-token gate.
  bool scalar = false;
};

// `body` reads operand i as Op(i); the result is `out`, at precision p, computed in a Dst of precision `acc`; the
// stage is named `kind` and the claim is ClaimOf(kind, body, p). Forms:
//  - rows > 1: one item per tile of the tile grid, section "{name}_{rows}x{n}"; a broadcast operand is 1 x n, its
//    tile of the item's columns read through a map with no row term;
//  - one row wider than RowBlockTiles: one item per tile, "{name}_{n}";
//  - otherwise one whole-row item, "{name}_{n}".
absl::StatusOr<Composition> PointwiseMap(const std::string& name, const std::string& kind, Precision p,
                                         Precision acc, const Body& body, const std::vector<MapOperand>& xs,
                                         const std::string& out, int64_t rows, int64_t n, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ELEMENTWISE_MAP_FORMS_H_
