// Row streaming (BlockPlan.stream_rows, sim/machine/row_stream.h): the calendars, the chain a section's stages
// form, and what the machine makes of a product and the exp that reads it, with and without the plan's word.
#include "sim/machine/row_stream.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/machine/stage_cost.h"
#include "sim/simulate.h"
#include "spatial/maps.h"
#include "tests/sim/sim_test_util.h"

namespace spatial {
namespace {

using sim_test::One;
using sim_test::TimeOnly;
using sim_test::WormholeLike;

TEST(RowStream, ARowGroupTakesTheEarliestGapItFits) {
  ThreadCalendar t;
  t.Reset(0);
  EXPECT_DOUBLE_EQ(t.Book(0, 10), 0);
  EXPECT_DOUBLE_EQ(t.Book(0, 5), 10);    // after what is booked
  EXPECT_DOUBLE_EQ(t.Book(20, 5), 20);   // leaves [15, 20) free
  EXPECT_DOUBLE_EQ(t.Book(12, 5), 15);   // fits the gap
  EXPECT_DOUBLE_EQ(t.Book(0, 1), 25);    // no gap left before 25
  EXPECT_DOUBLE_EQ(t.Book(30, 10), 30);  // leaves [26, 30) free
  EXPECT_DOUBLE_EQ(t.Book(26, 5), 40);   // too short for 5
  EXPECT_DOUBLE_EQ(t.Book(26, 4), 26);   // just fits
  // Nothing before the section's start: a reset calendar is busy until then.
  t.Reset(100);
  EXPECT_DOUBLE_EQ(t.Book(0, 1), 100);
}

TEST(RowStream, TheOldestIntervalsFoldIntoTheHorizon) {
  ThreadCalendar t;
  t.Reset(0);
  // Every other unit booked: the gaps stay open until the calendar folds its oldest half.
  for (size_t i = 0; i <= kMaxCalendarIntervals; ++i) t.Book(2.0 * static_cast<double>(i), 1);
  EXPECT_GE(t.Book(0, 1), static_cast<double>(kMaxCalendarIntervals) - 1);
}

// load a, load b (prologue) -> s = a b (8 x 8 tiles, k 4) -> p = exp(s [+ x]) -> store p. `late`: the exp also reads
// x, loaded after a and b. `rows`: the plan's per_site_m, with stream_rows; 0: no plan.
Composition ProductThenExp(int64_t rows, bool late) {
  Template t(32, 32);
  const int64_t m = 8, n = 8, k = 4;
  const TensorId a = t.AddTensor("a", TensorRole::kInput, 32 * m, 32 * k, Precision::kBf16, TensorInit::External());
  const TensorId b = t.AddTensor("b", TensorRole::kInput, 32 * k, 32 * n, Precision::kBf16, TensorInit::External());
  const TensorId x = t.AddTensor("x", TensorRole::kInput, 32 * m, 32 * n, Precision::kBf16, TensorInit::External());
  const TensorId p = t.AddTensor("p", TensorRole::kOutput, 32 * m, 32 * n, Precision::kBf16, TensorInit::Zero());
  const BufferId a_in = t.AddBuffer("in_a", m * k, Precision::kBf16);
  const BufferId b_in = t.AddBuffer("in_b", k * n, Precision::kBf16);
  const BufferId x_in = t.AddBuffer("in_x", m * n, Precision::kBf16);
  const BufferId s = t.AddScratch("s", m * n, Precision::kBf16);
  const BufferId out = t.AddBuffer("out", m * n, Precision::kBf16);
  const StageId la = t.AddLoadBlockAt("load_a", a, 0, {}, {.h = m, .w = k, .pitch = k}, a_in);
  const StageId lb = t.AddLoadBlockAt("load_b", b, 0, {}, {.h = k, .w = n, .pitch = n}, b_in);
  const StageId lx = late ? t.AddLoadBlockAt("load_x", x, 0, {}, {.h = m, .w = n, .pitch = n}, x_in) : -1;
  const StageId mm = t.AddMatmul("product", MatmulTiles{m, n, k, false, false}, a_in, b_in, s);
  const int64_t w = n * 32;
  std::vector<BufferId> ins = {s};
  std::vector<ElemAccess> maps = {IdentMap(w)};
  Body arg = Op(0);
  if (late) {
    ins.push_back(x_in);
    maps.push_back(IdentMap(w));
    arg = Add(Op(0), Op(1));
  }
  const StageId ex = t.AddGeneric("exp", HeadSpace(32 * m, w), ins, maps, IdentMap(w),
                                  Unary(SfpuKind::Exp(), std::move(arg)), out);
  const StageId st = t.AddStoreBlock("store_p", p, 0, {}, {.h = m, .w = n, .pitch = n}, out);
  t.AddEdge(la, a_in, mm);
  t.AddEdge(lb, b_in, mm);
  t.AddEdge(mm, s, ex);
  if (late) t.AddEdge(lx, x_in, ex);
  t.AddEdge(ex, out, st);
  if (rows > 0) t.SetPlan(BlockPlan{.per_site_m = rows, .stream_rows = true});
  return One(t.Finish("product_exp", {WorkItem{.out = TileRect{0, 0, m, n}}}, Precision::kFp32,
                      NumericsClaim::Approx("exp")));
}

// What the machine charges the product and the exp of ProductThenExp on `target`.
struct ChainCosts {
  ComputeCost product, exp;
};
ChainCosts CostsOf(const Composition& c, const Target& target) {
  absl::StatusOr<MachineParams> params = DeriveParams(target);
  EXPECT_TRUE(params.ok()) << params.status();
  const Section& s = c.sections[0];
  return {CostOf(s, s.stages[s.FindStage("product")], target, *params).compute,
          CostOf(s, s.stages[s.FindStage("exp")], target, *params).compute};
}

TEST(RowStream, TheExpReadsTheProductRowByRow) {
  const Composition c = ProductThenExp(8, false);
  const RowStreamPlan plan = PlanRowStream(c.sections[0]);
  ASSERT_TRUE(plan.streams());
  EXPECT_EQ(plan.rows, 8);
  // Stages: load_a, load_b, product, exp, store_p. The exp's chain predecessor is the product, through s; the
  // product reads only Loads' pages.
  EXPECT_TRUE(plan.deps[2].empty());
  EXPECT_EQ(plan.deps[3], std::vector<int32_t>{2});
  EXPECT_TRUE(plan.Chained(3, c.sections[0].stages[2].outs[0]));
  EXPECT_FALSE(plan.Chained(2, c.sections[0].stages[0].outs[0]));
  // Only the product's row groups are kept: the exp's are read by no stage.
  EXPECT_EQ(plan.slots, 1);
  EXPECT_EQ(plan.slot[2], 0);
  EXPECT_EQ(plan.slot[3], -1);
  EXPECT_FALSE(PlanRowStream(ProductThenExp(0, false).sections[0]).streams());
  // Row groups are tile rows of the plan's block, at least one and at most kMaxStreamRows.
  EXPECT_EQ(PlanRowStream(ProductThenExp(1000, false).sections[0]).rows, kMaxStreamRows);
  Composition none = ProductThenExp(8, false);
  none.sections[0].plan->per_site_m = 0;
  EXPECT_EQ(PlanRowStream(none.sections[0]).rows, 1);
}

// A stage that skips blocks (Stage.last_blocks) leaves its buffer to the writer before it on those blocks: a reader
// after it waits for both — the product's row groups, or the Load's page (not chained to the skipper alone).
TEST(RowStream, AReaderOfAStageThatSkipsBlocksAlsoWaitsForTheWriterBeforeIt) {
  for (const bool loaded : {false, true}) {
    for (const int64_t last : {int64_t{0}, int64_t{1}}) {
      SCOPED_TRACE(absl::StrCat(loaded ? "a Load" : "a product", " before a stage on the last ", last, " blocks"));
      Template t(32, 32);
      const TensorId a = t.AddTensor("a", TensorRole::kInput, 32, 32 * 4, Precision::kBf16, TensorInit::External());
      const TensorId y = t.AddTensor("y", TensorRole::kOutput, 32, 32, Precision::kBf16, TensorInit::Zero());
      const BufferId a_in = t.AddBuffer("in_a", 1, Precision::kBf16);
      const BufferId s = t.AddScratch("s", 1, Precision::kBf16);
      const BufferId out = t.AddScratchDeep("out", 2, 1, Precision::kFp32);
      const StageId init = t.AddGeneric("init", HeadSpace(32, 32), {}, {}, IdentMap(32), Const(0.0), out);
      t.Fold(4);
      t.SetPhase(Phase::kBody);
      const BufferId first = loaded ? s : a_in;
      const StageId la = t.AddLoad("load_a", a, {{LoopVar::kKBlock, 1}}, 1, first);
      StageId writer = la;
      if (!loaded) {
        writer = t.AddGeneric("product", HeadSpace(32, 32), {a_in}, {IdentMap(32)}, IdentMap(32), Mul(Op(0), Op(0)), s);
        t.AddEdge(la, a_in, writer);
      }
      const StageId mask = t.AddGeneric("mask", HeadSpace(32, 32), {s}, {IdentMap(32)}, IdentMap(32),
                                        Add(Op(0), Const(1.0)), s);
      if (last > 0) t.SetLastBlocks(mask, last);
      const StageId acc = t.AddGeneric("acc", HeadSpace(32, 32), {out, s}, {IdentMap(32), IdentMap(32)},
                                       IdentMap(32), Add(Op(0), Op(1)), out);
      t.AddEdge(writer, s, mask);
      t.AddEdge(mask, s, acc);
      t.AddEdge(init, out, acc);
      t.SetPhase(Phase::kEpilogue);
      const StageId st = t.AddStore("store_y", y, {}, 1, out);
      t.AddEdge(acc, out, st);
      t.SetPlan(BlockPlan{.per_site_m = 1, .stream_rows = true});
      const Composition c = One(t.Finish("skip", {WorkItem{.out = TileRect{0, 0, 1, 1}}}, Precision::kFp32,
                                         NumericsClaim::Approx("adds")));
      const Section& sec = c.sections[0];
      const RowStreamPlan plan = PlanRowStream(sec);
      const int32_t m = sec.FindStage("mask"), r = sec.FindStage("acc");
      std::vector<int32_t> want = {m};
      if (last > 0 && !loaded) want.push_back(sec.FindStage("product"));
      std::vector<int32_t> deps = plan.deps[static_cast<size_t>(r)];
      std::erase(deps, sec.FindStage("init"));  // not in the body's phase: never a predecessor
      EXPECT_EQ(deps, want);
      // Chained to compute writers only: behind a Load a skipped block's page is the Load's, pushed when it lands.
      EXPECT_EQ(plan.Chained(r, s), !(loaded && last > 0));
    }
  }
}

// A chain of many stages keeps fewer row groups, so a site's record of them stays bounded whatever the program.
TEST(RowStream, ALongChainIsCutIntoFewerRowGroups) {
  Template t(32, 32);
  const int64_t n = 1000;
  std::vector<BufferId> bufs;
  for (int64_t i = 0; i <= n; ++i) bufs.push_back(t.AddScratch(absl::StrCat("b", i), 1, Precision::kFp32));
  t.AddGeneric("s0", HeadSpace(32, 32), {}, {}, IdentMap(32), Const(1.0), bufs[0]);
  for (int64_t i = 1; i <= n; ++i) {
    t.AddGeneric(absl::StrCat("s", i), HeadSpace(32, 32), {bufs[i - 1]}, {IdentMap(32)}, IdentMap(32),
                 Unary(SfpuKind::Exp(), Op(0)), bufs[i]);
  }
  t.SetPlan(BlockPlan{.per_site_m = 64, .stream_rows = true});
  const Section s = t.Finish("long", {WorkItem{}}, Precision::kFp32, NumericsClaim::Approx("exp"));
  const RowStreamPlan plan = PlanRowStream(s);
  EXPECT_EQ(plan.slots, n);
  EXPECT_EQ(plan.rows, kMaxStreamSlotRows / n);
  EXPECT_LE(plan.slots * plan.rows, kMaxStreamSlotRows);
}

// The product is matrix-bound, the exp SFPU-bound. Run one after the other they take the sum of their durations;
// streamed by tile rows, the exp of row group r runs from the pack thread while the matrix engine multiplies r + 1,
// so the two take the product plus the exp's last row group, never less than the busiest thread's work. In one row
// group the exp waits for the whole product, and runs longer than unstreamed: the pack thread takes the exp and
// then the pack, where the math thread's exp would overlap the packer tile by tile.
TEST(RowStream, AStreamedChainOverlapsItsStagesByRowGroup) {
  const Target target = WormholeLike(1, 1);
  const Composition plain = ProductThenExp(0, false);
  const auto [mm, ex] = CostsOf(plain, target);
  ASSERT_GT(mm.fpu, ex.unpack + ex.sfpu + ex.pack);
  ASSERT_GT(ex.sfpu, 0.0);
  ASSERT_DOUBLE_EQ(ex.fpu, 0.0);
  const double before = static_cast<double>(TimeOnly(plain, target).total_cycles());
  const double streamed = static_cast<double>(TimeOnly(ProductThenExp(8, false), target).total_cycles());
  const double one_group = static_cast<double>(TimeOnly(ProductThenExp(1, false), target).total_cycles());
  // What is not compute (the loads before, the store after) is the same in all three.
  const double around = before - mm.Duration() - ex.Duration();
  EXPECT_GT(around, 0.0);
  const double busiest = std::max({mm.unpack + ex.unpack, mm.fpu + ex.fpu, mm.sfpu + mm.pack + ex.sfpu + ex.pack});
  EXPECT_GE(streamed - around, busiest);
  EXPECT_LE(streamed - around, mm.Duration() + (ex.unpack + ex.sfpu + ex.pack) / 8 + ex.latency + 1);
  EXPECT_LT(streamed, before);
  EXPECT_GE(one_group - around, mm.Duration() + ex.sfpu + ex.pack);
  EXPECT_GT(one_group, before);
}

// A streamed stage does not start before its other inputs are pushed. On a slow link x, loaded after a and b,
// arrives long after the product is done, so the exp (which reads it) runs after that, then the store.
TEST(RowStream, AStreamedStageWaitsForItsOtherInputs) {
  proto::Target tp = sim_test::WormholeLikeProto(1, 1);
  tp.mutable_noc()->set_link_bytes_per_cycle(4);
  const Target target(tp);
  const Composition c = ProductThenExp(8, true);
  const auto [mm, ex] = CostsOf(c, target);
  const double a_b = (32.0 + 32.0) * 2048.0 / 4, x = 64.0 * 2048.0 / 4, store = 64.0 * 2048.0 / 4;
  ASSERT_LT(a_b + mm.Duration(), a_b + x);
  const double cycles = static_cast<double>(TimeOnly(c, target).total_cycles());
  EXPECT_GE(cycles, a_b + x + ex.sfpu + ex.pack + store);
  EXPECT_LE(cycles, 1.02 * (a_b + x + ex.unpack + ex.fpu + ex.sfpu + ex.pack + store));
}

// The calendars on their own: an invocation whose other inputs arrive at `floor` packs nothing before floor plus a
// row group's work, and its row groups follow its predecessor's.
TEST(RowStream, APlacementStartsNoEarlierThanItsFloorOrItsPredecessorsRows) {
  const Composition c = ProductThenExp(8, false);
  const RowStreamPlan plan = PlanRowStream(c.sections[0]);
  RowStreamCalendar cal;
  cal.Reset(plan, 0);
  const ComputeCost mm{.unpack = 800, .fpu = 1600, .pack = 80, .latency = 10, .tiles = 64};
  const ComputeCost ex{.unpack = 80, .sfpu = 400, .pack = 80, .latency = 10, .tiles = 64};
  std::vector<RowSpan> spans;
  const double product = cal.Place(plan, 2, mm, 0, &spans);
  EXPECT_GE(product, 1600 + 10);
  EXPECT_EQ(spans.size(), 3u * 8);
  // Streamed behind the product: it ends a row group's work after it.
  const double exp_now = cal.Place(plan, 3, ex, 0, nullptr);
  EXPECT_GE(exp_now, product + (80 + 400 + 80) / 8.0);
  EXPECT_LE(exp_now, product + (80 + 400 + 80) / 8.0 + 20);
  // With its other input arriving late, all of it after that input.
  cal.Reset(plan, 0);
  cal.Place(plan, 2, mm, 0, nullptr);
  EXPECT_GE(cal.Place(plan, 3, ex, 5000, nullptr), 5000 + 80 / 8.0 + 400 + 80);
}

// The trace draws each row group's share of each engine; no engine holds two at once.
TEST(RowStream, TraceSpansDoNotOverlapOnAnEngine) {
  const std::string path = ::testing::TempDir() + "/row_stream_trace.json";
  SimOptions o;
  o.timing_only = true;
  o.trace_path = path;
  absl::StatusOr<SimResult> r = Simulate(ProductThenExp(8, true), WormholeLike(1, 1), {}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string check = ::testing::TempDir() + "/check_row_stream_trace.py";
  std::ofstream(check) << R"(import json, sys, collections
ev = json.load(open(sys.argv[1]))["traceEvents"]
tracks = collections.defaultdict(list)
for e in ev:
    if e["ph"] == "X":
        tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
names = collections.Counter(e["name"] for e in ev if e["ph"] == "X")
assert names["product"] == 3 * 8 and names["exp"] == 4 * 8, names  # unpack, matrix, pack / + SFPU, a row group each
for spans in tracks.values():
    spans.sort()
    for (a0, a1, _), (b0, b1, _) in zip(spans, spans[1:]):
        assert b0 >= a1 - 1e-6, (a0, a1, b0, b1)
)";
  EXPECT_EQ(std::system(("python3 " + check + " " + path).c_str()), 0);
}

}  // namespace
}  // namespace spatial
