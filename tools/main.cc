// The `spatial` tool (DESIGN §9): mlir-opt-like subcommands over programs, targets and op specs.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/cli.h"
#include "proto/program.pb.h"
#include "tools/commands.h"

namespace spatial {
namespace {

// The tool's version: bumped with each release of the project (the second round of work is 0.2).
constexpr char kVersion[] = "0.2.0";

// The dispatch table: one line per subcommand, in the order `spatial --help` lists them (the pipeline's order:
// lower, certify, simulate, then the VM and the readers).
std::vector<Subcommand> Subcommands() {
  return {
      LowerCommand(),
      CertifyCommand(),
      SimulateCommand(),
      ModelCommand(),
      VmCommand(),
      InspectCommand(),
      OptCommand(),
      DemoCommand(),
      TargetsCommand(),
      OpsCommand(),
  };
}

std::string ToolHelp(const std::vector<Subcommand>& subs) {
  std::string s =
      "usage: spatial <subcommand> [flags] [args]\n\n"
      "Lowers transformer ops into spatial-accelerator programs, checks them, and runs them.\n"
      "Programs are read from a file or '-' (stdin): .binpb is binary, .json protobuf's JSON, else text.\n"
      "Exit codes: 0 success, 1 failed check / refusal / fault, 2 bad usage, unreadable input or an output\n"
      "path that cannot be written.\n"
      "spatial --version prints the version.\n\n"
      "subcommands:\n";
  size_t w = 0;
  for (const Subcommand& c : subs) w = std::max(w, c.spec.name.size());
  for (const Subcommand& c : subs) {
    absl::StrAppend(&s, "  ", c.spec.name, std::string(w - c.spec.name.size() + 2, ' '), c.spec.summary, "\n");
  }
  absl::StrAppend(&s,
                  "\nrun 'spatial <subcommand> --help' for its flags.\n\n"
                  "example:\n"
                  "  spatial demo\n"
                  "  spatial lower --target=wormhole_n150 --op=examples/ops/silu.textproto -o silu.textproto\n"
                  "  spatial vm silu.textproto --random-inputs=1 --output-dir=out\n");
  return s;
}

int Main(int argc, char** argv) {
  // SystemC, when linked in, prints a banner on first use; keep tool output clean.
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 0);
  std::vector<Subcommand> subs = Subcommands();
  if (argc < 2) {
    std::cerr << "spatial: error: missing subcommand\n" << ToolHelp(subs);
    return cli::kExitUsage;
  }
  std::string name = argv[1];
  if (name == "--version" || name == "-V" || name == "version") {
    std::cout << "spatial " << kVersion << " (program IR version " << proto::IrVersion_Name(proto::IR_VERSION_1)
              << ")\n";
    return cli::kExitOk;
  }
  if (name == "--help" || name == "-h" || name == "help") {
    std::cout << ToolHelp(subs);
    return cli::kExitOk;
  }
  for (const Subcommand& c : subs) {
    if (c.spec.name != name) continue;
    std::vector<std::string> args(argv + 2, argv + argc);
    absl::StatusOr<cli::ParsedArgs> parsed = cli::ParseArgs(c.spec, args);
    if (!parsed.ok()) return cli::UsageError(std::cerr, c.spec.name, std::string(parsed.status().message()));
    if (parsed->help) {
      std::cout << cli::CommandHelp(c.spec);
      return cli::kExitOk;
    }
    if (absl::Status st = cli::CheckOutputPaths(c.spec, *parsed); !st.ok()) {
      return cli::UsageError(std::cerr, c.spec.name, std::string(st.message()));
    }
    return c.run(*parsed);
  }
  std::string names;
  for (const Subcommand& c : subs) absl::StrAppend(&names, names.empty() ? "" : ", ", c.spec.name);
  return cli::UsageError(std::cerr, "", absl::StrCat("unknown subcommand '", name, "' (subcommands: ", names, ")"));
}

}  // namespace
}  // namespace spatial

int main(int argc, char** argv) { return spatial::Main(argc, argv); }
