// DESIGN §11's first budget: lowering + composing + certifying the blocked Gated DeltaNet layer of seed 002 at its real
// shape in under 1 s. ★ THIS ONCE DID NOT FINISH (the seed): blocking gated delta by head produced a layer of ~14,800
// stages in 45 sections; certifying it ran sixteen minutes because one check was stores x ops, and once linear the
// layer still took ~77 s to lower.
//
// Shapes: Qwen3-Next's Gated DeltaNet (32 value heads over 16 key heads of 128) on wormhole_n150.
//   - Stepped/43: the seed's 45-section form — the two gate broadcasts and one step per row of a 43-row block;
//   - Chunked/43: the same block as the lowering picks it (two chunks of the WY form);
//   - Decode: one row;
//   - Layer/43: the block's causal conv over the 8192 conv channels, the per-head l2norms of q and k, then the
//     stepped Gated DeltaNet, lowered each and composed into one program.
// Counters: sections, stages, and stage instances (stages x items: what placement clones per site).
//
//   cmake --build build --target gdn_bench && build/bench/gdn_bench
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "certify/certify.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/carried/gated_delta.h"
#include "lowerings/registry.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/loader.h"

namespace spatial {
namespace {

constexpr int64_t kHv = 32, kHk = 16, kD = 128, kChan = 2 * kHk * kD + kHv * kD, kTaps = 4;

const Target& Wormhole() {
  static const Target t = [] {
    absl::StatusOr<Target> loaded = LoadTarget("wormhole_n150");
    if (!loaded.ok()) std::abort();
    return *std::move(loaded);
  }();
  return t;
}

proto::OpSpec GdnSpec(int64_t rows, const std::string& q, const std::string& k) {
  proto::OpSpec spec;
  spec.set_out("attn_out");
  for (const std::string& name : {q, k, std::string("v"), std::string("z"), std::string("beta"), std::string("alpha"),
                                  std::string("recurrent_state"), std::string("norm_weight")}) {
    spec.add_operands()->set_name(name);
  }
  proto::GatedDeltaSpec* g = spec.mutable_gated_delta();
  g->set_hv(kHv);
  g->set_hk(kHk);
  g->set_d(kD);
  g->set_rows(rows);
  g->set_eps(1e-6);
  g->set_gate(proto::GatedDeltaSpec::SILU);
  return spec;
}

absl::StatusOr<Composition> Stepped(const proto::OpSpec& spec) {
  GdNames names{spec.out(), {}};
  for (const proto::Operand& o : spec.operands()) names.ops.push_back({o.name(), o.fill()});
  const std::string carried = names.ops[6].name;
  return SteppedGatedDelta(spec.gated_delta(), names, kD, [carried](int64_t) { return carried; }, Wormhole());
}

absl::StatusOr<Composition> Layer(int64_t rows) {
  std::vector<Composition> parts;
  proto::OpSpec conv;
  conv.set_out("qkv_conv");
  for (const char* name : {"qkv", "conv_weight", "conv_state"}) conv.add_operands()->set_name(name);
  conv.mutable_causal_conv()->set_taps(kTaps);
  conv.mutable_causal_conv()->set_chan(kChan);
  conv.mutable_causal_conv()->set_rows(rows);
  for (const auto& [in, out] : {std::pair<std::string, std::string>{"q", "q_norm"}, {"k", "k_norm"}}) {
    proto::OpSpec norm;
    norm.set_out(out);
    norm.add_operands()->set_name(in);
    norm.mutable_l2norm()->set_rows(rows * kHk);
    norm.mutable_l2norm()->set_cols(kD);
    norm.mutable_l2norm()->set_eps(1e-6);
    absl::StatusOr<Composition> c = Lower(norm, Wormhole());
    if (!c.ok()) return c.status();
    parts.push_back(*std::move(c));
  }
  absl::StatusOr<Composition> c = Lower(conv, Wormhole());
  if (!c.ok()) return c.status();
  parts.insert(parts.begin(), *std::move(c));
  absl::StatusOr<Composition> gdn = Stepped(GdnSpec(rows, "q_norm", "k_norm"));
  if (!gdn.ok()) return gdn.status();
  parts.push_back(*std::move(gdn));
  return ComposeSections("gated_deltanet_layer", std::move(parts), Wormhole());
}

void Run(benchmark::State& state, const std::function<absl::StatusOr<Composition>()>& lower) {
  int64_t sections = 0, stages = 0, instances = 0;
  for (auto _ : state) {
    absl::StatusOr<Composition> c = lower();
    if (!c.ok()) {
      state.SkipWithError(std::string(c.status().message()).c_str());
      return;
    }
    CertifyResult r = Certify(*c, Wormhole());
    if (!r.ok()) {
      state.SkipWithError(FormatDiagnostic(r.diagnostics[0], c->name).c_str());
      return;
    }
    sections = static_cast<int64_t>(c->sections.size());
    stages = instances = 0;
    for (const Section& s : c->sections) {
      stages += static_cast<int64_t>(s.stages.size());
      instances += static_cast<int64_t>(s.stages.size() * s.items.size());
    }
    benchmark::DoNotOptimize(r);
  }
  state.counters["sections"] = static_cast<double>(sections);
  state.counters["stages"] = static_cast<double>(stages);
  state.counters["stage_instances"] = static_cast<double>(instances);
}

void BM_GatedDeltaStepped43(benchmark::State& state) {
  Run(state, [] { return Stepped(GdnSpec(43, "q", "k")); });
}
void BM_GatedDeltaChunked43(benchmark::State& state) {
  Run(state, [] { return Lower(GdnSpec(43, "q", "k"), Wormhole()); });
}
void BM_GatedDeltaDecode(benchmark::State& state) {
  Run(state, [] { return Lower(GdnSpec(1, "q", "k"), Wormhole()); });
}
void BM_GatedDeltaLayer43(benchmark::State& state) {
  Run(state, [] { return Layer(43); });
}

BENCHMARK(BM_GatedDeltaStepped43)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GatedDeltaChunked43)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GatedDeltaDecode)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GatedDeltaLayer43)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace spatial

BENCHMARK_MAIN();
