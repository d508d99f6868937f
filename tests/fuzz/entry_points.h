// The project's entry points other than the program pipeline (pipeline.h), each as one function from untrusted bytes
// to "what misbehaved" (empty: nothing). A misbehaviour is what the README promises never happens: an error without
// a message, or — for the lowerings — a program its own target does not certify. Shared by the libFuzzer targets
// (lower_fuzzer.cc, target_fuzzer.cc, npy_fuzzer.cc, cli_fuzzer.cc; `make fuzz`) and the deterministic replay that
// `make test` runs (entry_points_replay_test.cc).
#ifndef TESTS_FUZZ_ENTRY_POINTS_H_
#define TESTS_FUZZ_ENTRY_POINTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "certify/certify.h"
#include "lowerings/registry.h"
#include "spatial/proto_file.h"
#include "spatial/validate.h"
#include "targets/loader.h"
#include "tools/cli.h"
#include "tools/npy.h"

namespace spatial::fuzz {

inline std::string NeedsMessage(const absl::Status& st, const std::string& what) {
  return !st.ok() && st.message().empty() ? absl::StrCat(what, " failed without a message") : "";
}

// An op spec (text proto) lowered for test_tiny: a refusal or an error with a message, or a valid program that the
// target certifies (`lower` writes only those).
inline std::string CheckLower(std::string_view bytes) {
  static const Target* tiny = [] {
    absl::StatusOr<Target> t = LoadTarget("test_tiny");
    return t.ok() ? new Target(*t) : nullptr;
  }();
  if (tiny == nullptr) return "test_tiny does not load";
  proto::OpSpec spec;
  if (absl::Status st = ParseTextProto(bytes, "spec", &spec); !st.ok()) return NeedsMessage(st, "parsing a spec");
  absl::StatusOr<Composition> c = Lower(spec, *tiny);
  if (!c.ok()) return NeedsMessage(c.status(), "Lower");
  if (absl::Status st = ValidateComposition(*c); !st.ok()) {
    return absl::StrCat("Lower returned an invalid program: ", st.message());
  }
  const CertifyResult r = Certify(*c, *tiny);
  if (!r.ok()) {
    return absl::StrCat("Lower returned a program test_tiny does not certify: [", r.diagnostics[0].code(), "] ",
                        r.diagnostics[0].message());
  }
  return "";
}

// A target description (text proto): a Target or an error with a message.
inline std::string CheckTarget(std::string_view bytes) {
  absl::StatusOr<Target> t = ParseTarget(bytes, "target.textproto");
  return t.ok() ? "" : NeedsMessage(t.status(), "ParseTarget");
}

// A .npy file: an array or an error with a message; an array read back as a tensor of its own shape.
inline std::string CheckNpy(std::string_view bytes) {
  absl::StatusOr<NpyArray> a = ParseNpy(bytes, "x.npy");
  if (!a.ok()) return NeedsMessage(a.status(), "ParseNpy");
  if (a->shape.size() != 2 || a->shape[0] < 1 || a->shape[1] < 1) return "";
  Tensor t;
  t.name = "x";
  t.rows = a->shape[0];
  t.cols = a->shape[1];
  t.precision = Precision::kFp32;
  absl::StatusOr<TensorData> d = NpyToTensor(*a, t, "x.npy");
  return d.ok() ? "" : NeedsMessage(d.status(), "NpyToTensor");
}

// A command line (arguments separated by newlines) against a flag table with every kind of flag.
inline std::string CheckArgs(std::string_view bytes) {
  static const cli::CommandSpec* spec = [] {
    auto* s = new cli::CommandSpec;
    s->name = "fuzz";
    s->positional = "PROG";
    s->min_positional = 0;
    s->max_positional = 2;
    s->flags = {{"target", cli::FlagSpec::Kind::kValue, "NAME", "a value"},
                {"input", cli::FlagSpec::Kind::kRepeated, "N=V", "repeated"},
                {"quiet", cli::FlagSpec::Kind::kBool, "", "a switch"},
                {"o", cli::FlagSpec::Kind::kValue, "FILE", "one letter"},
                {"need", cli::FlagSpec::Kind::kValue, "X", "required", true}};
    return s;
  }();
  std::vector<std::string> args = absl::StrSplit(absl::string_view(bytes.data(), bytes.size()), '\n');
  absl::StatusOr<cli::ParsedArgs> p = cli::ParseArgs(*spec, args);
  return p.ok() ? "" : NeedsMessage(p.status(), "ParseArgs");
}

}  // namespace spatial::fuzz

#endif  // TESTS_FUZZ_ENTRY_POINTS_H_
