// The column-blocked pointwise stage (lowerings/pointwise.h) on its own: constant band bounds, a bound the section
// computes, and a gather already indexed by data, in result columns, run on the VM one item per block and compared
// with the same formula written directly.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/toolkit/pointwise.h"
#include "spatial/maps.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

// y[r] = 2 x[r] for r < 5, x[r + S] for r < K, -x[r] after: x is 1 x (n + 8), K and S one-element int32 inputs.
absl::StatusOr<Composition> Mix(int64_t n, const Target& target) {
  ASSIGN_OR_RETURN(ColumnBuild b, ColumnBuild::Columns(n, target));
  ASSIGN_OR_RETURN(BufferId x, b.flat().Input("x", n + 8, proto::Fill()));
  ASSIGN_OR_RETURN(BufferId s, b.flat().InputPaged("s", 1, proto::Fill(), Precision::kInt32, 2));
  ASSIGN_OR_RETURN(BufferId k, b.flat().InputPaged("k", 1, proto::Fill(), Precision::kInt32, 2));
  BufferId out = b.ResultPage("out", n, b.flat().precision());
  std::vector<Slot> slots{Slot{x, WithIndirect(At(0), 2, 1, 8)}, Slot{x, At(0)}, Slot{s, Fixed(0)}, Slot{k, Fixed(0)}};
  Body body = Select(Pred::Lt(LoopVar::kCol, 5), Mul(Op(1), Const(2.0)),
                     Select(Pred::LtOperand(LoopVar::kCol, 3), Op(0), Sub(Const(0.0), Op(1))));
  ASSIGN_OR_RETURN(std::vector<StageId> chain, b.Pointwise("mix", n, std::move(slots), body, out));
  return b.Finish("y", n, chain, out, absl::StrCat("mix_", n), ApproxIn("mix", b.flat().precision()));
}

struct MixCase {
  const char* target;
  int64_t n;
  size_t items;
};

TEST(PointwiseTest, BlockedStageMatchesTheFormula) {
  const std::vector<MixCase> cases = {{"test_tiny", 20, 1},      {"test_tiny", 32, 1},  {"test_tiny", 64, 2},
                                      {"test_tiny", 100, 13},    {"test_tiny", 9, 1},   {"wormhole_n150", 1000, 4},
                                      {"wormhole_n150", 300, 2}};
  for (const MixCase& mc : cases) {
    const Target& t = Shipped(mc.target);
    SCOPED_TRACE(absl::StrCat(mc.n, " on ", mc.target));
    absl::StatusOr<Composition> c = Mix(mc.n, t);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(ValidateComposition(*c, t.tile_rows(), t.tile_cols()).ok());
    EXPECT_EQ(c->sections[0].items.size(), mc.items);
    ExpectCertifies(*c, t);
    for (int64_t kk : {int64_t{0}, int64_t{7}, mc.n / 2, mc.n}) {
      for (int64_t ss : {0, 3, 7}) {
        TensorMap in;
        Rng rng(static_cast<uint64_t>(mc.n * 100 + kk * 10 + ss));
        TensorData x{1, mc.n + 8, Precision::kBf16, std::vector<double>(mc.n + 8)};
        for (double& v : x.values) v = rng.Real(-10, 10);
        in["x"] = x;
        in["s"] = TensorData{1, 1, Precision::kInt32, {static_cast<double>(ss)}};
        in["k"] = TensorData{1, 1, Precision::kInt32, {static_cast<double>(kk)}};
        absl::StatusOr<TensorMap> vm = RunComposition(*c, t.tile_rows(), t.tile_cols(), in);
        ASSERT_TRUE(vm.ok()) << vm.status();
        const std::vector<double>& y = vm->at("y").values;
        ASSERT_EQ(static_cast<int64_t>(y.size()), mc.n);
        for (int64_t r = 0; r < mc.n; ++r) {
          const double want = r < 5 ? 2 * x.values[r] : r < kk ? x.values[r + ss] : -x.values[r];
          ASSERT_EQ(y[r], want) << "column " << r << " K " << kk << " S " << ss;
        }
      }
    }
  }
}

// The blocked form's table (one page an item: its first column, then each constant bound less it) and its moved
// stages (the computed bound and the gather index, each moved by the item's first column).
TEST(PointwiseTest, BlockedTableAndMovedStages) {
  const Target& t = Shipped("test_tiny");
  absl::StatusOr<Composition> c = Mix(64, t);  // 8 tiles against 4: two items of 4 tiles
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& s = c->sections[0];
  const Tensor& table = s.tensors[s.FindTensor("mix__columns")];
  EXPECT_EQ(table.role, TensorRole::kParam);
  EXPECT_EQ(table.precision, Precision::kInt32);
  ASSERT_EQ(table.init.values.size(), 16u);
  EXPECT_EQ(table.init.values[0], 0);
  EXPECT_EQ(table.init.values[1], 5);
  EXPECT_EQ(table.init.values[8], 32);
  EXPECT_EQ(table.init.values[9], 5 - 32);
  EXPECT_GE(s.FindStage("mix_index0"), 0);
  EXPECT_GE(s.FindStage("mix_bound3"), 0);
  const Generic& g = std::get<Generic>(s.stages[s.FindStage("mix")].op);
  // [o, 5 - o, x (gathered through the moved index), x, s, k, moved index, moved bound]
  ASSERT_EQ(g.ins.size(), 8u);
  EXPECT_EQ(g.ins[3].indirect, (IndirectTerm{0, 1, 4 * 8 * 2 + 1}));
  // The gather: base kept (an all-positive move needs no lift), the moved index (slot 6) admitted [0, span + 7].
  EXPECT_EQ(g.ins[2].base, 0);
  EXPECT_EQ(g.ins[2].indirect, (IndirectTerm{6, 1, 64 + 7 + 1}));
  EXPECT_EQ(g.iters[1].extent, 32);
  const Store& st = std::get<Store>(s.stages[s.FindStage("store_y")].op);
  EXPECT_EQ(st.pattern.origin.steps, (std::vector<Term>{{LoopVar::kItemX, 4}}));
  EXPECT_EQ(s.items[1].out, (TileRect{0, 4, 1, 4}));
}

TEST(PointwiseTest, ConstantColumnBounds) {
  const Body b = Select(Pred::Lt(LoopVar::kCol, 9), Op(0),
                        Select(Pred::Ge(LoopVar::kCol, 4), Select(Pred::Lt(LoopVar::kCol, 9), Op(1), Op(2)),
                               Select(Pred::Lt(LoopVar::kRow, 3), Op(1), Op(0))));
  EXPECT_EQ(ConstantColumnBounds(b), (std::vector<int64_t>{9, 4}));
  EXPECT_TRUE(ConstantColumnBounds(Op(0)).empty());
}

TEST(PointwiseTest, BlocksFollowTheAccumulator) {
  EXPECT_FALSE(ColumnBlocksFor(32, Shipped("test_tiny")).has_value());
  EXPECT_EQ(ColumnBlocksFor(33, Shipped("test_tiny")), (ColumnBlocks{1, 5}));
  EXPECT_EQ(ColumnBlocksFor(96, Shipped("test_tiny")), (ColumnBlocks{4, 3}));
  // Qwen3.8's 5120: 160 tiles, 20 items of 8.
  EXPECT_EQ(ColumnBlocksFor(5120, Shipped("wormhole_n150")), (ColumnBlocks{8, 20}));
}

}  // namespace
}  // namespace spatial::testing
