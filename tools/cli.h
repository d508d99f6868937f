// Command-line conventions shared by every `spatial` subcommand: a declared flag table per subcommand (so each
// has its own --help and rejects flags it does not know), exit codes, and GNU-style error lines.
//
// A small hand parser rather than absl flags: absl flags are process-global, so per-subcommand help and
// per-subcommand rejection of unknown flags would need filtering that hides flags from other subcommands.
#ifndef TOOLS_CLI_H_
#define TOOLS_CLI_H_

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spatial::cli {

// Exit codes: mlir-opt / GNU style.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    // a failed check, a refusal, a VM fault
inline constexpr int kExitUsage = 2;     // bad usage or unreadable input

struct FlagSpec {
  enum class Kind { kBool, kValue, kRepeated };
  std::string name;        // "target" for --target; a one-letter name ("o") is spelled -o
  Kind kind = Kind::kValue;
  std::string value_name;  // "NAME|FILE" in the help line
  std::string help;        // one line
  bool required = false;   // ParseArgs fails without it (unless --help)
  // A path the command writes ('-' is stdout for a file): CheckOutputPaths refuses one that cannot be written
  // before the command runs, so a long run does not end in "cannot write".
  enum class Output { kNone, kFile, kDir };
  Output output = Output::kNone;
};

struct CommandSpec {
  std::string name;                 // "lower"
  std::string summary;              // one line, shown in `spatial --help`
  std::string positional;           // "PROG" in the usage line; empty: none
  int min_positional = 0;
  int max_positional = 0;
  std::vector<FlagSpec> flags;
  std::string description;          // a paragraph for the subcommand's --help
  std::vector<std::string> examples;
};

class ParsedArgs {
 public:
  bool help = false;
  std::vector<std::string> positional;

  bool Has(const std::string& flag) const { return values_.count(flag) > 0; }
  // The last value given (or `def`); bool flags read as "true"/"false".
  std::string Get(const std::string& flag, const std::string& def = "") const;
  bool GetBool(const std::string& flag) const { return Get(flag, "false") == "true"; }
  const std::vector<std::string>& GetAll(const std::string& flag) const;

  void Add(const std::string& flag, std::string value) { values_[flag].push_back(std::move(value)); }

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

// Parses a subcommand's arguments (after the subcommand name). Accepts --flag=V, --flag V, -o V, -o=V, bool
// flags as --flag or --flag=true|false, "-" as a positional (stdin), and "--" to end the flags. --help / -h set
// `help`. Errors (unknown flag, missing value, repeated single-valued flag, wrong positional count) are
// InvalidArgument with a message that names the flag.
absl::StatusOr<ParsedArgs> ParseArgs(const CommandSpec& spec, const std::vector<std::string>& args);

// Every output path given (FlagSpec.output) that cannot be written: a file whose directory is missing or not
// writable, or that is a directory; a directory that is a file, or that cannot be made under its nearest existing
// ancestor. InvalidArgument naming the flag and the path (bad usage, exit 2); OK when all can be written.
absl::Status CheckOutputPaths(const CommandSpec& spec, const ParsedArgs& args);

// The subcommand's --help text: usage line, description, one line per flag, examples.
std::string CommandHelp(const CommandSpec& spec);

// Prints `status` to `err` as one GNU-style diagnostic. When the message already carries a location
// ("file:line:col: error: ..." or "file: error: ...") it is printed as is; otherwise it is prefixed with
// "<where>: error: ". `where` is a file name or "spatial <cmd>".
void PrintError(std::ostream& err, const std::string& where, const absl::Status& status);
// The same for a plain message.
void PrintError(std::ostream& err, const std::string& where, const std::string& message);

// True when `message` starts with a GNU-style location ("X: error: " or "X:L:C: error: " on its first line).
bool HasLocation(const std::string& message);

// The name a file is called by in diagnostics: "-" reads stdin.
std::string DisplayName(const std::string& path);

// Usage error: prints "spatial <cmd>: error: <message>" and a hint to --help; returns kExitUsage.
int UsageError(std::ostream& err, const std::string& command, const std::string& message);

}  // namespace spatial::cli

#endif  // TOOLS_CLI_H_
