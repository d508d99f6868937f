#include "tools/command_common.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "certify/admitted_inputs.h"
#include "google/protobuf/util/message_differencer.h"
#include "sim/numerics/target_model.h"
#include "spatial/proto_file.h"
#include "spatial/proto_io.h"
#include "spatial/validate.h"
#include "targets/loader.h"
#include "tools/cli.h"
#include "tools/npy.h"
#include "tools/random_inputs.h"
#include "tools/tensor_report.h"

namespace spatial {
namespace {

using google::protobuf::util::MessageDifferencer;

std::string Describe(const Tensor& t) {
  return absl::StrCat("'", t.name, "' (", t.rows, "x", t.cols, " ", std::string(PrecisionName(t.precision)), ")");
}

// A tensor name as a file name: names come from the program file, which may be hostile ("../../x"), so anything
// outside [A-Za-z0-9_.-] becomes '_' and a leading '.' too.
std::string FileStem(const std::string& name) {
  std::string s = name.empty() ? "_" : name;
  for (char& c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    if (!ok) c = '_';
  }
  if (s[0] == '.') s[0] = '_';
  return s;
}

// Writes one .npy per tensor into `dir`; names that collide after FileStem are an error rather than a silent
// overwrite. A directory that cannot be made, or a file in it that cannot be written, is PermissionDenied: the
// output path is unusable.
absl::Status WriteAll(const std::filesystem::path& dir,
                      const std::vector<std::pair<std::string, const TensorData*>>& ts) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat(dir.string(), ": error: cannot create directory: ", ec.message()));
  }
  std::set<std::string> used;
  for (const auto& [name, t] : ts) {
    std::string stem = FileStem(name);
    if (!used.insert(stem).second) {
      return absl::InvalidArgumentError(absl::StrCat(dir.string(), ": error: two tensors map to the file name '",
                                                     stem, ".npy' (one is '", name, "')"));
    }
    if (absl::Status st = WriteNpy((dir / (stem + ".npy")).string(), *t); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<LoadedProgram> LoadProgram(const std::string& path, int* exit_code) {
  proto::Composition p;
  if (absl::Status st = ReadProtoFile(path, &p); !st.ok()) {
    cli::PrintError(std::cerr, cli::DisplayName(path), st);
    *exit_code = cli::kExitUsage;
    return std::nullopt;
  }
  absl::StatusOr<Composition> c = FromProto(p);
  absl::Status st = c.ok() ? ValidateComposition(*c) : c.status();
  if (!st.ok()) {
    cli::PrintError(std::cerr, cli::DisplayName(path), absl::StrCat("invalid program: ", st.message()));
    *exit_code = cli::kExitFailed;
    return std::nullopt;
  }
  LoadedProgram out{std::move(*c), std::nullopt};
  if (p.has_target_description()) out.recorded_target = p.target_description();
  return out;
}

std::optional<Target> LoadTargetOrReport(const std::string& name_or_path, const std::string& command,
                                         int* exit_code) {
  absl::StatusOr<Target> t = LoadTarget(name_or_path);
  if (!t.ok()) {
    cli::PrintError(std::cerr, absl::StrCat("spatial ", command), t.status());
    *exit_code = cli::kExitUsage;
    return std::nullopt;
  }
  return std::move(*t);
}

std::optional<Target> ResolveTarget(const std::string& program_target, const proto::Target* recorded,
                                    const cli::ParsedArgs& args, const std::string& cmd, const std::string& where,
                                    int* exit_code) {
  *exit_code = cli::kExitUsage;
  std::optional<Target> given;
  if (args.Has("target")) {
    given = LoadTargetOrReport(args.Get("target"), cmd, exit_code);
    if (!given) return std::nullopt;
  }
  if (recorded != nullptr) {
    // The description travels with the program: it is checked like a target file, and a different --target
    // would silently run another machine than the one the program was lowered (and its buffers sized) for.
    if (absl::Status st = ValidateTarget(*recorded, absl::StrCat(where, " (target_description)")); !st.ok()) {
      cli::PrintError(std::cerr, where, st);
      return std::nullopt;
    }
    if (given) {
      MessageDifferencer d;
      std::string diff;
      d.ReportDifferencesToString(&diff);
      if (!d.Compare(*recorded, given->proto())) {
        diff = diff.substr(0, diff.find('\n'));
        cli::PrintError(std::cerr, where,
                        absl::StrCat("--target=", args.Get("target"), " differs from the target description '",
                                     recorded->name(), "' recorded in the program (", diff,
                                     "); lower the op again for that target, or leave out --target"));
        return std::nullopt;
      }
    }
    *exit_code = cli::kExitOk;
    return Target(*recorded);
  }
  if (given) {
    *exit_code = cli::kExitOk;
    return given;
  }
  if (program_target.empty()) {
    cli::UsageError(std::cerr, cmd, "the program names no target: give --target=NAME|FILE");
    return std::nullopt;
  }
  std::optional<Target> shipped = LoadTargetOrReport(program_target, cmd, exit_code);
  if (shipped) *exit_code = cli::kExitOk;
  return shipped;
}

std::vector<cli::FlagSpec> InputFlags() {
  using cli::FlagSpec;
  return {
      {"input", FlagSpec::Kind::kRepeated, "NAME=FILE.npy|V[,V...]",
       "value of the run input NAME: a .npy file, or a decimal number or comma-separated ones (pos=4096)"},
      {"inputs-dir", FlagSpec::Kind::kValue, "DIR", "read every run input not given by --input from DIR/NAME.npy"},
      {"random-inputs", FlagSpec::Kind::kValue, "SEED",
       "fill the rest from SEED: floats uniform in [-2, 2), integers inside the range the certificate admits"},
      {"zero-missing", FlagSpec::Kind::kBool, "", "run inputs still without a value read as zeros (said in the output)"},
  };
}

namespace {

// Whether the text after --input NAME= is literal numbers ("4096", "1,2,3") rather than a .npy file: it is no
// existing file, names no .npy and no folder, and starts as a number does (or is "nan", "inf"). The file is probed
// with the non-throwing overload: a long value list is no valid file name (ENAMETOOLONG), which the throwing one
// turns into an exception; any error there just means "not a file".
bool IsNumberList(const std::string& text) {
  std::error_code ec;
  if (std::filesystem::exists(text, ec)) return false;
  if (absl::EndsWith(text, ".npy") || text.find('/') != std::string::npos) return false;
  const absl::string_view s = absl::StripLeadingAsciiWhitespace(text);
  if (s.empty()) return false;
  if (absl::ascii_isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' || s[0] == '.') return true;
  double v = 0;
  return absl::SimpleAtod(absl::StripAsciiWhitespace(s.substr(0, s.find(','))), &v);
}

// Element `i` of a literal list for tensor `t`; errors say what is wrong with it, quoting it as written. Decimal
// only: SimpleAtod also reads hexadecimal, and "pos=0x10" read as 16 is a surprise, not a convenience. An integer is
// parsed as one, so a value beyond what the tensor holds is reported as written, not as its nearest double
// (9223372036854775807 read as 9223372036854775808), and a number too large for f64 is not reported as "inf".
absl::StatusOr<double> ListElement(const Tensor& t, absl::string_view text, size_t i) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat("element ", i, " is empty"));
  if (text.find_first_of("xX") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("element ", i, " '", text, "' is not a decimal number (hexadecimal is not read)"));
  }
  const bool integer = IsInteger(t.precision);
  const RunIntRange range = integer ? RunInputIntRange(t.precision) : RunIntRange{};  // tools/npy.h
  const int64_t lo = range.lo, hi = range.hi;
  auto does_not_fit = [&] {
    return absl::InvalidArgumentError(absl::StrCat("element ", i, " = ", text, " does not fit the tensor '", t.name,
                                                   "' of precision ", std::string(PrecisionName(t.precision)), " (",
                                                   lo, "..", hi, ")"));
  };
  int64_t n = 0;
  if (absl::SimpleAtoi(text, &n)) {
    if (integer && (n < lo || n > hi)) return does_not_fit();
    return static_cast<double>(n);
  }
  double v = 0;
  if (!absl::SimpleAtod(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("element ", i, " '", text, "' is not a number"));
  }
  const std::string lower = absl::AsciiStrToLower(text);
  const bool special = absl::StrContains(lower, "nan") || absl::StrContains(lower, "inf");
  if (!std::isfinite(v) && !special) {
    return absl::InvalidArgumentError(absl::StrCat("element ", i, " = ", text, " is beyond the range of f64"));
  }
  if (integer) {
    if (!std::isfinite(v) || v != std::trunc(v)) {
      return absl::InvalidArgumentError(absl::StrCat("the tensor '", t.name, "' is ",
                                                     std::string(PrecisionName(t.precision)), " but element ", i,
                                                     " is ", text, ", not an integer"));
    }
    if (v < static_cast<double>(lo) || v > static_cast<double>(hi)) return does_not_fit();
  }
  return v;
}

// The literal numbers of --input NAME=V[,V...]: every element of `t` in row-major order. Errors name the input.
absl::StatusOr<TensorData> ListValue(const Tensor& t, const std::string& text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ',');
  const std::string where = absl::StrCat("--input ", t.name);
  if (static_cast<int64_t>(parts.size()) != t.rows * t.cols) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", parts.size(), " value(s) for tensor '", t.name,
                                                   "' of ", t.rows, "x", t.cols, " (give all ", t.rows * t.cols,
                                                   ", or a .npy file)"));
  }
  TensorData d;
  d.rows = t.rows;
  d.cols = t.cols;
  d.precision = t.precision;
  d.values.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    absl::StatusOr<double> v = ListElement(t, parts[i], i);
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", v.status().message()));
    d.values.push_back(*v);
  }
  return d;
}

// One value given by --input: the literal numbers or the .npy file. Errors about a file carry its name as their
// location; those about numbers name the input.
absl::StatusOr<TensorData> InputValue(const Tensor& t, const std::string& text) {
  if (IsNumberList(text)) return ListValue(t, text);
  absl::StatusOr<NpyArray> a = ReadNpy(text);
  if (!a.ok()) return a.status();
  return NpyToTensor(*a, t, text);
}

// Warns (and notes) when some of a given input's values lie outside [lo, hi]: `what` says whose range it is.
void WarnOutside(const std::string& name, const TensorData& d, double lo, double hi, const std::string& what,
                 const std::string& where, std::vector<std::string>* notes) {
  const int64_t outside =
      std::count_if(d.values.begin(), d.values.end(), [&](double v) { return !(v >= lo && v <= hi); });
  if (outside == 0) return;
  const std::string line = absl::StrCat("run input '", name, "' has ", outside, " of ", d.values.size(),
                                        " values outside [", lo, ", ", hi, "], ", what);
  std::cerr << where << ": warning: " << line << "\n";
  if (notes != nullptr) notes->push_back(line);
}

}  // namespace

std::optional<TensorMap> GivenInputs(const Composition& c, const cli::ParsedArgs& args, const std::string& cmd,
                                     int* exit_code) {
  *exit_code = cli::kExitUsage;
  const std::vector<Tensor> wanted = CompositionInputs(c);
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const Tensor& t : wanted) {
      if (t.name == name) return &t;
    }
    return nullptr;
  };
  std::string input_names;
  for (const Tensor& t : wanted) absl::StrAppend(&input_names, input_names.empty() ? "" : ", ", t.name);
  if (input_names.empty()) input_names = "none";
  TensorMap inputs;
  for (const std::string& spec : args.GetAll("input")) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      cli::UsageError(std::cerr, cmd, absl::StrCat("--input '", spec, "' is not NAME=FILE.npy or NAME=VALUE"));
      return std::nullopt;
    }
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    const Tensor* t = find(name);
    if (t == nullptr) {
      cli::UsageError(std::cerr, cmd, absl::StrCat("--input ", name, ": the program has no run input '", name,
                                                   "' (its run inputs: ", input_names, ")"));
      return std::nullopt;
    }
    if (inputs.count(name)) {
      cli::UsageError(std::cerr, cmd, absl::StrCat("--input ", name, " given twice"));
      return std::nullopt;
    }
    absl::StatusOr<TensorData> d = InputValue(*t, file);
    if (!d.ok()) {
      cli::PrintError(std::cerr, absl::StrCat("spatial ", cmd), d.status());
      return std::nullopt;
    }
    inputs[name] = std::move(*d);
  }
  if (args.Has("inputs-dir")) {
    const std::filesystem::path dir(args.Get("inputs-dir"));
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      cli::UsageError(std::cerr, cmd, absl::StrCat("--inputs-dir ", dir.string(), ": not a directory"));
      return std::nullopt;
    }
    for (const Tensor& t : wanted) {
      const std::filesystem::path file = dir / (FileStem(t.name) + ".npy");
      if (inputs.count(t.name) || !std::filesystem::exists(file, ec)) continue;
      absl::StatusOr<TensorData> d = InputValue(t, file.string());
      if (!d.ok()) {
        cli::PrintError(std::cerr, file.string(), d.status());
        return std::nullopt;
      }
      inputs[t.name] = std::move(*d);
    }
  }
  *exit_code = cli::kExitOk;
  return inputs;
}

std::optional<TensorMap> GatherInputs(const Composition& c, const Target* target, const cli::ParsedArgs& args,
                                      const std::string& cmd, const std::string& where,
                                      std::vector<std::string>* notes, int* exit_code, bool require_all) {
  *exit_code = cli::kExitUsage;
  std::vector<Tensor> wanted = CompositionInputs(c);
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const Tensor& t : wanted) {
      if (t.name == name) return &t;
    }
    return nullptr;
  };
  // Sizes first: the values are f64 in memory, so a program whose run inputs are larger than this machine holds
  // is refused before anything is allocated (a 65536 x 65536 input is 34 GB).
  double total = 0;
  for (const Tensor& t : wanted) {
    total += static_cast<double>(t.rows) * static_cast<double>(t.cols);
    if (total > static_cast<double>(kMaxRunInputElems)) {
      cli::PrintError(std::cerr, where,
                      absl::StrFormat("the run inputs up to '%s' (%dx%d) hold %.3g elements; a run is given at most "
                                      "%.3g (%d GiB of f64 values)",
                                      t.name, t.rows, t.cols, total, static_cast<double>(kMaxRunInputElems),
                                      kMaxRunInputElems * 8 >> 30));
      *exit_code = cli::kExitFailed;
      return std::nullopt;
    }
  }

  std::optional<TensorMap> given = GivenInputs(c, args, cmd, exit_code);
  if (!given) return std::nullopt;
  *exit_code = cli::kExitUsage;
  TensorMap inputs = *std::move(given);
  // The range each integer run input admits (certify/admitted_inputs.h): drawn from, and a given value checked
  // against. Certifying again per candidate range is not free: only when there is something to draw or check.
  const bool given_integer =
      std::any_of(inputs.begin(), inputs.end(), [](const auto& g) { return IsInteger(g.second.precision); });
  std::map<std::string, std::pair<int64_t, int64_t>> admitted;
  if (target != nullptr && (args.Has("random-inputs") || given_integer)) {
    for (const proto::AdmittedInput& a : AdmitInputs(c, *target)) {
      admitted[a.tensor()] = {a.admitted().lo(), a.admitted().hi()};
    }
  }
  // A given value outside it runs (the run's own check names the fault exactly), with a warning that says which
  // input and range, since the fault is reported where the value is read, not where it was given.
  for (const auto& [name, d] : inputs) {
    auto a = admitted.find(name);
    if (a == admitted.end()) continue;
    WarnOutside(name, d, static_cast<double>(a->second.first), static_cast<double>(a->second.second),
                "the range the program's checks admit for it; the run may fault", where, notes);
  }
  if (args.Has("random-inputs")) {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(args.Get("random-inputs"), &seed)) {
      cli::UsageError(std::cerr, cmd,
                      absl::StrCat("--random-inputs needs a non-negative integer seed, got '",
                                   args.Get("random-inputs"), "'"));
      return std::nullopt;
    }
    for (const Tensor& t : wanted) {
      if (inputs.count(t.name)) continue;
      auto a = admitted.find(t.name);
      inputs[t.name] = RandomTensor(t, seed, a == admitted.end() ? std::nullopt : std::optional(a->second));
    }
  }
  std::vector<std::string> missing;
  for (const Tensor& t : wanted) {
    if (!inputs.count(t.name)) missing.push_back(t.name);
  }
  if (!missing.empty() && require_all) {
    if (!args.GetBool("zero-missing")) {
      for (const std::string& name : missing) {
        const Tensor& t = *find(name);
        cli::PrintError(std::cerr, where,
                        absl::StrCat("no value for run input ", Describe(t), " (", std::string(TensorRoleName(t.role)),
                                     "): give --input ", t.name, "=FILE.npy, --inputs-dir=DIR or --random-inputs=SEED",
                                     t.role == TensorRole::kParam ? " (a weight the program does not embed)" : ""));
      }
      return std::nullopt;
    }
    for (const std::string& name : missing) {
      const Tensor& t = *find(name);
      TensorData d;
      d.rows = t.rows;
      d.cols = t.cols;
      d.precision = t.precision;
      d.values.assign(static_cast<size_t>(t.rows * t.cols), 0.0);
      inputs[name] = std::move(d);
    }
    if (notes != nullptr) notes->push_back(absl::StrCat("run inputs read as zeros (--zero-missing): ",
                                                        absl::StrJoin(missing, ", ")));
  }
  // The machine stores every tensor at its precision; rounding here gives the VM the same values.
  if (target != nullptr) {
    std::unique_ptr<ValueModel> model = MakeTargetModel(*target);
    std::vector<std::string> rounded;
    for (auto& [name, d] : inputs) {
      // A value count that is not rows x cols is the run's to refuse (the VM names it), not rounded here.
      if (IsInteger(d.precision) || d.values.empty() || static_cast<int64_t>(d.values.size()) != d.rows * d.cols) {
        continue;
      }
      std::vector<double> before = d.values;
      model->StoreRoundRows(d.precision, d.values.data(), d.rows, d.cols);
      if (before != d.values) rounded.push_back(name);
    }
    if (!rounded.empty() && notes != nullptr) {
      notes->push_back(absl::StrCat("float inputs rounded to their tensors' precision (", target->name(),
                                    "'s store rounding): ", absl::StrJoin(rounded, ", ")));
    }
  }
  // Values outside an input's domain run as given (the program's meaning covers them), but the op's claims do not.
  for (const Tensor& t : wanted) {
    auto it = inputs.find(t.name);
    if (!t.domain || it == inputs.end()) continue;
    WarnOutside(t.name, it->second, t.domain->lo, t.domain->hi, "its domain; the op's claims assume it", where,
                notes);
  }
  *exit_code = cli::kExitOk;
  return inputs;
}

int WriteResults(const Composition& c, const TensorMap& out, const TensorMap& inputs, const cli::ParsedArgs& args,
                 const std::string& cmd, const std::string& where) {
  std::vector<std::pair<std::string, const TensorData*>> results, given;
  for (const Tensor& t : CompositionResults(c)) {
    auto it = out.find(t.name);
    if (it == out.end()) {
      cli::PrintError(std::cerr, where, absl::StrCat("no value was computed for result tensor ", Describe(t)));
      return cli::kExitFailed;
    }
    results.emplace_back(t.name, &it->second);
  }
  for (const auto& [name, d] : inputs) given.emplace_back(name, &d);

  if (args.Has("output-dir")) {
    std::filesystem::path dir(args.Get("output-dir"));
    absl::Status st = WriteAll(dir, results);
    if (st.ok()) st = WriteAll(dir / "inputs", given);
    if (!st.ok()) {
      cli::PrintError(std::cerr, absl::StrCat("spatial ", cmd), st);
      // An --output-dir that cannot be made or written is bad usage; two tensors that map to one file name, or a
      // write that fails part way, is not the caller's path.
      return st.code() == absl::StatusCode::kPermissionDenied ? cli::kExitUsage : cli::kExitFailed;
    }
  }
  if (!args.GetBool("quiet")) {
    std::cout << FormatTensorTable(results);
    if (args.Has("output-dir")) {
      std::cout << "wrote " << results.size() << " result(s) to " << args.Get("output-dir") << "/ and "
                << given.size() << " input(s) to " << args.Get("output-dir") << "/inputs/\n";
    }
  }
  return cli::kExitOk;
}

}  // namespace spatial
