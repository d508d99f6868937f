// The per-op-kind numerics table of the integration tests (DESIGN §10, the three-way check's second leg): for every
// lowered op kind, how far the simulator under the target's numerics (bf16 storage, fp32 accumulation, the SFPU's
// algorithms) may move each Approx-claimed output from the exact f64 VM, as a relative L2 error, with its reason
// (both from the kind's family, lowerings/family.h); and the small specs (shapes on test_tiny and wormhole_n150) and input
// draws every kind is checked at.
//
// Every kind Lower maps must have cases here: op_tolerance_test fails for a kind that has none, so a new family is
// measured deliberately, never by a default.
//
// Exact-claimed outputs (integer arithmetic, index moves) are held to bit equality whatever the entry says.
#ifndef TESTS_INTEGRATION_TOLERANCES_H_
#define TESTS_INTEGRATION_TOLERANCES_H_

#include <string>
#include <vector>

#include "proto/op.pb.h"
#include "tests/lowerings/harness.h"

namespace spatial::integration {

// One spec checked on one shipped target, with the values its inputs are drawn from.
struct OpCase {
  std::string target;  // "test_tiny" or "wormhole_n150"
  proto::OpSpec spec;
  testing::Draw draw;
};

struct OpTolerance {
  std::string kind;  // OpKindName: "silu", "int_requant", ...
  // Bound on the relative L2 error (||sim - vm||_2 / ||vm||_2) of every Approx-claimed output, target numerics
  // against the exact VM. 0: bit equality (the kind does no rounding arithmetic on the values the test draws).
  double rel_l2 = 0.0;
  // The VM against ReferenceOp: |vm - ref| <= vm_tol * max(|ref|, 1) (f64 rounding; 0: exactly equal).
  double vm_tol = 1e-12;
  // The cases, built afresh on every call (a draw may keep state across the values it draws).
  std::vector<OpCase> (*cases)() = nullptr;
};

// Every entry, sorted by kind.
const std::vector<OpTolerance>& ToleranceTable();

// The carried-state kinds' cases (tolerances_carried.cc).
std::vector<OpCase> CausalConvCases();
std::vector<OpCase> GatedDeltaCases();

// The entry of `kind`, or nullptr.
const OpTolerance* FindTolerance(const std::string& kind);

// How much looser than the largest error measured over a kind's cases its tolerance may be. A tolerance far above
// what the kind produces would hide a regression of the numerics; op_tolerance_test asserts
// measured <= tolerance <= kMaxHeadroom * measured for every Approx kind.
inline constexpr double kMaxHeadroom = 16.0;

}  // namespace spatial::integration

#endif  // TESTS_INTEGRATION_TOLERANCES_H_
