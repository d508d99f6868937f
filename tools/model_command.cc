// `spatial model`: one decoder layer of a model, from its config.json, lowered, certified and simulated on a
// target (issue #15), reported one row per op.
#include <cstdio>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "certify/certify.h"
#include "lowerings/registry.h"  // OpKindName
#include "models/layer.h"
#include "sim/simulate.h"
#include "spatial/proto_file.h"
#include "tools/command_common.h"
#include "tools/commands.h"

namespace spatial {
namespace {

using cli::FlagSpec;

bool IntFlag(const cli::ParsedArgs& args, const std::string& flag, int64_t def, int64_t* out, const std::string& cmd) {
  if (!args.Has(flag)) {
    *out = def;
    return true;
  }
  if (absl::SimpleAtoi(args.Get(flag), out)) return true;
  cli::UsageError(std::cerr, cmd, absl::StrCat("--", flag, " takes an integer, got '", args.Get(flag), "'"));
  return false;
}

int RunModel(const cli::ParsedArgs& args) {
  const std::string cmd = "model";
  int64_t layer = 0, position = 0, cache = 0;
  if (!IntFlag(args, "layer", 0, &layer, cmd) || !IntFlag(args, "decode", 0, &position, cmd) ||
      !IntFlag(args, "cache", 0, &cache, cmd)) {
    return cli::kExitUsage;
  }
  if (args.Has("prefill")) {
    cli::PrintError(std::cerr, "spatial model",
                    "--prefill is not supported yet: only a decode step is recognized (--decode=P --cache=L)");
    return cli::kExitFailed;
  }
  if (!args.Has("decode")) return cli::UsageError(std::cerr, cmd, "--decode=P is required (the 1-based position)");
  if (!args.Has("cache")) cache = position;
  absl::StatusOr<ModelConfig> config = ReadModelConfig(args.Get("config"));
  if (!config.ok()) {
    cli::PrintError(std::cerr, "spatial model", config.status());
    return config.status().code() == absl::StatusCode::kInvalidArgument ? cli::kExitUsage : cli::kExitFailed;
  }
  int exit_code = cli::kExitOk;
  std::optional<Target> target = LoadTargetOrReport(args.Get("target", "wormhole_n150"), cmd, &exit_code);
  if (!target) return exit_code;
  absl::StatusOr<LayerPlan> plan = DecodeLayerPlan(*config, layer, DecodePhase{position, cache}, *target);
  if (!plan.ok()) return cli::UsageError(std::cerr, cmd, std::string(plan.status().message()));
  absl::StatusOr<LoweredLayer> lowered = LowerLayer(*plan, *target);
  if (!lowered.ok()) {
    cli::PrintError(std::cerr, "spatial model", lowered.status());
    return cli::kExitFailed;
  }
  const Composition& c = lowered->program;
  CertifyResult cert = Certify(c, *target);
  if (!cert.ok()) {
    for (const proto::Diagnostic& d : cert.diagnostics) std::cerr << FormatDiagnostic(d, plan->name) << "\n";
    cli::PrintError(std::cerr, "spatial model", absl::StrCat("the layer did not certify on ", target->name()));
    return cli::kExitFailed;
  }
  SimOptions options;
  options.timing_only = true;
  if (args.Has("trace")) options.trace_path = args.Get("trace");
  if (args.Has("svg")) options.svg_path = args.Get("svg");
  TensorMap inputs;
  inputs["pos"] = TensorData{1, 1, Precision::kInt32, {static_cast<double>(position)}};
  absl::StatusOr<SimResult> r = Simulate(c, *target, inputs, options);
  if (!r.ok()) {
    cli::PrintError(std::cerr, "spatial model", r.status());
    return cli::kExitFailed;
  }
  const proto::SimReport& rep = r->report;
  if (args.Has("report")) {
    if (absl::Status st = WriteProtoFile(args.Get("report"), rep); !st.ok()) {
      cli::PrintError(std::cerr, "spatial model", st);
      return cli::kExitFailed;
    }
  }
  // ★ THE LAYER'S TOTAL IS THE SUM OF ITS SECTIONS: sections run one after another, each starting when the one
  // before has finished everywhere (the barrier), so any gap or overlap is a defect of the report.
  int64_t sum = 0;
  for (const auto& s : rep.sections()) sum += s.cycles();
  if (sum != rep.total_cycles()) {
    cli::PrintError(std::cerr, "spatial model",
                    absl::StrCat("internal: the sections' cycles sum to ", sum, " but the layer took ",
                                 rep.total_cycles()));
    return cli::kExitFailed;
  }
  const double clock = rep.clock_hz() > 0 ? rep.clock_hz() : 1e9;
  std::cout << absl::StrFormat("%s layer %d, decode at position %d over a %d-row cache, on %s (timing only)\n",
                               config->architecture, layer, position, cache, target->name());
  std::cout << absl::StrFormat("%-14s %-10s %4s %12s %9s %7s %-8s %9s %10s\n", "op", "kind", "secs", "cycles",
                               "time(us)", "share", "bound", "roofline", "DRAM(MB)");
  for (size_t i = 0; i < plan->ops.size(); ++i) {
    const auto [first, end] = lowered->op_sections[i];
    int64_t cycles = 0, bytes = 0, longest = -1;
    double bound = 0;
    std::string limited = "-";
    for (int s = first; s < end && s < rep.sections_size(); ++s) {
      const auto& st = rep.sections(s);
      cycles += st.cycles();
      bytes += st.dram_read_bytes() + st.dram_write_bytes();
      bound += st.roofline().bound_cycles();
      if (st.cycles() > longest) {
        longest = st.cycles();
        limited = st.roofline().limited_by();
      }
    }
    std::cout << absl::StrFormat("%-14s %-10s %4d %12d %9.2f %6.1f%% %-8s %8.1f%% %10.3f\n", plan->ops[i].label,
                                 OpKindName(plan->ops[i].spec), end - first, cycles, cycles / clock * 1e6,
                                 rep.total_cycles() > 0 ? 100.0 * cycles / rep.total_cycles() : 0.0, limited,
                                 cycles > 0 ? 100.0 * bound / cycles : 0.0, bytes / 1e6);
  }
  std::cout << absl::StrFormat("%-14s %-10s %4d %12d %9.2f %6.1f%% %-8s %8.1f%% %10.3f\n", "layer", "",
                               rep.sections_size(), rep.total_cycles(), rep.total_cycles() / clock * 1e6, 100.0,
                               rep.roofline().limited_by(), 100.0 * rep.roofline().fraction(),
                               (rep.dram_read_bytes() + rep.dram_write_bytes()) / 1e6);
  std::cout << absl::StrFormat("%d layers of this kind: %.3f ms a token, %.1f tokens/s per user (layers only: no "
                               "embedding, final norm or LM head)\n",
                               config->layers, config->layers * rep.total_cycles() / clock * 1e3,
                               clock / (static_cast<double>(config->layers) * rep.total_cycles()));
  return cli::kExitOk;
}

}  // namespace

Subcommand ModelCommand() {
  cli::CommandSpec s;
  s.name = "model";
  s.summary = "one decoder layer of a model from its config.json: lowered, certified, simulated, one row per op";
  s.flags = {
      {"config", FlagSpec::Kind::kValue, "NAME|FILE",
       "a Hugging Face config.json, or an example's name (examples/models: qwen3-0.6b, qwen3-8b)", true},
      {"layer", FlagSpec::Kind::kValue, "N", "the layer index (default 0)"},
      {"decode", FlagSpec::Kind::kValue, "P", "a decode step at 1-based position P (attends positions 1..P)"},
      {"cache", FlagSpec::Kind::kValue, "L", "the KV caches' rows (default P)"},
      {"prefill", FlagSpec::Kind::kValue, "T", "a prefill of T tokens (not supported yet)"},
      {"target", FlagSpec::Kind::kValue, "NAME|FILE", "the target (default wormhole_n150)"},
      {"report", FlagSpec::Kind::kValue, "FILE", "write the layer's SimReport: .json, .binpb or text proto"},
      {"trace", FlagSpec::Kind::kValue, "FILE.json", "a Chrome-trace timeline of the whole layer"},
      {"svg", FlagSpec::Kind::kValue, "FILE.svg", "per-site engine occupancy and per-section cycles"},
  };
  s.description =
      "Reads the model's config.json (architecture facts only, no weights), builds the op specs of one decoder\n"
      "layer (norms, projections, q/k norms, RoPE, KV-cache writes, attention, residual adds, SwiGLU MLP), lowers\n"
      "each for the target, joins them into one program, certifies it and simulates it timing-only. Prints one row\n"
      "per op (sections, cycles, share of the layer, what bounds its longest section, roofline fraction, DRAM\n"
      "bytes) and the layer total, which is checked to equal the sum of its sections. Recognized architectures:\n"
      "Qwen3ForCausalLM. Exit 1 on a refusal or a failed certification, 2 on bad usage or an unreadable config.";
  s.examples = {"spatial model --config=qwen3-8b --decode=4096 --cache=8192 --target=wormhole_n150",
                "spatial model --config=path/to/config.json --layer=3 --decode=128 --report=layer.json"};
  return {s, &RunModel};
}

}  // namespace spatial
