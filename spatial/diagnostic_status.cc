#include "spatial/diagnostic_status.h"

#include <string>

#include "absl/strings/cord.h"

namespace spatial {

absl::Status WithDiagnostic(absl::Status st, const proto::Diagnostic& d) {
  if (st.ok()) return st;
  st.SetPayload(kDiagnosticPayloadUrl, absl::Cord(d.SerializeAsString()));
  return st;
}

std::optional<proto::Diagnostic> DiagnosticOf(const absl::Status& st) {
  const auto payload = st.GetPayload(kDiagnosticPayloadUrl);  // absl::optional in Debian's Abseil
  if (!payload) return std::nullopt;
  proto::Diagnostic d;
  if (!d.ParseFromString(std::string(*payload))) return std::nullopt;
  return d;
}

}  // namespace spatial
