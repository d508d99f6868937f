// `spatial simulate`: runs a program on the SystemC model of a target with its tile-accurate numerics, prints the
// cycle report, and (with --compare-vm) each output's error against the exact f64 VM next to its tolerance.
#include <fstream>
#include <iostream>
#include <memory>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "sim/numerics/target_model.h"
#include "sim/report/summary.h"
#include "sim/simulate.h"
#include "spatial/proto_file.h"
#include "tools/command_common.h"
#include "tools/commands.h"

namespace spatial {
namespace {

using cli::FlagSpec;

// Outputs that may be "-" (stdout): at most one of them may be, and then the human summary goes to stderr.
constexpr const char* kFileOutputs[] = {"report", "trace", "vcd", "svg"};

int RunSimulate(const cli::ParsedArgs& args) {
  const std::string cmd = "simulate";
  const std::string path = args.positional[0];
  const std::string where = cli::DisplayName(path);
  int exit_code = cli::kExitOk;
  int to_stdout = 0;
  for (const char* f : kFileOutputs) to_stdout += args.Has(f) && args.Get(f) == "-";
  if (to_stdout > 1) return cli::UsageError(std::cerr, cmd, "only one output may be '-' (stdout)");
  // --timing-only computes no values: a flag about values would be silently dropped (--compare-vm exited 0 having
  // compared nothing).
  if (args.GetBool("timing-only")) {
    for (const char* f : {"compare-vm", "exact", "output-dir"}) {
      if (args.Has(f) && (std::string(f) == "output-dir" || args.GetBool(f))) {
        return cli::UsageError(std::cerr, cmd,
                               absl::StrCat("--", f, " is about values, and --timing-only computes none: give one"));
      }
    }
  }
  std::ostream& summary_out = to_stdout > 0 ? std::cerr : std::cout;

  std::optional<LoadedProgram> p = LoadProgram(path, &exit_code);
  if (!p) return exit_code;
  const Composition& c = p->c;
  std::optional<Target> target = ResolveTarget(c.target, p->recorded_target ? &*p->recorded_target : nullptr, args,
                                               cmd, where, &exit_code);
  if (!target) return exit_code;
  if (target->tile_rows() != c.tile_rows || target->tile_cols() != c.tile_cols) {
    cli::PrintError(std::cerr, where,
                    absl::StrCat("the program was lowered for a ", c.tile_rows, "x", c.tile_cols, " tile but target '",
                                 target->name(), "' has ", target->tile_rows(), "x", target->tile_cols()));
    return cli::kExitUsage;
  }

  // Only a certified program runs: the machine model times what it is given, and an uncertified program (a
  // footprint 11x the site's memory, a tile outside its tensor) would report cycles for a machine that cannot
  // run it.
  std::vector<std::string> notes;
  const bool certify = !args.GetBool("no-certify");
  if (certify) {
    CertifyResult r = Certify(c, *target);
    if (!r.ok()) {
      for (const proto::Diagnostic& d : r.diagnostics) std::cerr << FormatDiagnostic(d, where) << "\n";
      std::cerr << where << ": " << r.diagnostics.size() << " diagnostic(s); not certified on " << target->name()
                << ": not simulated (--no-certify runs it anyway)\n";
      return cli::kExitFailed;
    }
  } else {
    std::cerr << where << ": warning: --no-certify: simulating a program that was not certified on "
              << target->name() << "; its cycles and values may describe no machine\n";
    notes.push_back("not certified (--no-certify)");
  }

  SimOptions options;
  options.timing_only = args.GetBool("timing-only");
  options.compare_vm = args.GetBool("compare-vm");
  if (args.Has("trace")) options.trace_path = args.Get("trace");
  if (args.Has("vcd")) options.vcd_path = args.Get("vcd");
  if (args.Has("svg")) options.svg_path = args.Get("svg");
  options.progress = !args.GetBool("quiet") && isatty(STDERR_FILENO);
  std::unique_ptr<ValueModel> model;
  if (!args.GetBool("exact")) {
    model = MakeTargetModel(*target);
    options.model = model.get();
  }

  std::optional<TensorMap> inputs;
  const bool given = !args.GetAll("input").empty() || args.Has("random-inputs") || args.Has("inputs-dir");
  if (options.timing_only && !given) {
    inputs = TensorMap();  // timing needs no values (a run-time trip then times the fold's maximum)
  } else {
    // Timing reads only a trip's value: the inputs given are used, the rest need not be.
    inputs = GatherInputs(c, &*target, args, cmd, where, &notes, &exit_code, /*require_all=*/!options.timing_only);
    if (!inputs) return exit_code;
  }

  absl::StatusOr<SimResult> result = Simulate(c, *target, *inputs, options);
  if (!result.ok()) {
    cli::PrintError(std::cerr, where, result.status());
    return cli::kExitFailed;
  }
  result->report.set_certified(certify);
  for (const std::string& n : notes) result->report.add_notes(n);
  if (args.Has("report")) {
    if (absl::Status st = WriteProtoFile(args.Get("report"), result->report); !st.ok()) {
      cli::PrintError(std::cerr, absl::StrCat("spatial ", cmd), st);
      return cli::kExitFailed;
    }
  }
  if (!args.GetBool("quiet")) summary_out << FormatReport(result->report);
  int code = cli::kExitOk;
  if (!options.timing_only) code = WriteResults(c, result->outputs, *inputs, args, cmd, where);
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
      {"target", FlagSpec::Kind::kValue, "NAME|FILE",
       "for a program that records no target description: the target (else it must equal the recorded one)"},
  };
  for (FlagSpec& f : InputFlags()) s.flags.push_back(std::move(f));
  std::vector<FlagSpec> more = {
      {"output-dir", FlagSpec::Kind::kValue, "DIR",
       "write each Output/State tensor to DIR/NAME.npy and each input to DIR/inputs/NAME.npy",
       false, FlagSpec::Output::kDir},
      {"compare-vm", FlagSpec::Kind::kBool, "",
       "also run the exact f64 VM; report each output's max abs / max rel / relative L2 error and fail outside "
       "its tolerance"},
      {"timing-only", FlagSpec::Kind::kBool, "",
       "time the program without computing values (so not with --compare-vm, --exact or --output-dir)"},
      {"exact", FlagSpec::Kind::kBool, "", "compute values in exact f64 instead of the target's numerics"},
      {"no-certify", FlagSpec::Kind::kBool, "", "simulate even if the program does not certify (with a warning)"},
      {"trace", FlagSpec::Kind::kValue, "FILE.json",
       "write a Chrome-trace/Perfetto timeline (one track per engine per site; '-' stdout)",
       false, FlagSpec::Output::kFile},
      {"svg", FlagSpec::Kind::kValue, "FILE.svg",
       "draw per-site engine occupancy over time and per-section cycles, for a browser ('-' stdout)",
       false, FlagSpec::Output::kFile},
      {"vcd", FlagSpec::Kind::kValue, "FILE.vcd", "write engine busy signals as VCD ('-' stdout)",
       false, FlagSpec::Output::kFile},
      {"report", FlagSpec::Kind::kValue, "FILE",
       "write the report: .json (protobuf's JSON mapping), .binpb binary, else text proto; '-' stdout",
       false, FlagSpec::Output::kFile},
      {"quiet", FlagSpec::Kind::kBool, "", "print nothing but errors (and no progress line)"},
  };
  for (FlagSpec& f : more) s.flags.push_back(std::move(f));
  s.description =
      "Simulates PROG ('-': stdin) on a SystemC model of the target: every site's reader, unpack, matrix, SFPU,\n"
      "pack and writer engines, page FIFOs, DRAM channels and NoC links, timed at tile-op granularity. Values\n"
      "are computed with the target's numerics (its storage formats, its accumulator: fp32 on Wormhole and\n"
      "Blackhole, bf16 on Grayskull; its SFPU algorithms).\n"
      "The program is certified first and not run if it fails (--no-certify overrides, with a warning). It runs on\n"
      "the target description recorded in it by `spatial lower`. The summary names what bounds the run.\n"
      "A progress line shows on a terminal for runs longer than two seconds.\n"
      "Exit 1 on a fault, a failed certification or an output outside its tolerance.";
  s.examples = {"spatial simulate silu.textproto --random-inputs=1 --compare-vm --trace=silu.json --svg=silu.svg",
                "spatial simulate attn.textproto --random-inputs=1 --input pos=4096 --compare-vm",
                "spatial simulate attn.textproto --timing-only --input pos=4096 --report=report.json"};
  return {s, &RunSimulate};
}

}  // namespace spatial
