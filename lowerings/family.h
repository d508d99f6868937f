// Op families (DESIGN §5, §10): one registration per kind holds everything the project knows about it — its
// lowering, its f64 op reference, and the tolerance the simulator's values are held to against the exact VM with
// the reason for that number. The registry (Lower), the reference (ReferenceOp), the tolerance test, the demo and
// `spatial ops` all read this one table (lowerings/families.cc); adding a kind is one entry there.
#ifndef LOWERINGS_FAMILY_H_
#define LOWERINGS_FAMILY_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"
#include "targets/target.h"

namespace spatial {

struct OpFamily {
  proto::OpSpec::KindCase kind;
  absl::StatusOr<Composition> (*lower)(const proto::OpSpec&, const Target&);
  absl::StatusOr<TensorMap> (*reference)(const proto::OpSpec&, const TensorMap&);
  // Bound on the relative L2 error (||sim - vm||_2 / ||vm||_2) of every Approx-claimed output, target numerics
  // against the exact VM; 0: bit equality. Measured by tests/integration/op_tolerance_test.cc.
  double rel_l2 = 0.0;
  // The VM against the reference: |vm - ref| <= vm_tol * max(|ref|, 1) (f64 rounding; 0: exactly equal).
  double vm_tol = 1e-12;
  std::string_view why;  // the reasoning and the measurement behind rel_l2
};

// Every family, in the table's order (by family, as the table groups them).
const std::vector<OpFamily>& OpFamilies();

// The family of a kind, by oneof case or by name ("silu"); nullptr when none is registered.
const OpFamily* FindFamily(proto::OpSpec::KindCase kind);
const OpFamily* FindFamily(std::string_view name);

}  // namespace spatial

#endif  // LOWERINGS_FAMILY_H_
