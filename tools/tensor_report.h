// Tables and error figures the tool prints about tensors: min / max / mean per tensor, and how far one tensor is
// from a reference (max abs, max rel error).
#ifndef TOOLS_TENSOR_REPORT_H_
#define TOOLS_TENSOR_REPORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "spatial/tensor_data.h"

namespace spatial {

struct TensorStats {
  double min = 0.0;
  double max = 0.0;
  double mean = 0.0;
  int64_t nan = 0;  // NaN elements (left out of min/max/mean)
};
TensorStats StatsOf(const TensorData& t);

// One row per (name, tensor): tensor, shape, precision, min, max, mean.
std::string FormatTensorTable(const std::vector<std::pair<std::string, const TensorData*>>& rows);

struct ErrorStats {
  double max_abs = 0.0;
  // max over elements of |got - want| / |want|; an element whose reference is 0 counts |got - want| / 1e-300, so
  // a nonzero value where zero is expected is a large relative error, not a hidden one.
  double max_rel = 0.0;
  int64_t worst = -1;  // the element of max_rel (-1: none)
  int64_t mismatched_nan = 0;  // elements NaN in exactly one of the two
};
// InvalidArgument when the shapes differ.
absl::StatusOr<ErrorStats> CompareTensors(const TensorData& got, const TensorData& want);

}  // namespace spatial

#endif  // TOOLS_TENSOR_REPORT_H_
