// The op references (DESIGN §5): each op kind's math in f64, written straight from its spec and never through a
// program. They are the judge of the lowerings: VM(Lower(spec)) must equal ReferenceOp(spec).
#ifndef LOWERINGS_REFERENCE_H_
#define LOWERINGS_REFERENCE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/tensor_data.h"

namespace spatial {

// The op's result, one tensor named OpSpec.out shaped as the lowering's result. `inputs` holds every operand by name,
// shaped as the lowering declares it (a pointwise op: its pointwise shape; a dense decay: ar rows x heads, dt and
// alog 1 x heads; a matmul: A m x k, B k x n). A missing or misshaped input, or a spec the lowering would not accept,
// is an error.
absl::StatusOr<TensorMap> ReferenceOp(const proto::OpSpec& spec, const TensorMap& inputs);

// The kinds ReferenceOp knows, sorted.
std::vector<std::string> ReferencedKinds();

}  // namespace spatial

#endif  // LOWERINGS_REFERENCE_H_
