// `spatial vm`: runs a program on the f64 reference VM with inputs from .npy files or a seed, and writes every
// result (and every input, so the run can be repeated) as .npy.
#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "sim/report/progress_line.h"
#include "sim/vm/vm.h"
#include "targets/loader.h"
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
  std::optional<LoadedProgram> p = LoadProgram(path, &exit_code);
  if (!p) return exit_code;
  const Composition* c = &p->c;
  // The VM needs no machine, but the inputs do: they are rounded to their precision as the target stores them
  // and drawn inside the ranges it admits, so `vm` and `simulate` runs of one seed see the same values. A
  // hand-written program naming no shipped target runs without that.
  std::optional<Target> target;
  if (p->recorded_target || args.Has("target") || ShippedTargetText(c->target).has_value()) {
    target = ResolveTarget(c->target, p->recorded_target ? &*p->recorded_target : nullptr, args, cmd, where,
                           &exit_code);
    if (!target) return exit_code;
  }
  std::vector<std::string> notes;
  std::optional<TensorMap> inputs =
      GatherInputs(*c, target ? &*target : nullptr, args, cmd, where, &notes, &exit_code);
  if (!inputs) return exit_code;
  if (!args.GetBool("quiet")) {
    for (const std::string& n : notes) std::cerr << where << ": note: " << n << "\n";
  }

  VmOptions options;
  ProgressLine progress(!args.GetBool("quiet") && isatty(STDERR_FILENO), "vm");
  options.progress = progress.VmCallback("running");
  absl::StatusOr<TensorMap> out = RunComposition(*c, c->tile_rows, c->tile_cols, *inputs, options);
  progress.Done();
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
  s.flags = InputFlags();
  s.flags.insert(s.flags.begin(), {"target", FlagSpec::Kind::kValue, "NAME|FILE",
                                   "for a program that records no target: the one whose rounding its inputs get"});
  s.flags.push_back(
      {"output-dir", FlagSpec::Kind::kValue, "DIR",
       "write each Output/State tensor to DIR/NAME.npy and each input to DIR/inputs/NAME.npy",
       false, FlagSpec::Output::kDir});
  s.flags.push_back({"quiet", FlagSpec::Kind::kBool, "", "do not print the result table"});
  s.description =
      "Runs PROG ('-': stdin) on its own tile with exact f64 arithmetic. Every run input (Inputs, and States and\n"
      "Params the program does not embed, such as weights) must come from --input, --inputs-dir or\n"
      "--random-inputs; float inputs are first rounded to their tensor's precision as the target stores them.\n"
      "Results are float64 .npy for float precisions, int64 for integer ones.\n"
      "A VM fault prints 'PROG: error: <fault>' and exits 1.";
  s.examples = {"spatial vm silu.textproto --random-inputs=7 --output-dir=out",
                "spatial vm silu.textproto --input gate=out/inputs/gate.npy"};
  return {s, &RunVm};
}

}  // namespace spatial
