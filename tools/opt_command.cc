// `spatial opt`: runs passes (passes/pass.h) over a program file and writes the result, as LLVM's opt does: the
// pass list in order, the program after each pass on request, a refusal named by its pass.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "passes/pass.h"
#include "proto/program.pb.h"
#include "spatial/print.h"
#include "spatial/proto_file.h"
#include "spatial/proto_io.h"
#include "tools/command_common.h"
#include "tools/commands.h"

namespace spatial {
namespace {

using cli::FlagSpec;

int RunOpt(const cli::ParsedArgs& args) {
  const std::string cmd = "opt";
  if (args.GetBool("list")) {
    for (const Pass& p : Passes()) std::cout << absl::StrFormat("%-15s %s\n", p.name, p.summary);
    return cli::kExitOk;
  }
  if (args.positional.empty()) return cli::UsageError(std::cerr, cmd, "missing PROG (or --list)");
  if (!args.Has("passes")) return cli::UsageError(std::cerr, cmd, "missing --passes=NAME[,NAME...] (see --list)");
  // Every name must be a pass: an empty list, or an empty name between commas (a slip such as "verify,,compose"),
  // would otherwise run fewer passes than written and exit 0.
  const std::string list = args.Get("passes");
  if (list.empty()) return cli::UsageError(std::cerr, cmd, "--passes is empty: give NAME[,NAME...] (see --list)");
  std::vector<std::string> names = absl::StrSplit(list, ',');
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) {
      return cli::UsageError(std::cerr, cmd, absl::StrCat("--passes=", list, ": pass ", i + 1, " of ", names.size(),
                                                          " has no name"));
    }
  }
  for (const std::string& n : names) {
    if (FindPass(n) == nullptr) {
      return cli::UsageError(std::cerr, cmd, absl::StrCat("unknown pass '", n, "' (spatial opt --list names them)"));
    }
  }
  const std::string path = args.positional[0];
  const std::string where = cli::DisplayName(path);
  int exit_code = cli::kExitOk;
  std::optional<LoadedProgram> p = LoadProgram(path, &exit_code);
  if (!p) return exit_code;
  std::optional<Target> target = ResolveTarget(p->c.target, p->recorded_target ? &*p->recorded_target : nullptr,
                                               args, cmd, where, &exit_code);
  if (!target) return exit_code;

  const std::string out = args.Get("o", "-");
  const bool print_after = args.GetBool("print-after-all");
  // The printed programs go to stderr when the result itself goes to stdout, so a pipe still carries one program.
  std::ostream& dump = out == "-" ? std::cerr : std::cout;
  PipelineOptions options;
  options.verify_each = true;
  if (print_after) {
    options.after_each = [&](const Pass& pass, const Composition& c) {
      dump << "// ---- after pass '" << pass.name << "' ----\n" << PrintComposition(c) << "\n";
    };
  }
  if (absl::Status st = RunPasses(p->c, *target, names, options); !st.ok()) {
    cli::PrintError(std::cerr, where, st);
    return cli::kExitFailed;
  }
  proto::Composition wire = ToProto(p->c);
  if (p->recorded_target) *wire.mutable_target_description() = *p->recorded_target;
  if (args.GetBool("no-output")) return cli::kExitOk;
  if (absl::Status st = WriteProtoFile(out, wire); !st.ok()) {
    cli::PrintError(std::cerr, "spatial opt", st);
    return cli::kExitFailed;
  }
  return cli::kExitOk;
}

}  // namespace

Subcommand OptCommand() {
  cli::CommandSpec s;
  s.name = "opt";
  s.summary = "run passes over a program (verify, fit-site, compose, online-softmax) and write the result";
  s.positional = "PROG";
  s.min_positional = 0;
  s.max_positional = 1;
  s.flags = {
      {"passes", FlagSpec::Kind::kValue, "A,B,...", "the passes to run, in order (see --list)"},
      {"list", FlagSpec::Kind::kBool, "", "list the passes and what each does"},
      {"print-after-all", FlagSpec::Kind::kBool, "",
       "print the program after every pass (to stderr when the result goes to stdout)"},
      {"target", FlagSpec::Kind::kValue, "NAME|FILE",
       "for a program that records no target description: the target (else it must equal the recorded one)"},
      {"o", FlagSpec::Kind::kValue, "FILE", "write the result (.json JSON, .binpb binary, else text proto; default '-')",
       false, FlagSpec::Output::kFile},
      {"no-output", FlagSpec::Kind::kBool, "", "run the passes, write nothing (a check)"},
  };
  s.description =
      "Reads PROG ('-': stdin), runs each pass of --passes in order on its target, verifying the program after\n"
      "every pass, and writes the result. A pass that refuses the program exits 1 naming the pass and the reason.";
  s.examples = {"spatial opt --passes=verify,fit-site --print-after-all silu.textproto -o silu.opt.textproto",
                "spatial opt --passes=online-softmax parts.textproto -o folded.textproto",
                "spatial opt --list"};
  return {s, &RunOpt};
}

}  // namespace spatial
