// Element maps under Select (lazy bands), indirect terms and their guards, and integer index arithmetic.
#include <algorithm>
#include <optional>
#include <vector>

#include "certify/certify.h"
#include "gtest/gtest.h"
#include "spatial/limits.h"
#include "tests/certify/test_programs.h"

namespace spatial {
namespace {

using certify_testing::Explain;
using certify_testing::IntRow;
using certify_testing::OnlyCode;
using certify_testing::Scale2;
using certify_testing::Tiny;

// Scale2 with its Generic replaced: slots all read `in` (a 128-element page: 8 rows x 16 columns).
CertifyResult WithBody(std::vector<ElemAccess> maps, Body body, ElemAccess out = At(0)) {
  Scale2 p;
  Section& s = p.t.mutable_section();
  s.stages[p.gen].ins.assign(maps.size(), p.in);
  Generic& g = std::get<Generic>(s.stages[p.gen].op);
  g.ins = std::move(maps);
  g.body = std::move(body);
  g.out = std::move(out);
  return Certify(p.Build(), Tiny());
}

TEST(Select, BandReadsOutOfRangeOnlyInTheBranchNotTaken) {
  // Columns [8, 16) read column c - 8: negative offsets for c < 8, which only the other band covers.
  CertifyResult ok = WithBody({At(0), At(-8)}, Banded({{8, Op(0)}, {0, Op(1)}}));
  EXPECT_TRUE(ok.ok()) << Explain(ok);
  EXPECT_EQ(ok.certificate.sections(0).element_reads_proven(), 2);

  CertifyResult r = WithBody({At(0), At(-8)}, Op(1));
  ASSERT_TRUE(OnlyCode(r, "INDEX_OUT_OF_RANGE"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "scale");
  EXPECT_EQ(r.diagnostics[0].field(), "ins[1]");
  EXPECT_EQ(r.diagnostics[0].expected(), "in [0, 128)");
  EXPECT_EQ(r.diagnostics[0].actual(), "[-8, 7]");
}

TEST(Select, AxisGeNarrowsTheThenBranch) {
  CertifyResult ok = WithBody({At(0), At(-8)}, Select(Pred::Ge(LoopVar::kCol, 8), Op(1), Op(0)));
  EXPECT_TRUE(ok.ok()) << Explain(ok);
  // The same maps with the branches swapped read c - 8 for c < 8.
  CertifyResult r = WithBody({At(0), At(-8)}, Select(Pred::Ge(LoopVar::kCol, 8), Op(0), Op(1)));
  ASSERT_TRUE(OnlyCode(r, "INDEX_OUT_OF_RANGE"));
  EXPECT_EQ(r.diagnostics[0].actual(), "[-8, -1]");
}

TEST(Select, NestedBandsEachUnderItsPathCondition) {
  // Three bands of a join: [0, 4) at c, [4, 12) at c - 4, [12, 16) at c + 100 (inside the 128-element page only
  // for c < 28, which the band's c < 16 guarantees).
  Body body = Banded({{4, Op(0)}, {12, Op(1)}, {0, Op(2)}});
  CertifyResult ok = WithBody({At(0), At(-4), At(100)}, body);
  EXPECT_TRUE(ok.ok()) << Explain(ok);
  CertifyResult r = WithBody({At(0), At(-4), At(113)}, body);  // 113 + 15 = 128: one past the page
  ASSERT_TRUE(OnlyCode(r, "INDEX_OUT_OF_RANGE"));
  EXPECT_EQ(r.diagnostics[0].field(), "ins[2]");
  EXPECT_EQ(r.diagnostics[0].actual(), "[125, 128]");
}

TEST(Select, LongBandChainIsWalkedNotRecursed) {
  // As many bands on K as a body may be deep (spatial/limits.h: the limit the VM runs too): band k reads c for
  // K < k. Each band is proven. (A deeper chain is MALFORMED: it certified once and then could not run.)
  Scale2 p;
  Generic& g = std::get<Generic>(p.t.mutable_section().stages[p.gen].op);
  g.iters = {{LoopVar::kRow, 1, IterKind::kParallel}, {LoopVar::kCol, 16, IterKind::kParallel},
             {LoopVar::kK, kMaxBodyDepth, IterKind::kParallel}};
  Body body = Op(0);
  for (int64_t k = kMaxBodyDepth - 1; k >= 1; --k) body = Select(Pred::Lt(LoopVar::kK, k), Op(0), body);
  g.body = body;
  CertifyResult r = Certify(p.Build(), Tiny());
  EXPECT_TRUE(r.ok()) << Explain(r);
}

TEST(Select, DeadBranchReadsNothing) {
  // COL < 0 never holds: its branch is dead, however wild its map.
  CertifyResult ok = WithBody({At(0), At(-1000)}, Select(Pred::Lt(LoopVar::kCol, 0), Op(1), Op(0)));
  EXPECT_TRUE(ok.ok()) << Explain(ok);
}

// `lim` (an int32 page) bounds the band: COL < lim reads at c + 120, inside the page only for c < 8.
CertifyResult OperandBand(std::optional<std::vector<int64_t>> lim_values) {
  Scale2 p;
  const TensorId lim = lim_values ? p.t.AddTensor("lim", TensorRole::kParam, 1, 1, Precision::kInt32,
                                                  TensorInit::Values(*lim_values))
                                  : p.t.AddTensor("lim", TensorRole::kInput, 1, 1, Precision::kInt32,
                                                  TensorInit::External());
  const BufferId lb = p.t.AddBuffer("lim_buf", 1, Precision::kInt32);
  p.t.AddLoad("load_lim", lim, {}, 1, lb);
  Composition c = p.Build();
  Section& s = c.sections[0];
  // Move the new load ahead of the Generic so the limit is written before it is read.
  std::rotate(s.stages.begin(), s.stages.end() - 1, s.stages.end());
  for (Edge& e : s.edges) {
    e.from += 1;
    e.to += 1;
  }
  Stage& gen = s.stages[2];
  gen.ins = {p.in, lb};
  Generic& g = std::get<Generic>(gen.op);
  g.ins = {At(120), Fixed(0)};
  g.body = Select(Pred::LtOperand(LoopVar::kCol, 1), Op(0), Const(0.0));
  return Certify(c, Tiny());
}

TEST(Select, OperandConditionNarrowsByTheOperandsProvenRange) {
  CertifyResult ok = OperandBand(std::vector<int64_t>{3});  // lim in [0, 3]: COL <= 2 in the band
  EXPECT_TRUE(ok.ok()) << Explain(ok);
  CertifyResult wide = OperandBand(std::vector<int64_t>{9});  // COL <= 8: offset 128 reachable
  ASSERT_TRUE(OnlyCode(wide, "INDEX_OUT_OF_RANGE"));
  EXPECT_EQ(wide.diagnostics[0].actual(), "[120, 128]");
  CertifyResult unknown = OperandBand(std::nullopt);  // an Input: no bound, the whole space
  ASSERT_TRUE(OnlyCode(unknown, "INDEX_OUT_OF_RANGE"));
  EXPECT_EQ(unknown.diagnostics[0].actual(), "[120, 135]");
}

// ── Indirect terms ──────────────────────────────────────────────────────────────────────────────────────────

// Slot 0 gathers `in` at c + v, v read from an int32 index page through slot 1 and admitted in [0, modulus).
// `compile_time`: the index is a Param table (known for each item) rather than an Input (run-time data).
CertifyResult Gather(int64_t modulus, bool compile_time = false) {
  Scale2 p;
  const TensorId idx =
      compile_time ? p.t.AddTensor("idx", TensorRole::kParam, 1, 1, Precision::kInt32, TensorInit::Values({40}))
                   : p.t.AddTensor("idx", TensorRole::kInput, 1, 1, Precision::kInt32, TensorInit::External());
  const BufferId ib = p.t.AddBuffer("idx_buf", 1, Precision::kInt32);
  p.t.AddLoad("load_idx", idx, {}, 1, ib);
  Composition c = p.Build();
  Section& s = c.sections[0];
  std::rotate(s.stages.begin(), s.stages.end() - 1, s.stages.end());
  for (Edge& e : s.edges) {
    e.from += 1;
    e.to += 1;
  }
  Stage& gen = s.stages[2];
  gen.ins = {p.in, ib};
  Generic& g = std::get<Generic>(gen.op);
  g.ins = {WithIndirect(At(0), 1, 1, modulus), Fixed(0)};
  g.body = Op(0);
  return Certify(c, Tiny());
}

TEST(Indirect, AdmittedRangeKeepsTheGatherInItsPage) {
  CertifyResult ok = Gather(100);  // c + v <= 15 + 99 = 114
  ASSERT_TRUE(ok.ok()) << Explain(ok);
  const proto::SectionProof& s = ok.certificate.sections(0);
  ASSERT_EQ(s.guards_size(), 1);
  EXPECT_EQ(s.guards(0).field(), "ins[0].indirect");
  EXPECT_EQ(s.guards(0).admitted().lo(), 0);
  EXPECT_EQ(s.guards(0).admitted().hi(), 99);
  // Run-time data: only its int32 range is known, so the guard is a real run-time check.
  EXPECT_EQ(s.guards(0).proven().hi(), 2147483647);
  EXPECT_FALSE(s.guards(0).always_holds());

  // The admitted range is the contract for run-time data: 119 is admitted, and 15 + 119 leaves the page.
  CertifyResult r = Gather(120);
  ASSERT_TRUE(OnlyCode(r, "INDEX_OUT_OF_RANGE"));
  EXPECT_EQ(r.diagnostics[0].field(), "ins[0].indirect");
  EXPECT_EQ(r.diagnostics[0].actual(), "[0, 134]");
}

TEST(Indirect, CompileTimeIndexIsReadExactly) {
  // The same loose guard over a Param table holding 40: the index is known, so c + 40 <= 55 is what is read.
  CertifyResult r = Gather(120, /*compile_time=*/true);
  ASSERT_TRUE(r.ok()) << Explain(r);
  EXPECT_TRUE(r.certificate.sections(0).guards(0).always_holds());
}

// The seed's column-blocked bands (lowerings/pointwise.h): item i computes result columns [8i, 8i + 8) of a
// 16-column join: result columns < 8 read `a` at the same column, the rest read `b` at column - 8. Column c of an
// item's page is result column c + o, o and the band bound 8 - o read from the item's compile-time table, so the
// reads are in range only relationally; `bound0` is item 0's bound (8 when the table is right).
CertifyResult ColumnBlocked(int64_t bound0) {
  Template t(8, 8);
  const TensorId a = t.AddTensor("a", TensorRole::kInput, 1, 16, Precision::kBf16, TensorInit::External());
  const TensorId b = t.AddTensor("b", TensorRole::kInput, 1, 8, Precision::kBf16, TensorInit::External());
  std::vector<int64_t> table(16, 0);
  table[0] = 0;       // item 0: o
  table[1] = bound0;  // item 0: 8 - o
  table[8] = 8;       // item 1: o
  table[9] = 0;       // item 1: 8 - o
  const TensorId tab = t.AddTensor("join__columns", TensorRole::kParam, 1, 16, Precision::kInt32,
                                   TensorInit::Values(table));
  const TensorId y = t.AddTensor("y", TensorRole::kOutput, 1, 16, Precision::kBf16, TensorInit::Zero());
  const BufferId ap = t.AddBuffer("a_page", 2, Precision::kBf16);
  const BufferId bp = t.AddBuffer("b_page", 1, Precision::kBf16);
  const BufferId tp = t.AddBuffer("columns", 1, Precision::kInt32);
  const BufferId out = t.AddBuffer("out", 1, Precision::kBf16);
  t.AddLoad("load_a", a, {}, 2, ap);
  t.AddLoad("load_b", b, {}, 1, bp);
  t.AddLoad("load_columns", tab, {{LoopVar::kItemX, 1}}, 1, tp);
  t.AddGeneric("join", FlatSpace(8), {tp, tp, ap, bp},
               {Fixed(0), Fixed(1), WithIndirect(At(0), 0, 1, 17), WithIndirect(At(-8), 0, 1, 17)}, At(0),
               Select(Pred::LtOperand(LoopVar::kCol, 1), Op(2), Op(3)), out);
  t.AddStore("store_y", y, {{LoopVar::kItemX, 1}}, 1, out);
  return Certify(certify_testing::Compose(t.Finish("join", RowItems(2, 1), Precision::kFp32,
                                                   NumericsClaim::Exact())),
                 Tiny());
}

TEST(Indirect, ColumnBlockedBandsProveItemByItem) {
  CertifyResult ok = ColumnBlocked(8);
  EXPECT_TRUE(ok.ok()) << Explain(ok);
  // Item 0's bound says 4: its columns 4..7 take the `b` band at c - 8 + 0 < 0.
  CertifyResult r = ColumnBlocked(4);
  ASSERT_TRUE(OnlyCode(r, "INDEX_OUT_OF_RANGE"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].field(), "ins[3]");
  EXPECT_EQ(r.diagnostics[0].actual(), "[-4, -1]");
  EXPECT_NE(r.diagnostics[0].message().find("for item 0"), std::string::npos) << r.diagnostics[0].message();
}

// ── Index arithmetic ────────────────────────────────────────────────────────────────────────────────────────

TEST(Overflow, InputAtItsPrecisionsFullRange) {
  IntRow p({At(0)}, Add(Op(0), Const(1)));
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "INDEX_OVERFLOW"));
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].stage(), "index_math");
  // An int32 holds ±(2^31 - 1) (sign-magnitude), so x + 1 reaches [-(2^31 - 2), 2^31].
  EXPECT_EQ(r.diagnostics[0].actual(), "[-2147483646, 2147483648]");
}

TEST(Overflow, GuardOnASecondReadBoundsTheValue) {
  // Slot 0 reads x guarded by slot 1 (the same element): x in [0, 100) wherever slot 0 is read.
  IntRow p({WithIndirect(At(0), 1, 0, 100), At(0)}, Add(Op(0), Const(1)));
  CertifyResult r = Certify(p.Build(), Tiny());
  EXPECT_TRUE(r.ok()) << Explain(r);
  // Reading the unguarded twin is bounded too: it is the same element.
  IntRow q({WithIndirect(At(0), 1, 0, 100), At(0)}, Add(Op(1), Mul(Op(0), Const(0))));
  CertifyResult rq = Certify(q.Build(), Tiny());
  EXPECT_TRUE(rq.ok()) << Explain(rq);
}

TEST(Overflow, GuardInTheOtherBranchDoesNotBound) {
  // The guarded read happens only for COL < 8; for COL >= 8 x is unguarded and x + 1 can wrap.
  IntRow p({WithIndirect(At(0), 1, 0, 100), At(0)},
           Select(Pred::Lt(LoopVar::kCol, 8), Add(Op(0), Const(1)), Add(Op(1), Const(1))));
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "INDEX_OVERFLOW"));
}

TEST(Overflow, ParamTableValuesBoundTheArithmetic) {
  IntRow ok({At(0)}, Mul(Op(0), Const(1000000)), std::vector<int64_t>{1, 2, 3});
  CertifyResult r = Certify(ok.Build(), Tiny());
  EXPECT_TRUE(r.ok()) << Explain(r);
  IntRow bad({At(0)}, Mul(Op(0), Const(1000000000)), std::vector<int64_t>{1, 2, 3});
  CertifyResult rb = Certify(bad.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(rb, "INDEX_OVERFLOW"));
  EXPECT_EQ(rb.diagnostics[0].actual(), "[0, 3000000000]");
}

TEST(Overflow, ResultMustFitTheOutputPrecision) {
  IntRow p({At(0)}, Mul(Op(0), Const(100)), std::vector<int64_t>{1, 2, 3}, Precision::kInt8);
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "INDEX_OVERFLOW"));
  EXPECT_EQ(r.diagnostics[0].field(), "outs[0]");
  EXPECT_EQ(r.diagnostics[0].actual(), "[0, 300]");
}

TEST(Overflow, FloorDivAndShrShrinkTheRange) {
  IntRow p({WithIndirect(At(0), 1, 0, 1 << 20), At(0)}, Shr(FloorDiv(Mul(Op(0), Const(2047)), Const(3)), 2));
  CertifyResult r = Certify(p.Build(), Tiny());
  EXPECT_TRUE(r.ok()) << Explain(r);
}

TEST(Overflow, TransformOnTheIntegerDatapath) {
  IntRow p({At(0)}, Unary(SfpuKind::Exp(), Op(0)));
  CertifyResult r = Certify(p.Build(), Tiny());
  ASSERT_TRUE(OnlyCode(r, "UNSUPPORTED_PRECISION"));
  EXPECT_EQ(r.diagnostics[0].field(), "generic.body");
}

TEST(OutMap, WriteOutsideTheOutputPage) {
  CertifyResult r = WithBody({At(0)}, Op(0), At(120));
  ASSERT_TRUE(OnlyCode(r, "INDEX_OUT_OF_RANGE"));
  EXPECT_EQ(r.diagnostics[0].field(), "out");
  EXPECT_EQ(r.diagnostics[0].actual(), "[120, 135]");
}

}  // namespace
}  // namespace spatial
