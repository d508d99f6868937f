// Tensor values handed to and from a run (VM, simulator, op references, .npy files): logical row-major
// rows x cols values in f64, whatever the tensor's precision (integers are exact up to 2^53).
#ifndef SPATIAL_TENSOR_DATA_H_
#define SPATIAL_TENSOR_DATA_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "spatial/precision.h"
#include "spatial/program.h"

namespace spatial {

struct TensorData {
  int64_t rows = 0;
  int64_t cols = 0;
  Precision precision = Precision::kFp32;
  std::vector<double> values;  // rows * cols, row-major

  double at(int64_t r, int64_t c) const { return values[r * cols + c]; }
};

// Tensors by name. std::map: iteration order is deterministic.
using TensorMap = std::map<std::string, TensorData>;

// Whether a run must be given this tensor's values: an Input, or a State or Param whose init is External (a KV
// cache the caller holds, a weight the lowering did not embed). The one rule the VM, the simulator and the tools
// share: such a tensor is never silently zeros.
bool IsRunInput(const Tensor& t);

// The tensors a run must be given (IsRunInput) that no earlier section produces; first declaration wins, in
// section order.
std::vector<Tensor> CompositionInputs(const Composition& c);
// The tensors a run produces: every Output and State tensor, first declaration wins.
std::vector<Tensor> CompositionResults(const Composition& c);

}  // namespace spatial

#endif  // SPATIAL_TENSOR_DATA_H_
