// MatmulTiles, the prologue/body/epilogue fold with carried buffers, static and run-time trips. Tile 4x4.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/vm/vm.h"
#include "spatial/builder.h"
#include "spatial/maps.h"

namespace spatial {
namespace {

constexpr Precision kF = Precision::kFp32;

TensorData Mat(int64_t rows, int64_t cols, std::vector<double> v) { return TensorData{rows, cols, kF, std::move(v)}; }

// A (4x8): a(r, k) = r + k; B (8x4): b(k, n) = k - 2n; Bt (4x8) = B transposed.
std::vector<double> A() {
  std::vector<double> v(32);
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < 8; ++k) v[r * 8 + k] = r + k;
  }
  return v;
}
std::vector<double> B() {
  std::vector<double> v(32);
  for (int k = 0; k < 8; ++k) {
    for (int n = 0; n < 4; ++n) v[k * 4 + n] = k - 2 * n;
  }
  return v;
}
std::vector<double> Bt() {
  std::vector<double> v(32);
  for (int n = 0; n < 4; ++n) {
    for (int k = 0; k < 8; ++k) v[n * 8 + k] = k - 2 * n;
  }
  return v;
}
// C(r, n) = sum_k (r + k)(k - 2n) = sum_k (rk + k^2 - 2nr - 2nk), k = 0..7:
// sum k = 28, sum k^2 = 140: C = 28r + 140 - 16nr - 56n.
double C(int r, int n) { return 28.0 * r + 140 - 16.0 * n * r - 56.0 * n; }

void ExpectProduct(const std::vector<double>& c) {
  ASSERT_EQ(c.size(), 16u);
  for (int r = 0; r < 4; ++r) {
    for (int n = 0; n < 4; ++n) EXPECT_EQ(c[r * 4 + n], C(r, n)) << r << "," << n;
  }
  EXPECT_EQ(c[0], 140);   // row 0 of A . column 0 of B = sum k^2
  EXPECT_EQ(c[5], 96);    // 28 + 140 - 16 - 56
}

TEST(VmFold, MatmulTilesPlain) {
  Template t(4, 4);
  TensorId a = t.AddTensor("a", TensorRole::kInput, 4, 8, kF, TensorInit::External());
  TensorId b = t.AddTensor("b", TensorRole::kInput, 8, 4, kF, TensorInit::External());
  TensorId c = t.AddTensor("c", TensorRole::kOutput, 4, 4, kF, TensorInit::Zero());
  BufferId ab = t.AddBuffer("ab", 2, kF);
  BufferId bb = t.AddBuffer("bb", 2, kF);
  BufferId cb = t.AddBuffer("cb", 1, kF);
  t.AddLoad("load_a", a, {}, 2, ab);
  t.AddLoadBlockAt("load_b", b, 0, {}, {.h = 2}, bb);  // tiles (0,0) and (1,0) of B: page tiles k = 0, 1
  t.AddMatmul("mm", MatmulTiles{1, 1, 2, false, false}, ab, bb, cb);
  t.AddStore("store", c, {}, 1, cb);
  Composition comp = Single(t.Finish("mm", WholeRow(1), kF, NumericsClaim::Approx("matmul")));
  auto out = RunComposition(comp, 4, 4, {{"a", Mat(4, 8, A())}, {"b", Mat(8, 4, B())}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectProduct(out->at("c").values);
}

TEST(VmFold, MatmulTilesTransposeB) {
  Template t(4, 4);
  TensorId a = t.AddTensor("a", TensorRole::kInput, 4, 8, kF, TensorInit::External());
  TensorId bt = t.AddTensor("bt", TensorRole::kInput, 4, 8, kF, TensorInit::External());
  TensorId c = t.AddTensor("c", TensorRole::kOutput, 4, 4, kF, TensorInit::Zero());
  BufferId ab = t.AddBuffer("ab", 2, kF);
  BufferId bb = t.AddBuffer("bb", 2, kF);
  BufferId cb = t.AddBuffer("cb", 1, kF);
  t.AddLoad("load_a", a, {}, 2, ab);
  t.AddLoad("load_bt", bt, {}, 2, bb);  // tile (n=0, k) at page tile 0 * 2 + k
  t.AddMatmul("mm", MatmulTiles{1, 1, 2, false, true}, ab, bb, cb);
  t.AddStore("store", c, {}, 1, cb);
  Composition comp = Single(t.Finish("mmt", WholeRow(1), kF, NumericsClaim::Approx("matmul")));
  auto out = RunComposition(comp, 4, 4, {{"a", Mat(4, 8, A())}, {"bt", Mat(4, 8, Bt())}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectProduct(out->at("c").values);
}

// Prologue zeroes the accumulator; each of 2 blocks loads A tile (0, KBLOCK) and B tile (KBLOCK, 0) and
// accumulates; the epilogue stores.
TEST(VmFold, MatmulAccumulatesOverAFoldOfKBlockLoads) {
  Template t(4, 4);
  TensorId a = t.AddTensor("a", TensorRole::kInput, 4, 8, kF, TensorInit::External());
  TensorId b = t.AddTensor("b", TensorRole::kInput, 8, 4, kF, TensorInit::External());
  TensorId c = t.AddTensor("c", TensorRole::kOutput, 4, 4, kF, TensorInit::Zero());
  BufferId ab = t.AddBuffer("ab", 1, kF);
  BufferId bb = t.AddBuffer("bb", 1, kF);
  BufferId cb = t.AddScratchDeep("acc", 2, 1, kF);
  t.AddGeneric("init_acc", TileSpace(4, 4), {}, {}, IdentMap(4), Const(0), cb);
  t.SetPhase(Phase::kBody);
  t.AddLoad("load_a", a, {{LoopVar::kKBlock, 1}}, 1, ab);
  t.AddLoad("load_b", b, {{LoopVar::kKBlock, 1}}, 1, bb);
  t.AddMatmul("mm", MatmulTiles{1, 1, 1, true, false}, ab, bb, cb);
  t.SetPhase(Phase::kEpilogue);
  t.AddStore("store", c, {}, 1, cb);
  t.Fold(2);
  Composition comp = Single(t.Finish("fold", WholeRow(1), kF, NumericsClaim::Approx("matmul")));
  auto out = RunComposition(comp, 4, 4, {{"a", Mat(4, 8, A())}, {"b", Mat(8, 4, B())}});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectProduct(out->at("c").values);

  // Without the prologue's init the first accumulate reads an unwritten carry.
  comp.sections[0].stages.erase(comp.sections[0].stages.begin());
  auto fault = RunComposition(comp, 4, 4, {{"a", Mat(4, 8, A())}, {"b", Mat(8, 4, B())}});
  ASSERT_FALSE(fault.ok());
  EXPECT_EQ(fault.status().message(),
            "UnwrittenBuffer: section 'fold' item 0 stage 'mm' (#2): accumulator buffer 'acc' is read before any "
            "stage of this item wrote it");
}

// A running max over 4 blocks of a 1x16 row: m = max(m, x block b), m carried in a buffer the prologue sets.
TEST(VmFold, CarriedRunningMaxOverBlocks) {
  Template t(4, 4);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 1, 16, kF, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 4, kF, TensorInit::Zero());
  BufferId a = t.AddBuffer("a", 1, kF);
  BufferId m = t.AddScratchDeep("m", 2, 1, kF);
  t.AddGeneric("init_max", FlatSpace(4), {}, {}, At(0), Const(-1e30), m);
  t.SetPhase(Phase::kBody);
  t.AddLoad("load_x", x, {{LoopVar::kKBlock, 1}}, 1, a);
  t.AddGeneric("new_max", FlatSpace(4), {m, a}, {At(0), At(0)}, At(0), Max(Op(0), Op(1)), m);
  t.SetPhase(Phase::kEpilogue);
  t.AddStore("store", y, {}, 1, m);
  t.Fold(4);
  Composition c = Single(t.Finish("runmax", WholeRow(1), kF, NumericsClaim::Exact()));
  EXPECT_EQ(c.sections[0].stages[1].phase, Phase::kBody);
  auto out = RunComposition(c, 4, 4, {{"x", TensorData{1, 16, kF, {1, 9, -3, 0, 5, 2, -1, 7, 3, 3, 8, -2, 0, 4, -9,
                                                                   6}}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y").values, (std::vector<double>{5, 9, 8, 7}));

  // Without the init the first block reads the carry unwritten.
  c.sections[0].stages.erase(c.sections[0].stages.begin());
  auto fault = RunComposition(c, 4, 4, {{"x", TensorData{1, 16, kF, std::vector<double>(16, 0.0)}}});
  ASSERT_FALSE(fault.ok());
  EXPECT_EQ(fault.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fault.status().message(),
            "UnwrittenBuffer: section 'runmax' item 0 stage 'new_max' (#1): input buffer 'm' is read before any "
            "stage of this item wrote it");
}

// Counts the blocks a fold runs: n = 0 in the prologue, n += 1 per block, stored by the epilogue. With a trip,
// the count is ceil((P + bias) / per) for P = element 0 of "pos", admitted in [1, 16].
Composition BlockCounter(std::optional<Trip> trip, int64_t num_blocks) {
  Template t(4, 4);
  TensorId pos = t.AddTensor("pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 1, kF, TensorInit::Zero());
  BufferId n = t.AddScratchDeep("n", 2, 1, kF);
  t.AddGeneric("init", FlatSpace(1), {}, {}, At(0), Const(0), n);
  t.SetPhase(Phase::kBody);
  t.AddGeneric("count", FlatSpace(1), {n}, {At(0)}, At(0), Add(Op(0), Const(1)), n);
  t.SetPhase(Phase::kEpilogue);
  t.AddStore("store", y, {}, 1, n);
  if (trip) {
    trip->tensor = pos;
    t.SetTrip(*trip, num_blocks);
  } else {
    t.Fold(num_blocks);
  }
  return Single(t.Finish("count", WholeRow(1), kF, NumericsClaim::Exact()));
}

absl::StatusOr<double> Blocks(const Composition& c, double pos) {
  auto out = RunComposition(c, 4, 4, {{"pos", TensorData{1, 1, Precision::kInt32, {pos}}}});
  if (!out.ok()) return out.status();
  return out->at("y").values[0];
}

TEST(VmFold, StaticBlockCount) {
  auto three = Blocks(BlockCounter(std::nullopt, 3), 1);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(*three, 3);
  auto zero = Blocks(BlockCounter(std::nullopt, 0), 1);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(*zero, 0);
}

TEST(VmFold, RunTimeTrip) {
  const Composition c = BlockCounter(Trip{0, 0, 1, 16, 0, 4}, 4);
  for (auto [pos, want] : std::vector<std::pair<double, double>>{{1, 1}, {4, 1}, {5, 2}, {16, 4}}) {
    auto got = Blocks(c, pos);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << "pos " << pos;
  }
  // bias 3: ceil((5 + 3) / 4) = 2, ceil((6 + 3) / 4) = 3; bias -10 leaves nothing to run.
  auto biased = Blocks(BlockCounter(Trip{0, 0, 1, 16, 3, 4}, 5), 6);
  ASSERT_TRUE(biased.ok()) << biased.status();
  EXPECT_EQ(*biased, 3);
  auto none = Blocks(BlockCounter(Trip{0, 0, 1, 16, -10, 4}, 1), 5);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0);
}

// Items that fold blocks of their own (WorkItem.blocks, a causal chunk's): item i counts into its own tile of y.
// -1 folds the section's count; a count above the run's (here the trip's) folds the run's.
Composition ItemCounter(std::optional<Trip> trip, int64_t num_blocks, const std::vector<int64_t>& own) {
  Template t(4, 4);
  const int64_t n_items = static_cast<int64_t>(own.size());
  TensorId pos = t.AddTensor("pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 4, 4 * n_items, kF, TensorInit::Zero());
  BufferId n = t.AddScratchDeep("n", 2, 1, kF);
  t.AddGeneric("init", FlatSpace(1), {}, {}, At(0), Const(0), n);
  t.SetPhase(Phase::kBody);
  t.AddGeneric("count", FlatSpace(1), {n}, {At(0)}, At(0), Add(Op(0), Const(1)), n);
  t.SetPhase(Phase::kEpilogue);
  t.AddStore("store", y, {{LoopVar::kItemX, 1}}, 1, n);
  if (trip) {
    trip->tensor = pos;
    t.SetTrip(*trip, num_blocks);
  } else {
    t.Fold(num_blocks);
  }
  std::vector<WorkItem> items;
  for (int64_t i = 0; i < n_items; ++i) {
    items.push_back(WorkItem{.id = i, .y = 0, .x = i, .out = TileRect{0, i, 1, 1}, .blocks = own[i]});
  }
  return Single(t.Finish("count", std::move(items), kF, NumericsClaim::Exact()));
}

TEST(VmFold, EachItemFoldsItsOwnBlocks) {
  auto counts = [](const Composition& c, double pos) {
    auto out = RunComposition(c, 4, 4, {{"pos", TensorData{1, 1, Precision::kInt32, {pos}}}});
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<double> got;
    for (size_t i = 0; out.ok() && i < out->at("y").values.size() / 16; ++i) got.push_back(out->at("y").values[4 * i]);
    return got;
  };
  EXPECT_EQ(counts(ItemCounter(std::nullopt, 4, {-1, 0, 2, 4, 1}), 1), (std::vector<double>{4, 0, 2, 4, 1}));
  // The trip gives 2 blocks at pos 5 (per 4): an item's own 3 folds 2.
  EXPECT_EQ(counts(ItemCounter(Trip{0, 0, 1, 16, 0, 4}, 4, {-1, 3, 1}), 5), (std::vector<double>{2, 2, 1}));
  // More than the section's fold is malformed (validation refuses it: the loads are proven for the section's
  // blocks only); the VM never folds past the section's count.
  EXPECT_EQ(counts(ItemCounter(std::nullopt, 2, {3}), 1), (std::vector<double>{2}));
}

TEST(VmFold, TripOutOfRange) {
  const Composition c = BlockCounter(Trip{0, 0, 1, 64, 0, 4}, 16);
  auto high = Blocks(c, 70);
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(high.status().message(),
            "TripOutOfRange: section 'count': trip value 70 not in [1, 64] (element 0 of tensor 'pos')");
  auto low = Blocks(c, 0);
  ASSERT_FALSE(low.ok());
  EXPECT_TRUE(std::string(low.status().message()).find("trip value 0") != std::string::npos) << low.status();
}

}  // namespace
}  // namespace spatial
