// t = argmax(X) + 1 against its op reference (the seed's scan: seeded with item 1, moved only by a strictly greater
// item) on the VM, exactly, validated and certified on every shipped target that lowers it: one fold for a row a page
// holds, block scans and a merge tree past it — up to Qwen3's real vocabulary (151,936 logits) — with ties, NaN, −∞,
// logits below −1e30, and the maximum at every edge of a block.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/toolkit/index.h"
#include "spatial/maps.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

proto::OpSpec ArgMax(int64_t n, bool is_float) {
  proto::OpSpec s = Spec({"x"});
  s.mutable_argmax()->set_n(n);
  s.mutable_argmax()->set_float_(is_float);
  return s;
}

// Values of "x" by position: `at(p, rng)`; MakeInputs draws the row in order.
Draw ByPosition(std::function<double(int64_t, Rng&)> at) {
  auto p = std::make_shared<int64_t>(0);
  return [=](const std::string&, Rng& r) { return at((*p)++, r); };
}

// Many ties: small integers, so the first maximum is rarely the only one.
Draw Ties(int64_t lo, int64_t hi) {
  return ByPosition([=](int64_t, Rng& r) { return static_cast<double>(r.Int(lo, hi)); });
}

// The maximum `peak` planted at `where` (and again later: the first one wins), everything else below it.
Draw PeakAt(int64_t where, double below_lo, double below_hi, double peak) {
  return ByPosition(
      [=](int64_t p, Rng& r) { return p == where || p == where + 3 ? peak : r.Real(below_lo, below_hi); });
}

// The section names a lowered argmax has: one, or the blocks and the merge tree.
std::vector<std::string> Sections(const Composition& c) {
  std::vector<std::string> out;
  for (const Section& s : c.sections) out.push_back(s.name);
  return out;
}

struct Case {
  const char* target;
  int64_t n;
  std::vector<std::string> sections;
};

TEST(ArgMaxTest, ShapesWithTies) {
  const std::vector<Case> cases = {
      {"test_tiny", 1, {"argmax_1"}},
      {"test_tiny", 2, {"argmax_2"}},
      {"test_tiny", 5, {"argmax_5"}},
      {"test_tiny", 13, {"argmax_13"}},
      {"test_tiny", 32, {"argmax_32"}},
      {"test_tiny", 3, {"argmax_3"}},
      {"test_tiny", 9, {"argmax_9"}},
      {"test_tiny", 31, {"argmax_31"}},
      // Past the 4-tile accumulator: blocks of 32, merge fans [2], [4, 2], [4, 3, 3].
      {"test_tiny", 33, {"argmax_blocks_33_b4", "argmax_merge1_f2"}},
      {"test_tiny", 64, {"argmax_blocks_64_b4", "argmax_merge1_f2"}},
      {"test_tiny", 100, {"argmax_blocks_100_b4", "argmax_merge1_f4"}},
      {"test_tiny", 257, {"argmax_blocks_257_b4", "argmax_merge1_f3", "argmax_merge2_f3"}},
      {"test_tiny", 1000, {"argmax_blocks_1000_b4", "argmax_merge1_f4", "argmax_merge2_f3", "argmax_merge3_f3"}},
      {"wormhole_n150", 100, {"argmax_100"}},
      {"wormhole_n150", 256, {"argmax_256"}},
      {"wormhole_n150", 257, {"argmax_blocks_257_b8", "argmax_merge1_f2"}},
      {"test_tiny", 500, {"argmax_blocks_500_b4", "argmax_merge1_f4", "argmax_merge2_f4"}},
      {"test_tiny", 2000, {"argmax_blocks_2000_b4", "argmax_merge1_f4", "argmax_merge2_f4", "argmax_merge3_f4"}},
      {"wormhole_n150", 1000, {"argmax_blocks_1000_b8", "argmax_merge1_f4"}},
  };
  int checked = 0;
  for (const Case& k : cases) {
    for (bool is_float : {true, false}) {
      SCOPED_TRACE(absl::StrCat(k.n, is_float ? " float" : " int", " on ", k.target));
      Composition c = ThreeWay(ArgMax(k.n, is_float), Shipped(k.target), Ties(-3, 3), 0.0, k.n);
      EXPECT_EQ(Sections(c), k.sections);
      for (const Section& s : c.sections) EXPECT_TRUE(s.claim.exact) << s.name;
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

TEST(ArgMaxTest, QwenVocabulary) {
  // The decode step's argmax of logits over Qwen3's 151,936-token vocabulary: 4748 tiles, 594 blocks of 8, and four
  // merge levels on Wormhole's 8-tile accumulator (8^3 = 512 < 594), each of the smallest fan reaching one partial in
  // the levels left: 5^4 = 625 slots.
  const int64_t n = 151936;
  const Target& wh = Shipped("wormhole_n150");
  const std::vector<int64_t> fans = MergeFans(CeilDiv(CeilDiv(n, 32), 8), 8);
  EXPECT_EQ(fans, (std::vector<int64_t>{5, 5, 5, 5}));
  for (int64_t where : {int64_t{0}, int64_t{77777}, n - 4}) {
    SCOPED_TRACE(where);
    Composition c = ThreeWay(ArgMax(n, true), wh, PeakAt(where, -30, 30, 31.5), 0.0, where);
    EXPECT_EQ(c.sections.size(), 1 + fans.size());
  }
}

TEST(ArgMaxTest, MergeFans) {
  EXPECT_EQ(MergeFans(1, 8), std::vector<int64_t>{});
  EXPECT_EQ(MergeFans(20, 8), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(MergeFans(100, 8), (std::vector<int64_t>{5, 5, 4}));
  EXPECT_EQ(MergeFans(160, 8), (std::vector<int64_t>{6, 6, 5}));
  EXPECT_EQ(MergeFans(2, 1), (std::vector<int64_t>{2}));  // the seed's fmax 1 would never end
}

// The maximum at every edge a block has: the first and last element of the row, of each block, of the overlapping
// last block, and just past a block (tiny: blocks of 32, the last one starting at 1000 − 32... 968).
TEST(ArgMaxTest, PeakAtEveryBlockEdge) {
  const Target& tiny = Shipped("test_tiny");
  for (int64_t n : {int64_t{100}, int64_t{1000}}) {
    for (int64_t where : {0, 1, 30, 31, 32, 33, 63, 64, 65, 95, 96}) {
      if (where + 3 >= n) continue;
      SCOPED_TRACE(absl::StrCat(n, " peak at ", where));
      CheckLowering(ArgMax(n, true), tiny, PeakAt(where, -5, 5, 6), 0.0, where);
    }
    SCOPED_TRACE(absl::StrCat(n, " peak last"));
    CheckLowering(ArgMax(n, true), tiny, ByPosition([n](int64_t p, Rng& r) { return p == n - 1 ? 9.0 : r.Real(0, 1); }),
                  0.0);
  }
}

TEST(ArgMaxTest, NaNAndInfinitiesAsTheSeedScans) {
  const Target& tiny = Shipped("test_tiny");
  for (int64_t n : {int64_t{13}, int64_t{32}, int64_t{100}, int64_t{1000}}) {
    SCOPED_TRACE(n);
    // A NaN at item 1 is never replaced: the answer is 1, even with larger values and +∞ after it.
    CheckLowering(ArgMax(n, true), tiny,
                  ByPosition([](int64_t p, Rng& r) { return p == 0   ? kNaN
                                                            : p == 5 ? kInf
                                                                     : r.Real(-1, 1); }), 0.0);
    // A NaN anywhere else never moves the scan, at a block's start included.
    CheckLowering(ArgMax(n, true), tiny, ByPosition([](int64_t p, Rng& r) {
                    return p % 32 == 0 && p > 0 ? kNaN : p == 7 ? 3.0 : r.Real(-1, 1);
                  }),
                  0.0);
    // Every value −∞: the first. Logits far below −1e30 are a row like any other (the mask is −∞, not −1e30).
    CheckLowering(ArgMax(n, true), tiny, ByPosition([](int64_t, Rng&) { return -kInf; }), 0.0);
    CheckLowering(ArgMax(n, true), tiny,
                  ByPosition([n](int64_t p, Rng& r) { return p == n / 2 ? -2e30 : r.Real(-9e30, -3e30); }), 0.0);
    // All NaN: the seed's 1.
    CheckLowering(ArgMax(n, true), tiny, ByPosition([](int64_t, Rng&) { return kNaN; }), 0.0);
    // An integer row at the least value the sign-magnitude datapath holds, -(2^31 - 1): the mask (that value)
    // never replaces a live equal value.
    CheckLowering(ArgMax(n, false), tiny,
                  ByPosition([](int64_t, Rng&) { return -static_cast<double>(std::numeric_limits<int32_t>::max()); }),
                  0.0);
  }
}

TEST(ArgMaxTest, ReferenceIsTheSeedScan) {
  proto::OpSpec spec = ArgMax(5, true);
  auto run = [&](std::vector<double> x) {
    TensorMap in;
    in["x"] = TensorData{1, 5, Precision::kBf16, std::move(x)};
    absl::StatusOr<TensorMap> r = ReferenceOp(spec, in);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->at("y").values[0] : -1.0;
  };
  EXPECT_EQ(run({1, 3, 3, 2, 0}), 2);
  EXPECT_EQ(run({kNaN, 3, 4, 2, 0}), 1);
  EXPECT_EQ(run({1, kNaN, 4, kNaN, 0}), 3);
  EXPECT_EQ(run({-kInf, -kInf, -kInf, -kInf, -kInf}), 1);
  EXPECT_EQ(run({0, 0, 0, 0, 1}), 5);
}

TEST(ArgMaxTest, Refusals) {
  const Target& tiny = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(ArgMax(0, true), tiny), "NotLowered: an argmax of an empty tensor");
  // Past 2^24 an fp32 partial cannot hold a position exactly.
  EXPECT_EQ(RefusalOf(ArgMax(int64_t{1} << 24, true), tiny),
            "MissingPrecision: int64 argmax partials (fp32 holds a position exactly only below 2^24) (target "
            "test_tiny)");
  // An integer row whose declared values need more than the target's integers.
  proto::OpSpec wide = ArgMax(10, false);
  wide.mutable_operands(0)->mutable_fill()->set_const_i(int64_t{1} << 40);
  EXPECT_TRUE(absl::StartsWith(RefusalOf(wide, tiny), "MissingPrecision: an index integer holding "));
  const Target& gs = Shipped("grayskull_e150");
  EXPECT_EQ(RefusalOf(ArgMax(10, true), gs),
            "MissingPrecision: an fp32 accumulator (Dst) for an argmax (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(ArgMax(10, false), gs),
            "MissingCompute: an integer elementwise datapath (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(ArgMax(100000, true), gs),
            "MissingCompute: an integer elementwise datapath for an argmax position (target grayskull_e150)");
  proto::OpSpec two = ArgMax(4, true);
  two.add_operands()->set_name("z");
  EXPECT_EQ(RefusalOf(two, tiny), "NotLowered: argmax takes 1 operand, got 2");
}

}  // namespace
}  // namespace spatial::testing
