// The three-way check of DESIGN §10 for the lowerings tests, on top of harness.h's CheckLowering (lower, validate,
// VM against the op reference on one target): the certifier must accept the lowered program on every shipped target
// that does not refuse the op, and a target that refuses must refuse with a refusal (IsRefusal), never with a
// malformed-spec error or a wrong program.
#ifndef TESTS_LOWERINGS_THREE_WAY_H_
#define TESTS_LOWERINGS_THREE_WAY_H_

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/lowerings/harness.h"

#include "certify/certify.h"

namespace spatial::testing {

inline const std::vector<std::string>& ShippedTargets() {
  static const std::vector<std::string> names = {"test_tiny", "wormhole_n150", "blackhole_p150", "grayskull_e150"};
  return names;
}

// Certifies `c` on `target`; every diagnostic is a test failure, printed GNU-style.
inline void ExpectCertifies(const Composition& c, const Target& target) {
  CertifyResult r = Certify(c, target);
  for (const proto::Diagnostic& d : r.diagnostics) {
    ADD_FAILURE() << "certify on " << target.name() << ": " << FormatDiagnostic(d, c.name);
  }
}

// What happened to a spec on each shipped target.
struct Outcomes {
  std::vector<std::string> certified;  // lowered, validated and certified
  std::vector<std::string> refused;    // refused with a refusal status
};

// Lowers `spec` on every shipped target: a refusal is recorded, anything else must validate and certify.
inline Outcomes CertifyWhereLowered(const proto::OpSpec& spec) {
  Outcomes out;
  for (const std::string& name : ShippedTargets()) {
    const Target& target = Shipped(name);
    SCOPED_TRACE(spec.ShortDebugString() + " on " + name);
    absl::StatusOr<Composition> c = Lower(spec, target);
    if (!c.ok()) {
      EXPECT_TRUE(IsRefusal(c.status())) << c.status();
      out.refused.push_back(name);
      continue;
    }
    absl::Status valid = ValidateComposition(*c, target.tile_rows(), target.tile_cols());
    EXPECT_TRUE(valid.ok()) << valid;
    ExpectCertifies(*c, target);
    out.certified.push_back(name);
  }
  return out;
}

// The three-way check: VM(Lower(spec)) against ReferenceOp(spec) to `tol` on `target` (0: equal), the program
// valid, and certified on every shipped target that lowers it (which must include `target`). Returns the program
// lowered for `target`.
inline Composition ThreeWay(const proto::OpSpec& spec, const Target& target, const Draw& draw, double tol,
                            uint64_t seed = 1) {
  Composition c = CheckLowering(spec, target, draw, tol, seed);
  Outcomes o = CertifyWhereLowered(spec);
  EXPECT_NE(std::find(o.certified.begin(), o.certified.end(), target.name()), o.certified.end())
      << spec.ShortDebugString() << " did not lower on " << target.name();
  return c;
}

// The full message of the refusal `spec` gets on `target`; fails the test when it lowers or fails otherwise.
inline std::string RefusalOf(const proto::OpSpec& spec, const Target& target) {
  absl::StatusOr<Composition> c = Lower(spec, target);
  EXPECT_FALSE(c.ok()) << "lowered " << spec.ShortDebugString() << " on " << target.name();
  if (c.ok()) return "";
  EXPECT_TRUE(IsRefusal(c.status())) << c.status();
  return std::string(c.status().message());
}

}  // namespace spatial::testing

#endif  // TESTS_LOWERINGS_THREE_WAY_H_
