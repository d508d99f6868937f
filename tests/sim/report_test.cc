// Error statistics and placement: no simulation needed.
#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "sim/place/placement.h"
#include "sim/report/error_stats.h"
#include "tests/sim/sim_test_util.h"

namespace spatial {
namespace {

TensorData Row(std::vector<double> v) {
  TensorData t;
  t.rows = 1;
  t.cols = static_cast<int64_t>(v.size());
  t.values = std::move(v);
  return t;
}

TEST(ErrorStats, MaxAbsMaxRelAndRelativeL2) {
  const proto::OutputError e = CompareTensor("t", Row({1.0, 2.5, -4.0, 0.0}), Row({1.0, 2.0, -4.0, 0.5}), 0.5, false);
  EXPECT_EQ(e.elements(), 4);
  EXPECT_DOUBLE_EQ(e.max_abs(), 0.5);
  EXPECT_DOUBLE_EQ(e.max_rel(), 1.0);  // 0 against 0.5
  EXPECT_DOUBLE_EQ(e.rel_l2(), std::sqrt(0.5) / std::sqrt(1 + 4 + 16 + 0.25));
  EXPECT_TRUE(e.within());
  EXPECT_FALSE(CompareTensor("t", Row({1.0, 2.5}), Row({1.0, 2.0}), 0.01, false).within());
}

TEST(ErrorStats, ZeroToleranceMeansBitEquality) {
  EXPECT_TRUE(CompareTensor("t", Row({1.0, -0.0}), Row({1.0, 0.0}), 0.0, true).within());
  EXPECT_FALSE(CompareTensor("t", Row({1.0, 1e-300}), Row({1.0, 0.0}), 0.0, true).within());
  EXPECT_EQ(DefaultTolerance(true), 0.0);
  EXPECT_EQ(DefaultTolerance(false), kApproxRelL2Tolerance);
}

TEST(ErrorStats, NansMatchOnlyNans) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(CompareTensor("t", Row({nan, 1.0}), Row({nan, 1.0}), 0.0, true).within());
  const proto::OutputError e = CompareTensor("t", Row({nan, 1.0}), Row({0.0, 1.0}), 0.5, false);
  EXPECT_EQ(e.mismatched_nans(), 1);
  EXPECT_TRUE(std::isinf(e.rel_l2()));
  EXPECT_FALSE(e.within());
  // A shape mismatch is never within.
  EXPECT_FALSE(CompareTensor("t", Row({1.0}), Row({1.0, 2.0}), 1.0, false).within());
}

// NaN on both sides is the same answer, counted so the summary can say the inputs left the op's domain there.
TEST(ErrorStats, NansOnBothSidesAreCounted) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const proto::OutputError e = CompareTensor("t", Row({nan, nan, 1.0}), Row({nan, nan, 1.0}), 0.03, false);
  EXPECT_TRUE(e.within());
  EXPECT_EQ(e.nans_on_both_sides(), 2);
  EXPECT_EQ(e.mismatched_nans(), 0);
}

// The exact values are taken in the output format's range (not its precision): below its least normal magnitude a
// store flushes to 0, above its largest it is infinite. A bf16 tensor of exact values all near 1e-36 is the
// machine's zeros, and 4e38 is its infinity; 1e-30 is a value bf16 holds, so a machine 0 there is still an error.
TEST(ErrorStats, TheReferenceIsTakenInTheFormatsRange) {
  TensorData zeros = Row({0.0, 0.0}), tiny = Row({1e-40, -3e-39});
  zeros.precision = tiny.precision = Precision::kBf16;
  EXPECT_EQ(CompareTensor("t", zeros, tiny, 0.03, false).rel_l2(), 0.0);
  TensorData inf = Row({std::numeric_limits<double>::infinity(), 2.0}), big = Row({4e38, 2.0});
  inf.precision = Precision::kBf16;
  EXPECT_TRUE(CompareTensor("t", inf, big, 0.03, false).within());
  TensorData small = Row({1e-30, 0.0});
  EXPECT_FALSE(CompareTensor("t", zeros, small, 0.03, false).within());
  // fp32 holds 4e38 at no finite value either; fp16 flushes below 2^-14.
  TensorData h = Row({0.0}), ref = Row({1e-5});
  h.precision = Precision::kFp16;
  EXPECT_EQ(CompareTensor("t", h, ref, 0.03, false).rel_l2(), 0.0);
}

TensorData Rows(int64_t rows, std::vector<double> v) {
  TensorData t = Row(std::move(v));
  t.rows = rows;
  t.cols /= rows;
  return t;
}

// A choice compares the rows that choose alike as values, and lets a row choose otherwise only on a near tie of the
// exact scores that the machine's own score error explains.
TEST(ErrorStats, AChoiceDiffersOnlyOnANearTie) {
  // Two tokens, top 1 of 3 experts. Row 0 alike; row 1: the machine picks expert 0, the exact VM expert 1.
  const TensorData ref = Rows(2, {0.0, 1.0, 0.0, 0.0, 1.0, 0.0});
  const TensorData sim = Rows(2, {0.0, 0.99, 0.0, 1.0, 0.0, 0.0});
  const TensorData ref_scores = Rows(2, {0.1, 2.0, -1.0, 1.000, 1.002, 0.0});
  // The machine's scores of row 1 are off by up to 0.003: 1.000 vs 1.002 is a tie it can order either way.
  const TensorData near = Rows(2, {0.1, 2.0, -1.0, 1.003, 1.001, 0.0});
  proto::OutputError e = CompareChoice("w", sim, ref, near, ref_scores, 0.05);
  EXPECT_EQ(e.choice_rows_differing(), 1);
  EXPECT_EQ(e.elements(), 6);
  EXPECT_NEAR(e.rel_l2(), 0.01, 1e-12);  // row 0 only: 0.99 against 1
  EXPECT_TRUE(e.within());
  // Scores off by 0.0005 cannot reorder 1.000 and 1.002: not a tie the machine's rounding explains.
  const TensorData close = Rows(2, {0.1, 2.0, -1.0, 1.0005, 1.0015, 0.0});
  e = CompareChoice("w", sim, ref, close, ref_scores, 0.05);
  EXPECT_EQ(e.choice_rows_differing(), 1);
  EXPECT_FALSE(e.within());
  // Alike everywhere: a plain comparison, nothing differing.
  e = CompareChoice("w", ref, ref, ref_scores, ref_scores, 0.0);
  EXPECT_EQ(e.choice_rows_differing(), 0);
  EXPECT_TRUE(e.within());
  // Choosing more experts than the exact VM is never a tie; nor is a shape that is not the scores'.
  EXPECT_FALSE(CompareChoice("w", Rows(2, {1.0, 1.0, 0.0, 0.0, 1.0, 0.0}), ref, near, ref_scores, 0.05).within());
  EXPECT_FALSE(CompareChoice("w", sim, ref, Row({1.0}), ref_scores, 0.05).within());
}

TEST(Placement, RoundRobinInItemOrder) {
  const Composition c = sim_test::Copy(10, 1);
  const Placement p = PlaceItems(c.sections[0], sim_test::WormholeLike(2, 2));
  ASSERT_EQ(p.sites(), 4);
  EXPECT_FALSE(p.followed_plan);
  EXPECT_EQ(p.site_items[0], (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(p.site_items[1], (std::vector<int64_t>{1, 5, 9}));
  EXPECT_EQ(p.site_items[3], (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(p.sites_used(), 4);
}

TEST(Placement, FollowsAPlanThatFits) {
  Section s = sim_test::Copy(1, 1).sections[0];
  s.items.clear();
  for (int64_t y = 0; y < 4; ++y) {
    for (int64_t x = 0; x < 3; ++x) s.items.push_back(WorkItem{y * 3 + x, y, x, TileRect{y, x, 1, 1}});
  }
  BlockPlan plan;
  plan.grid_y = 2;
  plan.grid_x = 3;
  s.plan = plan;
  const Placement p = PlaceItems(s, sim_test::WormholeLike(4, 4));
  EXPECT_TRUE(p.followed_plan);
  EXPECT_EQ(p.site_items[0], (std::vector<int64_t>{0, 6}));        // (0,0) and (2,0)
  EXPECT_EQ(p.site_items[1 * 4 + 2], (std::vector<int64_t>{5, 11}));  // (1,2) and (3,2)
  EXPECT_EQ(p.sites_used(), 6);
  // A plan wider than the grid is folded round-robin instead.
  plan.grid_x = 5;
  s.plan = plan;
  const Placement q = PlaceItems(s, sim_test::WormholeLike(4, 4));
  EXPECT_FALSE(q.followed_plan);
  EXPECT_EQ(q.sites_used(), 12);
}

}  // namespace
}  // namespace spatial
