#include "tools/command_common.h"

#include <filesystem>
#include <iostream>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spatial/proto_io.h"
#include "spatial/validate.h"
#include "targets/loader.h"
#include "tools/cli.h"
#include "tools/npy.h"
#include "tools/random_inputs.h"
#include "tools/tensor_report.h"

namespace spatial {
namespace {

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
// overwrite.
absl::Status WriteAll(const std::filesystem::path& dir, const std::vector<std::pair<std::string, const TensorData*>>& ts) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(dir.string(), ": error: cannot create directory: ", ec.message()));
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

std::optional<Composition> LoadProgram(const std::string& path, int* exit_code) {
  absl::StatusOr<Composition> c = ReadComposition(path);
  if (!c.ok()) {
    cli::PrintError(std::cerr, cli::DisplayName(path), c.status());
    *exit_code = cli::kExitUsage;
    return std::nullopt;
  }
  if (absl::Status st = ValidateComposition(*c); !st.ok()) {
    cli::PrintError(std::cerr, cli::DisplayName(path), absl::StrCat("invalid program: ", st.message()));
    *exit_code = cli::kExitFailed;
    return std::nullopt;
  }
  return std::move(*c);
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

std::optional<TensorMap> GatherInputs(const Composition& c, const cli::ParsedArgs& args, const std::string& cmd,
                                      const std::string& where, int* exit_code) {
  *exit_code = cli::kExitUsage;
  std::vector<Tensor> wanted = CompositionInputs(c);
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
      cli::UsageError(std::cerr, cmd, absl::StrCat("--input '", spec, "' is not NAME=FILE.npy"));
      return std::nullopt;
    }
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    const Tensor* t = find(name);
    if (t == nullptr) {
      cli::UsageError(std::cerr, cmd, absl::StrCat("--input ", name, ": the program has no input tensor '", name,
                                                   "' (its inputs: ", input_names, ")"));
      return std::nullopt;
    }
    if (inputs.count(name)) {
      cli::UsageError(std::cerr, cmd, absl::StrCat("--input ", name, " given twice"));
      return std::nullopt;
    }
    absl::StatusOr<NpyArray> a = ReadNpy(file);
    if (!a.ok()) {
      cli::PrintError(std::cerr, file, a.status());
      return std::nullopt;
    }
    absl::StatusOr<TensorData> d = NpyToTensor(*a, *t, file);
    if (!d.ok()) {
      cli::PrintError(std::cerr, file, d.status());
      return std::nullopt;
    }
    inputs[name] = std::move(*d);
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
      if (!inputs.count(t.name)) inputs[t.name] = RandomTensor(t, seed);
    }
  }
  for (const Tensor& t : wanted) {
    if (!inputs.count(t.name)) {
      cli::PrintError(std::cerr, where,
                      absl::StrCat("no value for input tensor ", Describe(t), ": give --input ", t.name,
                                   "=FILE.npy or --random-inputs=SEED"));
      return std::nullopt;
    }
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
      return cli::kExitFailed;
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
