// `spatial simulate`: runs a program on the SystemC model of a target with its tile-accurate numerics, prints the
// cycle report, and (with --compare-vm) each output's error against the exact f64 VM next to its tolerance.
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "sim/numerics/target_model.h"
#include "sim/report/summary.h"
#include "sim/simulate.h"
#include "spatial/proto_file.h"
#include "tools/command_common.h"
#include "tools/commands.h"

namespace spatial {
namespace {

using cli::FlagSpec;

int RunSimulate(const cli::ParsedArgs& args) {
  const std::string cmd = "simulate";
  const std::string path = args.positional[0];
  const std::string where = cli::DisplayName(path);
  int exit_code = cli::kExitOk;
  std::optional<Composition> c = LoadProgram(path, &exit_code);
  if (!c) return exit_code;
  // The program names the target it was lowered for; --target overrides it (e.g. a modified description).
  std::string target_name = args.Has("target") ? args.Get("target") : c->target;
  if (target_name.empty()) {
    return cli::UsageError(std::cerr, cmd, "the program names no target: give --target=NAME|FILE");
  }
  std::optional<Target> target = LoadTargetOrReport(target_name, cmd, &exit_code);
  if (!target) return exit_code;
  if (target->tile_rows() != c->tile_rows || target->tile_cols() != c->tile_cols) {
    cli::PrintError(std::cerr, where,
                    absl::StrCat("the program was lowered for a ", c->tile_rows, "x", c->tile_cols, " tile but target '",
                                 target->name(), "' has ", target->tile_rows(), "x", target->tile_cols()));
    return cli::kExitUsage;
  }

  SimOptions options;
  options.timing_only = args.GetBool("timing-only");
  options.compare_vm = args.GetBool("compare-vm");
  if (args.Has("trace")) options.trace_path = args.Get("trace");
  if (args.Has("vcd")) options.vcd_path = args.Get("vcd");
  std::unique_ptr<ValueModel> model;
  if (!args.GetBool("exact")) {
    model = MakeTargetModel(*target);
    options.model = model.get();
  }

  std::optional<TensorMap> inputs;
  if (options.timing_only && args.GetAll("input").empty() && !args.Has("random-inputs")) {
    inputs = TensorMap();  // timing needs no values (a run-time trip then times the fold's maximum)
  } else {
    inputs = GatherInputs(*c, args, cmd, where, &exit_code);
    if (!inputs) return exit_code;
  }

  absl::StatusOr<SimResult> result = Simulate(*c, *target, *inputs, options);
  if (!result.ok()) {
    cli::PrintError(std::cerr, where, result.status());
    return cli::kExitFailed;
  }
  if (args.Has("report")) {
    if (absl::Status st = WriteProtoFile(args.Get("report"), result->report); !st.ok()) {
      cli::PrintError(std::cerr, absl::StrCat("spatial ", cmd), st);
      return cli::kExitFailed;
    }
  }
  if (!args.GetBool("quiet")) std::cout << FormatReport(result->report);
  int code = cli::kExitOk;
  if (!options.timing_only) code = WriteResults(*c, result->outputs, *inputs, args, cmd, where);
  if (code != cli::kExitOk) return code;
  // An output outside its tolerance is a failed check.
  for (const auto& e : result->report.errors()) {
    if (!e.within()) {
      cli::PrintError(std::cerr, where,
                      absl::StrCat("output '", e.tensor(), "' is outside its tolerance: relative L2 ", e.rel_l2(),
                                   " > ", e.tolerance()));
      return cli::kExitFailed;
    }
  }
  return cli::kExitOk;
}

}  // namespace

Subcommand SimulateCommand() {
  cli::CommandSpec s;
  s.name = "simulate";
  s.summary = "run a program on the SystemC model of its target: cycles, engines, tile-accurate values";
  s.positional = "PROG";
  s.min_positional = 1;
  s.max_positional = 1;
  s.flags = {
      {"target", FlagSpec::Kind::kValue, "NAME|FILE", "the target (default: the one the program was lowered for)"},
      {"input", FlagSpec::Kind::kRepeated, "NAME=FILE.npy", "value of the input tensor NAME from a .npy file"},
      {"random-inputs", FlagSpec::Kind::kValue, "SEED",
       "fill inputs not given by --input: floats uniform in [-2, 2), integers in [-100, 100]"},
      {"output-dir", FlagSpec::Kind::kValue, "DIR",
       "write each Output/State tensor to DIR/NAME.npy and each input to DIR/inputs/NAME.npy"},
      {"compare-vm", FlagSpec::Kind::kBool, "",
       "also run the exact f64 VM; report each output's max abs / max rel / relative L2 error and fail outside "
       "its tolerance"},
      {"timing-only", FlagSpec::Kind::kBool, "", "time the program without computing values"},
      {"exact", FlagSpec::Kind::kBool, "", "compute values in exact f64 instead of the target's numerics"},
      {"trace", FlagSpec::Kind::kValue, "FILE.json", "write a Chrome-trace/Perfetto timeline (one track per engine per site)"},
      {"vcd", FlagSpec::Kind::kValue, "FILE.vcd", "write engine busy signals as VCD"},
      {"report", FlagSpec::Kind::kValue, "FILE", "write the report proto (.textproto text, .binpb binary)"},
      {"quiet", FlagSpec::Kind::kBool, "", "print nothing but errors"},
  };
  s.description =
      "Simulates PROG ('-': stdin) on a SystemC model of the target: every site's reader, unpack, matrix, SFPU,\n"
      "pack and writer engines, page FIFOs, DRAM channels and NoC links, timed at tile-op granularity. Values\n"
      "are computed with the target's numerics (bf16 storage, fp32 accumulation, its SFPU algorithms).\n"
      "Exit 1 on a fault or an output outside its tolerance.";
  s.examples = {"spatial simulate silu.textproto --random-inputs=1 --compare-vm --trace=silu.json",
                "spatial simulate matmul.textproto --timing-only --report=report.textproto"};
  return {s, &RunSimulate};
}

}  // namespace spatial
