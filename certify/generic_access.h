// Proofs about one Generic stage: every element offset a slot read, a Select comparison or the out map can form
// lies inside its page, checked under the path condition of the Select branch that performs the read (the
// branch not taken reads nothing, and the seed's band, join and transpose maps point out of range there); and,
// on the integer datapath, that no intermediate value of the body leaves its integer type.
#ifndef CERTIFY_GENERIC_ACCESS_H_
#define CERTIFY_GENERIC_ACCESS_H_

#include <optional>
#include <vector>

#include "certify/context.h"
#include "spatial/semantics/interval.h"

namespace spatial::certify {

struct GenericFacts {
  // Per input slot: the values its buffer can hold when this stage reads it.
  std::vector<Interval> slot_values;
  // The integer datapath's type when every input and the output are integers (index arithmetic), else nullopt.
  std::optional<Precision> int_type;
  // False for a tentative re-proof (one item at a time): nothing is added to the section's proof.
  bool record = true;
};

// Checks stage `stage` (a Generic) and returns the values its output page can receive (Everything when nothing
// useful is known). An indirect term's index is taken over its admitted range, unless its slot's value is one
// known constant (a compile-time table read for one item), which is then used exactly.
Interval ProveGeneric(SectionContext& ctx, int stage, const GenericFacts& facts);

}  // namespace spatial::certify

#endif  // CERTIFY_GENERIC_ACCESS_H_
