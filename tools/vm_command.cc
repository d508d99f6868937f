// `spatial vm`: runs a program on the f64 reference VM with inputs from .npy files or a seed, and writes every
// result (and every input, so the run can be repeated) as .npy.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "sim/vm/vm.h"
#include "tools/command_common.h"
#include "tools/commands.h"

namespace spatial {
namespace {

using cli::FlagSpec;

int RunVm(const cli::ParsedArgs& args) {
  const std::string cmd = "vm";
  const std::string path = args.positional[0];
  const std::string where = cli::DisplayName(path);
  int exit_code = cli::kExitOk;
  std::optional<Composition> c = LoadProgram(path, &exit_code);
  if (!c) return exit_code;

  std::optional<TensorMap> inputs = GatherInputs(*c, args, cmd, where, &exit_code);
  if (!inputs) return exit_code;

  absl::StatusOr<TensorMap> out = RunComposition(*c, c->tile_rows, c->tile_cols, *inputs);
  if (!out.ok()) {
    cli::PrintError(std::cerr, where, out.status());
    return cli::kExitFailed;
  }
  return WriteResults(*c, *out, *inputs, args, cmd, where);
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
