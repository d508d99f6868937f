// Loading target descriptions (DESIGN §4): the shipped ones by name, any other from a text-proto file.
//
// The shipped targets/*.textproto are embedded into the library at build time, so the tool finds them from any
// working directory; their file name in errors is "targets/<name>.textproto". Both the syntax (unknown fields,
// malformed text) and the meaning (missing required fields, inconsistent values) are checked, and every error
// points at the offending field as "file:line:col: error: ...".
#ifndef TARGETS_LOADER_H_
#define TARGETS_LOADER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "targets/target.h"

namespace spatial {

// A shipped target name ("wormhole_n150") or, when no shipped target has that name, a path to a text-proto file
// (any extension ProtoFormat treats as text; a ".binpb" path is read as binary and checked the same way, with
// errors at 1:1). NotFound for an unknown name that is not a readable file: the message lists the shipped names.
absl::StatusOr<Target> LoadTarget(const std::string& name_or_path);

// Parses and checks a text-format spatial.proto.Target. `filename` only labels errors.
absl::StatusOr<Target> ParseTarget(std::string_view text, const std::string& filename);

// Checks the meaning of an already-parsed target (the checks ParseTarget runs). Without location information
// every error is reported at `filename`:1:1.
absl::Status ValidateTarget(const proto::Target& target, const std::string& filename);

// The shipped target names, sorted.
std::vector<std::string> ShippedTargetNames();

// The embedded text of a shipped target, exactly as targets/<name>.textproto was at build time.
std::optional<std::string_view> ShippedTargetText(std::string_view name);

}  // namespace spatial

#endif  // TARGETS_LOADER_H_
