// Timing sanity of the machine on hand-built programs: every expected figure is hardware arithmetic on the
// Wormhole-like test target (sim_test_util.h), and every simulation goes through the forked Simulate().
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "sim/machine/stage_cost.h"
#include "sim/simulate.h"
#include "spatial/maps.h"
#include "tests/sim/sim_test_util.h"

namespace spatial {
namespace {

using sim_test::Copy;
using sim_test::ExpMap;
using sim_test::MatmulFold;
using sim_test::One;
using sim_test::WormholeLike;
using sim_test::WormholeLikeProto;

using sim_test::TimeOnly;

double Cycles(const Composition& c, const Target& t) { return static_cast<double>(TimeOnly(c, t).total_cycles()); }

const proto::EngineStats& EngineOf(const proto::SimReport& r, const std::string& name) {
  for (const auto& e : r.engines()) {
    if (e.engine() == name) return e;
  }
  static const proto::EngineStats kNone;
  ADD_FAILURE() << "no engine " << name;
  return kNone;
}

// One site, m = n = 4, k = 8 tiles per block: 128 tile products per block against 64 tiles of A and B loaded
// (4096 cycles over the 32 B/cycle link) and 3072 cycles of unpack: the matrix engine is the bottleneck at HiFi3
// and HiFi4, so the run takes blocks x 128 x cycles-per-product, plus one block's load to fill and the epilogue.
class MatmulFidelity : public ::testing::TestWithParam<std::pair<proto::Fidelity, double>> {};

TEST_P(MatmulFidelity, ComputeBoundCyclesAreTileProductsTimesCyclesPerTile) {
  const auto [fidelity, per_tile] = GetParam();
  proto::Target p = WormholeLikeProto(1, 1);
  p.mutable_numerics()->set_fidelity(fidelity);
  const Target target(p);
  const int64_t blocks = 32;
  const proto::SimReport r = TimeOnly(MatmulFold(1, 4, 4, 8, blocks), target);
  const double ideal = blocks * 128 * per_tile;
  EXPECT_GE(r.total_cycles(), ideal);
  // The pipeline fills and drains a 1 x 4 sub-block's unpack and pack per block around the products.
  EXPECT_LE(r.total_cycles(), 1.15 * ideal);
  // Plus, as FPU datacopies at 8 cycles a tile: the accumulator's reload into Dst each block (no packer L1
  // accumulation), the zero fill and the pack of the 16-tile accumulator.
  EXPECT_DOUBLE_EQ(EngineOf(r, "matrix").busy_cycles(), ideal + blocks * 16 * 8 + 2 * 16 * 8);
  EXPECT_GT(EngineOf(r, "matrix").busy_fraction(), 0.88);
  EXPECT_EQ(r.roofline().limited_by(), "compute");
  EXPECT_GT(r.roofline().fraction(), 0.88);
  EXPECT_LE(r.roofline().fraction(), 1.0);
  // 2 * 32^3 FLOPs per tile product.
  EXPECT_DOUBLE_EQ(r.flops(), blocks * 128 * 2.0 * 32 * 32 * 32);
}

INSTANTIATE_TEST_SUITE_P(Fidelities, MatmulFidelity,
                         ::testing::Values(std::make_pair(proto::HIFI3, 48.0), std::make_pair(proto::HIFI4, 64.0)));

// 64 sites each copying 16 items of 4 tiles: every site could move far more than its share of the 264.96 B/cycle
// the 12 channels sustain, so the run takes (read + written bytes) / 264.96.
// The SFPU runs a tile a face (16 x 16) at a time and skips faces no output point falls in (tt-metal's
// VectorMode::C for a column of per-row values): an exp written to column 0 of 32 rows, or to columns 0..15, takes
// faces 0 and 2, half a tile; columns 0..16 take all four; a reduction is charged its whole work tiles.
TEST(Timing, SfpuSkipsFacesWithoutOutput) {
  const Target target = WormholeLike(1, 1);
  auto sfpu_of = [&](std::vector<IterSpec> space, ElemAccess out) {
    Template t(32, 32);
    const BufferId in = t.AddScratchDeep("in", 1, 1, Precision::kFp32);
    const BufferId res = t.AddScratchDeep("res", 1, 1, Precision::kFp32);
    t.AddGeneric("fill", HeadSpace(32, 32), {}, {}, IdentMap(32), Const(0.0), in);
    t.AddGeneric("exp", std::move(space), {in}, {IdentMap(32)}, std::move(out), Unary(SfpuKind::Exp(), Op(0)), res);
    const Section s = t.Finish("faces", {WorkItem{}}, Precision::kFp32, NumericsClaim::Approx("exp"));
    absl::StatusOr<MachineParams> p = DeriveParams(target);
    EXPECT_TRUE(p.ok()) << p.status();
    return CostOf(s, s.stages[1], target, *p).compute.sfpu;
  };
  const double tile = sfpu_of(HeadSpace(32, 32), IdentMap(32));
  EXPECT_GT(tile, 0.0);
  EXPECT_DOUBLE_EQ(sfpu_of(HeadSpace(32, 1), PerRowMap(32)), tile / 2);
  EXPECT_DOUBLE_EQ(sfpu_of(HeadSpace(32, 16), IdentMap(32)), tile / 2);
  EXPECT_DOUBLE_EQ(sfpu_of(HeadSpace(16, 32), IdentMap(32)), tile / 2);
  EXPECT_DOUBLE_EQ(sfpu_of(HeadSpace(32, 17), IdentMap(32)), tile);
  EXPECT_DOUBLE_EQ(sfpu_of(HeadSpace(1, 1), PerRowMap(32)), tile / 4);
  EXPECT_DOUBLE_EQ(sfpu_of(HeadSpace(32, 32, IterKind::kReduceMax), PerRowMap(32)), tile);
}

// The fast exp folds a constant factor of its argument into its own constant (tt-llk _init_exponential_ with a scale:
// A * scale), so e^(c * (x - m)) costs what e^(x - m) does: the subtraction on the FPU, the exp on the SFPU. Any
// other exp, or a factor that is not a constant, multiplies on the FPU first (one eltwise pass a fidelity phase).
TEST(Timing, TheFastExpTakesAConstantScaleForFree) {
  const Target target = WormholeLike(1, 1);
  auto cost_of = [&](Body body) {
    Template t(32, 32);
    const BufferId x = t.AddScratchDeep("x", 1, 1, Precision::kFp32);
    const BufferId m = t.AddScratchDeep("m", 1, 1, Precision::kFp32);
    const BufferId res = t.AddScratchDeep("res", 1, 1, Precision::kFp32);
    t.AddGeneric("fill_x", HeadSpace(32, 32), {}, {}, IdentMap(32), Const(0.0), x);
    t.AddGeneric("fill_m", HeadSpace(32, 32), {}, {}, IdentMap(32), Const(0.0), m);
    t.AddGeneric("exp", HeadSpace(32, 32), {x, m}, {IdentMap(32), IdentMap(32)}, IdentMap(32), std::move(body), res);
    const Section s = t.Finish("scale", {WorkItem{}}, Precision::kFp32, NumericsClaim::Approx("exp"));
    absl::StatusOr<MachineParams> p = DeriveParams(target);
    EXPECT_TRUE(p.ok()) << p.status();
    return CostOf(s, s.stages[2], target, *p).compute;
  };
  const ComputeCost plain = cost_of(Unary(SfpuKind::ExpFast(), Sub(Op(0), Op(1))));
  const ComputeCost scaled = cost_of(Unary(SfpuKind::ExpFast(), Mul(Sub(Op(0), Op(1)), Const(0.125))));
  EXPECT_GT(plain.fpu, 0.0);  // the subtraction
  EXPECT_DOUBLE_EQ(scaled.fpu, plain.fpu);
  EXPECT_DOUBLE_EQ(scaled.sfpu, plain.sfpu);
  // The accurate exp, or a factor read from an operand, pays the multiply on the FPU.
  EXPECT_GT(cost_of(Unary(SfpuKind::Exp(), Mul(Sub(Op(0), Op(1)), Const(0.125)))).fpu,
            cost_of(Unary(SfpuKind::Exp(), Sub(Op(0), Op(1)))).fpu);
  EXPECT_GT(cost_of(Unary(SfpuKind::ExpFast(), Mul(Op(0), Op(1)))).fpu,
            cost_of(Unary(SfpuKind::ExpFast(), Op(0))).fpu);
}

// A row sum right after the elementwise stage that writes its input is the packer's where the plan says so
// (BlockPlan.pack_row_sums, tt-metal SDPA's sub_exp_block_bcast_cols): the sum has no unpack and no math, and its
// producer packs its page twice. Without the plan's word, with a stage between them, or for a maximum, both cost
// as before.
TEST(Timing, ARowSumAfterItsProducerIsThePackers) {
  const Target target = WormholeLike(1, 1);
  absl::StatusOr<MachineParams> p = DeriveParams(target);
  ASSERT_TRUE(p.ok()) << p.status();
  struct Costs {
    ComputeCost producer, sum;
  };
  auto costs_of = [&](bool plan, bool between, IterKind pool) {
    Template t(32, 32);
    const BufferId x = t.AddScratchDeep("x", 1, 4, Precision::kBf16);
    const BufferId probs = t.AddScratchDeep("probs", 1, 4, Precision::kBf16);
    const BufferId other = t.AddScratchDeep("other", 1, 1, Precision::kFp32);
    const BufferId sum = t.AddScratchDeep("sum", 1, 1, Precision::kFp32);
    t.AddGeneric("fill", HeadSpace(32, 128), {}, {}, IdentMap(128), Const(0.0), x);
    t.AddGeneric("probs", HeadSpace(32, 128), {x}, {IdentMap(128)}, IdentMap(128), Unary(SfpuKind::ExpFast(), Op(0)),
                 probs);
    if (between) t.AddGeneric("between", HeadSpace(32, 1), {}, {}, PerRowMap(32), Const(1.0), other);
    t.AddGeneric("sum", HeadSpace(32, 128, pool), {probs}, {IdentMap(128)}, PerRowMap(32), Op(0), sum);
    if (plan) t.SetPlan(BlockPlan{.pack_row_sums = true});
    const Section s = t.Finish("rowsum", {WorkItem{}}, Precision::kFp32, NumericsClaim::Approx("exp"));
    return Costs{CostOf(s, s.stages[1], target, *p).compute, CostOf(s, s.stages[between ? 3 : 2], target, *p).compute};
  };
  const Costs plain = costs_of(false, false, IterKind::kReduceSum);
  const Costs packed = costs_of(true, false, IterKind::kReduceSum);
  EXPECT_GT(plain.sum.unpack, 0.0);
  EXPECT_GT(plain.sum.fpu, 0.0);
  EXPECT_DOUBLE_EQ(packed.sum.unpack, 0.0);
  EXPECT_DOUBLE_EQ(packed.sum.fpu + packed.sum.sfpu + packed.sum.pack, 0.0);
  EXPECT_DOUBLE_EQ(packed.sum.flops, plain.sum.flops);
  EXPECT_DOUBLE_EQ(packed.producer.pack, 2 * plain.producer.pack);
  EXPECT_DOUBLE_EQ(packed.producer.sfpu, plain.producer.sfpu);
  EXPECT_LT(packed.producer.Duration() + packed.sum.Duration(), plain.producer.Duration() + plain.sum.Duration());
  for (const Costs& c : {costs_of(true, true, IterKind::kReduceSum), costs_of(true, false, IterKind::kReduceMax)}) {
    EXPECT_GT(c.sum.unpack, 0.0);
    EXPECT_DOUBLE_EQ(c.producer.pack, plain.producer.pack);
  }
}

TEST(Timing, DramBoundCopyMovesBytesAtTheSustainedBandwidth) {
  const int64_t items = 64 * 16, w = 4;
  const proto::SimReport r = TimeOnly(Copy(items, w), WormholeLike(8, 8));
  const double bytes = 2.0 * items * w * 2048;
  EXPECT_EQ(r.dram_read_bytes(), items * w * 2048);
  EXPECT_EQ(r.dram_write_bytes(), items * w * 2048);
  const double ideal = bytes / (288e9 * 0.92 / 1e9);
  EXPECT_GE(r.total_cycles(), ideal * 0.999);
  EXPECT_LE(r.total_cycles(), 1.05 * ideal);
  EXPECT_EQ(r.roofline().limited_by(), "dram");
  EXPECT_GT(r.roofline().fraction(), 0.95);
  EXPECT_GT(r.stalls().dram_cycles(), 0);  // 64 sites queue for 12 channels
}

TEST(Timing, DoublingTheWorkDoublesTheCycles) {
  const Target grid = WormholeLike(8, 8);
  EXPECT_NEAR(Cycles(Copy(2048, 4), grid) / Cycles(Copy(1024, 4), grid), 2.0, 0.1);
  const Target one = WormholeLike(1, 1);
  EXPECT_NEAR(Cycles(MatmulFold(1, 4, 4, 8, 64), one) / Cycles(MatmulFold(1, 4, 4, 8, 32), one), 2.0, 0.1);
}

// Independent compute-bound items (8000 SFPU cycles each against ~730 cycles of load): n sites finish in 1/n of
// the time.
TEST(Timing, MoreSitesTakeProportionallyFewerCycles) {
  auto target = [](int64_t gy, int64_t gx) {
    proto::Target p = WormholeLikeProto(gy, gx);
    p.mutable_costs()->mutable_sfpu(0)->set_cycles_per_tile(1000);
    return Target(p);
  };
  const Composition c = ExpMap(64, 8);
  const double one = Cycles(c, target(1, 1));
  EXPECT_GT(one, 64 * 8 * 1000.0);
  for (auto [gy, gx] : {std::pair<int64_t, int64_t>{1, 2}, {2, 2}, {2, 4}}) {
    const double n = static_cast<double>(gy * gx);
    EXPECT_NEAR(one / Cycles(c, target(gy, gx)), n, 0.05 * n) << gy << "x" << gx;
  }
}

// load (256 cycles: 8 KiB over the link, no latency) -> exp (unpack 128, SFPU 4 x 64, pack 128: 256 + 256/4 + 5
// = 325 pipelined) -> store (256). Two-page FIFOs let the three overlap: one item per 325 cycles. One-page FIFOs
// make the reader wait for exp to pop its page before loading the next: one item per 256 + 325 = 581 cycles.
TEST(Timing, FifoDepthDecidesHowFarStagesOverlap) {
  proto::Target p = WormholeLikeProto(1, 1);
  p.mutable_dram()->set_latency_cycles(0);
  p.mutable_noc()->set_hop_cycles(0);
  p.mutable_noc()->set_niu_cycles(0);
  const Target target(p);
  const int64_t items = 64;
  const double double_buffered = Cycles(ExpMap(items, 4, 2), target);
  const double single = Cycles(ExpMap(items, 4, 1), target);
  EXPECT_NEAR(double_buffered, items * 325.0 + 512, 0.02 * items * 325.0);
  EXPECT_NEAR(single, items * 581.0 + 512, 0.02 * items * 581.0);
}

TEST(Timing, StallsAreChargedToTheirCause) {
  // The matmul waits on nothing once the first block is in; the reader waits for pages to free (output space).
  const proto::SimReport r = TimeOnly(MatmulFold(1, 4, 4, 8, 16), WormholeLike(1, 1));
  EXPECT_GT(EngineOf(r, "reader").stall_output_cycles(), 0);
  EXPECT_LT(EngineOf(r, "matrix").stall_input_cycles(), 0.05 * r.total_cycles());
  EXPECT_EQ(EngineOf(r, "matrix").invocations(), 16 + 2);  // the blocks, the zero fill, the pack
  EXPECT_EQ(EngineOf(r, "reader").invocations(), 32);
  EXPECT_EQ(EngineOf(r, "writer").invocations(), 1);
}

TEST(Timing, SimulationIsDeterministic) {
  const Composition c = Copy(300, 3);
  const Target t = WormholeLike(4, 4);
  EXPECT_EQ(TimeOnly(c, t).SerializeAsString(), TimeOnly(c, t).SerializeAsString());
}

TEST(Timing, SectionsRunOneAfterAnother) {
  Composition c = Copy(64, 4);
  Composition two = c;
  Section second = c.sections[0];
  second.name = "copy_again";
  two.sections.push_back(second);
  const Target t = WormholeLike(2, 2);
  const proto::SimReport one = TimeOnly(c, t);
  const proto::SimReport r = TimeOnly(two, t);
  ASSERT_EQ(r.sections_size(), 2);
  EXPECT_EQ(r.sections(1).start_cycle(), r.sections(0).cycles());
  EXPECT_NEAR(static_cast<double>(r.total_cycles()), 2.0 * one.total_cycles(), 2.0);
}

// A gathered copy: item x reads w tiles at tile w * v, v the index page it loads from tile x of `table` (holding x
// at each tile's first element): a PARAM table, whose values the program holds, or a run input's.
Composition GatheredCopy(int64_t items, int64_t w, TensorRole table_role) {
  Template t(32, 32);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 32, 32 * w * items, Precision::kBf16, TensorInit::External());
  std::vector<int64_t> held(static_cast<size_t>(32 * items), 0);
  for (int64_t i = 0; i < items; ++i) held[static_cast<size_t>(32 * i)] = i;
  TensorId table = t.AddTensor("table", table_role, 32, 32 * items, Precision::kInt32,
                               table_role == TensorRole::kParam ? TensorInit::Values(held) : TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 32, 32 * w * items, Precision::kBf16, TensorInit::Zero());
  BufferId index = t.AddBufferDeep("index", 2, 1, Precision::kInt32);
  BufferId buf = t.AddBufferDeep("page", 2, w, Precision::kBf16);
  StageId li = t.AddLoad("load_index", table, {{LoopVar::kItemX, 1}}, 1, index);
  StageId ld = t.AddLoadPattern(
      "load_x", x, AccessPattern{TileAddr{0, {}, IndirectTile{index, w, 0, items - 1}}, 1, w, 1, 1}, buf);
  StageId st = t.AddStore("store_y", y, {{LoopVar::kItemX, w}}, w, buf);
  t.AddEdge(li, index, ld);
  t.AddEdge(ld, buf, st);
  return One(t.Finish("gathered_copy", RowItems(w * items, w), Precision::kFp32, NumericsClaim::Exact()));
}

// A gathered block's DRAM channels are those of the tiles it reads: where its index comes from a table the program
// holds, the machine reads the index there (TablePages), so 256 items gathering their own 4 tiles spread over the
// 12 channels as a direct copy's do, and the run is bound by its bytes (the index pages' too). From a run input not
// given the index is unknown to timing, which takes the admitted range's low end — every item's reads queue at the
// same 4 channels — and the report says so; given, the input is read as the table was.
TEST(Timing, AGatherThroughAHeldTableBooksTheChannelsItReads) {
  const Target t = WormholeLike(4, 4);
  const proto::SimReport held = TimeOnly(GatheredCopy(256, 4, TensorRole::kParam), t);
  EXPECT_EQ(held.roofline().limited_by(), "dram");
  EXPECT_GT(held.roofline().fraction(), 0.85);
  EXPECT_LT(held.total_cycles(), 1.3 * Cycles(Copy(256, 4), t));  // + the index pages' reads and latency
  EXPECT_EQ(held.notes_size(), 0);
  const proto::SimReport unknown = TimeOnly(GatheredCopy(256, 4, TensorRole::kInput), t);
  EXPECT_GT(unknown.total_cycles(), 1.5 * held.total_cycles());
  ASSERT_EQ(unknown.notes_size(), 1);
  EXPECT_EQ(unknown.notes(0),
            "256 gathered block transfer(s) timed at the low end of their admitted index, which is computed on a site "
            "or read from a tensor not given: the DRAM channels they occupy, and their contention, may differ on "
            "hardware");
  TensorData table{.rows = 32, .cols = 32 * 256, .precision = Precision::kInt32};
  table.values.assign(32 * 32 * 256, 0.0);
  for (int64_t i = 0; i < 256; ++i) table.values[static_cast<size_t>(32 * i)] = static_cast<double>(i);
  SimOptions opts;
  opts.timing_only = true;
  absl::StatusOr<SimResult> given = Simulate(GatheredCopy(256, 4, TensorRole::kInput), t, {{"table", table}}, opts);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->report.total_cycles(), held.total_cycles());
  EXPECT_EQ(given->report.notes_size(), 0);
}

// A section's time is its own: the same section after different ones (which leave the sites' sequencers finishing
// in different orders, at different cycles) takes the same cycles as alone. The machine restarts every sequencer in
// site order at a section's start and counts the section's cycles from it (machine.cc, Machine::Now).
TEST(Timing, ASectionTakesTheSameCyclesWhateverRanBeforeIt) {
  const Target t = WormholeLike(4, 4);
  const Composition contended = Copy(300, 3);  // 16 sites queueing at 12 DRAM channels
  const double alone = TimeOnly(contended, t).sections(0).cycles();
  for (const Composition& before : {Copy(37, 5), ExpMap(11, 3), Copy(300, 3)}) {
    Composition two = before;
    two.sections.push_back(contended.sections[0]);
    two.sections.back().name = "contended";
    const proto::SimReport r = TimeOnly(two, t);
    ASSERT_EQ(r.sections_size(), 2);
    EXPECT_EQ(r.sections(1).cycles(), alone) << "after " << before.sections[0].name;
  }
}

TEST(Timing, TraceParsesWithOneTrackPerEnginePerSite) {
  const std::string path = ::testing::TempDir() + "/sim_trace.json";
  SimOptions o;
  o.timing_only = true;
  o.trace_path = path;
  absl::StatusOr<SimResult> r = Simulate(ExpMap(8, 2), WormholeLike(2, 2), {}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  // 8 items x (load, unpack, sfpu, pack, store) spans.
  EXPECT_EQ(r->report.trace_events(), 8 * 5);
  const std::string check = ::testing::TempDir() + "/check_trace.py";
  std::ofstream(check) << R"(import json, sys, collections
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
threads = collections.defaultdict(set)
for e in ev:
    if e["ph"] == "M" and e["name"] == "thread_name":
        threads[e["pid"]].add(e["args"]["name"])
want = {"reader", "unpack", "matrix", "sfpu", "pack", "writer"}
assert len(threads) == 4 and all(v == want for v in threads.values()), threads
xs = [e for e in ev if e["ph"] == "X"]
assert len(xs) == 40, len(xs)
assert all(e["dur"] > 0 and e["ts"] >= 0 and e["tid"] in range(6) and e["pid"] in range(4) for e in xs)
assert {e["name"] for e in xs} == {"load_x", "exp", "store_y"}
)";
  EXPECT_EQ(std::system(("python3 " + check + " " + path).c_str()), 0);
}

TEST(Timing, VcdHasBusyWires) {
  const std::string path = ::testing::TempDir() + "/sim.vcd";
  SimOptions o;
  o.timing_only = true;
  o.vcd_path = path;
  o.vcd_window_cycles = 100000;
  ASSERT_TRUE(Simulate(ExpMap(4, 2), WormholeLike(1, 1), {}, o).ok());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("$var wire 1 ! reader $end"), std::string::npos);
  EXPECT_NE(text.find("$enddefinitions $end"), std::string::npos);
  EXPECT_NE(text.find("\n1!\n"), std::string::npos);  // the reader went busy
  EXPECT_NE(text.find("\n0!\n", text.find("\n1!\n")), std::string::npos);  // and idle again
}

}  // namespace
}  // namespace spatial
