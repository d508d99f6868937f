// `spatial vm`: runs a program on the f64 reference VM with inputs from .npy files or a seed, and writes every
// result (and every input, so the run can be repeated) as .npy.
#include <filesystem>
#include <iostream>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sim/vm/vm.h"
#include "spatial/tensor_data.h"
#include "tools/command_common.h"
#include "tools/commands.h"
#include "tools/npy.h"
#include "tools/random_inputs.h"
#include "tools/tensor_report.h"

namespace spatial {
namespace {

using cli::FlagSpec;

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

int RunVm(const cli::ParsedArgs& args) {
  const std::string cmd = "vm";
  const std::string path = args.positional[0];
  const std::string where = cli::DisplayName(path);
  int exit_code = cli::kExitOk;
  std::optional<Composition> c = LoadProgram(path, &exit_code);
  if (!c) return exit_code;

  std::vector<Tensor> wanted = CompositionInputs(*c);
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
      return cli::UsageError(std::cerr, cmd, absl::StrCat("--input '", spec, "' is not NAME=FILE.npy"));
    }
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    const Tensor* t = find(name);
    if (t == nullptr) {
      return cli::UsageError(std::cerr, cmd, absl::StrCat("--input ", name, ": the program has no input tensor '", name,
                                                          "' (its inputs: ", input_names, ")"));
    }
    if (inputs.count(name)) return cli::UsageError(std::cerr, cmd, absl::StrCat("--input ", name, " given twice"));
    absl::StatusOr<NpyArray> a = ReadNpy(file);
    if (!a.ok()) {
      cli::PrintError(std::cerr, file, a.status());
      return cli::kExitUsage;
    }
    absl::StatusOr<TensorData> d = NpyToTensor(*a, *t, file);
    if (!d.ok()) {
      cli::PrintError(std::cerr, file, d.status());
      return cli::kExitUsage;
    }
    inputs[name] = std::move(*d);
  }
  if (args.Has("random-inputs")) {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(args.Get("random-inputs"), &seed)) {
      return cli::UsageError(std::cerr, cmd,
                             absl::StrCat("--random-inputs needs a non-negative integer seed, got '",
                                          args.Get("random-inputs"), "'"));
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
      return cli::kExitUsage;
    }
  }

  absl::StatusOr<TensorMap> out = RunComposition(*c, c->tile_rows, c->tile_cols, inputs);
  if (!out.ok()) {
    cli::PrintError(std::cerr, where, out.status());
    return cli::kExitFailed;
  }
  std::vector<std::pair<std::string, const TensorData*>> results, given;
  for (const Tensor& t : CompositionResults(*c)) {
    auto it = out->find(t.name);
    if (it == out->end()) {
      cli::PrintError(std::cerr, where, absl::StrCat("the VM returned no value for result tensor ", Describe(t)));
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
      cli::PrintError(std::cerr, "spatial vm", st);
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

}  // namespace

Subcommand VmCommand() {
  cli::CommandSpec s;
  s.name = "vm";
  s.summary = "run a program on the f64 reference VM";
  s.positional = "PROG";
  s.min_positional = 1;
  s.max_positional = 1;
  s.flags = {
      {"input", FlagSpec::Kind::kRepeated, "NAME=FILE.npy", "value of the input tensor NAME from a .npy file"},
      {"random-inputs", FlagSpec::Kind::kValue, "SEED",
       "fill inputs not given by --input: floats uniform in [-2, 2), integers in [-100, 100]"},
      {"output-dir", FlagSpec::Kind::kValue, "DIR",
       "write each Output/State tensor to DIR/NAME.npy and each input to DIR/inputs/NAME.npy"},
      {"quiet", FlagSpec::Kind::kBool, "", "do not print the result table"},
  };
  s.description =
      "Runs PROG ('-': stdin) on its own tile with exact f64 arithmetic. Every input tensor must come from\n"
      "--input or --random-inputs. Results are float64 .npy for float precisions, int64 for integer ones.\n"
      "A VM fault prints 'PROG: error: <fault>' and exits 1.";
  s.examples = {"spatial vm silu.textproto --random-inputs=7 --output-dir=out",
                "spatial vm silu.textproto --input x=out/inputs/x.npy"};
  return {s, &RunVm};
}

}  // namespace spatial
