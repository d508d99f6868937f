// Steps several subcommands share, each of which reports its own failure: it prints a GNU-style diagnostic to
// stderr and says which exit code the failure maps to, so every subcommand classifies errors the same way
// (unreadable input: 2; a program that fails a check: 1).
#ifndef TOOLS_COMMAND_COMMON_H_
#define TOOLS_COMMAND_COMMON_H_

#include <optional>
#include <string>
#include <vector>

#include "proto/program.pb.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"
#include "targets/target.h"
#include "tools/cli.h"

namespace spatial {

// The most elements all run inputs of one run may hold together: 2^28 f64 values (2 GiB), about a tenth of this
// machine class's 24 GiB, which leaves room for the VM's copies and the results. Qwen3's 151936 x 1024 embedding
// table (1.6e8) fits.
inline constexpr int64_t kMaxRunInputElems = int64_t{1} << 28;

// A program file as read: the model, and the target description the lowering recorded in it (if any).
struct LoadedProgram {
  Composition c;
  std::optional<proto::Target> recorded_target;
};

// Reads a program (text, binary or JSON by extension; "-" stdin, format detected) and validates it on its own
// tile. On failure prints the error and sets *exit_code (2 unreadable, 1 invalid).
std::optional<LoadedProgram> LoadProgram(const std::string& path, int* exit_code);

// A shipped target name or a target .textproto file. On failure prints the error (file:line:col) and sets
// *exit_code to 2.
std::optional<Target> LoadTargetOrReport(const std::string& name_or_path, const std::string& command, int* exit_code);

// The one rule for the target a program runs on. A program that records its target's description runs on exactly
// that description; a --target that differs from it is an error naming the first field that differs (re-lower
// for another target). A program without one (hand-written) runs on --target, else on the shipped target it
// names. `program_target` is the name the program records, `recorded` its description.
std::optional<Target> ResolveTarget(const std::string& program_target, const proto::Target* recorded,
                                    const cli::ParsedArgs& args, const std::string& command, const std::string& where,
                                    int* exit_code);

// The program's run inputs (spatial::IsRunInput: Inputs, and External States and Params such as weights), from
// repeated --input NAME=FILE.npy or NAME=V[,V...] (a scalar or a short list), --inputs-dir=DIR (DIR/NAME.npy),
// and --random-inputs=SEED for the rest: floats uniform in [-2, 2), integers inside the range the certificate
// admits for them (certify/admitted_inputs.h) or else [-100, 100]. Float inputs are rounded to their tensor's
// precision with the target's rounding (as the machine stores them), so the VM and the simulator see the same
// values. A run input with no value is an error naming it, unless --zero-missing (then it is zeros and `notes`
// says so); with `require_all` false (a timing-only run, which reads only trip values) the rest stay absent.
// `target` may be null (no rounding, no admitted ranges). On failure prints the error and sets *exit_code (2: bad
// usage or unreadable .npy).
std::optional<TensorMap> GatherInputs(const Composition& c, const Target* target, const cli::ParsedArgs& args,
                                      const std::string& command, const std::string& where,
                                      std::vector<std::string>* notes, int* exit_code, bool require_all = true);

// Only the values --input and --inputs-dir give (GatherInputs' first step), checked against the run inputs of `c`
// by name, shape and dtype; nullopt after printing the error (*exit_code 2: bad usage or unreadable .npy).
std::optional<TensorMap> GivenInputs(const Composition& c, const cli::ParsedArgs& args, const std::string& command,
                                     int* exit_code);

// The flags GatherInputs reads, for a subcommand's flag table.
std::vector<cli::FlagSpec> InputFlags();

// Every Output and State tensor of `c` from `results`: printed as a table unless --quiet, and with --output-dir
// written as DIR/NAME.npy, the inputs as DIR/inputs/NAME.npy so the run can be repeated. Returns the exit code (2
// when DIR cannot be made or written).
int WriteResults(const Composition& c, const TensorMap& results, const TensorMap& inputs,
                 const cli::ParsedArgs& args, const std::string& command, const std::string& where);

}  // namespace spatial

#endif  // TOOLS_COMMAND_COMMON_H_
