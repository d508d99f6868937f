#include "spatial/diagnostic_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

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

DiagWhere DiagWhere::Composition(const std::string& name) {
  DiagWhere w;
  w.text = absl::StrCat("composition '", name, "' ");
  return w;
}

DiagWhere DiagWhere::Section(const std::string& name, int index) const {
  DiagWhere w = *this;
  absl::StrAppend(&w.text, "section '", name, "' ", index >= 0 ? absl::StrCat("(#", index, ") ") : "");
  w.section = name;
  w.section_index = index;
  return w;
}

DiagWhere DiagWhere::Stage(const std::string& name, int index) const {
  DiagWhere w = *this;
  absl::StrAppend(&w.text, "stage '", name, "' (#", index, ") ");
  w.stage = name;
  w.stage_index = index;
  return w;
}

DiagWhere DiagWhere::Part(const std::string& p) const {
  DiagWhere w = *this;
  w.text += p;
  w.part += p;
  return w;
}

namespace {

proto::Diagnostic At(const DiagWhere& where) {
  proto::Diagnostic d;
  d.set_code("MALFORMED");
  d.set_section(where.section);
  if (where.section_index >= 0) d.set_section_index(where.section_index);
  d.set_stage(where.stage);
  if (where.stage_index >= 0) d.set_stage_index(where.stage_index);
  return d;
}

}  // namespace

absl::Status Malformed(const DiagWhere& where, std::string_view field, const std::string& what) {
  proto::Diagnostic d = At(where);
  d.set_field(absl::StrCat(where.part, std::string(field)));
  d.set_message(what);
  return WithDiagnostic(absl::InvalidArgumentError(absl::StrCat(where.text, std::string(field), ": ", what)), d);
}

absl::Status MalformedAt(const DiagWhere& where, const std::string& text) {
  proto::Diagnostic d = At(where);
  d.set_message(absl::StrCat(where.part, text));
  return WithDiagnostic(absl::InvalidArgumentError(absl::StrCat(where.text, text)), d);
}

absl::Status MalformedWithin(const DiagWhere& where, std::string_view prefix, const absl::Status& inner) {
  proto::Diagnostic d = At(where);
  const std::optional<proto::Diagnostic> in = DiagnosticOf(inner);
  if (in && !in->field().empty()) {
    d.set_field(absl::StrCat(where.part, std::string(prefix), in->field()));
    d.set_message(in->message());
  } else {
    d.set_message(absl::StrCat(where.part, std::string(prefix), inner.message()));
  }
  return WithDiagnostic(
      absl::Status(inner.code(), absl::StrCat(where.text, std::string(prefix), inner.message())), d);
}

}  // namespace spatial
