// Loads, stores, work items, indirect tile loads, inputs, and tensors shared across sections. Tile 4x4.
#include <cmath>
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
TensorData Row(std::vector<double> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Mat(1, n, std::move(v));
}

absl::StatusOr<TensorMap> RunVm(const Composition& c, const TensorMap& in) { return RunComposition(c, 4, 4, in); }

bool Has(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// y[p] = x[p] + x[p + 2] over a 1 x 6 row: the page is 8 wide, so x[6] and x[7] are the zero padding of the
// second tile, and the store drops the page's columns 6 and 7.
TEST(VmMovement, RowCopyNotATileMultipleReadsPaddingAsZero) {
  Template t(4, 4);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 1, 6, kF, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 6, kF, TensorInit::Zero());
  BufferId a = t.AddBuffer("a", 2, kF);
  BufferId b = t.AddBuffer("b", 2, kF);
  t.AddLoad("load_x", x, {}, 2, a);
  t.AddGeneric("shift_add", FlatSpace(8), {a, a}, {At(0), {2, {{LoopVar::kCol, 1}}, std::nullopt}}, At(0),
               Add(Op(0), Op(1)), b);
  t.AddStore("store_y", y, {}, 2, b);
  Composition c = Single(t.Finish("copy", WholeRow(2), kF, NumericsClaim::Exact()));
  auto out = RunVm(c, {{"x", Row({1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y").values, (std::vector<double>{4, 6, 8, 10, 5, 6}));
  EXPECT_EQ(out->at("x").values, (std::vector<double>{1, 2, 3, 4, 5, 6}));  // every tensor is returned
}

// A 6x6 tensor is a 2x2 grid of tiles, three of them clipped. One item per tile: ITEM_Y/ITEM_X pick the tile.
// y = 10 x round-trips every element; s holds each tile's total at flat element 4 * tile.
TEST(VmMovement, TiledLoadStoreWithItemSteps) {
  Template t(4, 4);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 6, 6, kF, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 6, 6, kF, TensorInit::Zero());
  TensorId s = t.AddTensor("s", TensorRole::kOutput, 1, 16, kF, TensorInit::Zero());
  BufferId a = t.AddBuffer("a", 1, kF);
  BufferId b = t.AddBuffer("b", 1, kF);
  BufferId sum = t.AddBuffer("sum", 1, kF);
  t.AddLoad("load_x", x, TileGridSteps(2), 1, a);
  t.AddGeneric("times10", TileSpace(4, 4), {a}, {IdentMap(4)}, IdentMap(4), Mul(Op(0), Const(10)), b);
  t.AddGeneric("total", {{LoopVar::kRow, 4, IterKind::kReduceSum}, {LoopVar::kCol, 4, IterKind::kReduceSum}}, {a},
               {IdentMap(4)}, ConstMap(), Op(0), sum);
  t.AddStore("store_y", y, TileGridSteps(2), 1, b);
  t.AddStore("store_s", s, TileGridSteps(2), 1, sum);
  Composition c = Single(t.Finish("tiles", ItemsPerTileGrid(2, 2), kF, NumericsClaim::Exact()));
  std::vector<double> xv(36);
  for (int r = 0; r < 6; ++r) {
    for (int col = 0; col < 6; ++col) xv[r * 6 + col] = 10 * r + col;
  }
  auto out = RunVm(c, {{"x", Mat(6, 6, xv)}});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i = 0; i < 36; ++i) EXPECT_EQ(out->at("y").values[i], 10 * xv[i]) << i;
  // Tile (0,0): 4*10*(0+1+2+3) + 4*(0+1+2+3) = 264; (0,1): rows 0-3 x cols 4-5 = 120 + 36 = 156;
  // (1,0): rows 4-5 x cols 0-3 = 360 + 12 = 372; (1,1): rows 4-5 x cols 4-5 = 180 + 18 = 198.
  std::vector<double> want(16, 0.0);
  want[0] = 264;
  want[4] = 156;
  want[8] = 372;
  want[12] = 198;
  EXPECT_EQ(out->at("s").values, want);
}

// x is 8x16 (2x4 tiles), x(r, c) = 100 r + c. A 2x2 block with stride_w 2 and stride_h 4 from tile 1 takes tiles
// 1, 3, 5, 7 into page tiles 0..3; storing the page as one 1x4 block row lays them side by side.
TEST(VmMovement, BlockLoadWithStrides) {
  Template t(4, 4);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 8, 16, kF, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 4, 16, kF, TensorInit::Zero());
  BufferId a = t.AddBuffer("a", 4, kF);
  t.AddLoadPattern("load_block", x, AccessPattern{TileAddr{1, {}, std::nullopt}, 2, 2, 2, 4}, a);
  t.AddStore("store", y, {}, 4, a);
  Composition c = Single(t.Finish("blocks", WholeRow(4), kF, NumericsClaim::Exact()));
  std::vector<double> xv(128);
  for (int r = 0; r < 8; ++r) {
    for (int col = 0; col < 16; ++col) xv[r * 16 + col] = 100 * r + col;
  }
  auto out = RunVm(c, {{"x", Mat(8, 16, xv)}});
  ASSERT_TRUE(out.ok()) << out.status();
  const auto& yv = out->at("y").values;
  EXPECT_EQ(yv[1 * 16 + 2], 106);       // page tile 0 = x tile 1: rows 0-3, cols 4-7
  EXPECT_EQ(yv[2 * 16 + 4 + 3], 215);   // page tile 1 = x tile 3: cols 12-15
  EXPECT_EQ(yv[3 * 16 + 8 + 0], 704);   // page tile 2 = x tile 5: rows 4-7, cols 4-7
  EXPECT_EQ(yv[0 * 16 + 12 + 1], 413);  // page tile 3 = x tile 7: rows 4-7, cols 12-15
  const int row0[4] = {0, 0, 4, 4}, col0[4] = {4, 12, 4, 12};
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < 4; ++k) {
      for (int cc = 0; cc < 4; ++cc) {
        EXPECT_EQ(yv[r * 16 + k * 4 + cc], 100 * (row0[k] + r) + col0[k] + cc) << r << " " << k << " " << cc;
      }
    }
  }
}

// Tile v of a 1x16 table, v read from an index page and admitted in [0, hi].
Composition IndirectGather(int64_t hi) {
  Template t(4, 4);
  TensorId x = t.AddTensor("x", TensorRole::kParam, 1, 16, kF,
                           TensorInit::FloatValues({0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33}));
  TensorId v = t.AddTensor("v", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 4, kF, TensorInit::Zero());
  BufferId ib = t.AddBuffer("ib", 1, Precision::kInt32);
  BufferId a = t.AddBuffer("a", 1, kF);
  t.AddLoad("load_v", v, {}, 1, ib);
  t.AddLoadPattern("gather", x, AccessPattern{TileAddr{0, {}, IndirectTile{ib, 1, 0, hi}}, 1, 1, 1, 1}, a);
  t.AddStore("store", y, {}, 1, a);
  return Single(t.Finish("gather", WholeRow(1), kF, NumericsClaim::Exact()));
}

TEST(VmMovement, IndirectTileLoadAndItsBound) {
  auto out = RunVm(IndirectGather(2), {{"v", Row({2})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y").values, (std::vector<double>{20, 21, 22, 23}));

  auto fault = RunVm(IndirectGather(2), {{"v", Row({3})}});
  ASSERT_FALSE(fault.ok());
  EXPECT_EQ(fault.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(fault.status().message(),
            "IndexOutOfRange: section 'gather' item 0 stage 'gather' (#1): index value 3 (element 0 of buffer "
            "'ib') not in [0, 2]");

  auto fraction = RunVm(IndirectGather(2), {{"v", Row({1.5})}});
  ASSERT_FALSE(fraction.ok());
  EXPECT_TRUE(Has(fraction.status(), "index value 1.5")) << fraction.status();
  EXPECT_TRUE(Has(fraction.status(), "is not an integer")) << fraction.status();

  // Admitted by a too-wide bound, tile 4 is past the table: the load itself faults.
  auto past = RunVm(IndirectGather(5), {{"v", Row({4})}});
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().message(),
            "TileOutOfRange: section 'gather' item 0 stage 'gather' (#1): tile 4 of tensor 'x' (4 tiles)");
}

TEST(VmMovement, LoadAddressOutsideTheTensorFaults) {
  Template t(4, 4);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 1, 8, kF, TensorInit::External());
  BufferId a = t.AddBuffer("a", 1, kF);
  t.AddLoad("load_x", x, {{LoopVar::kItemX, 1}}, 1, a);
  Composition c = Single(t.Finish("s", ItemsPerTile(3), kF, NumericsClaim::Exact()));
  auto out = RunVm(c, {{"x", Row({1, 2, 3, 4, 5, 6, 7, 8})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "TileOutOfRange: section 's' item 2 stage 'load_x' (#0): tile 2 of tensor 'x' (2 tiles)");
}

// A store through an index page: the row lands at tile pos of a 1x16 cache (set_row on a tiled cache).
TEST(VmMovement, IndirectTileStore) {
  Template t(4, 4);
  TensorId cache = t.AddTensor("cache", TensorRole::kState, 1, 16, kF, TensorInit::External());
  TensorId row = t.AddTensor("row", TensorRole::kInput, 1, 4, kF, TensorInit::External());
  TensorId pos = t.AddTensor("pos", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  BufferId ib = t.AddBuffer("ib", 1, Precision::kInt32);
  BufferId a = t.AddBuffer("a", 1, kF);
  t.AddLoad("load_pos", pos, {}, 1, ib);
  t.AddLoad("load_row", row, {}, 1, a);
  StageId st = t.AddStorePattern("set_row", cache, AccessPattern{TileAddr{0, {}, IndirectTile{ib, 1, 0, 3}}, 1, 1, 1, 1},
                                 a);
  EXPECT_EQ(t.section().stages[st].ins, (std::vector<BufferId>{a, ib}));
  Composition c = Single(t.Finish("set_row", WholeRow(1), kF, NumericsClaim::Exact()));
  std::vector<double> zeros(16, 0.0);
  auto out = RunVm(c, {{"cache", Row(zeros)}, {"row", Row({7, 8, 9, 10})}, {"pos", Row({2})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("cache").values, (std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 0, 0, 0, 0}));
  auto fault = RunVm(c, {{"cache", Row(zeros)}, {"row", Row({7, 8, 9, 10})}, {"pos", Row({4})}});
  ASSERT_FALSE(fault.ok());
  EXPECT_EQ(fault.status().message(),
            "IndexOutOfRange: section 'set_row' item 0 stage 'set_row' (#2): index value 4 (element 0 of buffer "
            "'ib') not in [0, 3]");
}

Composition Doubler() {
  Template t(4, 4);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 1, 6, kF, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 6, kF, TensorInit::Zero());
  BufferId a = t.AddBuffer("a", 2, kF);
  BufferId b = t.AddBuffer("b", 2, kF);
  t.AddLoad("load", x, {}, 2, a);
  t.AddGeneric("twice", FlatSpace(6), {a}, {At(0)}, At(0), Mul(Op(0), Const(2)), b);
  t.AddStore("store", y, {}, 2, b);
  return Single(t.Finish("double", WholeRow(2), kF, NumericsClaim::Exact()));
}

TEST(VmMovement, BadInputs) {
  const Composition c = Doubler();
  auto wrong = RunVm(c, {{"x", Row({1, 2, 3, 4, 5})}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.status().message(), "BadInput: tensor 'x': expected 1x6, got 1x5");

  auto missing = RunVm(c, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Has(missing.status(), "BadInput: tensor 'x': missing")) << missing.status();

  auto unknown = RunVm(c, {{"x", Row({1, 2, 3, 4, 5, 6})}, {"w", Row({1})}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(Has(unknown.status(), "BadInput: tensor 'w': not a tensor")) << unknown.status();

  auto output = RunVm(c, {{"x", Row({1, 2, 3, 4, 5, 6})}, {"y", Row({1, 2, 3, 4, 5, 6})}});
  ASSERT_FALSE(output.ok());
  EXPECT_TRUE(Has(output.status(), "BadInput: tensor 'y': is Output")) << output.status();

  TensorData short_values = Row({1, 2, 3});
  short_values.cols = 6;
  auto ragged = RunVm(c, {{"x", short_values}});
  ASSERT_FALSE(ragged.ok());
  EXPECT_TRUE(Has(ragged.status(), "BadInput: tensor 'x': 3 values for 1x6")) << ragged.status();

  auto ok = RunVm(c, {{"x", Row({1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->at("y").values, (std::vector<double>{2, 4, 6, 8, 10, 12}));
}

// Section "a" writes mid = 2x; section "b" declares mid as its Input and writes z = mid + 1. The run's only
// input is x: mid was produced by an earlier section.
TEST(VmMovement, SectionsShareTensorsByName) {
  Template ta(4, 4);
  TensorId x = ta.AddTensor("x", TensorRole::kInput, 1, 4, kF, TensorInit::External());
  TensorId mid = ta.AddTensor("mid", TensorRole::kOutput, 1, 4, kF, TensorInit::Zero());
  BufferId a = ta.AddBuffer("a", 1, kF);
  BufferId b = ta.AddBuffer("b", 1, kF);
  ta.AddLoad("load", x, {}, 1, a);
  ta.AddGeneric("twice", FlatSpace(4), {a}, {At(0)}, At(0), Mul(Op(0), Const(2)), b);
  ta.AddStore("store", mid, {}, 1, b);

  Template tb(4, 4);
  TensorId mid_in = tb.AddTensor("mid", TensorRole::kInput, 1, 4, kF, TensorInit::External());
  TensorId z = tb.AddTensor("z", TensorRole::kOutput, 1, 4, kF, TensorInit::Zero());
  BufferId c_in = tb.AddBuffer("a", 1, kF);
  BufferId c_out = tb.AddBuffer("b", 1, kF);
  tb.AddLoad("load", mid_in, {}, 1, c_in);
  tb.AddGeneric("plus1", FlatSpace(4), {c_in}, {At(0)}, At(0), Add(Op(0), Const(1)), c_out);
  tb.AddStore("store", z, {}, 1, c_out);

  Composition c;
  c.name = "two";
  c.sections.push_back(ta.Finish("a", WholeRow(1), kF, NumericsClaim::Exact()));
  c.sections.push_back(tb.Finish("b", WholeRow(1), kF, NumericsClaim::Exact()));
  DeclareStateOrder(c);
  auto out = RunVm(c, {{"x", Row({1, 2, 3, 4})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("mid").values, (std::vector<double>{2, 4, 6, 8}));
  EXPECT_EQ(out->at("z").values, (std::vector<double>{3, 5, 7, 9}));
  EXPECT_EQ(out->size(), 3u);
}

TEST(VmMovement, SharedNameWithAnotherShapeIsRefused) {
  Composition c = Doubler();
  Composition other = Doubler();
  other.sections[0].name = "again";
  other.sections[0].tensors[1].cols = 5;  // y: 1x5 here, 1x6 in the first section
  c.sections.push_back(other.sections[0]);
  auto out = RunVm(c, {{"x", Row({1, 2, 3, 4, 5, 6})}});
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(Has(out.status(), "BadProgram: section 'again': tensor 'y' is 1x5 here but was declared 1x6"))
      << out.status();
}

// Params take their init: Values fill row-major and the rest is zero; ConstF fills everything.
TEST(VmMovement, ParamInits) {
  Template t(4, 4);
  t.AddTensor("p", TensorRole::kParam, 2, 3, Precision::kInt32, TensorInit::Values({7, -1, 4}));
  t.AddTensor("q", TensorRole::kParam, 1, 3, kF, TensorInit::ConstF(0.25));
  t.AddTensor("r", TensorRole::kParam, 1, 3, kF, TensorInit::FloatValues({1.5}));
  Composition c = Single(t.Finish("inits", {}, kF, NumericsClaim::Exact()));
  auto out = RunVm(c, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("p").values, (std::vector<double>{7, -1, 4, 0, 0, 0}));
  EXPECT_EQ(out->at("p").precision, Precision::kInt32);
  EXPECT_EQ(out->at("q").values, (std::vector<double>{0.25, 0.25, 0.25}));
  EXPECT_EQ(out->at("r").values, (std::vector<double>{1.5, 0, 0}));
}

}  // namespace
}  // namespace spatial
