// The certifier (DESIGN §6): program + target -> a certificate of what was proven, or diagnostics saying what
// could not be, each with a stable code (certify/codes.h), the section, stage and field it points at, and the
// expected and actual values.
//
// Every check is linear in the program: per stage, per buffer, per item; never stage x stage. Addresses are
// proven by interval arithmetic over the item coordinates, fold blocks and admitted index ranges, falling back
// to one evaluation per item only where the box over all items fails. A Generic's reads are proven under the
// conditions of the Select branches that perform them (Select is lazy; DESIGN §3.4).
#ifndef CERTIFY_CERTIFY_H_
#define CERTIFY_CERTIFY_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "proto/certificate.pb.h"
#include "proto/program.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

struct CertifyResult {
  // What was proven. Filled as far as the checks got, also when there are diagnostics.
  proto::Certificate certificate;
  std::vector<proto::Diagnostic> diagnostics;
  bool ok() const { return diagnostics.empty(); }
};

struct CertifyOptions {
  // Inclusive value ranges the run promises for some integer run inputs, by tensor name; the guards' proven
  // ranges then start from them instead of the precision's whole range, and a page loaded from such an input is
  // taken to hold only that range (its tile padding too). That is a question, not a proof: certify/admitted_inputs.h
  // asks which values keep the guards that read an input in range. A certificate never rests on it.
  std::map<std::string, std::pair<int64_t, int64_t>> input_ranges;
};

// Certifies `c` on `target`. Never crashes: a structurally invalid composition (spatial/validate.h) yields one
// MALFORMED diagnostic and no further checks.
CertifyResult Certify(const Composition& c, const Target& target, const CertifyOptions& options = {});

// Certifies a composition as read from the wire: a stage with no kind is OPEN_ALGEBRA, anything else
// FromProto rejects is MALFORMED.
CertifyResult CertifyProto(const proto::Composition& p, const Target& target);

// GNU style: "file: error: [CODE] section 'x' stage 'y' (#3) ins[1]: message (expected E, got A)". Parts that
// the diagnostic does not have are left out.
std::string FormatDiagnostic(const proto::Diagnostic& d, const std::string& file);

}  // namespace spatial

#endif  // CERTIFY_CERTIFY_H_
