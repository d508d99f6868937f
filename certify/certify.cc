// The certifier's driver: structure first (nothing else is safe to evaluate on a malformed program), then each
// section's checks in one linear pass apiece, then what ties the sections together.
#include "certify/certify.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "certify/codes.h"
#include "certify/context.h"
#include "certify/diagnostics.h"
#include "certify/value_ranges.h"
#include "spatial/proto_io.h"
#include "spatial/validate.h"

namespace spatial {

CertifyResult Certify(const Composition& c, const Target& target, const CertifyOptions& options) {
  CertifyResult result;
  proto::Certificate& cert = result.certificate;
  cert.set_composition(c.name);
  cert.set_target(target.name());
  certify::DiagnosticSink sink(&result.diagnostics);

  if (c.tile_rows != target.tile_rows() || c.tile_cols != target.tile_cols()) {
    sink.Add(codes::kTargetMismatch, -1, "", "tile_rows x tile_cols",
             absl::StrCat(target.tile_rows(), " x ", target.tile_cols(), " (target '", target.name(), "')"),
             absl::StrCat(c.tile_rows, " x ", c.tile_cols),
             absl::StrCat("the composition was built for a ", c.tile_rows, " x ", c.tile_cols, " tile (target '",
                          c.target, "'); its pages and tensor tiling mean nothing on a ", target.tile_rows(), " x ",
                          target.tile_cols(), " tile"));
    return result;
  }
  if (absl::Status st = ValidateComposition(c, c.tile_rows, c.tile_cols); !st.ok()) {
    proto::Diagnostic d = certify::DiagnosticFromStatus(codes::kMalformed, st);
    // A trip that reads past its tensor, divides by per <= 0 or admits nothing is the trip's own fault, found by
    // structural validation before any range is evaluated.
    for (const char* f : {"elem", "per", "lo"}) {
      if (d.field() == absl::StrCat("trip ", f)) {
        d.set_code(std::string(codes::kTripOutOfRange));
        d.set_field(absl::StrCat("trip.", f));
      }
    }
    if (!d.has_section_index() && !d.section().empty()) {
      for (size_t i = 0; i < c.sections.size(); ++i) {
        if (c.sections[i].name == d.section()) {
          d.set_section_index(static_cast<int>(i));
          break;
        }
      }
    }
    result.diagnostics.push_back(std::move(d));
    return result;
  }

  absl::flat_hash_map<std::string, Interval> given;
  for (const auto& [name, r] : options.input_ranges) given[name] = Interval::Of(r.first, r.second);
  certify::TensorRanges tensor_ranges(std::move(given));
  int64_t stages = 0;
  for (int i = 0; i < static_cast<int>(c.sections.size()); ++i) {
    const Section& s = c.sections[i];
    sink.SetSection(i, s.name);
    proto::SectionProof* proof = cert.add_sections();
    proof->set_name(s.name);
    proof->set_index(i);
    proof->set_stages(static_cast<int64_t>(s.stages.size()));
    proof->set_items(static_cast<int64_t>(s.items.size()));
    proof->set_num_blocks(s.num_blocks);
    // Every stage of the C++ model is Load, Store, Generic or MatmulTiles: the variant admits nothing else.
    proof->set_closed_algebra(true);
    stages += static_cast<int64_t>(s.stages.size());
    certify::SectionContext ctx(c, i, target, sink, *proof, tensor_ranges);
    certify::CheckResources(ctx);
    certify::CheckDataflow(ctx);
    certify::CheckWork(ctx);      // before the accesses: the trip's value is read before the section's stores
    certify::CheckAccesses(ctx);
    certify::CheckItemIndependence(ctx);
  }
  sink.SetSection(-1, "");
  certify::CheckStateOrder(c, sink, cert);
  cert.set_stages(stages);
  cert.set_certified(result.diagnostics.empty());
  return result;
}

CertifyResult CertifyProto(const proto::Composition& p, const Target& target) {
  CertifyResult result;
  result.certificate.set_composition(p.name());
  result.certificate.set_target(target.name());
  certify::DiagnosticSink sink(&result.diagnostics);
  // A stage outside the closed algebra cannot be converted, so it is found on the wire.
  for (int i = 0; i < p.sections_size(); ++i) {
    const proto::Section& s = p.sections(i);
    sink.SetSection(i, s.name());
    for (int k = 0; k < s.stages_size(); ++k) {
      if (s.stages(k).kind_case() != proto::Stage::KIND_NOT_SET) continue;
      sink.Add(codes::kOpenAlgebra, k, s.stages(k).name(), "kind", "one of load, store, generic, matmul", "none",
               "the stage is not in the closed algebra (Load, Store, Generic, MatmulTiles): the certifier cannot "
               "check what it does");
    }
  }
  if (!result.diagnostics.empty()) return result;
  absl::StatusOr<Composition> c = FromProto(p);
  if (!c.ok()) {
    result.diagnostics.push_back(certify::DiagnosticFromStatus(codes::kMalformed, c.status()));
    return result;
  }
  return Certify(*c, target);
}

}  // namespace spatial
