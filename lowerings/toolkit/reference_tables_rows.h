// What the tables-and-heads and rows references share (internal to lowerings/): an operand's values whatever view
// the lowering gave it, and the operand itself when the lowering embeds it as a Param.
#ifndef LOWERINGS_TOOLKIT_REFERENCE_TABLES_ROWS_H_
#define LOWERINGS_TOOLKIT_REFERENCE_TABLES_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "spatial/tensor_data.h"

namespace spatial {

// The `n` values of operand `op`, row-major. From `inputs` when the run is given it, in any rows x cols view of
// n elements (a flat 1 x n activation, or the (heads*a) x b matrix a tiled form declares: the same row-major
// sequence); otherwise from its fill, as a lowering that embeds the operand as a Param does. An operand neither given
// nor filled is an error. `view`, when not null, receives the view it was given in (1 x n for a fill).
absl::StatusOr<std::vector<double>> RefValues(const TensorMap& inputs, const OperandRef& op, int64_t n,
                                              std::pair<int64_t, int64_t>* view = nullptr);

}  // namespace spatial

#endif  // LOWERINGS_TOOLKIT_REFERENCE_TABLES_ROWS_H_
