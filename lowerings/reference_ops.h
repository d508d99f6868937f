// The per-family op references ReferenceOp dispatches to, and the input checks they share. Internal to lowerings/.
#ifndef LOWERINGS_REFERENCE_OPS_H_
#define LOWERINGS_REFERENCE_OPS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/tensor_data.h"

namespace spatial {

// The input `name`, checked to be rows x cols with as many values.
absl::StatusOr<const TensorData*> RefInput(const TensorMap& inputs, const std::string& name, int64_t rows,
                                           int64_t cols);
// Input `name` of n values read as either layout a lowering may declare it in: the flat 1 x n row, or `rows` rows
// of n / rows (a dense matrix; the same values in the same order). InvalidArgument names both.
absl::StatusOr<const TensorData*> RefInputRows(const TensorMap& inputs, const std::string& name, int64_t n,
                                               int64_t rows, std::string_view reader);
// The input's values must be integers (an integer op's operand): the first that is not is an error.
absl::Status RefIntegral(const TensorData& x, const std::string& name);
// A rows x cols result of `precision`, zero-filled.
TensorData RefResult(int64_t rows, int64_t cols, Precision precision);

// Elementwise (reference_elementwise.cc).
absl::StatusOr<TensorMap> ReferenceSilu(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceRelu(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceSigmoid(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceGelu(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceScale(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceSoftcap(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceDecay(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceIntRequant(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceIntClamp(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceBinary(const proto::OpSpec& spec, const TensorMap& inputs);
// Latent attention, naive: keys and values materialized (attention/reference_mla.cc).
absl::StatusOr<TensorMap> ReferenceMla(const proto::OpSpec& spec, const TensorMap& inputs);
// Mixture of experts (moe/reference_moe.cc).
absl::StatusOr<TensorMap> ReferenceMoe(const proto::OpSpec& spec, const TensorMap& inputs);
// Matmul (reference_matmul.cc).
absl::StatusOr<TensorMap> ReferenceMatmul(const proto::OpSpec& spec, const TensorMap& inputs);
// Tables and heads (reference_tables.cc).
absl::StatusOr<TensorMap> ReferenceTranspose(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceHeadSlice(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceJoin(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceHeadMatmul(const proto::OpSpec& spec, const TensorMap& inputs);
// Rows (reference_rows.cc).
absl::StatusOr<TensorMap> ReferenceL2Norm(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceFusedRow(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceSoftmax(const proto::OpSpec& spec, const TensorMap& inputs);
// Gathers, row writes, argmax (reference_gathers.cc).
absl::StatusOr<TensorMap> ReferenceRowGather(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceRowsGather(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceSetRow(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceArgMax(const proto::OpSpec& spec, const TensorMap& inputs);
// Rope (reference_rope.cc).
absl::StatusOr<TensorMap> ReferenceRope(const proto::OpSpec& spec, const TensorMap& inputs);
// Carried state (carried/reference_carried.cc): the result and the state the op leaves, under the state's name.
absl::StatusOr<TensorMap> ReferenceCausalConv(const proto::OpSpec& spec, const TensorMap& inputs);
absl::StatusOr<TensorMap> ReferenceGatedDelta(const proto::OpSpec& spec, const TensorMap& inputs);

}  // namespace spatial

#endif  // LOWERINGS_REFERENCE_OPS_H_
