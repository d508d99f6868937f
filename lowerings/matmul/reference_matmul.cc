// The matmul reference: the plain triple loop (B read transposed with transpose_b).
#include <vector>

#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<TensorMap> ReferenceMatmul(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "matmul", 2));
  const int64_t m = spec.matmul().m();
  const int64_t k = spec.matmul().k();
  const int64_t n = spec.matmul().n();
  RETURN_IF_ERROR(CheckElements("matmul", "m", m));
  RETURN_IF_ERROR(CheckElements("matmul", "k", k));
  RETURN_IF_ERROR(CheckElements("matmul", "n", n));
  ASSIGN_OR_RETURN(const TensorData* a, RefInput(inputs, ops[0].name, m, k));
  const bool tb = spec.matmul().transpose_b();
  ASSIGN_OR_RETURN(const TensorData* b, RefInput(inputs, ops[1].name, tb ? n : k, tb ? k : n));
  TensorData c = RefResult(m, n, Precision::kFp32);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t e = 0; e < k; ++e) sum += a->at(i, e) * (tb ? b->at(j, e) : b->at(e, j));
      c.values[i * n + j] = sum;
    }
  }
  TensorMap out;
  out[spec.out()] = std::move(c);
  return out;
}

}  // namespace spatial
