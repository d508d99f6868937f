// Items that fold blocks of their own (WorkItem.blocks): the machine runs each item's count, numbers a site's pages
// across items of different counts, and multicasts a block only among items that fold it alike.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/simulate.h"
#include "sim/vm/vm.h"
#include "spatial/maps.h"
#include "tests/sim/sim_test_util.h"

namespace spatial {
namespace {

using sim_test::One;
using sim_test::TimeOnly;
using sim_test::WormholeLike;

// Items (y, 0), y = 0..n-1, fold `num_blocks` blocks or their own count: each block loads a 1 x 4 tile block of b
// (the same block for every item: multicast along ITEM_Y when `multicast`) and adds its first element to a carried
// count n; the epilogue stores n into the item's tile of y. With `bonus_last` > 0, a stage after the count adds 10 to
// n on each item's last `bonus_last` blocks only (Stage.last_blocks: in place).
Composition Counter(int64_t num_blocks, const std::vector<int64_t>& own, bool multicast, int64_t bonus_last = 0) {
  Template t(32, 32);
  const int64_t items = static_cast<int64_t>(own.size());
  const TensorId b = t.AddTensor("b", TensorRole::kInput, 32, 32 * 4 * num_blocks, Precision::kBf16,
                                 TensorInit::External());
  const TensorId y = t.AddTensor("y", TensorRole::kOutput, 32 * items, 32, Precision::kFp32, TensorInit::Zero());
  const BufferId b_in = t.AddBuffer("in_b", 4, Precision::kBf16);
  const BufferId n = t.AddScratchDeep("n", 2, 1, Precision::kFp32);
  t.Fold(num_blocks);
  const StageId init = t.AddGeneric("init", FlatSpace(1), {}, {}, At(0), Const(0), n);
  t.SetPhase(Phase::kBody);
  const StageId load = t.AddLoad("load_b", b, {{LoopVar::kKBlock, 4}}, 4, b_in);
  if (multicast) t.SetMulticast(load, LoopVar::kItemY);
  const StageId add = t.AddGeneric("count", FlatSpace(1), {n, b_in}, {At(0), At(0)}, At(0), Add(Op(0), Op(1)), n);
  StageId last = add;
  if (bonus_last > 0) {
    last = t.AddGeneric("bonus", FlatSpace(1), {n}, {At(0)}, At(0), Add(Op(0), Const(10)), n);
    t.SetLastBlocks(last, bonus_last);
    t.AddEdge(add, n, last);
  }
  t.SetPhase(Phase::kEpilogue);
  const StageId store = t.AddStore("store", y, {{LoopVar::kItemY, 1}}, 1, n);
  t.AddEdge(init, n, add);
  t.AddEdge(load, b_in, add);
  t.AddEdge(last, n, store);
  std::vector<WorkItem> its;
  for (int64_t i = 0; i < items; ++i) {
    its.push_back(WorkItem{.id = i, .y = i, .x = 0, .out = TileRect{i, 0, 1, 1}, .blocks = own[i]});
  }
  return One(t.Finish("counter", std::move(its), Precision::kFp32, NumericsClaim::Approx("bf16 adds")));
}

// The values: b all ones, so item i's result is the blocks it folded. The machine's run (the target's numerics)
// gives each item's own count, on one site (items one after another, pages numbered across counts) and on four.
TEST(ItemBlocks, EachItemFoldsItsOwnCountOnTheMachine) {
  const std::vector<int64_t> own = {3, 0, -1, 2, 1};
  for (const int64_t sites : {1, 4}) {
    const Target target = WormholeLike(1, sites);
    TensorData ones{32, 32 * 4 * 4, Precision::kBf16, std::vector<double>(32 * 32 * 4 * 4, 1.0)};
    absl::StatusOr<SimResult> r = Simulate(Counter(4, own, false), target, {{"b", ones}}, SimOptions{});
    ASSERT_TRUE(r.ok()) << r.status();
    const TensorData& y = r->outputs.at("y");
    const std::vector<double> want = {3, 0, 4, 2, 1};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.values[i * 32 * 32], want[i]) << sites << " sites, item " << i;
  }
}

// The time: on one site the items run one after another, so the run takes about the blocks they fold in all.
TEST(ItemBlocks, ASiteTakesTheBlocksItsItemsFold) {
  const Target target = WormholeLike(1, 1);
  const double all = static_cast<double>(TimeOnly(Counter(64, {-1, -1}, false), target).total_cycles());
  const double half = static_cast<double>(TimeOnly(Counter(64, {32, 32}, false), target).total_cycles());
  const double some = static_cast<double>(TimeOnly(Counter(64, {64, 0}, false), target).total_cycles());
  EXPECT_NEAR(half / all, 0.5, 0.05);
  EXPECT_NEAR(some / all, 0.5, 0.05);
}

// A block is multicast among the items at one ordinal that fold the same blocks: counts {4, 4, 2, 1} on four sites
// read the block stream once for the two 4s, and once each for the 2 and the 1 (4 + 2 + 1 blocks from DRAM); the
// handshake never waits for a member that stopped folding.
TEST(ItemBlocks, MulticastGroupsFoldAlike) {
  const Target target = WormholeLike(1, 4);
  const proto::SimReport r = TimeOnly(Counter(4, {4, -1, 2, 1}, true), target);
  EXPECT_GT(r.total_cycles(), 0);
  const int64_t block_bytes = 4 * 2048;
  EXPECT_EQ(r.dram_read_bytes(), (4 + 2 + 1) * block_bytes);
  const proto::SimReport alike = TimeOnly(Counter(4, {-1, -1, -1, -1}, true), target);
  EXPECT_EQ(alike.dram_read_bytes(), 4 * block_bytes);
}

// A body stage run on the last blocks only (Stage.last_blocks) runs on each item's last ones of its own count: the
// VM and the machine agree on the values (count + 10 per block the bonus ran), and the machine invokes the stage
// exactly that often.
TEST(ItemBlocks, AStageOnTheLastBlocksRunsOnEachItemsLastOnes) {
  const std::vector<int64_t> own = {3, 0, -1, 2, 1};
  const std::vector<double> want = {3 + 20, 0, 4 + 20, 2 + 20, 1 + 10};
  TensorData ones{32, 32 * 4 * 4, Precision::kBf16, std::vector<double>(32 * 32 * 4 * 4, 1.0)};
  const Composition c = Counter(4, own, false, /*bonus_last=*/2);
  absl::StatusOr<TensorMap> vm = RunComposition(c, 32, 32, {{"b", ones}});
  ASSERT_TRUE(vm.ok()) << vm.status();
  const Target target = WormholeLike(1, 4);
  absl::StatusOr<SimResult> r = Simulate(c, target, {{"b", ones}}, SimOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(vm->at("y").values[i * 32 * 32], want[i]) << "VM, item " << i;
    EXPECT_EQ(r->outputs.at("y").values[i * 32 * 32], want[i]) << "machine, item " << i;
  }
  // 3 + 0 + 4 + 2 + 1 blocks run the bonus on every block; on the last two of each, 2 + 0 + 2 + 2 + 1.
  const int64_t every = TimeOnly(Counter(4, own, false, /*bonus_last=*/4), target).stage_invocations();
  EXPECT_EQ(every - TimeOnly(c, target).stage_invocations(), (3 + 0 + 4 + 2 + 1) - (2 + 0 + 2 + 2 + 1));
}

// Many items, each folding a different long count, would expand to a schedule per count: refused by message, before
// memory runs out, as one over-long fold is.
TEST(ItemBlocks, TooManyDifferentLongCountsAreRefused) {
  std::vector<int64_t> own;
  for (int64_t i = 0; i < 8192; ++i) own.push_back(4096 + i);
  SimOptions o;
  o.timing_only = true;
  absl::StatusOr<SimResult> r = Simulate(Counter(1 << 14, own, false), WormholeLike(1, 1), {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("different fold counts expand to more than"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace spatial
