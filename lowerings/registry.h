// The registry: from an OpSpec's kind to its lowering. A family adds one line to the table in registry.cc.
#ifndef LOWERINGS_REGISTRY_H_
#define LOWERINGS_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"  // IsRefusal
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Lowers `spec` for `target`: a composition, or a refusal (IsRefusal) when the op cannot be mapped there, or
// InvalidArgument for a malformed spec ("op spec has no kind"). A kind with no lowering yet is
// "NotLowered: op kind 'attention' is not lowered yet". Deterministic: the same spec and target give the same
// program, byte for byte once serialized.
absl::StatusOr<Composition> Lower(const proto::OpSpec& spec, const Target& target);

// The name of the spec's kind, as the oneof field is named in proto/op.proto ("silu", "int_requant"), or "" when
// it has none.
std::string OpKindName(const proto::OpSpec& spec);

// The kinds Lower maps, sorted.
std::vector<std::string> LoweredKinds();

}  // namespace spatial

#endif  // LOWERINGS_REGISTRY_H_
