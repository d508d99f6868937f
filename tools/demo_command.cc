// `spatial demo`: the README's demo on an embedded default. Two ops of Qwen3-0.6B at their real shapes, each
// lowered for a real target (wormhole_n150 unless --target), CERTIFIED, run on the f64 VM against the op's own f64
// reference, and SIMULATED on the SystemC model with the target's numerics, compared with the exact VM:
//   silu    the MLP gate activation over intermediate_size 3072 (config.json), one token;
//   matmul  the MLP up projection hidden 1024 -> intermediate 3072 for a 32-token prefill block.
// One table row per op; exit 1 when any check fails. --trace=FILE writes each op's Chrome trace.
// The simulated result is held to the op family's measured bound where the target accumulates in fp32 (where it was
// measured), else to the program's own claim, the tolerance `spatial simulate --compare-vm` holds it to.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "certify/certify.h"
#include "lowerings/reference.h"
#include "lowerings/family.h"
#include "lowerings/registry.h"
#include "models/decode_token.h"
#include "models/model_config.h"
#include "sim/numerics/target_model.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "spatial/tensor_data.h"
#include "spatial/validate.h"
#include "tools/command_common.h"
#include "tools/commands.h"
#include "tools/program_summary.h"
#include "tools/random_inputs.h"

namespace spatial {
namespace {

using cli::FlagSpec;

// Qwen3-0.6B (its config.json): hidden_size 1024, intermediate_size 3072.
constexpr int64_t kQwen3Hidden = 1024;
constexpr int64_t kQwen3MlpWidth = 3072;
constexpr int64_t kPrefillTokens = 32;  // one 32-row tile of tokens: a prefill block

// The VM is exact f64 and so is the op reference: they may differ only by how each orders the same math. Measured
// as |vm - ref| / max(|ref|, 1) (relative, with an absolute floor below 1: a dot product that cancels to near zero
// carries the rounding of its large terms, not of its small result).
constexpr double kVmTolerance = 1e-12;

struct DemoOp {
  std::string label;  // the table's op column
  std::string what;   // one line of what it is
  std::string shape;
  proto::OpSpec spec;
  // Relative-L2 bound of the simulated (bf16, target numerics) result against the exact VM: the kind's family's
  // (lowerings/family.h), the bound the tolerance test holds it to with an fp32 accumulator (FamilyBoundHolds).
  double tolerance = 0.0;
};

// Whether the families' bounds apply on `target`: op_tolerance_test measures them on targets with an fp32
// accumulator (Dst), where partial sums and SFPU results keep fp32 until they are packed. Without one (grayskull_e150
// rounds them to bf16 in Dst, after every step) the errors are several times larger and the bound says nothing about
// them; the program's own claim (simulate --compare-vm's tolerance) is the honest one there.
bool FamilyBoundHolds(const Target& target) { return target.effective_acc_tiles(Precision::kFp32) > 0; }

std::vector<DemoOp> DemoOps() {
  std::vector<DemoOp> ops;
  {
    DemoOp op;
    op.label = "silu";
    op.what = "Qwen3-0.6B MLP gate activation, intermediate_size 3072, one token";
    op.shape = absl::StrCat("1x", kQwen3MlpWidth);
    op.spec.set_out("act");
    op.spec.add_operands()->set_name("gate");
    op.spec.mutable_silu()->set_n(kQwen3MlpWidth);
    op.tolerance = FindFamily(proto::OpSpec::kSilu)->rel_l2;
    ops.push_back(std::move(op));
  }
  {
    DemoOp op;
    op.label = "matmul";
    op.what = "Qwen3-0.6B MLP up projection 1024 -> 3072, 32-token prefill block";
    op.shape = absl::StrCat(kPrefillTokens, "x", kQwen3Hidden, " @ ", kQwen3Hidden, "x", kQwen3MlpWidth);
    op.spec.set_out("up");
    op.spec.add_operands()->set_name("x");
    op.spec.add_operands()->set_name("w_up");
    op.spec.mutable_matmul()->set_m(kPrefillTokens);
    op.spec.mutable_matmul()->set_k(kQwen3Hidden);
    op.spec.mutable_matmul()->set_n(kQwen3MlpWidth);
    op.tolerance = FindFamily(proto::OpSpec::kMatmul)->rel_l2;
    ops.push_back(std::move(op));
  }
  return ops;
}

// What happened to one op; the first failing check stops it and says why.
struct DemoRow {
  bool lowered = false;
  ProgramSummary summary;
  bool certified = false;
  double vm_err = -1.0;  // < 0: not run
  proto::SimReport report;
  bool simulated = false;
  double rel_l2 = -1.0;
  double tolerance = -1.0;  // what the simulation held the result to (its report's)
  std::string trace_path;
  std::vector<std::string> failures;
  bool pass() const { return failures.empty(); }
};

// demo.json -> demo.silu.json; a path without an extension gets ".silu.json".
std::string TracePathFor(const std::string& path, const std::string& label) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return absl::StrCat(path, ".", label, ".json");
  }
  return absl::StrCat(path.substr(0, dot), ".", label, path.substr(dot));
}

double VmVsReference(const TensorData& got, const TensorData& want, std::string* why) {
  if (got.values.size() != want.values.size()) {
    *why = absl::StrCat("VM result ", got.rows, "x", got.cols, " vs reference ", want.rows, "x", want.cols);
    return INFINITY;
  }
  double worst = 0.0;
  for (size_t i = 0; i < got.values.size(); ++i) {
    const double g = got.values[i], w = want.values[i];
    if (std::isnan(g) || std::isnan(w)) {
      if (std::isnan(g) != std::isnan(w)) return INFINITY;
      continue;
    }
    worst = std::max(worst, std::fabs(g - w) / std::max(std::fabs(w), 1.0));
  }
  return worst;
}

DemoRow RunOne(const DemoOp& op, const Target& target, uint64_t seed, const std::string& trace) {
  DemoRow row;
  absl::StatusOr<Composition> c = Lower(op.spec, target);
  if (!c.ok()) {
    row.failures.push_back(
        absl::StrCat(IsRefusal(c.status()) ? "refused: " : "lowering failed: ", c.status().message()));
    return row;
  }
  if (absl::Status st = ValidateComposition(*c); !st.ok()) {
    row.failures.push_back(absl::StrCat("the lowered program is invalid: ", st.message()));
    return row;
  }
  row.lowered = true;
  row.summary = Summarize(*c);

  CertifyResult cert = Certify(*c, target);
  row.certified = cert.ok();
  for (const proto::Diagnostic& d : cert.diagnostics) {
    row.failures.push_back(absl::StrCat("certify: ", FormatDiagnostic(d, c->name)));
  }

  // Seeded inputs, stored at their tensors' precisions (bf16) as the layer before would have stored them: the VM,
  // the reference and the simulator all start from the same values.
  std::unique_ptr<ValueModel> model = MakeTargetModel(target);
  TensorMap inputs = RandomInputs(CompositionInputs(*c), seed);
  for (auto& [name, t] : inputs) model->StoreRoundRows(t.precision, t.values.data(), t.rows, t.cols);
  absl::StatusOr<TensorMap> vm = RunComposition(*c, target.tile_rows(), target.tile_cols(), inputs);
  absl::StatusOr<TensorMap> ref = ReferenceOp(op.spec, inputs);
  if (!vm.ok()) {
    row.failures.push_back(absl::StrCat("VM: ", vm.status().message()));
  } else if (!ref.ok()) {
    row.failures.push_back(absl::StrCat("op reference: ", ref.status().message()));
  } else if (!vm->count(op.spec.out()) || !ref->count(op.spec.out())) {
    row.failures.push_back(absl::StrCat("no result '", op.spec.out(), "' from the VM or the reference"));
  } else {
    std::string why;
    row.vm_err = VmVsReference(vm->at(op.spec.out()), ref->at(op.spec.out()), &why);
    if (!why.empty()) row.failures.push_back(why);
    if (!(row.vm_err <= kVmTolerance)) {
      row.failures.push_back(absl::StrFormat("VM vs f64 reference: max rel error %.3g > %.0e", row.vm_err,
                                             kVmTolerance));
    }
  }

  SimOptions so;
  so.model = model.get();
  so.compare_vm = true;
  // Else the program's claim (LineageTolerances), as simulate --compare-vm; the report says which was used.
  if (FamilyBoundHolds(target)) so.tolerance[op.spec.out()] = op.tolerance;
  if (!trace.empty()) so.trace_path = row.trace_path = TracePathFor(trace, op.label);
  absl::StatusOr<SimResult> sim = Simulate(*c, target, inputs, so);
  if (!sim.ok()) {
    row.failures.push_back(absl::StrCat("simulate: ", sim.status().message()));
    row.trace_path.clear();
    return row;
  }
  row.simulated = true;
  row.report = sim->report;
  for (const proto::OutputError& e : row.report.errors()) {
    if (e.tensor() != op.spec.out()) continue;
    row.rel_l2 = e.rel_l2();
    row.tolerance = e.tolerance();
    if (!e.within() || e.mismatched_nans() > 0) {
      row.failures.push_back(absl::StrFormat("bf16 result: relative L2 %.3g vs the VM exceeds the tolerance %.3g%s",
                                             e.rel_l2(), e.tolerance(),
                                             e.mismatched_nans() > 0 ? " (NaN on one side only)" : ""));
    }
  }
  if (row.rel_l2 < 0)
    row.failures.push_back(absl::StrCat("the simulation reported no error for '", op.spec.out(), "'"));
  return row;
}

std::string Kib(int64_t bytes) { return absl::StrFormat("%.1f KiB", static_cast<double>(bytes) / 1024.0); }

std::string Time(double seconds) {
  if (seconds >= 1e-3) return absl::StrFormat("%.2f ms", seconds * 1e3);
  return absl::StrFormat("%.2f us", seconds * 1e6);
}

double MatrixBusy(const proto::SimReport& r) {
  for (const proto::EngineStats& e : r.engines()) {
    if (e.engine() == "matrix") return e.busy_fraction();
  }
  return 0.0;
}

// One line of fixed-width columns.
std::string Line(const std::vector<std::string>& cells, const std::vector<size_t>& widths) {
  std::string s = " ";
  for (size_t i = 0; i < cells.size(); ++i) {
    absl::StrAppend(&s, "  ", cells[i]);
    if (i + 1 < cells.size()) s.append(widths[i] > cells[i].size() ? widths[i] - cells[i].size() : 0, ' ');
  }
  return s + "\n";
}

int RunDemo(const cli::ParsedArgs& args) {
  const std::string cmd = "demo";
  uint64_t seed = 1;
  if (args.Has("seed") && !absl::SimpleAtoi(args.Get("seed"), &seed)) {
    return cli::UsageError(std::cerr, cmd,
                           absl::StrCat("--seed needs a non-negative integer, got '", args.Get("seed"), "'"));
  }
  int exit_code = cli::kExitOk;
  std::optional<Target> target = LoadTargetOrReport(args.Get("target", "wormhole_n150"), cmd, &exit_code);
  if (!target) return exit_code;
  const std::string trace = args.Get("trace");
  if (trace == "-") {
    return cli::UsageError(std::cerr, cmd,
                           "--trace=-: the demo writes one trace per op (FILE.silu.json, FILE.matmul.json), so it "
                           "cannot be '-' (stdout): give a file name");
  }

  const auto start = std::chrono::steady_clock::now();
  const std::vector<DemoOp> ops = DemoOps();
  std::vector<DemoRow> rows;
  for (const DemoOp& op : ops) rows.push_back(RunOne(op, *target, seed, trace));
  // ★ ONE REAL LAYER: Qwen3-0.6B's layer 0 at a decode step, its 20 ops lowered, joined, certified and simulated
  // timing-only (models/decode_token.h), the per-op table being `spatial model`'s.
  std::string layer_line;
  bool layer_ok = false;
  {
    constexpr int64_t kPosition = 4096;
    absl::StatusOr<ModelConfig> config = ReadModelConfig("qwen3-0.6b");
    absl::StatusOr<LayerPlan> plan =
        config.ok() ? DecodeLayerPlan(*config, 0, DecodePhase{kPosition, kPosition, {}}, *target)
                    : absl::StatusOr<LayerPlan>(config.status());
    absl::StatusOr<PlanRun> run = plan.ok() ? RunPlan(*plan, *target, kPosition, SimOptions{})
                                            : absl::StatusOr<PlanRun>(plan.status());
    if (run.ok()) {
      const proto::SimReport& rep = run->report;
      const double clock = rep.clock_hz() > 0 ? rep.clock_hz() : 1e9;
      layer_ok = true;
      layer_line = absl::StrFormat(
          "  layer: Qwen3-0.6B layer 0, decode at position %d: %d ops in %d sections, certified, simulated timing-only\n"
          "    %d cycles (%s, %s-bound, %.1f%% of the roofline), the sum of its sections; %d such layers: %.1f "
          "tokens/s per user\n"
          "    per op: spatial model --config=qwen3-0.6b --decode=%d\n",
          kPosition, plan->ops.size(), run->lowered.program.sections.size(), rep.total_cycles(),
          Time(rep.seconds()), rep.roofline().limited_by(), 100 * rep.roofline().fraction(), config->layers,
          clock / (static_cast<double>(config->layers) * rep.total_cycles()), kPosition);
    } else if (IsRefusal(run.status())) {
      // A target the layer does not map to (test_tiny's fictional 96 KiB site) says so; it is not a failure.
      layer_ok = true;
      layer_line = absl::StrCat("  layer: Qwen3-0.6B layer 0 is not lowered on ", target->name(), ": ",
                                run.status().message(), "\n");
    } else {
      layer_line = absl::StrCat("  layer: Qwen3-0.6B layer 0: FAIL: ", run.status().message(), "\n");
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const proto::Target& tp = target->proto();
  std::string out = absl::StrFormat(
      "spatial demo: Qwen3-0.6B ops at their real shapes on %s (tile %dx%d, %dx%d sites, %.3g GHz, %s matmul), "
      "bf16 inputs uniform in [-2, 2) seeded with %d\n\n",
      target->name(), target->tile_rows(), target->tile_cols(), target->grid_y(), target->grid_x(),
      tp.clock_hz() / 1e9, proto::Fidelity_Name(tp.numerics().fidelity()), seed);
  const std::vector<std::string> head = {"op",        "shape",     "sect/stages/items", "footprint/site",
                                         "certified", "VM vs ref", "cycles",            "time",
                                         "roofline",  "matrix",    "bf16 vs VM (tol)",  "result"};
  std::vector<std::vector<std::string>> table = {head};
  for (size_t i = 0; i < ops.size(); ++i) {
    const DemoOp& op = ops[i];
    const DemoRow& r = rows[i];
    const proto::SimReport& rep = r.report;
    table.push_back({
        op.label,
        op.shape,
        r.lowered ? absl::StrCat(r.summary.sections.size(), "/", r.summary.stages, "/", r.summary.items) : "-",
        r.lowered ? Kib(r.summary.max_footprint_bytes) : "-",
        r.lowered ? (r.certified ? "yes" : "NO") : "-",
        r.vm_err >= 0 ? absl::StrFormat("%.1e", r.vm_err) : "-",
        r.simulated ? absl::StrCat(rep.total_cycles()) : "-",
        r.simulated ? Time(rep.seconds()) : "-",
        r.simulated ? absl::StrFormat("%.1f%% (%s)", 100 * rep.roofline().fraction(), rep.roofline().limited_by())
                    : "-",
        r.simulated ? absl::StrFormat("%.1f%%", 100 * MatrixBusy(rep)) : "-",
        r.rel_l2 >= 0 ? absl::StrFormat("%.2e (%.1e)", r.rel_l2, r.tolerance) : "-",
        r.pass() ? "PASS" : "FAIL",
    });
  }
  std::vector<size_t> widths(head.size(), 0);
  for (const auto& cells : table) {
    for (size_t j = 0; j < cells.size(); ++j) widths[j] = std::max(widths[j], cells[j].size());
  }
  for (const auto& cells : table) absl::StrAppend(&out, Line(cells, widths));
  absl::StrAppend(&out, "\n");
  bool all = true;
  for (size_t i = 0; i < ops.size(); ++i) {
    const DemoRow& r = rows[i];
    all &= r.pass();
    absl::StrAppend(&out, "  ", ops[i].label, ": ", ops[i].what, "\n");
    if (r.simulated) {
      const proto::SimReport& rep = r.report;
      absl::StrAppendFormat(&out, "    %s: %.0f GFLOP/s, %.2f MB from DRAM, %.2f MB to DRAM\n",
                            rep.composition(), rep.achieved_flops_per_second() / 1e9,
                            rep.dram_read_bytes() / 1e6, rep.dram_write_bytes() / 1e6);
    }
    if (!r.trace_path.empty()) {
      absl::StrAppendFormat(&out, "    trace: %s (%d sites x %d engines)\n", r.trace_path, r.report.sites(),
                            r.report.engines_size());
    }
    for (const std::string& f : r.failures) absl::StrAppend(&out, "    FAIL: ", f, "\n");
  }
  absl::StrAppend(&out, layer_line);
  all &= layer_ok;
  absl::StrAppendFormat(&out,
                        "\nVM vs ref: the f64 VM against the op's f64 reference, max |vm - ref| / max(|ref|, 1), "
                        "at most %.0e.\nbf16 vs VM: the simulated result under the target's numerics against the "
                        "exact VM, ||sim - vm|| / ||vm||.\ntol: %s.\nroofline: the share of the target's compute or "
                        "DRAM bound reached; matrix: the matrix engines' busy share.\n%s in %.1f s.\n",
                        kVmTolerance,
                        FamilyBoundHolds(*target)
                            ? "the op family's bound, measured with an fp32 accumulator as this target has"
                            : "the program's claim, as simulate --compare-vm holds it (the op families' bounds are "
                              "measured with an fp32 accumulator, which this target lacks)",
                        all ? "All checks passed" : "Some checks FAILED", wall);
  std::cout << out;
  return all ? cli::kExitOk : cli::kExitFailed;
}

}  // namespace

Subcommand DemoCommand() {
  cli::CommandSpec s;
  s.name = "demo";
  s.summary = "lower, certify, run and simulate Qwen3-0.6B's MLP SiLU (3072) and up projection (32x1024x3072), and "
              "time one decoder layer";
  s.flags = {
      {"target", FlagSpec::Kind::kValue, "NAME|FILE", "target to lower for (default wormhole_n150)"},
      {"seed", FlagSpec::Kind::kValue, "SEED", "seed of the random inputs (default 1)"},
      {"trace", FlagSpec::Kind::kValue, "FILE.json",
       "write each op's Chrome-trace/Perfetto timeline: FILE.json -> FILE.silu.json, FILE.matmul.json (two files, "
       "so not '-')",
       false, FlagSpec::Output::kFile},
  };
  s.description =
      "Two ops of Qwen3-0.6B at their real shapes: SiLU over the MLP width (1 x 3072) and the MLP up projection\n"
      "for a 32-token block (32 x 1024 @ 1024 x 3072). Each is lowered, certified, run on the f64 VM against the\n"
      "op's f64 reference (max relative error <= 1e-12), and simulated on the SystemC model with the target's\n"
      "numerics (bf16 storage, accumulation at the target's accumulator precision: fp32 on Wormhole and\n"
      "Blackhole, bf16 on Grayskull; its SFPU algorithms), its result compared with the exact VM as a relative L2\n"
      "error against the op's tolerance: the op family's bound where the target has an fp32 accumulator (where it\n"
      "was measured), else the program's claim (what simulate --compare-vm holds it to). One PASS/FAIL row per\n"
      "op. Then one whole decoder layer of Qwen3-0.6B at decode position 4096 (its 20 ops joined, certified,\n"
      "simulated timing-only). Exit 1 on any FAIL, 2 on bad usage.";
  s.examples = {"spatial demo", "spatial demo --trace=demo.json", "spatial demo --target=blackhole_p150"};
  return {s, &RunDemo};
}

}  // namespace spatial
