// The simulator's values at real sizes (issue #13): the value pass (the VM under the target's numerics, what
// `spatial simulate` computes) and the exact f64 VM, on lowered programs of Qwen3-8B's attention and Qwen3-Next's
// Gated DeltaNet, each at 1x, 2x and 4x its rows so the growth shows. Wall time per run, every core (the VM runs a
// section's items in parallel, the same bits at any thread count); the exact run's emulated FLOP/s is beside
// OpenBLAS's single-thread sgemm rate in the same run where the op is a contraction (attention's 4·hd per live
// row-head-position).
//
//   cmake --build build --target values_bench && build/bench/values_bench
//
// Counters: rows/s; FLOP/s (attention's causal FLOPs); vs_openblas (FLOP/s over OpenBLAS sgemm single-thread).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "lowerings/registry.h"
#include "sim/numerics/target_model.h"
#include "sim/vm/vm.h"
#include "spatial/tensor_data.h"
#include "targets/loader.h"
#ifdef SPATIAL_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace spatial {
namespace {

const Target& Wormhole() {
  static const Target t = [] {
    absl::StatusOr<Target> loaded = LoadTarget("wormhole_n150");
    if (!loaded.ok()) std::abort();
    return *std::move(loaded);
  }();
  return t;
}

// OpenBLAS's single-thread n^3 sgemm rate, best of three; 0 without OpenBLAS.
double SgemmFlops(int n) {
#ifdef SPATIAL_HAVE_OPENBLAS
  openblas_set_num_threads(1);
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a), c(a.size());
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
                n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * static_cast<double>(n) / s);
  }
  benchmark::DoNotOptimize(c.data());
  return best;
#else
  (void)n;
  return 0;
#endif
}

// Inputs for every tensor the program reads: standard normal, rounded by the run (the CLI's --random-inputs draws
// uniform values instead; the rate does not depend on them).
TensorMap Inputs(const Composition& c) {
  std::mt19937_64 rng(1);
  std::normal_distribution<double> n01;
  TensorMap in;
  for (const Tensor& t : CompositionInputs(c)) {
    TensorData d{t.rows, t.cols, t.precision, std::vector<double>(static_cast<size_t>(t.rows * t.cols))};
    for (double& v : d.values) v = n01(rng);
    in[t.name] = std::move(d);
  }
  return in;
}

void RunValues(benchmark::State& state, const proto::OpSpec& spec, int64_t rows, double flops) {
  absl::StatusOr<Composition> c = Lower(spec, Wormhole());
  if (!c.ok()) {
    state.SkipWithError(std::string(c.status().message()).c_str());
    return;
  }
  const TensorMap in = Inputs(*c);
  const std::unique_ptr<ValueModel> numerics = MakeTargetModel(Wormhole());
  const bool exact = state.range(1) != 0;
  VmOptions o;
  o.model = exact ? nullptr : numerics.get();
  for (auto _ : state) {
    absl::StatusOr<TensorMap> r = RunComposition(*c, 32, 32, in, o);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(r->size());
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsIterationInvariantRate);
  if (flops > 0) {
    state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                                  benchmark::Counter::kIs1000);
    static const double anchor = SgemmFlops(1024);
    if (anchor > 0) state.counters["openblas_FLOP/s"] = anchor;
  }
}

// Qwen3-8B's attention (32 query heads of 128 over 8 K/V heads): the last `rows` query rows of the 2048-row causal
// prefill (2048: the whole prefill, about a minute and a half a run), or one decode row at position 4096 of a 4096
// cache (rows 0).
void BM_Qwen3Attention(benchmark::State& state) {
  const int64_t rows = state.range(0);
  proto::OpSpec s;
  s.set_out("ctx");
  for (const char* o : {"q", "k", "v"}) s.add_operands()->set_name(o);
  auto* a = s.mutable_attention();
  a->set_h(32);
  a->set_kv(8);
  a->set_hd(128);
  a->set_vd(128);
  const int64_t l = rows == 0 ? 4096 : 2048;
  a->set_l(l);
  a->set_rows(rows == 0 ? 1 : rows);
  a->mutable_pos()->set_literal(rows == 0 ? l : l - rows + 1);
  // Causal FLOPs: 4·hd per live (row, head, position); row r of the block sees P + r positions.
  double live = 0;
  const int64_t p = a->pos().literal(), n = a->rows();
  for (int64_t r = 0; r < n; ++r) live += static_cast<double>(p + r);
  RunValues(state, s, n, 4.0 * 128 * 32 * live);
}
// Args: rows (0: decode at 4096), exact (1) or the target's numerics (0).
BENCHMARK(BM_Qwen3Attention)
    ->ArgsProduct({{0, 128, 256, 512, 2048}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

// Qwen3-Next's Gated DeltaNet (32 value heads over 16 key heads of 128), a prefill block of `rows` rows in the
// lowering's chunked form.
void BM_Qwen3NextGatedDelta(benchmark::State& state) {
  const int64_t rows = state.range(0);
  proto::OpSpec s;
  s.set_out("attn_out");
  for (const char* o : {"q", "k", "v", "z", "beta", "alpha", "recurrent_state", "norm_weight"}) {
    s.add_operands()->set_name(o);
  }
  auto* g = s.mutable_gated_delta();
  g->set_hv(32);
  g->set_hk(16);
  g->set_d(128);
  g->set_rows(rows);
  g->set_eps(1e-6);
  g->set_gate(proto::GatedDeltaSpec::SILU);
  RunValues(state, s, rows, 0);
}
BENCHMARK(BM_Qwen3NextGatedDelta)
    ->ArgsProduct({{64, 128, 256}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace spatial

BENCHMARK_MAIN();
