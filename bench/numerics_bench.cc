// Emulated matmul with tile-accurate numerics vs a native fp32 matmul on the same machine, in the same run
// (DESIGN §11: "Simulation with numerics: its emulated arithmetic rate within a small factor of this machine's
// native fp32 GEMM rate").
//
// Emulated: a 256x256x256 product as the VM runs it, 8x8 output tiles x 8 K tiles of 32x32x32, each through the
// target's ValueModel::MatmulTile on f64 pages (operands converted per tile to bf16 Src registers with the
// fidelity's mantissa bits, products summed in fp32, the Dst rounding per MVMUL). Native: the same product as a
// straightforward i-k-j loop over fp32 arrays (unit-stride inner loop the compiler vectorizes), same flags.
// Both report FLOP/s = 2*n^3 per second.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "sim/numerics/sfpu.h"
#include "sim/vm/exact_model.h"
#include "sim/numerics/target_model.h"
#include "targets/loader.h"
#ifdef SPATIAL_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace spatial::numerics {
namespace {

constexpr int64_t kN = 256;
constexpr int64_t kTile = 32;

std::vector<double> RandomBf16Matrix(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> man(0, 127), exp(-2, 2), sign(0, 1);
  std::vector<double> m(n * n);
  for (double& v : m) v = (sign(rng) ? -1.0 : 1.0) * std::ldexp(1.0 + man(rng) / 128.0, exp(rng));
  return m;
}

// wormhole_n150's value model at `fidelity`; null (and the benchmark skipped) when the target does not load.
std::unique_ptr<ValueModel> WormholeModel(benchmark::State& state, proto::Fidelity fidelity) {
  absl::StatusOr<Target> target = LoadTarget("wormhole_n150");
  if (!target.ok()) {
    state.SkipWithError("wormhole_n150 did not load");
    return nullptr;
  }
  ModelOptions options;
  options.fidelity = fidelity;
  return MakeTargetModel(*target, options);
}

void EmulatedMatmul(benchmark::State& state, proto::Fidelity fidelity, Precision acc) {
  const std::unique_ptr<ValueModel> model = WormholeModel(state, fidelity);
  if (model == nullptr) return;
  const std::vector<double> a = RandomBf16Matrix(kN, 1), b = RandomBf16Matrix(kN, 2);
  std::vector<double> c(kN * kN);
  for (auto _ : state) {
    std::fill(c.begin(), c.end(), 0.0);
    for (int64_t i = 0; i < kN; i += kTile) {
      for (int64_t j = 0; j < kN; j += kTile) {
        for (int64_t k = 0; k < kN; k += kTile) {
          model->MatmulTile(a.data() + i * kN + k, kN, b.data() + k * kN + j, kN, false, c.data() + i * kN + j, kN,
                            kTile, kTile, kTile, acc, spatial::MathFidelity::kDefault);
        }
      }
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * kN * kN * kN, benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

void BM_EmulatedMatmul_HiFi2_Fp32Acc(benchmark::State& s) { EmulatedMatmul(s, proto::HIFI2, Precision::kFp32); }
void BM_EmulatedMatmul_LoFi_Fp32Acc(benchmark::State& s) { EmulatedMatmul(s, proto::LOFI, Precision::kFp32); }
void BM_EmulatedMatmul_HiFi3_Fp32Acc(benchmark::State& s) { EmulatedMatmul(s, proto::HIFI3, Precision::kFp32); }
void BM_EmulatedMatmul_HiFi4_Fp32Acc(benchmark::State& s) { EmulatedMatmul(s, proto::HIFI4, Precision::kFp32); }
void BM_EmulatedMatmul_HiFi2_Bf16Acc(benchmark::State& s) { EmulatedMatmul(s, proto::HIFI2, Precision::kBf16); }
BENCHMARK(BM_EmulatedMatmul_HiFi2_Fp32Acc)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmulatedMatmul_LoFi_Fp32Acc)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmulatedMatmul_HiFi3_Fp32Acc)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmulatedMatmul_HiFi4_Fp32Acc)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EmulatedMatmul_HiFi2_Bf16Acc)->Unit(benchmark::kMillisecond);

// The native baseline: C = A * B in fp32, i-k-j order so the inner loop streams a row of B into a row of C.
void NativeMatmul(const float* __restrict a, const float* __restrict b, float* __restrict c, int64_t n) {
  std::fill(c, c + n * n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float* __restrict ci = c + i * n;
    for (int64_t k = 0; k < n; ++k) {
      const float aik = a[i * n + k];
      const float* __restrict bk = b + k * n;
      for (int64_t j = 0; j < n; ++j) ci[j] += aik * bk[j];
    }
  }
}

void BM_NativeMatmul_Fp32(benchmark::State& state) {
  const std::vector<double> ad = RandomBf16Matrix(kN, 1), bd = RandomBf16Matrix(kN, 2);
  const std::vector<float> a(ad.begin(), ad.end()), b(bd.begin(), bd.end());
  std::vector<float> c(kN * kN);
  for (auto _ : state) {
    NativeMatmul(a.data(), b.data(), c.data(), kN);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * kN * kN * kN, benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}
BENCHMARK(BM_NativeMatmul_Fp32)->Unit(benchmark::kMillisecond);

// ── The same n^3 product as MatmulTiles stages run it, against OpenBLAS in the same run ──
// The VM cuts C into items of kBlock x kBlock tiles folding K kBlock tiles at a time; each (item, K block) is one
// ValueModel::MatmulBlock over pages that hold their tiles side by side (sim/vm/value_model.h). The pages are built
// once, outside the timing. Reported: the emulated FLOP/s and `vs_openblas`, that rate over OpenBLAS's
// single-thread sgemm (target model) or dgemm (the exact model) of the same n, timed in the same benchmark.
constexpr int64_t kBlock = 8;

struct BlockPages {
  int64_t n = 0, nb = 0;  // matrix size, blocks per side
  std::vector<std::vector<double>> a, b;  // a[ib * nb + kb], b[kb * nb + jb]
  std::vector<double> dense_a, dense_b;
};

// Page of block (bi, bk) of a dense n x n matrix: kBlock x kBlock tiles, tile (i, k) at column (i * kBlock + k) * T.
std::vector<double> PageOf(const std::vector<double>& m, int64_t n, int64_t bi, int64_t bk) {
  const int64_t w = kBlock * kBlock * kTile;
  std::vector<double> page(static_cast<size_t>(kTile * w));
  for (int64_t i = 0; i < kBlock; ++i) {
    for (int64_t k = 0; k < kBlock; ++k) {
      for (int64_t r = 0; r < kTile; ++r) {
        for (int64_t c = 0; c < kTile; ++c) {
          page[static_cast<size_t>(r * w + (i * kBlock + k) * kTile + c)] =
              m[static_cast<size_t>(((bi * kBlock + i) * kTile + r) * n + (bk * kBlock + k) * kTile + c)];
        }
      }
    }
  }
  return page;
}

BlockPages MakeBlockPages(int64_t n) {
  BlockPages p;
  p.n = n;
  p.nb = n / (kBlock * kTile);
  p.dense_a = RandomBf16Matrix(n, 1);
  p.dense_b = RandomBf16Matrix(n, 2);
  for (int64_t i = 0; i < p.nb; ++i) {
    for (int64_t k = 0; k < p.nb; ++k) {
      p.a.push_back(PageOf(p.dense_a, n, i, k));
      p.b.push_back(PageOf(p.dense_b, n, i, k));
    }
  }
  return p;
}

// One pass of the product through `model`: every item's K blocks into its C page.
void BlockedProduct(const ValueModel& model, const BlockPages& p, std::vector<double>& c, Precision acc) {
  const int64_t w = kBlock * kBlock * kTile;
  for (int64_t i = 0; i < p.nb; ++i) {
    for (int64_t j = 0; j < p.nb; ++j) {
      std::fill(c.begin(), c.end(), 0.0);
      for (int64_t k = 0; k < p.nb; ++k) {
        model.MatmulBlock(p.a[i * p.nb + k].data(), w, p.b[k * p.nb + j].data(), w, false, c.data(), w, kBlock,
                          kBlock, kBlock, kTile, acc, spatial::MathFidelity::kDefault);
      }
      benchmark::DoNotOptimize(c.data());
    }
  }
}

// OpenBLAS's single-thread rate for an n^3 sgemm (fp32) or dgemm, best of a few runs; 0 without OpenBLAS.
double OpenBlasFlops(const BlockPages& p, bool f64) {
#ifdef SPATIAL_HAVE_OPENBLAS
  openblas_set_num_threads(1);
  const int n = static_cast<int>(p.n);
  const std::vector<float> af(p.dense_a.begin(), p.dense_a.end()), bf(p.dense_b.begin(), p.dense_b.end());
  std::vector<float> cf(af.size());
  std::vector<double> cd(af.size());
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    if (f64) {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, p.dense_a.data(), n, p.dense_b.data(), n,
                  0.0, cd.data(), n);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, af.data(), n, bf.data(), n, 0.0f,
                  cf.data(), n);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * static_cast<double>(n) / s);
  }
  benchmark::DoNotOptimize(cf.data());
  benchmark::DoNotOptimize(cd.data());
  return best;
#else
  (void)p;
  (void)f64;
  return 0;
#endif
}

void BlockedMatmul(benchmark::State& state, bool exact, proto::Fidelity fidelity, Precision acc) {
  const int64_t n = state.range(0);
  const std::unique_ptr<ValueModel> owned = WormholeModel(state, fidelity);
  if (owned == nullptr) return;
  const ValueModel& model = exact ? ExactModel() : *owned;
  const BlockPages p = MakeBlockPages(n);
  std::vector<double> c(static_cast<size_t>(kTile * kBlock * kBlock * kTile));
  const double anchor = OpenBlasFlops(p, exact);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t passes = 0;
  for (auto _ : state) {
    BlockedProduct(model, p, c, acc);
    ++passes;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double flops = 2.0 * static_cast<double>(n) * n * n;
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  if (anchor > 0 && s > 0) {
    state.counters["openblas_FLOP/s"] = anchor;
    state.counters["vs_openblas"] = flops * static_cast<double>(passes) / s / anchor;
  }
}

void BM_Blocked_HiFi2_Bf16Acc(benchmark::State& s) { BlockedMatmul(s, false, proto::HIFI2, Precision::kBf16); }
void BM_Blocked_HiFi2_Fp32Acc(benchmark::State& s) { BlockedMatmul(s, false, proto::HIFI2, Precision::kFp32); }
void BM_Blocked_ExactVm(benchmark::State& s) { BlockedMatmul(s, true, proto::HIFI4, Precision::kFp32); }
// 1x, 2x, 4x, 8x the side: the time should grow as the cube (the rate stay flat) once the pages stop fitting cache.
BENCHMARK(BM_Blocked_HiFi2_Bf16Acc)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Blocked_HiFi2_Fp32Acc)->Arg(512)->Arg(1024)->Arg(2048)->Arg(4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Blocked_ExactVm)->Arg(512)->Arg(1024)->Arg(2048)->Arg(4096)->Unit(benchmark::kMillisecond);

// Stores and transforms, per element, for the simulator's budget: a bf16 page write and an exp tile.
void BM_StoreRound_Bf16(benchmark::State& state) {
  absl::StatusOr<Target> target = LoadTarget("wormhole_n150");
  if (!target.ok()) {
    state.SkipWithError("wormhole_n150 did not load");
    return;
  }
  const std::unique_ptr<ValueModel> model = MakeTargetModel(*target);
  const std::vector<double> src = RandomBf16Matrix(kN, 3);
  std::vector<double> v(src.size());
  for (auto _ : state) {
    std::copy(src.begin(), src.end(), v.begin());
    model->StoreRound(Precision::kBf16, v.data(), static_cast<int64_t>(v.size()));
    benchmark::DoNotOptimize(v.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(v.size()));
}
BENCHMARK(BM_StoreRound_Bf16);

void BM_Sfpu_Exp21f_Bf16(benchmark::State& state) {
  absl::StatusOr<Target> target = LoadTarget("wormhole_n150");
  if (!target.ok()) {
    state.SkipWithError("wormhole_n150 did not load");
    return;
  }
  const std::unique_ptr<ValueModel> model = MakeTargetModel(*target);
  const std::vector<double> x = RandomBf16Matrix(kTile, 4);
  double sink = 0;
  for (auto _ : state) {
    for (double v : x) sink += model->Sfpu(SfpuKind::Exp(), -std::fabs(v), Precision::kBf16);
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(x.size()));
}
BENCHMARK(BM_Sfpu_Exp21f_Bf16);

}  // namespace
}  // namespace spatial::numerics

BENCHMARK_MAIN();
