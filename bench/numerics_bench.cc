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
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "sim/numerics/sfpu.h"
#include "sim/numerics/target_model.h"
#include "targets/loader.h"

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

void EmulatedMatmul(benchmark::State& state, proto::Fidelity fidelity, Precision acc) {
  absl::StatusOr<Target> target = LoadTarget("wormhole_n150");
  if (!target.ok()) {
    state.SkipWithError("wormhole_n150 did not load");
    return;
  }
  ModelOptions options;
  options.fidelity = fidelity;
  const std::unique_ptr<ValueModel> model = MakeTargetModel(*target, options);
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
