// `spatial inspect`: a program printed readably, with a summary of its size and per-site footprint.
#include <iostream>

#include "spatial/print.h"
#include "tools/command_common.h"
#include "tools/commands.h"
#include "tools/program_summary.h"

namespace spatial {
namespace {

using cli::FlagSpec;

int RunInspect(const cli::ParsedArgs& args) {
  int exit_code = cli::kExitOk;
  std::optional<LoadedProgram> p = LoadProgram(args.positional[0], &exit_code);
  if (!p) return exit_code;
  const Composition* c = &p->c;
  if (!args.GetBool("summary")) std::cout << PrintComposition(*c) << "\n";
  std::cout << "composition " << (c->name.empty() ? "(unnamed)" : c->name) << " for target "
            << (c->target.empty() ? "(none)" : c->target) << ", tile " << c->tile_rows << "x" << c->tile_cols
            << (p->recorded_target ? " (its full description is recorded in the program)" : "") << "\n"
            << FormatSummary(Summarize(*c));
  return cli::kExitOk;
}

}  // namespace

Subcommand InspectCommand() {
  cli::CommandSpec s;
  s.name = "inspect";
  s.summary = "print a program and summarize it (stages by kind, buffers, footprint per site, work items)";
  s.positional = "PROG";
  s.min_positional = 1;
  s.max_positional = 1;
  s.flags = {
      {"summary", FlagSpec::Kind::kBool, "", "print only the summary, not the program"},
  };
  s.description =
      "Reads PROG ('-': stdin), validates it, prints it, then the summary. The footprint of a section is what one\n"
      "site holds: the sum over its buffers of depth * page_tiles * tile bytes at the buffer's precision.";
  s.examples = {"spatial inspect silu.textproto",
                "spatial lower --target=test_tiny --op=examples/ops/silu.textproto | spatial inspect -"};
  return {s, &RunInspect};
}

}  // namespace spatial
