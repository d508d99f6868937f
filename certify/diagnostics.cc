#include "certify/diagnostics.h"

#include <cctype>

#include "absl/strings/numbers.h"
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

namespace {

// Consumes "<word> '<name>' " at the front of `s`; returns false (and leaves `s`) when it is not there.
bool TakeNamed(std::string_view& s, std::string_view word, std::string* name) {
  const std::string prefix = absl::StrCat(std::string(word), " '");
  if (s.substr(0, prefix.size()) != prefix) return false;
  const size_t end = s.find("' ", prefix.size());
  const size_t end_colon = s.find("':", prefix.size());
  size_t close = std::min(end, end_colon);
  if (close == std::string_view::npos) return false;
  *name = std::string(s.substr(prefix.size(), close - prefix.size()));
  s.remove_prefix(close + 1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return true;
}

// Consumes "(#n) " at the front of `s`.
bool TakeIndex(std::string_view& s, int* index) {
  if (s.substr(0, 2) != "(#") return false;
  const size_t close = s.find(')');
  if (close == std::string_view::npos) return false;
  int v = 0;
  if (!absl::SimpleAtoi(absl::string_view(s.data() + 2, close - 2), &v)) return false;
  *index = v;
  s.remove_prefix(close + 1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return true;
}

}  // namespace

proto::Diagnostic DiagnosticFromStatus(std::string_view code, const absl::Status& status) {
  // A typed failure (validation's) carries its diagnostic: take it as it is.
  if (std::optional<proto::Diagnostic> typed = DiagnosticOf(status)) {
    typed->set_code(std::string(code));
    return *typed;
  }
  // Other errors (a wire-format conversion) are read from their message.
  proto::Diagnostic d;
  d.set_code(std::string(code));
  const absl::string_view message = status.message();
  std::string_view s(message.data(), message.size());
  std::string name;
  int index = -1;
  if (TakeNamed(s, "composition", &name)) {
    // The composition's name adds nothing to a diagnostic about one of its parts.
  }
  if (TakeNamed(s, "section", &name)) {
    d.set_section(name);
    if (TakeIndex(s, &index)) d.set_section_index(index);
  }
  if (TakeNamed(s, "stage", &name)) {
    d.set_stage(name);
    if (TakeIndex(s, &index)) d.set_stage_index(index);
  }
  if (!s.empty() && s.front() == ':') s.remove_prefix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  // "field: what", where the field is a short path without spaces around ": ".
  const size_t colon = s.find(": ");
  if (colon != std::string_view::npos && colon > 0 && colon <= 80) {
    d.set_field(std::string(s.substr(0, colon)));
    s.remove_prefix(colon + 2);
  }
  d.set_message(std::string(s));
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
