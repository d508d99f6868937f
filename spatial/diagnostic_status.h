// Typed faults (DESIGN §3.6): a failure carries its structured diagnostic (code, section, stage, field, expected,
// actual, message) on the absl::Status as a payload, from validation to the CLI, so no consumer parses a message
// back into its parts. The message stays the readable one-line form.
#ifndef SPATIAL_DIAGNOSTIC_STATUS_H_
#define SPATIAL_DIAGNOSTIC_STATUS_H_

#include <optional>

#include "absl/status/status.h"
#include "proto/certificate.pb.h"

namespace spatial {

inline constexpr char kDiagnosticPayloadUrl[] = "type.googleapis.com/spatial.proto.Diagnostic";

// `st` with `d` attached (an OK status stays OK).
absl::Status WithDiagnostic(absl::Status st, const proto::Diagnostic& d);

// The diagnostic a status carries, or nullopt.
std::optional<proto::Diagnostic> DiagnosticOf(const absl::Status& st);

}  // namespace spatial

#endif  // SPATIAL_DIAGNOSTIC_STATUS_H_
