// The `lut_attention` op kind: an int8 model's attention, integer throughout, EXACTLY equal to its integer reference
// on the VM over GQA groups, literal and named positions at 1, l/2 and l, shifts and multipliers (zero and negative
// included) — validated and certified on every shipped target that does not refuse it. A position outside the cache
// faults the VM; every refusal is tested.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/attention/lut.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

struct Lut {
  int64_t h = 2, kv = 1, hd = 4, l = 8, n = 16;
  int64_t m = 3, s = 4;
  enum { kNone, kLiteral, kNamed } pos = kNone;
  int64_t p = 0;
};

// Result "y", operands q, k, v, e, [pos].
proto::OpSpec LutSpec(const Lut& c) {
  proto::OpSpec spec = Spec({"q", "k", "v", "e"});
  proto::LutAttentionSpec* a = spec.mutable_lut_attention();
  a->set_h(c.h);
  a->set_kv(c.kv);
  a->set_hd(c.hd);
  a->set_l(c.l);
  a->set_table_len(c.n);
  a->set_m(c.m);
  a->set_s(c.s);
  if (c.pos == Lut::kLiteral) a->mutable_pos()->set_literal(c.p);
  if (c.pos == Lut::kNamed) {
    a->mutable_pos()->set_named("pos");
    spec.add_operands()->set_name("pos");
  }
  return spec;
}

std::string Text(const Lut& c) {
  return absl::StrCat("h=", c.h, " kv=", c.kv, " hd=", c.hd, " l=", c.l, " n=", c.n, " m=", c.m, " s=", c.s,
                      " pos=", static_cast<int>(c.pos), " p=", c.p);
}

// int8 queries, keys and values over their whole range; a table of positive weights (so every head's denominator is
// positive, as an exp table's is); the position.
Draw LutDraw(int64_t p) {
  return [p](const std::string& name, Rng& r) {
    if (name == "pos") return static_cast<double>(p);
    if (name == "e") return static_cast<double>(r.Int(1, 127));
    return static_cast<double>(r.Int(-128, 127));
  };
}

TEST(AttentionLutTest, ExactOverManyShapes) {
  struct Case {
    const char* target;
    Lut c;
  };
  std::vector<Case> cases;
  auto tiny = [&](Lut c) { cases.push_back({"test_tiny", c}); };
  tiny({});                                                       // group 2, whole cache
  tiny({.h = 1, .kv = 1, .hd = 8, .l = 32, .n = 64, .m = 1, .s = 8});
  tiny({.h = 4, .kv = 1, .hd = 8, .l = 8, .n = 32, .m = 2, .s = 6});   // group 4
  tiny({.h = 4, .kv = 4, .hd = 5, .l = 6, .n = 16, .m = 5, .s = 7});   // group 1
  tiny({.h = 4, .kv = 2, .hd = 3, .l = 7, .n = 9, .m = 7, .s = 5});
  tiny({.h = 8, .kv = 1, .hd = 4, .l = 4, .n = 8, .m = 1, .s = 10});   // group 8
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 16, .n = 16, .m = 3, .s = 4, .pos = Lut::kLiteral, .p = 1});
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 16, .n = 16, .m = 3, .s = 4, .pos = Lut::kLiteral, .p = 8});
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 16, .n = 16, .m = 3, .s = 4, .pos = Lut::kLiteral, .p = 16});
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 16, .n = 16, .m = 3, .s = 4, .pos = Lut::kNamed, .p = 1});
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 16, .n = 16, .m = 3, .s = 4, .pos = Lut::kNamed, .p = 8});
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 16, .n = 16, .m = 3, .s = 4, .pos = Lut::kNamed, .p = 16});
  tiny({.h = 2, .kv = 2, .hd = 6, .l = 13, .n = 20, .m = 4, .s = 9, .pos = Lut::kNamed, .p = 7});
  tiny({.h = 4, .kv = 2, .hd = 8, .l = 8, .n = 12, .m = 11, .s = 11, .pos = Lut::kNamed, .p = 5});
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 10, .n = 16, .m = 0, .s = 0});   // M = 0: every weight E[0]
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 10, .n = 16, .m = -3, .s = 2});  // M < 0: the index clamps to 0
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 10, .n = 1, .m = 3, .s = 4});    // a one-entry table
  tiny({.h = 2, .kv = 1, .hd = 4, .l = 10, .n = 300, .m = 1, .s = 0});  // no shift, a long table
  tiny({.h = 1, .kv = 1, .hd = 1, .l = 1, .n = 4, .m = 3, .s = 1, .pos = Lut::kNamed, .p = 1});
  tiny({.h = 3, .kv = 3, .hd = 7, .l = 9, .n = 16, .m = 2, .s = 9, .pos = Lut::kNamed, .p = 9});
  cases.push_back({"wormhole_n150", {.h = 4, .kv = 2, .hd = 64, .l = 64, .n = 256, .m = 5, .s = 12,
                                     .pos = Lut::kNamed, .p = 37}});
  cases.push_back({"wormhole_n150", {.h = 8, .kv = 1, .hd = 32, .l = 30, .n = 128, .m = 3, .s = 10}});
  cases.push_back({"blackhole_p150", {.h = 2, .kv = 1, .hd = 128, .l = 100, .n = 64, .m = 2, .s = 14,
                                      .pos = Lut::kLiteral, .p = 77}});
  ASSERT_GE(cases.size(), 20u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& k = cases[i];
    SCOPED_TRACE(Text(k.c) + " on " + k.target);
    const proto::OpSpec spec = LutSpec(k.c);
    const Composition c = ThreeWay(spec, Shipped(k.target), LutDraw(k.c.p), 0.0, 100 + i);
    const int64_t att = k.c.pos == Lut::kLiteral ? k.c.p : k.c.l;
    const std::string tag = absl::StrCat("lut_attn_", k.c.h, "x", att);
    ASSERT_EQ(c.sections.size(), 3u);
    EXPECT_EQ(c.name, tag);
    EXPECT_EQ(c.sections[0].name, tag + "_scores");
    EXPECT_EQ(c.sections[1].name, tag + "_weights");
    EXPECT_EQ(c.sections[2].name, tag + "_context");
    for (const Section& s : c.sections) EXPECT_TRUE(s.claim.exact) << s.name;
    // The masked step checks P and fences the maximum and the weights; the sums are unmasked.
    EXPECT_EQ(c.sections[1].FindStage("count_checked") >= 0, k.c.pos == Lut::kNamed);
    EXPECT_GE(c.sections[1].FindStage(absl::StrCat("row_max_", k.c.h - 1)), 0);
  }
}

// A masked position's score must not reach the maximum: a huge score past P leaves the result as if it were absent.
TEST(AttentionLutTest, PositionsPastPChangeNothing) {
  const Target& t = Shipped("test_tiny");
  const Lut c{.h = 2, .kv = 1, .hd = 4, .l = 12, .n = 16, .m = 3, .s = 5, .pos = Lut::kNamed, .p = 5};
  const proto::OpSpec spec = LutSpec(c);
  absl::StatusOr<Composition> comp = Lower(spec, t);
  ASSERT_TRUE(comp.ok()) << comp.status();
  TensorMap inputs = MakeInputs(*comp, LutDraw(c.p), 4);
  absl::StatusOr<TensorMap> before = RunComposition(*comp, t.tile_rows(), t.tile_cols(), inputs);
  ASSERT_TRUE(before.ok()) << before.status();
  // Keys past P aligned with every query at full scale, values at the extreme.
  for (int64_t j = c.p; j < c.l; ++j) {
    for (int64_t e = 0; e < c.hd; ++e) {
      inputs["k"].values[j * c.hd + e] = 127;
      inputs["v"].values[j * c.hd + e] = -128;
    }
  }
  absl::StatusOr<TensorMap> after = RunComposition(*comp, t.tile_rows(), t.tile_cols(), inputs);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(before->at("y").values, after->at("y").values);
  absl::StatusOr<TensorMap> ref = ReferenceOp(spec, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(after->at("y").values, ref->at("y").values);
  // Past P every weight is exactly zero.
  const TensorData& w = after->at("y_weights");
  for (int64_t head = 0; head < c.h; ++head) {
    for (int64_t j = 0; j < c.l; ++j) {
      if (j >= c.p) {
        EXPECT_EQ(w.values[head * c.l + j], 0.0) << head << "," << j;
      } else {
        EXPECT_GT(w.values[head * c.l + j], 0.0) << head << "," << j;
      }
    }
  }
}

TEST(AttentionLutTest, PositionOutsideTheCacheFaults) {
  const Target& t = Shipped("test_tiny");
  const Lut c{.h = 2, .kv = 1, .hd = 4, .l = 12, .n = 16, .pos = Lut::kNamed};
  absl::StatusOr<Composition> comp = Lower(LutSpec(c), t);
  ASSERT_TRUE(comp.ok()) << comp.status();
  for (int64_t p : {int64_t{0}, int64_t{13}, int64_t{-1}, int64_t{1000}}) {
    absl::StatusOr<TensorMap> run = RunComposition(*comp, t.tile_rows(), t.tile_cols(), MakeInputs(*comp, LutDraw(p), 1));
    ASSERT_FALSE(run.ok()) << p;
    EXPECT_TRUE(absl::StartsWith(run.status().message(), "IndexOutOfRange")) << run.status();
  }
}

TEST(AttentionLutTest, Refusals) {
  const Target& tiny = Shipped("test_tiny");
  const std::string shape =
      "NotLowered: a LUT attention with no heads, no head dimension, no cache or no table, or query heads that do not "
      "group over its K/V heads";
  EXPECT_EQ(RefusalOf(LutSpec({.h = 0}), tiny), shape);
  EXPECT_EQ(RefusalOf(LutSpec({.kv = 0}), tiny), shape);
  EXPECT_EQ(RefusalOf(LutSpec({.hd = 0}), tiny), shape);
  EXPECT_EQ(RefusalOf(LutSpec({.l = 0}), tiny), shape);
  EXPECT_EQ(RefusalOf(LutSpec({.n = 0}), tiny), shape);
  EXPECT_EQ(RefusalOf(LutSpec({.h = 3, .kv = 2}), tiny), shape);
  EXPECT_EQ(RefusalOf(LutSpec({.pos = Lut::kLiteral, .p = 0}), tiny),
            "NotLowered: a literal attention position 0 outside [1, 8] (1-based, the query row's; its 1 row "
            "within the 8-position cache) — the program fails at run time on every tier, so there is no "
            "section to lower");
  EXPECT_EQ(RefusalOf(LutSpec({.pos = Lut::kLiteral, .p = 9}), tiny),
            "NotLowered: a literal attention position 9 outside [1, 8] (1-based, the query row's; its 1 row "
            "within the 8-position cache) — the program fails at run time on every tier, so there is no "
            "section to lower");
  // An index product the int32 datapath cannot be proven to hold: 2 * 64 * 128^2 * 2000 > 2^31.
  const std::string product = RefusalOf(LutSpec({.h = 1, .kv = 1, .hd = 64, .l = 4, .m = 2000}), tiny);
  EXPECT_EQ(product,
            "NotLowered: a LUT attention whose index product (max - s) * M can leave the integer datapath (int8 "
            "scores of 64 terms times M = 2000, 4 positions, in int32)");
  EXPECT_TRUE(Lower(LutSpec({.h = 1, .kv = 1, .hd = 8, .l = 4, .m = -8000}), tiny).ok());
  const std::string negative = RefusalOf(LutSpec({.h = 1, .kv = 1, .hd = 8, .l = 4, .m = -20000}), tiny);
  EXPECT_TRUE(absl::StartsWith(negative, "NotLowered: a LUT attention whose index product")) << negative;
  // 2 heads x 20 positions are five 8x8 tiles of scores; the accumulator holds four.
  const std::string wide = RefusalOf(LutSpec({.l = 20}), tiny);
  EXPECT_TRUE(absl::StartsWith(wide, "AccTilesExceeded: stage 'lut_scores' of lut_attn_2x20_scores")) << wide;
  // The operands: Q, K, V, E, then P when named.
  proto::OpSpec missing = LutSpec({.pos = Lut::kNamed, .p = 3});
  missing.mutable_operands()->RemoveLast();
  EXPECT_EQ(RefusalOf(missing, tiny), "NotLowered: lut_attention takes 5 operands, got 4");
  // Grayskull has no integer datapath.
  EXPECT_EQ(RefusalOf(LutSpec({}), Shipped("grayskull_e150")),
            "MissingCompute: an integer elementwise datapath (target grayskull_e150)");
  // Malformed specs are errors, not refusals.
  for (proto::OpSpec bad : {LutSpec({.s = -1}), LutSpec({.hd = -4})}) {
    absl::StatusOr<Composition> c = Lower(bad, tiny);
    ASSERT_FALSE(c.ok());
    EXPECT_FALSE(IsRefusal(c.status())) << c.status();
  }
}

}  // namespace
}  // namespace spatial::testing
