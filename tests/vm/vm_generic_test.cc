// Generic stages: maps, broadcasts, reductions, lazy Select, indirect element access, guards, integer ops and
// transforms. Every tensor here is at most one tile row high (tile 4x4), so a page is the tensor itself.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/vm/vm.h"
#include "spatial/builder.h"
#include "spatial/maps.h"

namespace spatial {
namespace {

constexpr Precision kF = Precision::kFp32;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct In {
  std::string name;
  int64_t rows, cols;
  std::vector<double> values;
};

// Loads every input whole into its own buffer, runs one Generic ("g", stage #len(ins)) whose slot i reads input
// slot_input[i], and stores its page into y (out_rows x out_cols). Section "s", one item.
Composition OneGeneric(const std::vector<In>& ins, std::vector<int> slot_input, int64_t out_rows, int64_t out_cols,
                       std::vector<IterSpec> iters, std::vector<ElemAccess> maps, ElemAccess out, Body body) {
  Template t(4, 4);
  std::vector<BufferId> bufs;
  for (const In& in : ins) {
    TensorId id = t.AddTensor(in.name, TensorRole::kInput, in.rows, in.cols, kF, TensorInit::External());
    BufferId b = t.AddBuffer("buf_" + in.name, t.TilesOf(in.cols), kF);
    t.AddLoad("load_" + in.name, id, {}, t.TilesOf(in.cols), b);
    bufs.push_back(b);
  }
  TensorId y = t.AddTensor("y", TensorRole::kOutput, out_rows, out_cols, kF, TensorInit::Zero());
  BufferId ob = t.AddBuffer("out", t.TilesOf(out_cols), kF);
  std::vector<BufferId> slot_bufs;
  for (int i : slot_input) slot_bufs.push_back(bufs[i]);
  t.AddGeneric("g", std::move(iters), slot_bufs, std::move(maps), std::move(out), std::move(body), ob);
  t.AddStore("store", y, {}, t.TilesOf(out_cols), ob);
  return Single(t.Finish("s", WholeRow(1), kF, NumericsClaim::Approx("test")));
}

TensorMap Inputs(const std::vector<In>& ins) {
  TensorMap m;
  for (const In& in : ins) m[in.name] = TensorData{in.rows, in.cols, kF, in.values};
  return m;
}

absl::StatusOr<std::vector<double>> RunY(const Composition& c, const std::vector<In>& ins) {
  auto out = RunComposition(c, 4, 4, Inputs(ins));
  if (!out.ok()) return out.status();
  return out->at("y").values;
}

bool Has(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

ElemAccess RowOnly(int64_t coef) { return {0, {{LoopVar::kRow, coef}}, std::nullopt}; }

// y(r, c) = x[c] + 10 w[r]: x's map has no ROW term (broadcast down), w's no COL term (broadcast across).
TEST(VmGeneric, MissingTermBroadcasts) {
  std::vector<In> ins = {{"x", 1, 4, {1, 2, 3, 4}}, {"w", 1, 4, {0, 1, 2, 3}}};
  Composition c = OneGeneric(ins, {0, 1}, 4, 4, TileSpace(4, 4), {PerColMap(), RowOnly(1)}, IdentMap(4),
                             Add(Op(0), Mul(Const(10), Op(1))));
  auto y = RunY(c, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24, 31, 32, 33, 34}));
}

TEST(VmGeneric, SumOverColumnsAndOverRows) {
  std::vector<In> ins = {{"x", 4, 4, {1, 2, 3, 4, 10, 20, 30, 40, -1, -1, -1, -1, 0.5, 0.25, 0, 0}}};
  // Per-row sums land at (r, 0).
  Composition rows = OneGeneric(ins, {0}, 4, 4, HeadSpace(4, 4, IterKind::kReduceSum), {IdentMap(4)},
                                PerRowMap(4), Op(0));
  auto y = RunY(rows, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{10, 0, 0, 0, 100, 0, 0, 0, -4, 0, 0, 0, 0.75, 0, 0, 0}));
  // Folding ROW leaves one value per column in row 0: the flat 1 x n layout.
  Composition cols = OneGeneric(ins, {0}, 1, 4,
                                {{LoopVar::kRow, 4, IterKind::kReduceSum}, {LoopVar::kCol, 4, IterKind::kParallel}},
                                {IdentMap(4)}, PerColMap(), Op(0));
  auto z = RunY(cols, ins);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(*z, (std::vector<double>{10.5, 21.25, 32, 43}));
}

TEST(VmGeneric, MaxIgnoresNaN) {
  std::vector<In> ins = {{"x", 4, 4, {1, kNaN, 3, 2, kNaN, kNaN, kNaN, kNaN, -5, -7, -1, -3, kNaN, -2, kNaN, -4}}};
  Composition c = OneGeneric(ins, {0}, 4, 1, HeadSpace(4, 4, IterKind::kReduceMax), {IdentMap(4)}, PerRowMap(4),
                             Op(0));
  auto y = RunY(c, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->size(), 4u);
  EXPECT_EQ((*y)[0], 3);
  EXPECT_TRUE(std::isnan((*y)[1]));  // all NaN
  EXPECT_EQ((*y)[2], -1);
  EXPECT_EQ((*y)[3], -2);
}

TEST(VmGeneric, ArgMaxTakesTheFirstMaximumAndIgnoresNaN) {
  std::vector<In> ins = {{"x", 4, 4, {1, 3, 3, 2, kNaN, 0, 5, 5, -1, -1, -1, -1, kNaN, kNaN, kNaN, kNaN}}};
  Composition c = OneGeneric(ins, {0}, 4, 1, HeadSpace(4, 4, IterKind::kReduceArgMax), {IdentMap(4)},
                             PerRowMap(4), Op(0));
  auto y = RunY(c, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{1, 2, 0, 0}));
}

// Over two Reduce axes the position is linear over them in iteration order: (r, c) -> r * 3 + c.
TEST(VmGeneric, ArgMaxOverTwoAxesIsALinearPosition) {
  std::vector<In> ins = {{"x", 2, 3, {4, 1, 2, 9, 0, 9}}};
  Composition c = OneGeneric(ins, {0}, 1, 1,
                             {{LoopVar::kRow, 2, IterKind::kReduceArgMax}, {LoopVar::kCol, 3, IterKind::kReduceArgMax}},
                             {IdentMap(4)}, ConstMap(), Op(0));
  auto y = RunY(c, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{3}));
}

// COL < 2 ? x[c] : x[c - 2]. The else map reads offset c - 2, negative for c < 2: not a fault, since the branch
// is not taken there. Swapping the branches makes the taken branch read offset -2 at c = 0: a fault.
TEST(VmGeneric, SelectIsLazy) {
  std::vector<In> ins = {{"x", 1, 6, {5, 6, 7, 8, 9, 10}}};
  ElemAccess back2{-2, {{LoopVar::kCol, 1}}, std::nullopt};
  Composition lazy = OneGeneric(ins, {0, 0}, 1, 6, FlatSpace(6), {At(0), back2}, At(0),
                                Select(Pred::Lt(LoopVar::kCol, 2), Op(0), Op(1)));
  auto y = RunY(lazy, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{5, 6, 5, 6, 7, 8}));

  Composition eager = OneGeneric(ins, {0, 0}, 1, 6, FlatSpace(6), {At(0), back2}, At(0),
                                 Select(Pred::Lt(LoopVar::kCol, 2), Op(1), Op(0)));
  auto fault = RunY(eager, ins);
  ASSERT_FALSE(fault.ok());
  EXPECT_EQ(fault.status().message(),
            "IndexOutOfRange: section 's' item 0 stage 'g' (#1): slot 1: offset -2 outside its page [0, 32) at "
            "(ROW=0, COL=0)");
}

// COL < n ? x[c] : -1 with n read from a slot; and COL >= n ? 1 : 0.
TEST(VmGeneric, SelectAgainstAnOperand) {
  std::vector<In> ins = {{"x", 1, 6, {5, 6, 7, 8, 9, 10}}, {"n", 1, 1, {3}}};
  Composition lt = OneGeneric(ins, {0, 1}, 1, 6, FlatSpace(6), {At(0), Fixed(0)}, At(0),
                              Select(Pred::LtOperand(LoopVar::kCol, 1), Op(0), Const(-1)));
  auto y = RunY(lt, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{5, 6, 7, -1, -1, -1}));
  Composition ge = OneGeneric(ins, {0, 1}, 1, 6, FlatSpace(6), {At(0), Fixed(0)}, At(0),
                              Select(Pred::GeOperand(LoopVar::kCol, 1), Const(1), Const(0)));
  auto z = RunY(ge, ins);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(*z, (std::vector<double>{0, 0, 0, 1, 1, 1}));
}

// y[c] = table[idx[c]]: slot 0 reads the table at 0 + 1 * v, v = slot 1's value at c, admitted in [0, 8).
TEST(VmGeneric, IndirectElementAccessAndItsModulus) {
  auto gather = [](std::vector<double> idx) {
    std::vector<In> ins = {{"table", 1, 8, {10, 11, 12, 13, 14, 15, 16, 17}}, {"idx", 1, 4, std::move(idx)}};
    Composition c = OneGeneric(ins, {0, 1}, 1, 4, FlatSpace(4), {WithIndirect(Fixed(0), 1, 1, 8), At(0)}, At(0),
                               Op(0));
    return RunY(c, ins);
  };
  auto y = gather({3, 0, 7, 5});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{13, 10, 17, 15}));

  auto fault = gather({3, 0, 8, 5});
  ASSERT_FALSE(fault.ok());
  EXPECT_EQ(fault.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(fault.status().message(),
            "IndexOutOfRange: section 's' item 0 stage 'g' (#2): slot 0: index value 8 (read through slot 1) not in "
            "[0, 8) at (ROW=0, COL=2)");
  auto negative = gather({-1, 0, 0, 0});
  ASSERT_FALSE(negative.ok());
  EXPECT_TRUE(Has(negative.status(), "index value -1 (read through slot 1) not in [0, 8) at (ROW=0, COL=0)"));
  auto fraction = gather({0.5, 0, 0, 0});
  ASSERT_FALSE(fraction.ok());
  EXPECT_TRUE(Has(fraction.status(), "index value 0.5 (read through slot 1) is not an integer"));
}

// A stride-0 term moves nothing; it only checks g in [0, 4).
TEST(VmGeneric, StrideZeroIsAPureGuard) {
  auto guarded = [](double g) {
    std::vector<In> ins = {{"x", 1, 4, {1, 2, 3, 4}}, {"g", 1, 1, {g}}};
    Composition c = OneGeneric(ins, {0, 1}, 1, 4, FlatSpace(4), {WithIndirect(At(0), 1, 0, 4), Fixed(0)}, At(0),
                               Op(0));
    return RunY(c, ins);
  };
  auto y = guarded(3);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{1, 2, 3, 4}));
  auto high = guarded(4);
  ASSERT_FALSE(high.ok());
  EXPECT_TRUE(Has(high.status(), "slot 0: index value 4 (read through slot 1) not in [0, 4)")) << high.status();
  EXPECT_FALSE(guarded(-1).ok());
}

TEST(VmGeneric, FloorDivAndShrRoundTowardMinusInfinity) {
  std::vector<In> ins = {{"x", 1, 5, {-7, 7, -8, -1, 5}}, {"d", 1, 5, {2, 2, 2, 2, 0}}};
  Composition div = OneGeneric(ins, {0}, 1, 5, FlatSpace(5), {At(0)}, At(0), FloorDiv(Op(0), Const(2)));
  auto y = RunY(div, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{-4, 3, -4, -1, 2}));
  Composition shr = OneGeneric(ins, {0}, 1, 5, FlatSpace(5), {At(0)}, At(0), Shr(Op(0), 2));
  auto z = RunY(shr, ins);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(*z, (std::vector<double>{-2, 1, -2, -1, 1}));

  Composition by_zero = OneGeneric(ins, {0, 1}, 1, 5, FlatSpace(5), {At(0), At(0)}, At(0), FloorDiv(Op(0), Op(1)));
  auto fault = RunY(by_zero, ins);
  ASSERT_FALSE(fault.ok());
  EXPECT_EQ(fault.status().message(),
            "DivisionByZero: section 's' item 0 stage 'g' (#2): FloorDiv of 5 by zero at (ROW=0, COL=4)");
}

TEST(VmGeneric, MinMaxPreferNumbersOverNaN) {
  std::vector<In> ins = {{"a", 1, 3, {1, kNaN, kNaN}}, {"b", 1, 3, {2, 4, kNaN}}};
  Composition mx = OneGeneric(ins, {0, 1}, 1, 3, FlatSpace(3), {At(0), At(0)}, At(0), Max(Op(0), Op(1)));
  auto y = RunY(mx, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ((*y)[0], 2);
  EXPECT_EQ((*y)[1], 4);
  EXPECT_TRUE(std::isnan((*y)[2]));
  Composition mn = OneGeneric(ins, {0, 1}, 1, 3, FlatSpace(3), {At(0), At(0)}, At(0), Min(Op(0), Op(1)));
  auto z = RunY(mn, ins);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ((*z)[0], 1);
  EXPECT_EQ((*z)[1], 4);
}

TEST(VmGeneric, EachSfpuKind) {
  std::vector<In> ins = {{"x", 1, 4, {0, 1, 2, 16}}};
  auto run = [&](SfpuKind k) { return RunY(OneGeneric(ins, {0}, 1, 4, FlatSpace(4), {At(0)}, At(0), Unary(k, Op(0))), ins); };
  auto e = run(SfpuKind::Exp());
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)[0], 1.0);
  EXPECT_DOUBLE_EQ((*e)[1], 2.718281828459045);
  EXPECT_DOUBLE_EQ((*e)[2], 7.38905609893065);
  auto l = run(SfpuKind::Ln());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)[0], -std::numeric_limits<double>::infinity());
  EXPECT_EQ((*l)[1], 0.0);
  EXPECT_DOUBLE_EQ((*l)[2], 0.6931471805599453);
  auto r = run(SfpuKind::Recip());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[2], 0.5);
  EXPECT_EQ((*r)[3], 0.0625);
  // 1/sqrt(x/4 + 0): 16 -> 1/2, 1 -> 2; with eps 0.75 (750000000 nano): 1 -> 1/sqrt(1) = 1.
  auto q = run(SfpuKind::Rsqrt(0, 4));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)[3], 0.5);
  EXPECT_EQ((*q)[1], 2.0);
  auto qe = run(SfpuKind::Rsqrt(750000000, 4));
  ASSERT_TRUE(qe.ok()) << qe.status();
  EXPECT_DOUBLE_EQ((*qe)[1], 1.0);
  EXPECT_DOUBLE_EQ((*qe)[0], 1.0 / std::sqrt(0.75));
  // silu(x) = x / (1 + e^-x): silu(0) = 0, silu(1) = 0.7310585786300049.
  auto s = run(SfpuKind::Silu());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0], 0.0);
  EXPECT_DOUBLE_EQ((*s)[1], 0.7310585786300049);
  EXPECT_DOUBLE_EQ((*s)[2], 2.0 / (1.0 + std::exp(-2.0)));
}

// A contraction: [ROW 2, COL 2, K 3 Reduce Sum], C(r, c) = sum_k A(r, k) B(k, c) with A, B flat in one row.
// A = [[1, 2, 3], [4, 5, 6]], B = [[1, 0], [0, 1], [1, 1]]: C = [[4, 5], [10, 11]].
TEST(VmGeneric, ThreeAxisContraction) {
  std::vector<In> ins = {{"a", 1, 6, {1, 2, 3, 4, 5, 6}}, {"b", 1, 6, {1, 0, 0, 1, 1, 1}}};
  Composition c = OneGeneric(
      ins, {0, 1}, 1, 4,
      {{LoopVar::kRow, 2, IterKind::kParallel}, {LoopVar::kCol, 2, IterKind::kParallel},
       {LoopVar::kK, 3, IterKind::kReduceSum}},
      {{0, {{LoopVar::kRow, 3}, {LoopVar::kK, 1}}, std::nullopt}, {0, {{LoopVar::kK, 2}, {LoopVar::kCol, 1}}, std::nullopt}},
      {0, {{LoopVar::kRow, 2}, {LoopVar::kCol, 1}}, std::nullopt}, Mul(Op(0), Op(1)));
  auto y = RunY(c, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{4, 5, 10, 11}));
}

// A stage that reads and rewrites one buffer sees the page as it was before the stage: new[c] = old[c - 1]
// shifts right by one (an in-place update would smear old[0] along the row).
TEST(VmGeneric, AStageReadsTheOldPageOfTheBufferItRewrites) {
  Template t(4, 4);
  TensorId x = t.AddTensor("x", TensorRole::kInput, 1, 6, kF, TensorInit::External());
  TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 6, kF, TensorInit::Zero());
  BufferId a = t.AddBuffer("a", 2, kF);
  BufferId carry = t.AddScratchDeep("carry", 2, 2, kF);
  t.AddLoad("load", x, {}, 2, a);
  t.AddGeneric("copy", FlatSpace(6), {a}, {At(0)}, At(0), Op(0), carry);
  t.AddGeneric("shift", FlatSpace(6), {carry}, {At(-1)}, At(0), Select(Pred::Lt(LoopVar::kCol, 1), Const(0), Op(0)),
               carry);
  t.AddStore("store", y, {}, 2, carry);
  Composition c = Single(t.Finish("s", WholeRow(2), kF, NumericsClaim::Exact()));
  auto out = RunComposition(c, 4, 4, {{"x", TensorData{1, 6, kF, {1, 2, 3, 4, 5, 6}}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y").values, (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

// Variables a Generic does not iterate (the item, the block, an absent axis) read as zero in its maps.
TEST(VmGeneric, NonIteratedVariablesReadAsZero) {
  std::vector<In> ins = {{"x", 1, 4, {1, 2, 3, 4}}};
  ElemAccess with_item{0, {{LoopVar::kCol, 1}, {LoopVar::kItemX, 100}, {LoopVar::kK, 50}}, std::nullopt};
  Composition c = OneGeneric(ins, {0}, 1, 4, FlatSpace(4), {with_item}, At(0), Op(0));
  auto y = RunY(c, ins);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(*y, (std::vector<double>{1, 2, 3, 4}));
}

// An out map outside its page is a fault, like an input's.
TEST(VmGeneric, OutMapOutsideThePageFaults) {
  std::vector<In> ins = {{"x", 1, 4, {1, 2, 3, 4}}};
  Composition c = OneGeneric(ins, {0}, 1, 4, FlatSpace(4), {At(0)}, At(14), Op(0));
  auto y = RunY(c, ins);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().message(),
            "IndexOutOfRange: section 's' item 0 stage 'g' (#1): out map: offset 16 outside its page [0, 16) at "
            "(ROW=0, COL=2)");
}

// The rounding hooks: a model that rounds every stored value to an integer and whose adds also add 1000.
class ToyModel final : public ValueModel {
 public:
  bool exact() const override { return false; }
  void StoreRound(Precision, double* v, int64_t n) const override {
    for (int64_t i = 0; i < n; ++i) v[i] = std::round(v[i]);
  }
  double Arith(BodyOp op, double a, double b, Precision) const override {
    switch (op) {
      case BodyOp::kAdd: return a + b + 1000;
      case BodyOp::kSub: return a - b;
      case BodyOp::kMul: return a * b;
      case BodyOp::kMin: return std::fmin(a, b);
      case BodyOp::kMax: return std::fmax(a, b);
      default: return std::floor(a / b);
    }
  }
  double Sfpu(const SfpuKind&, double, Precision) const override { return 42.25; }
  void MatmulTile(const double*, int64_t, const double*, int64_t, bool, double*, int64_t, int64_t, int64_t, int64_t,
                  Precision, MathFidelity) const override {}
};

// VmOptions.follow: once a section stores a followed tensor, the run takes the given values for it, and the sections
// after it read those (the simulator's comparison follows the machine's routing so).
TEST(VmGeneric, AFollowedTensorTakesTheGivenValues) {
  const std::vector<In> ins = {{"x", 1, 3, {1, 2, 3}}};
  Composition c = OneGeneric(ins, {0}, 1, 3, FlatSpace(3), {At(0)}, At(0), Add(Op(0), Const(1.0)));
  // The second section reads the first's result "y" and writes "z" = 2y.
  Template t(4, 4);
  const TensorId y = t.AddTensor("y", TensorRole::kInput, 1, 3, kF, TensorInit::External());
  const TensorId z = t.AddTensor("z", TensorRole::kOutput, 1, 3, kF, TensorInit::Zero());
  const BufferId in = t.AddBuffer("in_y", 1, kF);
  const BufferId out = t.AddBuffer("out", 1, kF);
  t.AddLoad("load_y", y, {}, 1, in);
  t.AddGeneric("twice", FlatSpace(3), {in}, {At(0)}, At(0), Mul(Op(0), Const(2.0)), out);
  t.AddStore("store", z, {}, 1, out);
  c.sections.push_back(Single(t.Finish("s2", WholeRow(1), kF, NumericsClaim::Approx("test"))).sections[0]);
  auto free = RunComposition(c, 4, 4, Inputs(ins));
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_EQ(free->at("z").values, (std::vector<double>{4, 6, 8}));
  TensorMap given;
  given["y"] = TensorData{1, 3, kF, {10, 20, 30}};
  VmOptions o;
  o.follow = &given;
  auto followed = RunComposition(c, 4, 4, Inputs(ins), o);
  ASSERT_TRUE(followed.ok()) << followed.status();
  EXPECT_EQ(followed->at("y").values, (std::vector<double>{10, 20, 30}));
  EXPECT_EQ(followed->at("z").values, (std::vector<double>{20, 40, 60}));
  // Given values of another shape are a malformed request, named.
  given["y"] = TensorData{1, 2, kF, {1, 2}};
  auto bad = RunComposition(c, 4, 4, Inputs(ins), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status(), "the followed values of tensor 'y' are 2 elements; it has 3")) << bad.status();
}

TEST(VmGeneric, NonExactModelsRoundAndComputeThroughTheHooks) {
  static const ToyModel kToy;
  VmOptions toy;
  toy.model = &kToy;
  std::vector<In> ins = {{"x", 1, 3, {1.4, 2.6, 3}}};
  TensorMap in = Inputs(ins);
  Composition add = OneGeneric(ins, {0}, 1, 3, FlatSpace(3), {At(0)}, At(0), Add(Op(0), Const(0.2)));
  auto y = RunComposition(add, 4, 4, in, toy);
  ASSERT_TRUE(y.ok()) << y.status();
  // Inputs round on the way in (1, 3, 3); then + 0.2 + 1000, rounded into the page.
  EXPECT_EQ(y->at("y").values, (std::vector<double>{1001, 1003, 1003}));
  EXPECT_EQ(y->at("x").values, (std::vector<double>{1, 3, 3}));
  Composition exp = OneGeneric(ins, {0}, 1, 3, FlatSpace(3), {At(0)}, At(0), Unary(SfpuKind::Exp(), Op(0)));
  auto z = RunComposition(exp, 4, 4, in, toy);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->at("y").values, (std::vector<double>{42, 42, 42}));
  // Reductions fold through Arith too: 1000 + (1000 + (0 + 1 ...)).
  Composition sum = OneGeneric(ins, {0}, 1, 1, HeadSpace(1, 3, IterKind::kReduceSum), {At(0)}, ConstMap(), Op(0));
  auto s = RunComposition(sum, 4, 4, in, toy);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->at("y").values, (std::vector<double>{3007}));
}

// A run input no section stores is read in place when its values are already at its precision (the VM then holds
// no copy of a mixture's expert tables): the values are the same as the copied path's, the input is still returned
// whole (or left out with results_only), and a tensor the program stores is never written through to the caller's.
TEST(VmGeneric, ReadOnlyInputsAtTheirPrecisionAreReadInPlace) {
  static const ToyModel kToy;
  VmOptions toy;
  toy.model = &kToy;
  const std::vector<In> ins = {{"x", 1, 3, {1, 3, 3}}};  // integers: what the toy model's stores leave
  const TensorMap in = Inputs(ins);
  Composition add = OneGeneric(ins, {0}, 1, 3, FlatSpace(3), {At(0)}, At(0), Add(Op(0), Const(0.2)));
  auto y = RunComposition(add, 4, 4, in, toy);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->at("y").values, (std::vector<double>{1001, 1003, 1003}));
  EXPECT_EQ(y->at("x").values, (std::vector<double>{1, 3, 3}));
  VmOptions results = toy;
  results.results_only = true;
  auto only = RunComposition(add, 4, 4, in, results);
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_EQ(only->size(), 1u);
  EXPECT_EQ(only->at("y").values, (std::vector<double>{1001, 1003, 1003}));

  // A state the program loads and stores back: its given values are copied, and the caller's stay as they were.
  Template t(4, 4);
  const TensorId st = t.AddTensor("s", TensorRole::kState, 1, 3, kF, TensorInit::External());
  const BufferId b = t.AddBuffer("in_s", 1, kF);
  const BufferId o = t.AddBuffer("out", 1, kF);
  t.AddLoad("load_s", st, {}, 1, b);
  t.AddGeneric("bump", FlatSpace(3), {b}, {At(0)}, At(0), Add(Op(0), Const(1.0)), o);
  t.AddStore("store_s", st, {}, 1, o);
  Composition state = Single(t.Finish("s", WholeRow(1), kF, NumericsClaim::Approx("test")));
  DeclareStateOrder(state);
  TensorMap given;
  given["s"] = TensorData{1, 3, kF, {1, 2, 3}};
  auto bumped = RunComposition(state, 4, 4, given, toy);
  ASSERT_TRUE(bumped.ok()) << bumped.status();
  EXPECT_EQ(bumped->at("s").values, (std::vector<double>{1002, 1003, 1004}));
  EXPECT_EQ(given.at("s").values, (std::vector<double>{1, 2, 3}));
}

}  // namespace
}  // namespace spatial
