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

}  // namespace
}  // namespace spatial
