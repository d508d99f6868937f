// One table of the limits every reader of a program applies: the wire parser (spatial/proto_io.h), validation
// (spatial/validate.h), the certifier and the VM take them from here, so a program that parses and certifies also
// runs ("certified" never ends in "refused at run time").
#ifndef SPATIAL_LIMITS_H_
#define SPATIAL_LIMITS_H_

#include <cstdint>

namespace spatial {

// Body nodes of one Generic: the flattened list.
inline constexpr int64_t kMaxBodyNodes = int64_t{1} << 20;
// The longest root-to-leaf path of a body. Every body walker recurses (the VM's compiler, the certifier's range
// evaluation, printing); 2000 frames of the deepest of them (~1 KB each in the VM's compiler) stay far inside a
// thread's 8 MB stack. Seed 002's deepest body (the blocked GDN's banded selects) is under 100.
inline constexpr int64_t kMaxBodyDepth = 2000;
// The node count with shared subtrees counted once per use: recursive walkers visit a shared subtree once per use
// (a chain of 64 nodes each using the previous one twice would otherwise cost 2^64 steps).
inline constexpr int64_t kMaxBodyExpandedNodes = int64_t{1} << 22;

}  // namespace spatial

#endif  // SPATIAL_LIMITS_H_
