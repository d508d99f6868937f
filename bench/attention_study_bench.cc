// The attention study (issue #6): Qwen3-8B's attention (32 query heads x 128 over 8 K/V heads, a 2048-position
// cache) on wormhole_n150, LOWERED (flash form), CERTIFIED and SIMULATED; the figures of bench/attention_study.md.
//
//   flock /tmp/spatial-build.lock cmake --build build --target attention_study_bench -j2
//   build/bench/attention_study_bench                       # the whole study (~12 min on 2 shared cores)
//   ATTN_STUDY_ROWS=256 build/bench/attention_study_bench   # the numerics prefill block (default 128 rows)
//
// Cases (one benchmark each; each runs once — a run is seconds to minutes, and deterministic):
//   prefill_timing/{approx,accurate}    the full causal prefill, 2048 query rows from position 1, TIMING ONLY (no
//                                       values; the VM at this size would take ~1 h a run on this machine): cycles,
//                                       engine busy fractions, the report's roofline.
//   prefill_numerics/{approx,accurate,approx_exact_rescale}/rows:R  the LAST R query rows of that prefill
//                                       (P = 2049 - R: every row sees the cache up to its own position, 64 blocks,
//                                       as the full run's last rows do), simulated with the target's numerics against
//                                       the exact f64 VM: relative L2 error of the output (and the block's timing).
//   decode/{approx,accurate,approx_exact_rescale}  one query row at position 2040 (named, read at run time) of the
//                                       2048-position cache: the grouped decode, with values, against the VM.
// approx / accurate: the target's approx_mode — set on the target itself, so the SFPU cost the timing charges and
// the exp the numerics compute are the same variant (hardware-facts §1.6: fast-approx exp 70.7 cycles/tile, ~4.5%
// max relative error; exp_21f 1161 cycles/tile, 1 ulp). approx_exact_rescale: approx, with a value model whose
// exp(0) is exactly 1 — the running-state rescale e^(m - m') of a block whose maximum did not move, as tt-metal
// computes it with its non-fast exp (ttnn sdpa compute_common.hpp sub_exp_block); its timing is approx's.
//
// Counters (per case): cycles, sim_us (simulated time), matrix_busy / sfpu_busy / reader_busy (aggregate busy
// fraction over the 64 sites), roofline (the report's bound / cycles), compute_bound / dram_bound (the report's
// roofline bounds, cycles), report_TFLOPs (the report's FLOPs per simulated second), causal_TFLOPs (tt-metal's
// FlashAttention count: 4*hd FLOPs per live (row, head, position), per simulated second), peak_frac (causal_TFLOPs
// over the chip's HiFi2 peak, 131 TFLOP/s), dram_GBps, dram_frac (of the 288 GB/s peak), dram_GB, sites_used (of
// the fold section), rel_l2 (the output against the exact VM), wall_s.
//
// CLAIMS (asserted; the binary exits 1 and names each claim that fails):
//   - every lowered program certifies on wormhole_n150, and every roofline fraction is in (0, 1];
//   - prefill, as lowered (the prefill fold, flash_prefill.h: chunks of query tiles against blocks of key tiles, the
//     K/V blocks multicast along a head's chunks): it reads its K/V far less than once per (query tile, head) item
//     (the one-tile fold read items x blocks x 16 KiB, 2.1 GB), so the report's roofline is compute-limited, as
//     DESIGN §11 expects; with approximate exp the SFPU is not saturated, with accurate exp the SFPU is busier than
//     the matrix engine by more than 2.5x (hardware-facts §5.2: "with accurate exp the SFPU is the bottleneck
//     (~2.5-5x the HiFi2 matmul time)");
//   - the prefill in a 16-bit Dst (dest_acc: BF16, tt-metal's default) reaches >= 50% of the HiFi2 peak in causal
//     FLOPs and the report calls it matrix-bound (issue #12);
//   - decode is DRAM-limited in the report's roofline (DESIGN §11, hardware-facts §5.4);
//   - numerics (hardware-facts §5.3, tt-metal's SDPA recipes against f64 on the same bf16 inputs): accurate exp
//     at the target's HiFi2 < 1.25% relative L2 (between BALANCED 0.39%, whose QK runs at HiFi4, and STANDARD
//     2.37%; ACCURATE's 0.18% runs both at HiFi4); approx with an exact rescale < 3% (legacy 2.54%,
//     STANDARD 2.37% at K = 4096); approx as simulated within (1 - c0^(nb-1)) + 4.5%, c0 = fast_exp(0) — every
//     block's rescale multiplies all earlier blocks by c0 ~ 0.9785 (bench/attention_study.md); and
//     accurate < approx_exact_rescale < approx.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "certify/certify.h"
#include "lowerings/registry.h"
#include "proto/op.pb.h"
#include "sim/numerics/formats.h"
#include "sim/numerics/sfpu.h"
#include "sim/numerics/target_model.h"
#include "sim/report/summary.h"
#include "sim/simulate.h"
#include "spatial/tensor_data.h"
#include "targets/loader.h"

namespace spatial {
namespace {

// Qwen3-8B attention (config.json: num_attention_heads 32, num_key_value_heads 8, head_dim 128).
constexpr int64_t kHeads = 32;
constexpr int64_t kKvHeads = 8;
constexpr int64_t kHeadDim = 128;
constexpr int64_t kCache = 2048;
constexpr int64_t kDecodePos = 2040;
// The chip's matrix peak at the target's fidelity (hardware-facts §1.5: 64 cores x 4.096 TFLOP/s LoFi / 2 at HiFi2).
constexpr double kPeakHifi2FlopsPerSecond = 64 * 4.096e12 / 2;
constexpr double kDramPeakBytesPerSecond = 288e9;  // hardware-facts §1.4

std::vector<std::string> g_failed_claims;

// The case running now (this Google Benchmark has no State::name()).
std::string g_case;

void Claim(benchmark::State& state, bool ok, const std::string& what) {
  if (ok) return;
  const std::string msg = absl::StrCat(g_case, ": CLAIM FAILED: ", what);
  std::fprintf(stderr, "%s\n", msg.c_str());
  g_failed_claims.push_back(msg);
}

const Target& Wormhole(bool approx) {
  static const Target* targets[2] = {nullptr, nullptr};
  const Target*& t = targets[approx ? 1 : 0];
  if (t == nullptr) {
    absl::StatusOr<Target> loaded = LoadTarget("wormhole_n150");
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
      std::abort();
    }
    proto::Target p = loaded->proto();
    // approx_mode selects the SFPU cost the timing charges (sim/machine/stage_cost.cc); the exp the numerics
    // compute is the target's named algorithm whatever approx_mode says (sim/numerics/sfpu.h ResolveSfpuConfig:
    // "named by the target: approx does not override it"), so the approximate case names the fast-approx one.
    p.mutable_numerics()->set_approx_mode(approx);
    if (approx) p.mutable_numerics()->set_exp(proto::EXP_SCHRAUDOLPH_FAST);
    static std::vector<std::unique_ptr<Target>> keep;
    keep.push_back(std::make_unique<Target>(std::move(p)));
    t = keep.back().get();
  }
  return *t;
}

// The attention spec: `rows` query rows from position `pos` (1-based), named (read at run time) or literal.
proto::OpSpec AttentionSpec(int64_t rows, int64_t pos, bool named_pos) {
  proto::OpSpec s;
  s.set_out("ctx");
  s.add_operands()->set_name("q");
  s.add_operands()->set_name("k_cache");
  s.add_operands()->set_name("v_cache");
  if (named_pos) s.add_operands()->set_name("pos");
  proto::AttentionSpec* a = s.mutable_attention();
  a->set_h(kHeads);
  a->set_kv(kKvHeads);
  a->set_hd(kHeadDim);
  a->set_vd(kHeadDim);
  a->set_l(kCache);
  a->set_rows(rows);
  if (named_pos) {
    a->mutable_pos()->set_named("pos");
  } else {
    a->mutable_pos()->set_literal(pos);
  }
  return s;
}

// Standard normal Q, K and V rounded to bf16 (both runs read the same bf16 values, as tt-metal's study does), the
// position when it is an operand.
TensorMap Inputs(const Composition& c, int64_t pos) {
  TensorMap in;
  std::mt19937_64 rng(20240606);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const Tensor& t : CompositionInputs(c)) {
    TensorData d;
    d.rows = t.rows;
    d.cols = t.cols;
    d.precision = t.precision;
    d.values.resize(static_cast<size_t>(t.rows * t.cols));
    if (t.name == "pos") {
      for (double& v : d.values) v = static_cast<double>(pos);
    } else {
      for (double& v : d.values) {
        v = numerics::RoundToBf16(static_cast<float>(normal(rng)), proto::RNE);
      }
    }
    in[t.name] = std::move(d);
  }
  return in;
}

// Live (query row, head, position) triples of `rows` causal rows from position `pos`: row r attends pos + r
// positions; each costs 4 * hd FLOPs (QK^T and PV), tt-metal's FlashAttention count.
double CausalFlops(int64_t rows, int64_t pos) {
  const double live = static_cast<double>(rows) * static_cast<double>(pos) +
                      static_cast<double>(rows) * static_cast<double>(rows - 1) / 2.0;
  return live * kHeads * 4.0 * kHeadDim;
}

double Busy(const proto::SimReport& r, const std::string& engine) {
  for (const proto::EngineStats& e : r.engines()) {
    if (e.engine() == engine) return e.busy_fraction();
  }
  return 0.0;
}

struct Run {
  proto::SimReport report;
  double wall_s = 0;
  bool ok = false;
};

enum class Variant { kApprox, kAccurate, kApproxExactRescale };
bool Approximate(Variant v) { return v != Variant::kAccurate; }

// The target's model, except that exp(0) is exactly 1 (see approx_exact_rescale above); every other value is the
// target's.
class ExactRescaleModel final : public ValueModel {
 public:
  explicit ExactRescaleModel(std::unique_ptr<ValueModel> inner) : inner_(std::move(inner)) {}
  bool exact() const override { return false; }
  void StoreRound(Precision p, double* v, int64_t n) const override { inner_->StoreRound(p, v, n); }
  double Arith(BodyOp op, double a, double b, Precision acc) const override { return inner_->Arith(op, a, b, acc); }
  double Sfpu(const SfpuKind& k, double x, Precision acc) const override {
    if (k.op == SfpuOp::kExp && x == 0.0) return 1.0;
    return inner_->Sfpu(k, x, acc);
  }
  void MatmulTile(const double* a, int64_t lda, const double* b, int64_t ldb, bool transpose_b, double* c, int64_t ldc,
                  int64_t tr, int64_t tc, int64_t kk, Precision acc, MathFidelity f) const override {
    inner_->MatmulTile(a, lda, b, ldb, transpose_b, c, ldc, tr, tc, kk, acc, f);
  }

 private:
  std::unique_ptr<ValueModel> inner_;
};

std::unique_ptr<ValueModel> ModelFor(Variant v) {
  std::unique_ptr<ValueModel> m = MakeTargetModel(Wormhole(Approximate(v)));
  if (v == Variant::kApproxExactRescale) return std::make_unique<ExactRescaleModel>(std::move(m));
  return m;
}

// Lower, certify and simulate one case; sets the counters every case shares.
Run LowerCertifySimulate(benchmark::State& state, int64_t rows, int64_t pos, bool named_pos, Variant variant,
                         bool timing_only, bool bf16_dest = false) {
  Run run;
  const Target& target = Wormhole(Approximate(variant));
  proto::OpSpec spec = AttentionSpec(rows, pos, named_pos);
  if (bf16_dest) spec.mutable_attention()->set_dest_acc(proto::BF16);
  absl::StatusOr<Composition> c = Lower(spec, target);
  if (!c.ok()) {
    state.SkipWithError(absl::StrCat("lower: ", c.status().ToString()).c_str());
    return run;
  }
  const CertifyResult cert = Certify(*c, target);
  Claim(state, cert.ok(), absl::StrCat("the lowered program certifies (", cert.diagnostics.size(), " diagnostics: ",
                                       cert.ok() ? "" : FormatDiagnostic(cert.diagnostics[0], c->name), ")"));
  const TensorMap in = timing_only ? TensorMap{} : Inputs(*c, pos);
  std::unique_ptr<ValueModel> model = ModelFor(variant);
  SimOptions o;
  o.timing_only = timing_only;
  o.compare_vm = !timing_only;
  o.model = timing_only ? nullptr : model.get();
  o.timeout_seconds = 0;
  if (const char* trace = std::getenv("ATTN_STUDY_TRACE_DIR")) {
    std::string file = g_case;
    for (char& ch : file) ch = (ch == ':' || ch == '/') ? '_' : ch;
    o.trace_path = absl::StrCat(trace, "/", file, ".json");
  }
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<SimResult> r = Simulate(*c, target, in, o);
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) {
    state.SkipWithError(absl::StrCat("simulate: ", r.status().ToString()).c_str());
    return run;
  }
  run.report = r->report;
  run.ok = true;
  const proto::SimReport& rep = run.report;
  if (std::getenv("ATTN_STUDY_VERBOSE") != nullptr) std::fprintf(stderr, "%s\n", FormatReport(rep).c_str());
  state.SetIterationTime(run.wall_s);
  state.counters["cycles"] = static_cast<double>(rep.total_cycles());
  state.counters["sim_us"] = rep.seconds() * 1e6;
  state.counters["matrix_busy"] = Busy(rep, "matrix");
  state.counters["sfpu_busy"] = Busy(rep, "sfpu");
  state.counters["reader_busy"] = Busy(rep, "reader");
  state.counters["roofline"] = rep.roofline().fraction();
  state.counters["compute_bound"] = rep.roofline().compute_bound_cycles();
  state.counters["dram_bound"] = rep.roofline().dram_bound_cycles();
  state.counters["dram_GB"] = static_cast<double>(rep.dram_read_bytes() + rep.dram_write_bytes()) / 1e9;
  state.counters["report_TFLOPs"] = rep.achieved_flops_per_second() / 1e12;
  const double causal_tflops = rep.seconds() > 0 ? CausalFlops(rows, pos) / rep.seconds() / 1e12 : 0.0;
  state.counters["causal_TFLOPs"] = causal_tflops;
  state.counters["peak_frac"] = causal_tflops * 1e12 / kPeakHifi2FlopsPerSecond;
  state.counters["dram_GBps"] = rep.achieved_dram_bytes_per_second() / 1e9;
  state.counters["dram_frac"] = rep.achieved_dram_bytes_per_second() / kDramPeakBytesPerSecond;
  state.counters["wall_s"] = run.wall_s;
  // The fold section's sites: the last section of a prefill (one section) and the middle one of a grouped decode.
  for (const proto::SectionStats& ss : rep.sections()) {
    if (ss.name().find("flash_blocks") != std::string::npos) state.counters["sites_used"] = ss.sites_used();
  }
  for (const proto::OutputError& e : rep.errors()) {
    if (e.tensor() == "ctx") state.counters["rel_l2"] = e.rel_l2();
  }
  state.SetLabel(absl::StrCat(c->sections.size(), " section(s), ", rep.roofline().limited_by(), "-bound, ",
                              rep.sections_size() > 0 ? rep.sections(0).name() : ""));
  Claim(state, rep.roofline().fraction() > 0 && rep.roofline().fraction() <= 1.0,
        absl::StrCat("the roofline fraction is in (0, 1], got ", rep.roofline().fraction()));
  return run;
}

double RelL2(const Run& r) {
  for (const proto::OutputError& e : r.report.errors()) {
    if (e.tensor() == "ctx") return e.rel_l2();
  }
  return -1;
}

int64_t NumericsRows() {
  const char* env = std::getenv("ATTN_STUDY_ROWS");
  const int64_t r = env != nullptr ? std::atoll(env) : 128;
  return r >= 1 && r <= kCache ? r : 128;
}

// The relative L2 errors of the prefill numerics runs, by variant, for the comparison claims.
double g_err[3] = {-1, -1, -1};

// fast_exp(0) on the approximate target's fp32 datapath (the fold's running state is fp32).
double C0() { return MakeTargetModel(Wormhole(true))->Sfpu(SfpuKind::Exp(), 0.0, Precision::kFp32); }

constexpr int64_t kTile = 32;

void PrefillTiming(benchmark::State& state, Variant variant) {
  for (auto _ : state) {
    Run r = LowerCertifySimulate(state, kCache, 1, false, variant, true);
    if (!r.ok) return;
    const proto::SimReport& rep = r.report;
    // What the one-tile fold read: every (query tile, head) item streamed its K/V head, 64 blocks of hd/32 K tiles and
    // hd/32 V tiles, bf16. The prefill fold's chunks and multicast read a small part of it.
    const double items = static_cast<double>(kCache / kTile * kHeads), blocks = kCache / kTile;
    const double kv_bytes = items * blocks * 2.0 * (kHeadDim / kTile) * kTile * kTile * 2.0;
    Claim(state, static_cast<double>(rep.dram_read_bytes()) < kv_bytes / 8,
          absl::StrCat("K/V are not streamed per (query tile, head): DRAM reads < ", kv_bytes / 8, " bytes, got ",
                       rep.dram_read_bytes()));
    Claim(state, rep.roofline().limited_by() == "compute",
          absl::StrCat("the lowered prefill's roofline is compute-limited, got ", rep.roofline().limited_by()));
    if (variant == Variant::kApprox) {
      // The rescale exp(m - m') runs the ACCURATE exp even in approx mode (half a tile per block), next to the fast
      // probabilities (measured: sfpu 23%, matrix 42%); the claim is only that the SFPU is not saturated.
      Claim(state, Busy(rep, "sfpu") < 0.6,
            absl::StrCat("with approximate exp the SFPU is not saturated (sfpu ", Busy(rep, "sfpu"), ")"));
    } else {
      Claim(state, Busy(rep, "sfpu") > 2.5 * Busy(rep, "matrix"),
            absl::StrCat("with accurate exp the SFPU is busier than the matrix engine by > 2.5x (matrix ",
                         Busy(rep, "matrix"), ", sfpu ", Busy(rep, "sfpu"), ")"));
    }
  }
}

// Issue #12's prefill figure: the same 2048-row prefill in a 16-bit Dst (AttentionSpec.dest_acc: BF16, tt-metal's
// SDPA default: fp32_dest_acc_en off) reaches half the HiFi2 matrix peak in causal FLOPs, matrix-bound.
void PrefillBf16Dest(benchmark::State& state, Variant variant) {
  for (auto _ : state) {
    Run r = LowerCertifySimulate(state, kCache, 1, false, variant, true, /*bf16_dest=*/true);
    if (!r.ok) return;
    const double peak_frac = state.counters["peak_frac"];
    Claim(state, peak_frac >= 0.5,
          absl::StrCat("in a 16-bit Dst the prefill reaches >= 50% of the HiFi2 peak in causal FLOPs, got ", peak_frac));
    Claim(state, r.report.verdict().bound() == "matrix-bound",
          absl::StrCat("in a 16-bit Dst the prefill is matrix-bound, got ", r.report.verdict().bound()));
  }
}

void PrefillNumerics(benchmark::State& state, Variant variant) {
  const int64_t rows = NumericsRows();
  for (auto _ : state) {
    Run r = LowerCertifySimulate(state, rows, kCache + 1 - rows, false, variant, false);
    if (!r.ok) return;
    const double e = RelL2(r);
    g_err[static_cast<int>(variant)] = e;
    const double blocks = static_cast<double>(kCache / kTile);
    switch (variant) {
      case Variant::kAccurate:
        // Both contractions at the target's HiFi2 (bf16 operands, the left one's last mantissa bit dropped): between
        // tt-metal's BALANCED (0.39%, QK at HiFi4) and STANDARD (2.37%) bands, as tests/sim/attention_sim_test.cc
        // bounds it; ACCURATE's 0.18% is at HiFi4.
        Claim(state, e > 0 && e < 0.0125,
              absl::StrCat("accurate-exp relative L2 below the HiFi2 bound (< 1.25%), got ", e));
        break;
      case Variant::kApproxExactRescale:
        Claim(state, e > 0 && e < 0.03,
              absl::StrCat("approx-exp (exact rescale) relative L2 within tt-metal's band (< 3%), got ", e));
        break;
      case Variant::kApprox: {
        const double bound = (1.0 - std::pow(C0(), blocks - 1)) + 0.045;
        Claim(state, e > 0 && e < bound,
              absl::StrCat("approx-exp relative L2 within the compounded-rescale bound ", bound, ", got ", e));
        state.counters["c0"] = C0();
        break;
      }
    }
    const double approx = g_err[0], accurate = g_err[1], exact_rescale = g_err[2];
    if (approx > 0 && accurate > 0 && exact_rescale > 0) {
      Claim(state, accurate < exact_rescale && exact_rescale < approx,
            absl::StrCat("accurate < approx with an exact rescale < approx (", accurate, ", ", exact_rescale, ", ",
                         approx, ")"));
    }
  }
}

void Decode(benchmark::State& state, Variant variant) {
  for (auto _ : state) {
    Run r = LowerCertifySimulate(state, 1, kDecodePos, true, variant, false);
    if (!r.ok) return;
    Claim(state, r.report.roofline().limited_by() == "dram",
          absl::StrCat("the decode step is DRAM-limited, got ", r.report.roofline().limited_by()));
  }
}

}  // namespace
}  // namespace spatial

int main(int argc, char** argv) {
  using spatial::Variant;
  const std::string rows = std::to_string(spatial::NumericsRows());
  // Each case runs once: a run is seconds to minutes of wall time, and deterministic.
  auto add = [](const std::string& name, void (*fn)(benchmark::State&, Variant), Variant v) {
    benchmark::RegisterBenchmark(name.c_str(), [name, fn, v](benchmark::State& s) {
      spatial::g_case = name;
      fn(s, v);
    })->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);
  };
  add("prefill_timing/approx", spatial::PrefillTiming, Variant::kApprox);
  add("prefill_timing/accurate", spatial::PrefillTiming, Variant::kAccurate);
  add("prefill_timing/approx_bf16_dest", spatial::PrefillBf16Dest, Variant::kApprox);
  add("decode/approx", spatial::Decode, Variant::kApprox);
  add("decode/accurate", spatial::Decode, Variant::kAccurate);
  add("decode/approx_exact_rescale", spatial::Decode, Variant::kApproxExactRescale);
  add("prefill_numerics/approx/rows:" + rows, spatial::PrefillNumerics, Variant::kApprox);
  add("prefill_numerics/accurate/rows:" + rows, spatial::PrefillNumerics, Variant::kAccurate);
  add("prefill_numerics/approx_exact_rescale/rows:" + rows, spatial::PrefillNumerics, Variant::kApproxExactRescale);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!spatial::g_failed_claims.empty()) {
    std::fprintf(stderr, "\n%zu claim(s) failed:\n", spatial::g_failed_claims.size());
    for (const std::string& m : spatial::g_failed_claims) std::fprintf(stderr, "  %s\n", m.c_str());
    return 1;
  }
  std::fprintf(stderr, "\nevery claim holds\n");
  return 0;
}
