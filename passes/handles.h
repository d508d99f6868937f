// The compose pass: sections meet through typed tensor handles (DESIGN §3.7).
//
// Sections share tensors by name; validation (spatial/validate.h) holds a name to one type (rows, cols, precision)
// in every section. A section may read a name only after a section produces it (stores to it), unless it is one
// of the run's own inputs; and where the caller knows which names the run is given (an op's operands and
// result, as Lower does), a name that is read but neither produced before nor given is refused: it is a misspelled
// handle that would otherwise silently become a new run input.
#ifndef PASSES_HANDLES_H_
#define PASSES_HANDLES_H_

#include <set>
#include <string>

#include "absl/status/status.h"
#include "spatial/program.h"

namespace spatial {

// `given`: the names the run may be given; nullptr when unknown (then only the order is checked).
absl::Status CheckHandles(const Composition& c, const std::set<std::string>* given);

}  // namespace spatial

#endif  // PASSES_HANDLES_H_
