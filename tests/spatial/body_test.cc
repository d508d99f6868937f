#include "spatial/body.h"

#include "gtest/gtest.h"

namespace spatial {
namespace {

TEST(Body, BandedFoldsFromTheBack) {
  Body b = Banded({{4, Op(0)}, {8, Op(1)}, {0, Op(2)}});
  EXPECT_EQ(BodyToString(b), "(COL < 4 ? x0 : (COL < 8 ? x1 : x2))");
  EXPECT_EQ(BodySlotCount(b), 3);
}

TEST(Body, IntegralMeansIntegerArithmetic) {
  EXPECT_TRUE(BodyIntegral(Shr(Mul(Op(0), Const(3)), 2)));
  EXPECT_FALSE(BodyIntegral(Mul(Op(0), Const(0.5))));
  EXPECT_FALSE(BodyIntegral(Unary(SfpuKind::Exp(), Op(0))));
}

TEST(Body, EqualityIsStructuralAndBitExact) {
  EXPECT_TRUE(BodyEqual(Add(Op(0), Const(1)), Add(Op(0), Const(1))));
  EXPECT_FALSE(BodyEqual(Add(Op(0), Const(1)), Add(Op(1), Const(1))));
  EXPECT_FALSE(BodyEqual(Const(0.0), Const(-0.0)));
  EXPECT_FALSE(BodyEqual(Unary(SfpuKind::Rsqrt(1000, 64), Op(0)), Unary(SfpuKind::Rsqrt(1000, 32), Op(0))));
}


// The IR's kinds are listed once (SPATIAL_BODY_OPS, SPATIAL_SFPU_OPS): names, children and validity come from it.
TEST(BodyIr, KindsComeFromOneList) {
  EXPECT_EQ(BodyOpName(BodyOp::kFloorDiv), "FloorDiv");
  EXPECT_EQ(BodyOpChildren(BodyOp::kSelect), 2);
  EXPECT_EQ(BodyOpChildren(BodyOp::kUnary), 1);
  EXPECT_FALSE(IsKnownBodyOp(static_cast<BodyOp>(42)));
  EXPECT_TRUE(IsKnownSfpuOp(SfpuOp::kExpAccurate));
  EXPECT_FALSE(IsKnownSfpuOp(SfpuOp::kUnspecified));
  EXPECT_EQ(SfpuName(SfpuKind::Silu()), "silu");
}

// A body that doubles at every level is 2^60 trees but 61 nodes: the visitor sees each node once, the queries
// built on it answer at once, and a chain far deeper than any program may hold (kMaxBodyDepth 2000) is walked and
// destroyed without recursion (~BodyNode unlinks what it alone owns: a deep chain once overflowed the stack).
TEST(BodyIr, VisitorSeesSharedNodesOnceAndDeepBodiesSafely) {
  Body b = Op(0);
  for (int i = 0; i < 60; ++i) b = Add(b, b);
  int nodes = 0;
  VisitBody(b, [&nodes](const BodyNode&) { return ++nodes, true; });
  EXPECT_EQ(nodes, 61);
  EXPECT_TRUE(BodyIntegral(b));
  EXPECT_EQ(BodySlotCount(b), 1);
  Body deep = Op(3);
  for (int i = 0; i < 200000; ++i) deep = Unary(SfpuKind::Exp(), deep);
  EXPECT_FALSE(BodyIntegral(deep));
  EXPECT_EQ(BodySlotCount(deep), 4);
}

TEST(BodyIr, RewriteKeepsSharing) {
  Body x = Mul(Op(0), Const(2));
  Body b = Add(x, x);
  // Every constant 2 becomes 3.
  Body r = RewriteBody(b, [](const BodyNode& n, Body a, Body bb, Body c) -> Body {
    if (n.op == BodyOp::kConst) return Const(n.value == 2 ? 3 : n.value);
    if (n.op == BodyOp::kOperand) return Op(n.operand);
    return n.op == BodyOp::kMul ? Mul(a, bb) : Add(a, bb);
  });
  EXPECT_EQ(BodyToString(r), "((x0 * 3) + (x0 * 3))");
  EXPECT_EQ(r->a.get(), r->b.get()) << "a shared node is rewritten once and stays shared";
}

}  // namespace
}  // namespace spatial
