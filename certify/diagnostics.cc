#include "certify/diagnostics.h"

#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "spatial/diagnostic_status.h"

namespace spatial {
namespace certify {

void DiagnosticSink::Add(std::string_view code, int stage_index, std::string stage, std::string field,
                         std::string expected, std::string actual, std::string message) {
  if (out_->size() >= kMaxDiagnostics) {
    ++dropped_;
    return;
  }
  proto::Diagnostic& d = out_->emplace_back();
  d.set_code(std::string(code));
  d.set_section(section_);
  if (section_index_ >= 0) d.set_section_index(section_index_);
  d.set_stage(std::move(stage));
  if (stage_index >= 0) d.set_stage_index(stage_index);
  d.set_field(std::move(field));
  d.set_expected(std::move(expected));
  d.set_actual(std::move(actual));
  d.set_message(std::move(message));
}

proto::Diagnostic DiagnosticFromStatus(std::string_view code, const absl::Status& status) {
  // A typed failure (validation's) carries its diagnostic: take it as it is.
  if (std::optional<proto::Diagnostic> typed = DiagnosticOf(status)) {
    typed->set_code(std::string(code));
    return *typed;
  }
  // An untyped error (none of the project's checks makes one) keeps its message whole: nothing is parsed.
  proto::Diagnostic d;
  d.set_code(std::string(code));
  d.set_message(std::string(status.message()));
  return d;
}

}  // namespace certify

std::string FormatDiagnostic(const proto::Diagnostic& d, const std::string& file) {
  std::string out = absl::StrCat(file, ": error: [", d.code(), "]");
  if (!d.section().empty()) absl::StrAppend(&out, " section '", d.section(), "'");
  if (!d.stage().empty() || d.has_stage_index()) {
    absl::StrAppend(&out, " stage '", d.stage(), "'");
    if (d.has_stage_index()) absl::StrAppend(&out, " (#", d.stage_index(), ")");
  }
  if (!d.field().empty()) absl::StrAppend(&out, " ", d.field());
  absl::StrAppend(&out, ": ", d.message());
  if (!d.expected().empty() || !d.actual().empty()) {
    absl::StrAppend(&out, " (expected ", d.expected().empty() ? "?" : d.expected(), ", got ",
                    d.actual().empty() ? "?" : d.actual(), ")");
  }
  return out;
}

}  // namespace spatial
