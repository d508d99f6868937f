// `spatial demo`: the README's demo on an embedded default: SiLU over Qwen3-0.6B's MLP width (intermediate_size
// 3072), lowered for a real target, validated, run on the VM with seeded inputs, and judged against the op's f64
// reference.
#include <chrono>
#include <cmath>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lowerings/reference.h"
#include "lowerings/registry.h"
#include "sim/vm/vm.h"
#include "spatial/tensor_data.h"
#include "spatial/validate.h"
#include "tools/command_common.h"
#include "tools/commands.h"
#include "tools/program_summary.h"
#include "tools/random_inputs.h"
#include "tools/tensor_report.h"

namespace spatial {
namespace {

using cli::FlagSpec;

// Qwen3-0.6B: hidden_size 1024, intermediate_size 3072 (its config.json); the MLP gate's SiLU runs over 3072.
constexpr int64_t kQwen3MlpWidth = 3072;
// The VM is exact f64 and so is the reference: they may differ only by how each arranges the same math.
constexpr double kRelTolerance = 1e-12;

proto::OpSpec DemoSpec() {
  proto::OpSpec spec;
  // The names of examples/ops/silu.textproto: the gate projection in, the activation out.
  spec.set_out("act");
  spec.add_operands()->set_name("gate");
  spec.mutable_silu()->set_n(kQwen3MlpWidth);
  return spec;
}

int RunDemo(const cli::ParsedArgs& args) {
  const std::string cmd = "demo";
  const std::string where = "spatial demo";
  uint64_t seed = 1;
  if (args.Has("seed") && !absl::SimpleAtoi(args.Get("seed"), &seed)) {
    return cli::UsageError(std::cerr, cmd, absl::StrCat("--seed needs a non-negative integer, got '", args.Get("seed"), "'"));
  }
  int exit_code = cli::kExitOk;
  std::optional<Target> target = LoadTargetOrReport(args.Get("target", "wormhole_n150"), cmd, &exit_code);
  if (!target) return exit_code;

  proto::OpSpec spec = DemoSpec();
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Composition> c = Lower(spec, *target);
  if (!c.ok()) {
    cli::PrintError(std::cerr, where, absl::StrCat(IsRefusal(c.status()) ? "refused: " : "", c.status().message()));
    return cli::kExitFailed;
  }
  if (absl::Status st = ValidateComposition(*c); !st.ok()) {
    cli::PrintError(std::cerr, where, absl::StrCat("the lowered program is invalid: ", st.message()));
    return cli::kExitFailed;
  }
  auto lowered = std::chrono::steady_clock::now();
  TensorMap inputs = RandomInputs(CompositionInputs(*c), seed);
  absl::StatusOr<TensorMap> vm = RunComposition(*c, c->tile_rows, c->tile_cols, inputs);
  if (!vm.ok()) {
    cli::PrintError(std::cerr, where, vm.status());
    return cli::kExitFailed;
  }
  auto ran = std::chrono::steady_clock::now();
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, inputs);
  if (!ref.ok()) {
    cli::PrintError(std::cerr, where, absl::StrCat("op reference: ", ref.status().message()));
    return cli::kExitFailed;
  }
  auto got = vm->find(spec.out()), want = ref->find(spec.out());
  if (got == vm->end() || want == ref->end()) {
    cli::PrintError(std::cerr, where, absl::StrCat("no result tensor '", spec.out(), "' from the VM or the reference"));
    return cli::kExitFailed;
  }
  absl::StatusOr<ErrorStats> err = CompareTensors(got->second, want->second);
  if (!err.ok()) {
    cli::PrintError(std::cerr, where, err.status());
    return cli::kExitFailed;
  }
  bool pass = err->max_rel <= kRelTolerance && err->mismatched_nan == 0;

  ProgramSummary sum = Summarize(*c);
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  const TensorData& y = got->second;
  std::string out;
  absl::StrAppend(&out, "spatial demo: SiLU over Qwen3-0.6B's MLP width\n");
  absl::StrAppend(&out, "  op:         ", OpKindName(spec), "  ", spec.operands(0).name(), ": 1x", kQwen3MlpWidth,
                  " -> ", spec.out(), ": ", y.rows, "x", y.cols, "\n");
  absl::StrAppend(&out, "  target:     ", target->name(), " (tile ", target->tile_rows(), "x", target->tile_cols(),
                  ", grid ", target->grid_y(), "x", target->grid_x(), ")\n");
  std::string kinds;
  for (const auto& [kind, n] : sum.stages_by_kind) absl::StrAppend(&kinds, kinds.empty() ? "" : ", ", n, " ", kind);
  absl::StrAppend(&out, "  program:    ", c->name, ": ", sum.sections.size(), " section(s), ", sum.stages,
                  " stages (", kinds, "), ", sum.buffers, " buffers, ", sum.items, " work items\n");
  absl::StrAppend(&out, "  footprint:  ", FormatBytes(sum.max_footprint_bytes), " per site of ",
                  FormatBytes(target->max_local_mem_bytes()), " available\n");
  absl::StrAppend(&out, "  vm:         ", absl::StrFormat("%.1f ms", ms(lowered, ran)), " (lowering ",
                  absl::StrFormat("%.1f ms", ms(start, lowered)), "), inputs seeded with ", seed, "\n");
  absl::StrAppend(&out, "  vs f64 reference: ",
                  absl::StrFormat("max abs err %.3g, max rel err %.3g (tolerance %.0e relative): %s\n", err->max_abs,
                                  err->max_rel, kRelTolerance, pass ? "PASS" : "FAIL"));
  if (err->mismatched_nan > 0) absl::StrAppend(&out, "  ", err->mismatched_nan, " element(s) NaN on one side only\n");
  std::cout << out;
  return pass ? cli::kExitOk : cli::kExitFailed;
}

}  // namespace

Subcommand DemoCommand() {
  cli::CommandSpec s;
  s.name = "demo";
  s.summary = "lower, run and check SiLU over Qwen3-0.6B's MLP width (n = 3072) against the f64 reference";
  s.flags = {
      {"target", FlagSpec::Kind::kValue, "NAME|FILE", "target to lower for (default wormhole_n150)"},
      {"seed", FlagSpec::Kind::kValue, "SEED", "seed of the random input (default 1)"},
  };
  s.description =
      "Lowers the op, validates the program, runs it on the VM with seeded random inputs, computes the op's f64\n"
      "reference and prints a summary; PASS when the max relative error is within 1e-12, else FAIL and exit 1.";
  s.examples = {"spatial demo", "spatial demo --target=blackhole_p150"};
  return {s, &RunDemo};
}

}  // namespace spatial
