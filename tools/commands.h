// The `spatial` subcommands. Each lives in its own tools/<name>_command.cc and exposes one function returning its
// flag table and entry point; tools/main.cc lists them in its dispatch table. To add a subcommand: write
// tools/<name>_command.cc defining `Subcommand <Name>Command()`, declare it here, add one line to kSubcommands in
// tools/main.cc.
#ifndef TOOLS_COMMANDS_H_
#define TOOLS_COMMANDS_H_

#include "tools/cli.h"

namespace spatial {

struct Subcommand {
  cli::CommandSpec spec;
  // Runs with parsed arguments (help already handled); returns the process exit code (cli::kExit*).
  int (*run)(const cli::ParsedArgs& args);
};

Subcommand LowerCommand();
Subcommand VmCommand();
Subcommand InspectCommand();
Subcommand DemoCommand();
Subcommand SimulateCommand();
Subcommand CertifyCommand();
Subcommand TargetsCommand();
Subcommand OpsCommand();
Subcommand OptCommand();
Subcommand ModelCommand();

}  // namespace spatial

#endif  // TOOLS_COMMANDS_H_
