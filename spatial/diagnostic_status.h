// Typed faults (DESIGN §3.6): a failure carries its structured diagnostic (code, section, stage, field, expected,
// actual, message) on the absl::Status as a payload, from validation to the CLI, so no consumer parses a message
// back into its parts. The message stays the readable one-line form.
#ifndef SPATIAL_DIAGNOSTIC_STATUS_H_
#define SPATIAL_DIAGNOSTIC_STATUS_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "proto/certificate.pb.h"

namespace spatial {

inline constexpr char kDiagnosticPayloadUrl[] = "type.googleapis.com/spatial.proto.Diagnostic";

// `st` with `d` attached (an OK status stays OK).
absl::Status WithDiagnostic(absl::Status st, const proto::Diagnostic& d);

// The diagnostic a status carries, or nullopt.
std::optional<proto::Diagnostic> DiagnosticOf(const absl::Status& st);

// Where a structural check is: the readable prefix of its message ("section 's' stage 'g' (#3) ") and the same
// facts typed, for the diagnostic the failure carries.
struct DiagWhere {
  std::string text;
  std::string section;
  int section_index = -1;
  std::string stage;
  int stage_index = -1;
  std::string part;  // a path inside the section or stage ("tensors[2] 'x' ", "trip ")

  static DiagWhere Composition(const std::string& name);
  DiagWhere Section(const std::string& name, int index = -1) const;
  DiagWhere Stage(const std::string& name, int index) const;
  DiagWhere Part(const std::string& p) const;
};

// InvalidArgument "<where>field: what", carrying the MALFORMED diagnostic (field = where's part + field).
absl::Status Malformed(const DiagWhere& where, std::string_view field, const std::string& what);
// InvalidArgument "<where>text" for a failure with no field of its own.
absl::Status MalformedAt(const DiagWhere& where, const std::string& text);
// A failure inside a nested part (a stage's body): `inner`'s diagnostic placed at `where`, its field prefixed.
absl::Status MalformedWithin(const DiagWhere& where, std::string_view prefix, const absl::Status& inner);

}  // namespace spatial

#endif  // SPATIAL_DIAGNOSTIC_STATUS_H_
