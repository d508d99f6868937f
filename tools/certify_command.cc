// `spatial certify`: proves a program safe on a target (footprints fit, carried state read in order, no index
// leaves its tensor) and writes the certificate, or prints each diagnostic GNU style and exits 1.
#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "certify/admitted_inputs.h"
#include "certify/certify.h"
#include "spatial/proto_io.h"
#include "proto/program.pb.h"
#include "spatial/proto_file.h"
#include "tools/command_common.h"
#include "tools/commands.h"

namespace spatial {
namespace {

using cli::FlagSpec;

int RunCertify(const cli::ParsedArgs& args) {
  const std::string cmd = "certify";
  const std::string path = args.positional[0];
  const std::string where = cli::DisplayName(path);
  // Read the wire form, not the validated C++ model: a malformed or open-algebra program is a diagnostic of the
  // certifier (exit 1), while an unreadable file is bad input (exit 2).
  proto::Composition p;
  if (absl::Status st = ReadProtoFile(path, &p); !st.ok()) {
    cli::PrintError(std::cerr, where, st);
    return cli::kExitUsage;
  }
  int exit_code = cli::kExitOk;
  std::optional<Target> target = ResolveTarget(p.target(), p.has_target_description() ? &p.target_description() : nullptr,
                                               args, cmd, where, &exit_code);
  if (!target) return exit_code;

  CertifyResult r = CertifyProto(p, *target);
  if (r.ok()) {
    // What the run inputs may hold for no guard ever to fault: the certificate says so, and random inputs use it.
    if (absl::StatusOr<Composition> c = FromProto(p); c.ok()) {
      for (proto::AdmittedInput& a : AdmitInputs(*c, *target)) *r.certificate.add_admitted_inputs() = std::move(a);
    }
  }
  for (const proto::Diagnostic& d : r.diagnostics) std::cerr << FormatDiagnostic(d, where) << "\n";
  if (args.Has("o")) {
    if (absl::Status st = WriteProtoFile(args.Get("o"), r.certificate); !st.ok()) {
      cli::PrintError(std::cerr, absl::StrCat("spatial ", cmd), st);
      return cli::kExitFailed;
    }
  }
  if (!r.ok()) {
    std::cerr << where << ": " << r.diagnostics.size() << " diagnostic(s); not certified on " << target->name()
              << "\n";
    return cli::kExitFailed;
  }
  if (!args.GetBool("quiet")) {
    int64_t guards = 0;
    for (const auto& s : r.certificate.sections()) guards += s.guards_size();
    std::cout << absl::StrFormat("%s: certified on %s: %d section(s), %d guard(s)\n", where, target->name(),
                                 r.certificate.sections_size(), guards);
    for (const auto& s : r.certificate.sections()) {
      std::cout << absl::StrFormat("  %-40s footprint %8d of %8d B per site (margin %d), acc tiles %d of %d\n",
                                   s.name(), s.footprint_bytes(), s.local_mem_bytes(), s.footprint_margin_bytes(),
                                   s.acc_tiles_used(), s.acc_tiles_capacity());
    }
    for (const proto::AdmittedInput& a : r.certificate.admitted_inputs()) {
      std::cout << absl::StrFormat("  run input %-30s admitted in [%d, %d] (%d guard(s))\n", a.tensor(),
                                   a.admitted().lo(), a.admitted().hi(), a.guards_size());
    }
  }
  return cli::kExitOk;
}

}  // namespace

Subcommand CertifyCommand() {
  cli::CommandSpec s;
  s.name = "certify";
  s.summary = "prove a program safe on a target, or say exactly what fails";
  s.positional = "PROG";
  s.min_positional = 1;
  s.max_positional = 1;
  s.flags = {
      {"target", FlagSpec::Kind::kValue, "NAME|FILE",
       "for a program that records no target description: the target (else it must equal the recorded one)"},
      {"o", FlagSpec::Kind::kValue, "CERT",
       "write the certificate (.json JSON, .binpb binary, else text proto; '-' stdout)",
       false, FlagSpec::Output::kFile},
      {"quiet", FlagSpec::Kind::kBool, "", "print nothing but diagnostics"},
  };
  s.description =
      "Checks PROG ('-': stdin) against the target: structure and closed algebra, footprint per site, accumulator\n"
      "tiles, every index and tile address for every item and block, carried-state order, precisions, work items.\n"
      "Diagnostics print as 'PROG: error: [CODE] section ... stage ... field: message'. Exit 1 when any fails.";
  s.examples = {"spatial certify --target=wormhole_n150 silu.textproto -o silu.cert.textproto"};
  return {s, &RunCertify};
}

}  // namespace spatial
