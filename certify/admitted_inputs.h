// Which values of its integer run inputs a program admits: for a position, a token id or an index given at run
// time, the widest range of values for which every run-time check (guard) that depends on it always holds. The
// certificate records it, and `--random-inputs` draws from it, so a random run exercises the program instead of
// faulting on a position of -20.
//
// The answer comes from the certifier's own interval analysis (no second model of what a guard means): the
// program is certified again with the input promised to lie in a candidate range, and the range is admitted when
// every guard whose proof depends on the input then always holds. Interval analysis is monotone in the promised
// range, so the search is exact for it: an affine probe (the input at 0 and at 1) solves each guard's bounds
// when the guard reads the input through additions (tokens - 1, pos + window), and a bisection around a feasible
// value covers the rest.
#ifndef CERTIFY_ADMITTED_INPUTS_H_
#define CERTIFY_ADMITTED_INPUTS_H_

#include <vector>

#include "proto/certificate.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// One entry per integer run input that some guard depends on and that has a feasible value, in the order of
// CompositionInputs. Empty when the program does not certify (nothing is proven then).
std::vector<proto::AdmittedInput> AdmitInputs(const Composition& c, const Target& target);

}  // namespace spatial

#endif  // CERTIFY_ADMITTED_INPUTS_H_
