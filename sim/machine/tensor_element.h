// The value of a tensor's element as a run reads it, where it is known before the machine times the run: a fold's
// trip count (simulate.cc) and a gathered block's index (the machine books the DRAM channels of the tiles the run
// reads: spatial/semantics/table_pages.h) read it by this one rule.
#ifndef SIM_MACHINE_TENSOR_ELEMENT_H_
#define SIM_MACHINE_TENSOR_ELEMENT_H_

#include <cstdint>
#include <optional>

#include "spatial/program.h"
#include "spatial/tensor_data.h"

namespace spatial {

// Flat element `elem` of tensor `t`: from `inputs` (the value the run starts with), else `values` (the run's final
// values: a tensor an earlier section produced), else its init; nullopt where none says (an external tensor not
// given, an element outside the tensor).
std::optional<double> TensorElement(const Tensor& t, int64_t elem, const TensorMap& values, const TensorMap& inputs);

}  // namespace spatial

#endif  // SIM_MACHINE_TENSOR_ELEMENT_H_
