// Collecting diagnostics: the sink every check reports to, and the mapping of a structural error (a status from
// spatial/validate.h or spatial/proto_io.h) to a diagnostic that names its section, stage and field.
#ifndef CERTIFY_DIAGNOSTICS_H_
#define CERTIFY_DIAGNOSTICS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "proto/certificate.pb.h"

namespace spatial::certify {

// A hostile program can fault everywhere; past this many diagnostics the rest are counted, not kept.
inline constexpr size_t kMaxDiagnostics = 1000;

class DiagnosticSink {
 public:
  explicit DiagnosticSink(std::vector<proto::Diagnostic>* out) : out_(out) {}

  // Diagnostics added next name this section (index -1 and empty name: composition level).
  void SetSection(int index, std::string name) {
    section_index_ = index;
    section_ = std::move(name);
  }

  // `stage_index` -1 for a diagnostic about the section (or composition) as a whole.
  void Add(std::string_view code, int stage_index, std::string stage, std::string field, std::string expected,
           std::string actual, std::string message);

  size_t size() const { return out_->size() + dropped_; }
  size_t dropped() const { return dropped_; }

  // Tentative proofs: Mark() before, Rollback(mark) to drop what they reported.
  size_t Mark() const { return out_->size(); }
  void Rollback(size_t mark) {
    if (mark < out_->size()) out_->resize(mark);
  }
  proto::Diagnostic& at(size_t i) { return (*out_)[i]; }

 private:
  std::vector<proto::Diagnostic>* out_;
  int section_index_ = -1;
  std::string section_;
  size_t dropped_ = 0;
};

// One MALFORMED (or `code`) diagnostic from a structural error: the diagnostic it carries (validation and the
// wire conversion type every failure, spatial/diagnostic_status.h), else its message whole.
proto::Diagnostic DiagnosticFromStatus(std::string_view code, const absl::Status& status);

}  // namespace spatial::certify

#endif  // CERTIFY_DIAGNOSTICS_H_
