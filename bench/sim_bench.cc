// Timing-only simulation speed on a full Wormhole grid (DESIGN §11: millions of simulated cycles per wall second;
// the cycle-level peers SCALE-Sim and STONNE run 5k-25k). Every iteration is one forked Simulate() call, so the
// figure includes elaboration, the child process and the result's trip over the pipe; wall time is what counts.
//
//   cmake --build build --target sim_bench && build/bench/sim_bench
//
// Counters: sim_cycles/s (simulated cycles per wall second), site_cycles/s (the same times the 64 sites),
// invocations/s (stage invocations the sequencers executed per wall second).
#include <cstdint>
#include <cstdlib>

#include "benchmark/benchmark.h"
#include "sim/simulate.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "targets/loader.h"

namespace spatial {
namespace {

const Target& Wormhole() {
  static const Target* t = [] {
    static absl::StatusOr<Target> loaded = LoadTarget("wormhole_n150");
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
      std::abort();
    }
    return &*loaded;
  }();
  return *t;
}

Composition One(Section s) {
  Composition c = Single(std::move(s));
  c.tile_rows = c.tile_cols = 32;
  return c;
}

// C = A * B in m x n tile blocks per item, K folded in `blocks` blocks of k tiles (the lowering's matmul shape).
Composition MatmulFold(int64_t items, int64_t m, int64_t n, int64_t k, int64_t blocks) {
  Template t(32, 32);
  const int64_t kt = k * blocks;
  TensorId a = t.AddTensor("a", TensorRole::kInput, 32 * m * items, 32 * kt, Precision::kBf16, TensorInit::External());
  TensorId b = t.AddTensor("b", TensorRole::kInput, 32 * kt, 32 * n, Precision::kBf16, TensorInit::External());
  TensorId c = t.AddTensor("c", TensorRole::kOutput, 32 * m * items, 32 * n, Precision::kBf16, TensorInit::Zero());
  BufferId a_in = t.AddBuffer("in_a", m * k, Precision::kBf16);
  BufferId b_in = t.AddBuffer("in_b", k * n, Precision::kBf16);
  BufferId acc = t.AddScratchDeep("acc", 2, m * n, Precision::kFp32);
  BufferId out = t.AddBuffer("out", m * n, Precision::kBf16);
  const int64_t w = m * n * 32;
  t.Fold(blocks);
  t.AddGeneric("zero_acc", TileSpace(32, w), {}, {}, IdentMap(w), Const(0.0), acc);
  t.SetPhase(Phase::kBody);
  t.AddLoadBlockAt("load_a", a, 0, {{LoopVar::kItemY, m * kt}, {LoopVar::kKBlock, k}}, {.h = m, .w = k, .pitch = kt},
                   a_in);
  t.AddLoadBlockAt("load_b", b, 0, {{LoopVar::kKBlock, k * n}}, {.h = k, .w = n, .pitch = n}, b_in);
  t.AddMatmul("matmul", MatmulTiles{m, n, k, true, false}, a_in, b_in, acc);
  t.SetPhase(Phase::kEpilogue);
  t.AddGeneric("pack", TileSpace(32, w), {acc}, {IdentMap(w)}, IdentMap(w), Op(0), out);
  t.AddStoreBlock("store_c", c, 0, {{LoopVar::kItemY, m * n}}, {.h = m, .w = n, .pitch = n}, out);
  std::vector<WorkItem> its;
  for (int64_t i = 0; i < items; ++i) its.push_back(WorkItem{i, i, 0, TileRect{i * m, 0, m, n}});
  return One(t.Finish("matmul_fold", std::move(its), Precision::kFp32, NumericsClaim::Approx("bf16 matmul")));
}

// y = silu(x) * x + x over w-tile pages: load -> SFPU/FPU -> store.
Composition Elementwise(int64_t items, int64_t w) {
  Template t(32, 32);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 32, 32 * w * items, Precision::kBf16, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 32, 32 * w * items, Precision::kBf16, TensorInit::Zero());
  BufferId in = t.AddBuffer("in", w, Precision::kBf16);
  BufferId out = t.AddBuffer("out", w, Precision::kBf16);
  const int64_t pw = w * 32;
  t.AddLoad("load_x", x, {{LoopVar::kItemX, w}}, w, in);
  t.AddGeneric("silu_mul_add", TileSpace(32, pw), {in}, {IdentMap(pw)}, IdentMap(pw),
               Add(Mul(Unary(SfpuKind::Silu(), Op(0)), Op(0)), Op(0)), out);
  t.AddStore("store_y", y, {{LoopVar::kItemX, w}}, w, out);
  return One(t.Finish("elementwise", RowItems(w * items, w), Precision::kFp32, NumericsClaim::Approx("silu")));
}

void Run(benchmark::State& state, const Composition& c) {
  SimOptions o;
  o.timing_only = true;
  int64_t cycles = 0, invocations = 0;
  for (auto _ : state) {
    absl::StatusOr<SimResult> r = Simulate(c, Wormhole(), {}, o);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    cycles += r->report.total_cycles();
    invocations += r->report.stage_invocations();
    state.counters["cycles"] = static_cast<double>(r->report.total_cycles());
    state.counters["roofline_fraction"] = r->report.roofline().fraction();
  }
  state.counters["sim_cycles/s"] = benchmark::Counter(static_cast<double>(cycles), benchmark::Counter::kIsRate);
  state.counters["site_cycles/s"] =
      benchmark::Counter(static_cast<double>(cycles) * Wormhole().sites(), benchmark::Counter::kIsRate);
  state.counters["invocations/s"] = benchmark::Counter(static_cast<double>(invocations), benchmark::Counter::kIsRate);
}

// 4096 items of a 4x4-tile output block over 64 K blocks of 8 tiles: 200k stage invocations, DRAM-bound on the
// full grid (each site would need 16 B/cycle of the 4.1 the channels give it).
void BM_TimingMatmul(benchmark::State& state) {
  static const Composition c = MatmulFold(state.range(0), 4, 4, 8, 16);
  Run(state, c);
}
BENCHMARK(BM_TimingMatmul)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

// SFPU-bound (silu 1705 cycles a tile, accurate mode): long busy periods, few events per cycle.
void BM_TimingElementwise(benchmark::State& state) {
  static const Composition c = Elementwise(state.range(0), 8);
  Run(state, c);
}
BENCHMARK(BM_TimingElementwise)->Arg(64 * 256)->Unit(benchmark::kMillisecond)->UseRealTime();

// The worst case for an event-driven model: one-tile copies, ~64-cycle busy periods, two invocations per item.
Composition Copy(int64_t items, int64_t w) {
  Template t(32, 32);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 32, 32 * w * items, Precision::kBf16, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 32, 32 * w * items, Precision::kBf16, TensorInit::Zero());
  BufferId buf = t.AddBuffer("page", w, Precision::kBf16);
  t.AddLoad("load_x", x, {{LoopVar::kItemX, w}}, w, buf);
  t.AddStore("store_y", y, {{LoopVar::kItemX, w}}, w, buf);
  return One(t.Finish("copy", RowItems(w * items, w), Precision::kFp32, NumericsClaim::Exact()));
}

void BM_TimingCopyOneTile(benchmark::State& state) {
  static const Composition c = Copy(state.range(0), 1);
  Run(state, c);
}
BENCHMARK(BM_TimingCopyOneTile)->Arg(64 * 1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace spatial

BENCHMARK_MAIN();
