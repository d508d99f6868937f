// Certification time of a synthetic transformer layer shaped like the seed's blocked Gated DeltaNet (~14,800
// stages in 45 sections, which once took 16 minutes to certify because one check was stores x ops): per
// section, many per-head chains of an index load, a gathered tile, a carry initialized in the prologue, a
// streamed K-block load, a 16-band Generic whose bands read shifted maps plus a guarded element gather, the
// carry's fold, and an epilogue that scales and stores. Certification must stay linear: 4x the stages, ~4x
// the time, whether the growth is in sections or inside each section.
//
//   cmake --build build --target certify_bench && build/bench/certify_bench
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "certify/certify.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/program.h"
#include "targets/loader.h"

namespace spatial {
namespace {

constexpr int64_t kTile = 32;
constexpr int64_t kItems = 8;
constexpr int64_t kBlocks = 4;
constexpr int64_t kBands = 16;

Section SyntheticSection(int index, int64_t chains) {
  Template t(kTile, kTile);
  const int64_t row_tiles = kItems * chains;
  const TensorId k = t.AddTensor("k", TensorRole::kInput, 1, kBlocks * row_tiles * kTile, Precision::kBf16,
                                 TensorInit::External());
  const TensorId table = t.AddTensor("table", TensorRole::kParam, kTile, 64 * kTile, Precision::kBf16,
                                     TensorInit::ConstF(1.0));
  std::vector<int64_t> picks;
  for (int64_t c = 0; c < chains; ++c) picks.push_back((c * 7 + index) % 64);
  const TensorId idx = t.AddTensor("picks", TensorRole::kParam, 1, chains, Precision::kInt32,
                                   TensorInit::Values(picks));
  const TensorId elem = t.AddTensor("elem", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  const TensorId out = t.AddTensor(absl::StrCat("h", index + 1), TensorRole::kOutput, 1, row_tiles * kTile,
                                   Precision::kBf16, TensorInit::Zero());
  const BufferId eb = t.AddBufferDeep("elem_idx", 1, 1, Precision::kInt32);
  t.AddLoad("load_elem", elem, {}, 1, eb);

  struct Chain {
    BufferId ib, g, carry, kb, bo, ob;
    StageId load_idx, gather, load_k, band, fold, finish, store;
  };
  std::vector<Chain> ch(chains);
  for (int64_t c = 0; c < chains; ++c) {
    Chain& x = ch[c];
    const std::string n = absl::StrCat("_h", c);
    x.ib = t.AddBufferDeep("idx" + n, 1, 1, Precision::kInt32);
    x.g = t.AddBufferDeep("row" + n, 1, 1, Precision::kBf16);
    x.carry = t.AddScratchDeep("run" + n, 2, 1, Precision::kFp32);
    x.kb = t.AddBuffer("k" + n, 1, Precision::kBf16);
    x.bo = t.AddScratch("mix" + n, 1, Precision::kFp32);
    x.ob = t.AddBuffer("out" + n, 1, Precision::kBf16);
    // Prologue: the head's pick (tile c / 32 of the table, column c % 32 read as element 0 via base), the
    // gathered table tile, the carry's zero.
    x.load_idx = t.AddLoadBlockAt("load_pick" + n, idx, c / kTile, {}, {}, x.ib);
    x.gather = t.AddLoadPattern("gather" + n, table,
                                AccessPattern{TileAddr{0, {}, IndirectTile{x.ib, 1, 0, 63}}, 1, 1, 1, 1}, x.g);
    t.AddGeneric("init" + n, TileSpace(kTile, kTile), {}, {}, IdentMap(kTile), Const(0.0), x.carry);
  }
  t.SetPhase(Phase::kBody);
  for (int64_t c = 0; c < chains; ++c) {
    Chain& x = ch[c];
    const std::string n = absl::StrCat("_h", c);
    x.load_k = t.AddLoadBlockAt("load_k" + n, k, c, {{LoopVar::kKBlock, row_tiles}, {LoopVar::kItemX, chains}}, {},
                                x.kb);
    // 16 bands of two columns; band j reads column c - 2j of its own slot (negative outside the band).
    std::vector<BufferId> ins;
    std::vector<ElemAccess> maps;
    std::vector<std::pair<int64_t, Body>> bands;
    for (int64_t j = 0; j < kBands; ++j) {
      ins.push_back(x.kb);
      maps.push_back(Map2(-2 * j, kTile, 1));
      bands.emplace_back(2 * (j + 1), Mul(Op(static_cast<int>(j)), Const(0.5)));
    }
    ins.push_back(x.g);
    maps.push_back(WithIndirect(Fixed(0), kBands + 1, 1, kTile * kTile));
    ins.push_back(eb);
    maps.push_back(Fixed(0));
    ins.push_back(x.g);
    maps.push_back(IdentMap(kTile));
    Body body = Add(Add(Banded(bands), Op(kBands)), Unary(SfpuKind::Exp(), Op(kBands + 2)));
    x.band = t.AddGeneric("band" + n, TileSpace(kTile, kTile), ins, maps, IdentMap(kTile), body, x.bo);
    x.fold = t.AddGeneric("fold" + n, TileSpace(kTile, kTile), {x.bo, x.carry}, {IdentMap(kTile), IdentMap(kTile)},
                          IdentMap(kTile), Add(Op(0), Op(1)), x.carry);
    t.AddEdge(x.load_k, x.kb, x.band);
  }
  t.SetPhase(Phase::kEpilogue);
  for (int64_t c = 0; c < chains; ++c) {
    Chain& x = ch[c];
    const std::string n = absl::StrCat("_h", c);
    x.finish = t.AddGeneric("finish" + n, TileSpace(kTile, kTile), {x.carry}, {IdentMap(kTile)}, IdentMap(kTile),
                            Mul(Op(0), Const(0.25)), x.ob);
    x.store = t.AddStoreBlock("store" + n, out, c, {{LoopVar::kItemX, chains}}, {}, x.ob);
    t.AddEdge(x.finish, x.ob, x.store);
    t.AddEdge(x.load_idx, x.ib, x.gather);
  }
  t.Fold(kBlocks);
  std::vector<WorkItem> items;
  for (int64_t i = 0; i < kItems; ++i) items.push_back({i, 0, i, TileRect{0, i * chains, 1, chains}});
  return t.Finish(absl::StrCat("synthetic_", index), std::move(items), Precision::kFp32,
                  NumericsClaim::Approx("sums in fp32"));
}

Composition SyntheticLayer(int sections, int64_t chains) {
  Composition c;
  c.name = "synthetic_layer";
  c.target = "wormhole_n150";
  c.tile_rows = c.tile_cols = kTile;
  for (int s = 0; s < sections; ++s) c.sections.push_back(SyntheticSection(s, chains));
  DeclareStateOrder(c);
  return c;
}

void BM_CertifyLayer(benchmark::State& state) {
  const int sections = static_cast<int>(state.range(0));
  const int64_t chains = state.range(1);
  absl::StatusOr<Target> target = LoadTarget("wormhole_n150");
  if (!target.ok()) {
    state.SkipWithError(std::string(target.status().message()).c_str());
    return;
  }
  const Composition c = SyntheticLayer(sections, chains);
  int64_t stages = 0;
  for (const Section& s : c.sections) stages += static_cast<int64_t>(s.stages.size());
  CertifyResult first = Certify(c, *target);
  for (auto _ : state) {
    CertifyResult r = Certify(c, *target);
    benchmark::DoNotOptimize(r.certificate);
  }
  state.counters["stages"] = static_cast<double>(stages);
  state.counters["sections"] = sections;
  state.counters["diagnostics"] = static_cast<double>(first.diagnostics.size());
  state.counters["stages_per_s"] =
      benchmark::Counter(static_cast<double>(stages), benchmark::Counter::kIsIterationInvariantRate);
  if (!first.ok()) state.SetLabel(absl::StrCat("first diagnostic: ", first.diagnostics[0].code()));
}

// 45 sections of 42 chains (~15,200 stages, the blocked Gated DeltaNet layer's size); 4x by sections; 4x inside
// each section (its footprint then exceeds the site: one FOOTPRINT_EXCEEDED per section, same work).
BENCHMARK(BM_CertifyLayer)->Args({45, 42})->Args({180, 42})->Args({45, 168})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace spatial

BENCHMARK_MAIN();
