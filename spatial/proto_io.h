// Conversion between the program model (spatial/program.h) and its wire form (proto/program.proto).
//
// ToProto is total and deterministic: the same Composition always serializes to the same bytes (lowerings promise
// byte-identical programs for the same spec and target, DESIGN §5). FromProto is total on hostile input: every enum
// must be a known, non-UNSPECIFIED value, every oneof must be set, and a body's child indices must point at earlier
// nodes, so what it returns can be handed to ValidateComposition (spatial/validate.h) without crashing it. It
// checks what the C++ model cannot even represent; ValidateComposition checks everything else.
#ifndef SPATIAL_PROTO_IO_H_
#define SPATIAL_PROTO_IO_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/program.pb.h"
#include "spatial/body.h"
#include "spatial/limits.h"
#include "spatial/program.h"

namespace spatial {

// Limits on a body read from the wire: kMaxBodyNodes, kMaxBodyDepth, kMaxBodyExpandedNodes (spatial/limits.h).

proto::Composition ToProto(const Composition& c);
absl::StatusOr<Composition> FromProto(const proto::Composition& p);

// One section, for tools that handle sections alone. Errors of SectionFromProto start with "section 'name': ".
proto::Section SectionToProto(const Section& s);
absl::StatusOr<Section> SectionFromProto(const proto::Section& p);

// A body flattened into nodes, children before parents, the root last; a shared subtree (the same node) is
// emitted once. An undefined body is an empty node list.
proto::TensorBody BodyToProto(const Body& b);
// Rejects an empty list, unknown ops, and children that are negative or not earlier than their parent.
// Errors name the node ("nodes[3]: ...").
absl::StatusOr<Body> BodyFromProto(const proto::TensorBody& p);

// Files: ".binpb"/".pb" binary, anything else text; "-" is stdin/stdout (see spatial/proto_file.h).
absl::StatusOr<Composition> ReadComposition(const std::string& path);
absl::Status WriteComposition(const std::string& path, const Composition& c);

}  // namespace spatial

#endif  // SPATIAL_PROTO_IO_H_
