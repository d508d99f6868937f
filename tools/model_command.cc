// `spatial model`: one decoder layer of a model, from its config.json, lowered, certified and simulated on a
// target (issue #15), reported one row per op.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "certify/admitted_inputs.h"
#include "lowerings/registry.h"  // OpKindName
#include "models/decode_token.h"
#include "models/layer.h"
#include "sim/numerics/target_model.h"
#include "spatial/proto_file.h"
#include "tools/command_common.h"
#include "tools/commands.h"

namespace spatial {
namespace {

using cli::FlagSpec;

// Outputs that may be "-" (stdout), as simulate's: at most one of them may be, and then the table goes to stderr so
// the artifact on stdout stays parseable.
constexpr const char* kFileOutputs[] = {"report", "trace", "svg"};

bool IntFlag(const cli::ParsedArgs& args, const std::string& flag, int64_t def, int64_t* out, const std::string& cmd) {
  if (!args.Has(flag)) {
    *out = def;
    return true;
  }
  if (absl::SimpleAtoi(args.Get(flag), out)) return true;
  cli::UsageError(std::cerr, cmd, absl::StrCat("--", flag, " takes an integer, got '", args.Get(flag), "'"));
  return false;
}

// The ops' rows; with values, each op's result against the exact VM (relative L2) and whether it is within the
// tolerance the simulator's report gives it.
void PrintOps(std::ostream& out, const PlanRun& run, double clock, bool values) {
  const proto::SimReport& rep = run.report;
  std::map<std::string, const proto::OutputError*> errors;
  for (const proto::OutputError& e : rep.errors()) errors[e.tensor()] = &e;
  auto error_of = [&](const std::string& tensor) -> std::string {
    if (!values) return "";
    auto it = errors.find(tensor);
    if (it == errors.end()) return absl::StrFormat(" %14s", "-");
    return absl::StrFormat(" %9.2e %-4s", it->second->rel_l2(), it->second->within() ? "ok" : "OVER");
  };
  out << absl::StrFormat("%-18s %-10s %4s %12s %9s %7s %-8s %9s %10s%s\n", "op", "kind", "secs", "cycles", "time(us)",
                         "share", "bound", "roofline", "DRAM(MB)",
                         values ? absl::StrFormat(" %14s", "vs VM (L2)") : "");
  for (const LoweredPart& part : run.lowered.parts) {
    const int first = part.first, end = part.end;
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
    out << absl::StrFormat("%-18s %-10s %4d %12d %9.2f %6.1f%% %-8s %8.1f%% %10.3f%s\n", part.label, part.kind,
                           end - first, cycles, cycles / clock * 1e6,
                           rep.total_cycles() > 0 ? 100.0 * cycles / rep.total_cycles() : 0.0, limited,
                           cycles > 0 ? 100.0 * bound / cycles : 0.0, bytes / 1e6, error_of(part.out));
  }
  out << absl::StrFormat("%-18s %-10s %4d %12d %9.2f %6.1f%% %-8s %8.1f%% %10.3f\n", "total", "", rep.sections_size(),
                         rep.total_cycles(), rep.total_cycles() / clock * 1e6, 100.0, rep.roofline().limited_by(),
                         100.0 * rep.roofline().fraction(), (rep.dram_read_bytes() + rep.dram_write_bytes()) / 1e6);
  // What the run assumed that a reader must know (the simulator's report notes).
  for (const std::string& note : rep.notes()) out << "note: " << note << "\n";
}

// The columns of tensor `name` in the run's program (1 when it has none by that name).
int64_t ColsOf(const PlanRun& run, const std::string& name) {
  for (const Section& s : run.lowered.program.sections) {
    const int i = s.FindTensor(name);
    if (i >= 0) return std::max<int64_t>(1, s.tensors[i].cols);
  }
  return 1;
}

// Whether every given integer run input (a position) lies in the range the layer's certificate admits for it
// (certify/admitted_inputs.h, the range simulate's --random-inputs draws from). Outside it the run would fault in
// whichever op reads it first (a RoPE table row past the cache) instead of naming the input; prints that and
// returns false.
bool AdmittedGiven(const Composition& program, const Target& target, const TensorMap& given,
                   const cli::ParsedArgs& args, int64_t cache) {
  const bool any_integer =
      std::any_of(given.begin(), given.end(), [](const auto& g) { return IsInteger(g.second.precision); });
  if (!any_integer) return true;  // certifying again per candidate range is not free: only when there is one to check
  for (const proto::AdmittedInput& a : AdmitInputs(program, target)) {
    auto it = given.find(a.tensor());
    if (it == given.end()) continue;
    const int64_t lo = a.admitted().lo(), hi = a.admitted().hi();
    for (const double v : it->second.values) {
      if (v >= static_cast<double>(lo) && v <= static_cast<double>(hi)) continue;
      const std::vector<std::string> flags = args.GetAll("input");
      const bool by_flag = std::any_of(flags.begin(), flags.end(), [&](const std::string& f) {
        return absl::StartsWith(f, absl::StrCat(a.tensor(), "="));
      });
      cli::PrintError(
          std::cerr, "spatial model",
          absl::StrCat(by_flag ? "--input " : "--inputs-dir: run input ", a.tensor(), "=", static_cast<int64_t>(v),
                       " is outside [", lo, ", ", hi, "], the range the layer admits for it",
                       a.tensor() == "pos" ? absl::StrCat(" (it is built for a ", cache, "-row cache: --cache)") : ""));
      return false;
    }
  }
  return true;
}

int Fail(const absl::Status& st) {
  cli::PrintError(std::cerr, "spatial model", st);
  return st.code() == absl::StatusCode::kInvalidArgument ? cli::kExitUsage : cli::kExitFailed;
}

int RunModel(const cli::ParsedArgs& args) {
  const std::string cmd = "model";
  int to_stdout = 0;
  for (const char* f : kFileOutputs) to_stdout += args.Has(f) && args.Get(f) == "-";
  if (to_stdout > 1) return cli::UsageError(std::cerr, cmd, "only one output may be '-' (stdout)");
  std::ostream& out = to_stdout > 0 ? std::cerr : std::cout;
  int64_t layer = 0, position = 0, cache = 0;
  if (!IntFlag(args, "layer", 0, &layer, cmd) || !IntFlag(args, "decode", 0, &position, cmd) ||
      !IntFlag(args, "cache", 0, &cache, cmd)) {
    return cli::kExitUsage;
  }
  int64_t tokens = 0;
  if (!IntFlag(args, "prefill", 0, &tokens, cmd)) return cli::kExitUsage;
  const bool prefill = args.Has("prefill");
  if (prefill && args.Has("decode")) {
    return cli::UsageError(std::cerr, cmd, "--decode and --prefill are exclusive: a run is one decode step or one "
                                           "prefill");
  }
  if (!prefill && !args.Has("decode")) {
    return cli::UsageError(std::cerr, cmd, "one of --decode=P (a decode step at 1-based position P) or --prefill=T is "
                                           "required");
  }
  if (!args.Has("cache")) cache = prefill ? tokens : position;
  DecodePhase phase{position, cache, {}};
  const std::string weights = args.Get("weights", "default");
  if (!WeightRecipe(weights, &phase.weights)) {
    return cli::UsageError(std::cerr, cmd, absl::StrCat("--weights takes ", kWeightRecipeNames, "; got '", weights,
                                                        "'"));
  }
  const bool all_layers = args.Has("all-layers");
  const bool values = args.Has("values");
  uint64_t seed = 1;
  if (args.Has("seed") && !absl::SimpleAtoi(args.Get("seed"), &seed)) {
    return cli::UsageError(std::cerr, cmd, absl::StrCat("--seed takes a non-negative integer, got '",
                                                        args.Get("seed"), "'"));
  }
  const bool given_inputs = !args.GetAll("input").empty() || args.Has("inputs-dir");
  if (given_inputs && !values) {
    return cli::UsageError(std::cerr, cmd, "--input and --inputs-dir give the values of a --values run: add --values");
  }
  if (all_layers && (args.Has("trace") || args.Has("svg") || args.Has("report"))) {
    return cli::UsageError(std::cerr, cmd, "--trace, --svg and --report describe one layer: not with --all-layers");
  }
  absl::StatusOr<ModelConfig> config = ReadModelConfig(args.Get("config"));
  if (!config.ok()) return Fail(config.status());
  // Each length is named by its flag: --cache defaults to the position (or the token count), so the layer's own
  // check would name a cache of 0 rows that was never given.
  if (args.Has("cache") && (cache < 1 || cache > config->max_positions)) {
    return cli::UsageError(std::cerr, cmd,
                           absl::StrCat("--cache=", cache, ": the cache's rows must be 1..", config->max_positions,
                                        " (max_position_embeddings)"));
  }
  const int64_t most = args.Has("cache") ? cache : config->max_positions;
  const int64_t length = prefill ? tokens : position;
  if (length < 1 || length > most) {
    return cli::UsageError(
        std::cerr, cmd,
        absl::StrCat("--", prefill ? "prefill=" : "decode=", length, ": the ", prefill ? "token count" : "position",
                     " must be 1..", most,
                     args.Has("cache") ? " (the cache's rows, --cache)" : " (max_position_embeddings)"));
  }
  int exit_code = cli::kExitOk;
  std::optional<Target> target = LoadTargetOrReport(args.Get("target", "wormhole_n150"), cmd, &exit_code);
  if (!target) return exit_code;
  const PrefillPhase fill{tokens, cache, phase.weights};
  absl::StatusOr<LayerPlan> plan = prefill ? PrefillLayerPlan(*config, layer, fill, *target)
                                           : DecodeLayerPlan(*config, layer, phase, *target);
  if (!plan.ok()) {
    if (plan.status().code() != absl::StatusCode::kInvalidArgument) return Fail(plan.status());
    return cli::UsageError(std::cerr, cmd, std::string(plan.status().message()));
  }
  // A prefill's first row is at position 1.
  const int64_t first = prefill ? 1 : position;
  SimOptions options;
  if (args.Has("trace")) options.trace_path = args.Get("trace");
  if (args.Has("svg")) options.svg_path = args.Get("svg");
  // ★ --values: the layer's inputs drawn at an initializer's scale (LayerRunInputs), rounded to their tensors'
  // precision as the machine stores them so the VM sees the same values, simulated with the target's numerics and
  // compared with the exact VM output by output.
  std::unique_ptr<ValueModel> numerics;
  std::function<TensorMap(const Composition&)> inputs_of;
  // ★ WEIGHTS (and x, the caches) GIVEN AT RUN TIME replace the drawn ones by name: the layer is lowered once here to
  // check them against its run inputs (name, shape, dtype) before anything runs.
  TensorMap given;
  if (given_inputs) {
    absl::StatusOr<LoweredLayer> lowered = LowerLayer(*plan, *target);
    if (!lowered.ok()) return Fail(lowered.status());
    std::optional<TensorMap> g = GivenInputs(lowered->program, args, cmd, &exit_code);
    if (!g) return exit_code;
    given = *std::move(g);
    if (!AdmittedGiven(lowered->program, *target, given, args, cache)) return cli::kExitUsage;
  }
  if (values) {
    numerics = MakeTargetModel(*target);
    options.model = numerics.get();
    options.compare_vm = true;
    options.choices = PlanChoices(*plan);
    options.progress = isatty(2) != 0;
    inputs_of = [&](const Composition& c) {
      TensorMap in = LayerRunInputs(c, *config, first, seed);
      for (const auto& [name, d] : given) in[name] = d;
      for (auto& [name, d] : in) {
        // A given value count that is not rows x cols is the run's to refuse, not rounded here.
        if (IsInteger(d.precision) || static_cast<int64_t>(d.values.size()) != d.rows * d.cols) continue;
        numerics->StoreRoundRows(d.precision, d.values.data(), d.rows, d.cols);
      }
      return in;
    };
  }
  absl::StatusOr<PlanRun> run = RunPlan(*plan, *target, first, options, inputs_of);
  if (!run.ok()) return Fail(run.status());
  const proto::SimReport& rep = run->report;
  if (args.Has("report")) {
    if (absl::Status st = WriteProtoFile(args.Get("report"), rep); !st.ok()) return Fail(st);
  }
  const double clock = rep.clock_hz() > 0 ? rep.clock_hz() : 1e9;
  const LayerKind self = KindOf(*config, layer);
  // The position the run is at: a given pos replaces --decode's (the layer is built for its cache, and the
  // position is a run input), and the header says which one the values and cycles are for.
  std::string phase_text;
  auto pos = given.find("pos");
  if (pos != given.end() && pos->second.values.size() == 1) {
    const int64_t at = static_cast<int64_t>(pos->second.values[0]);
    phase_text = prefill ? absl::StrCat("prefill of ", tokens, " tokens from position ", at, " (the given pos) into a ",
                                        cache, "-row cache")
                         : absl::StrCat("decode at position ", at, " (the given pos, not --decode=", position,
                                        ") over a ", cache, "-row cache");
  } else {
    phase_text = prefill ? absl::StrCat("prefill of ", tokens, " tokens into a ", cache, "-row cache")
                         : absl::StrCat("decode at position ", position, " over a ", cache, "-row cache");
  }
  out << absl::StrFormat("%s layer %d (%s), %s, on %s (%s, weights %s)\n", config->architecture, layer,
                         LayerKindName(self), phase_text, target->name(),
                         values ? absl::StrCat("values: inputs seeded with ", seed,
                                               given.empty() ? "" : absl::StrCat(", ", given.size(), " given"),
                                               ", the target's numerics against the exact VM")
                                : std::string("timing only"),
                         weights);
  PrintOps(out, *run, clock, values);
  int64_t of_kind = 0;
  for (const LayerKind& k : LayerKinds(*config)) {
    if (SameKind(k, self)) of_kind = k.count;
  }
  if (prefill) {
    out << absl::StrFormat("%d layers of this kind: %.3f ms for the prefill (layers only)\n", of_kind,
                           of_kind * rep.total_cycles() / clock * 1e3);
  } else {
    out << absl::StrFormat(
        "%d layers of this kind: %.3f ms a token, %.1f tokens/s per user (layers only: no "
        "embedding, final norm or LM head)\n",
        of_kind, of_kind * rep.total_cycles() / clock * 1e3,
        clock / (static_cast<double>(of_kind) * rep.total_cycles()));
  }
  if (values) {
    int over = 0;
    for (const proto::OutputError& e : rep.errors()) over += e.within() ? 0 : 1;
    out << absl::StrFormat(
        "values: %d outputs against the VM, %d outside their tolerance (rel L2 <= the "
        "report's tolerance per output)\n",
        rep.errors_size(), over);
    // A mixture's routing is a choice: said when the machine chose otherwise on a near tie, and how many outputs were
    // compared given the machine's choice.
    int given = 0;
    for (const proto::OutputError& e : rep.errors()) {
      given += e.given_machine_choices() ? 1 : 0;
      const bool choice = std::any_of(options.choices.begin(), options.choices.end(),
                                      [&](const SimOptions::Choice& c) { return c.tensor == e.tensor(); });
      if (!choice) continue;
      const int64_t rows = e.elements() / ColsOf(*run, e.tensor());
      out << absl::StrFormat("  choice: %s (the routing) chose otherwise than the exact VM in %d of %d rows%s\n",
                             e.tensor(), e.choice_rows_differing(), rows,
                             e.choice_rows_differing() == 0 ? ""
                             : e.within() ? ", each a near tie of the router's logits within their own error"
                                          : ", NOT all near ties");
    }
    if (given > 0) {
      out << absl::StrFormat(
          "  %d outputs after a routing compared with the exact VM on the machine's routing (its choices and "
          "weights)\n",
          given);
    }
    // Name each one, internal tensors too: a table row shows only an op's result.
    for (const proto::OutputError& e : rep.errors()) {
      if (!e.within()) {
        out << absl::StrFormat("  outside: %s rel L2 %.3g > %.3g\n", e.tensor(), e.rel_l2(), e.tolerance());
      }
    }
    if (over > 0) {
      cli::PrintError(std::cerr, "spatial model", absl::StrCat(over, " outputs are outside their tolerance"));
      return cli::kExitFailed;
    }
  }
  if (!all_layers) return cli::kExitOk;
  // ★ A WHOLE TOKEN (or the whole prefill): every kind of layer simulated once and counted as often as the model
  // has it, then the head (final norm, LM head). The embedding lookup is one row read and is left out.
  absl::StatusOr<TokenTime> whole = prefill ? PrefillTime(*config, fill, *target)
                                            : DecodeTokenTime(*config, phase, *target);
  if (!whole.ok()) return Fail(whole.status());
  const std::string what =
      prefill ? absl::StrCat("prefill of ", tokens, " tokens") : absl::StrCat("decode at position ", position);
  out << "\nthe whole model, " << what << ":\n";
  out << absl::StrFormat("%-46s %6s %12s %12s\n", "part", "count", "cycles each", prefill ? "ms" : "ms a token");
  for (const TokenPart& part : whole->parts) {
    out << absl::StrFormat("%-46s %6d %12d %12.3f\n", part.name, part.count, part.cycles,
                           part.count * part.cycles / whole->clock_hz * 1e3);
  }
  if (prefill) {
    out << absl::StrFormat("time to first token: %.3f ms", whole->ms());
  } else {
    out << absl::StrFormat("token: %.3f ms, %.1f tokens/s per user", whole->ms(), whole->tokens_per_s());
  }
  out << " (batch 1; no embedding lookup, sampling or host overhead)\n";
  // ★ WHETHER THE MODEL FITS THE CARD: the simulator times any size, so it says when the weights and caches are
  // more than one card's DRAM holds.
  out << absl::StrFormat("memory: weights %.2f GB + caches %.2f GB", whole->weight_bytes / 1e9,
                         whole->state_bytes / 1e9);
  if (whole->capacity_bytes > 0) {
    out << absl::StrFormat(" of the card's %.2f GB%s", whole->capacity_bytes / 1e9,
                           whole->fits() ? "" : ": DOES NOT FIT one card (the times above assume it did)");
  }
  out << "\n";
  return cli::kExitOk;
}

}  // namespace

Subcommand ModelCommand() {
  cli::CommandSpec s;
  s.name = "model";
  s.summary = "one decoder layer of a model from its config.json: lowered, certified, simulated, one row per op";
  s.flags = {
      {"config", FlagSpec::Kind::kValue, "NAME|FILE",
       absl::StrCat("a Hugging Face config.json, or an example's name (examples/models: ",
                    absl::StrJoin(ExampleModelNames(), ", "), ")"),
       true},
      {"layer", FlagSpec::Kind::kValue, "N", "the layer index (default 0)"},
      {"decode", FlagSpec::Kind::kValue, "P", "a decode step at 1-based position P (attends positions 1..P)"},
      {"cache", FlagSpec::Kind::kValue, "L", "the KV caches' rows (default P)"},
      {"prefill", FlagSpec::Kind::kValue, "T",
       "a prefill of T tokens from position 1 (a mixture of experts runs every expert over every token)"},
      {"target", FlagSpec::Kind::kValue, "NAME|FILE", "the target (default wormhole_n150)"},
      {"weights", FlagSpec::Kind::kValue, "FORMAT",
       "matmul weight storage: default (the target's), bf16, bfp8_b, bfp4_b, or tt_transformers' decode recipes "
       "ff13_bfp4 (= performance: gate/up bfp4_b, the rest bfp8_b) and mlp_bfp4 (gate/up/down bfp4_b)"},
      {"values", FlagSpec::Kind::kBool, "",
       "also the values: inputs at an initializer's scale, the target's numerics, each op's result against the "
       "exact VM"},
      {"seed", FlagSpec::Kind::kValue, "SEED", "the --values inputs' seed (default 1)"},
      {"input", FlagSpec::Kind::kRepeated, "NAME=FILE.npy|V[,V...]",
       "with --values, the value of the layer's run input NAME (a weight such as w_down, x, a cache) instead of a "
       "drawn one; checked by name, shape and dtype"},
      {"inputs-dir", FlagSpec::Kind::kValue, "DIR",
       "with --values, every run input not given by --input that DIR/NAME.npy holds (spatial simulate "
       "--output-dir writes that layout)"},
      {"all-layers", FlagSpec::Kind::kBool, "",
       "also the whole model: each kind of layer once, times its count, plus the final norm and LM head (the token "
       "at a decode, the time to the first token at a prefill), and its weights and caches against the card's DRAM; "
       "not with --report, --trace or --svg (they describe one layer)"},
      {"report", FlagSpec::Kind::kValue, "FILE",
       "write the layer's SimReport: .json, .binpb or text proto ('-' stdout); not with --all-layers", false,
       FlagSpec::Output::kFile},
      {"trace", FlagSpec::Kind::kValue, "FILE.json",
       "a Chrome-trace timeline of the whole layer ('-' stdout); not with --all-layers", false,
       FlagSpec::Output::kFile},
      {"svg", FlagSpec::Kind::kValue, "FILE.svg",
       "per-site engine occupancy and per-section cycles ('-' stdout); not with --all-layers", false,
       FlagSpec::Output::kFile},
  };
  s.description = absl::StrCat(
      "Reads the model's config.json (architecture facts only, no weights), builds the op specs of one decoder\n"
      "layer at a decode step or a prefill (norms, projections, q/k norms, RoPE, KV-cache writes, attention,\n"
      "residual adds, the SwiGLU MLP or the mixture of experts), lowers each for the target, joins them into one\n"
      "program (moving a tensor between the T x n matrix and flat rows where two ops read it differently),\n"
      "certifies it and simulates it timing-only (--values: with values and the target's numerics, each op's result\n"
      "against the exact VM). Prints one row per op (sections, cycles, share of the layer, what bounds its\n"
      "longest section, roofline fraction, DRAM bytes) and the layer total, which is checked to equal the sum of\n"
      "its sections; --all-layers adds the whole token (decode) or the time to the first token (prefill).\n"
      "--report, --trace and --svg describe the one layer, so they are not taken with --all-layers; at most one of\n"
      "them may be '-' (stdout), and the table then goes to stderr.\n"
      "Recognized architectures: ",
      absl::StrJoin(RecognizedArchitectures(), ", "),
      ".\n"
      "Exit 1 on a refusal or a failed certification, 2 on bad usage or an unreadable config.");
  s.examples = {"spatial model --config=qwen3-8b --decode=4096 --cache=8192 --target=wormhole_n150",
                "spatial model --config=examples/models/qwen3-8b.json --layer=3 --decode=128 --report=layer.json",
                "spatial model --config=llama-3.1-8b --decode=128 --weights=performance --all-layers",
                "spatial model --config=qwen3-8b --prefill=128 --all-layers"};
  return {s, &RunModel};
}

}  // namespace spatial
