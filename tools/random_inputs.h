// Deterministic random input tensors for `spatial vm --random-inputs=SEED` and `spatial demo`.
//
// The values depend only on the seed, the tensor's name and its shape and precision (never on the order or number
// of the other inputs), and are produced by our own generator rather than <random>'s distributions, whose
// outputs the C++ standard leaves to each library: the same SEED gives the same inputs on every machine.
#ifndef TOOLS_RANDOM_INPUTS_H_
#define TOOLS_RANDOM_INPUTS_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "spatial/program.h"
#include "spatial/tensor_data.h"

namespace spatial {

// Float precisions: uniform in the tensor's domain [lo, hi) when it has one (Tensor.domain), else in [-2, 2).
// Integer precisions: uniform integers in `admitted` (the inclusive range the program's guards admit,
// certify/admitted_inputs.h) when given, else in [-100, 100]; either clipped to the precision's range.
TensorData RandomTensor(const Tensor& t, uint64_t seed,
                        std::optional<std::pair<int64_t, int64_t>> admitted = std::nullopt);

// One RandomTensor per tensor, by name.
TensorMap RandomInputs(const std::vector<Tensor>& tensors, uint64_t seed);

}  // namespace spatial

#endif  // TOOLS_RANDOM_INPUTS_H_
