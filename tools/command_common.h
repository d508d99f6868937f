// Steps several subcommands share, each of which reports its own failure: it prints a GNU-style diagnostic to
// stderr and says which exit code the failure maps to, so every subcommand classifies errors the same way
// (unreadable input: 2; a program that fails a check: 1).
#ifndef TOOLS_COMMAND_COMMON_H_
#define TOOLS_COMMAND_COMMON_H_

#include <optional>
#include <string>

#include "spatial/program.h"
#include "spatial/tensor_data.h"
#include "targets/target.h"
#include "tools/cli.h"

namespace spatial {

// Reads a program (text or binary by extension, "-" stdin) and validates it on its own tile. On failure prints
// the error and sets *exit_code (2 unreadable, 1 invalid).
std::optional<Composition> LoadProgram(const std::string& path, int* exit_code);

// A shipped target name or a target .textproto file. On failure prints the error (file:line:col) and sets
// *exit_code to 2.
std::optional<Target> LoadTargetOrReport(const std::string& name_or_path, const std::string& command, int* exit_code);

// The program's input tensors from repeated --input NAME=FILE.npy and --random-inputs=SEED (the flags `vm` and
// `simulate` share). On failure prints the error and sets *exit_code (2: bad usage or unreadable .npy).
std::optional<TensorMap> GatherInputs(const Composition& c, const cli::ParsedArgs& args, const std::string& command,
                                      const std::string& where, int* exit_code);

// Every Output and State tensor of `c` from `results`: printed as a table unless --quiet, and with --output-dir
// written as DIR/NAME.npy, the inputs as DIR/inputs/NAME.npy so the run can be repeated. Returns the exit code.
int WriteResults(const Composition& c, const TensorMap& results, const TensorMap& inputs,
                 const cli::ParsedArgs& args, const std::string& command, const std::string& where);

}  // namespace spatial

#endif  // TOOLS_COMMAND_COMMON_H_
