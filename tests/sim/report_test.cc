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
