// Every refusal of the carried-state family (the seed's messages, and the few this port adds where the seed would
// build a program that faults), each with its full message; and the malformed specs that are errors, not refusals.
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "lowerings/carried/gated_delta.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

proto::OpSpec Conv(int64_t rows, int64_t taps, int64_t chan) {
  proto::OpSpec s = Spec({"x", "w", "cs"});
  s.mutable_causal_conv()->set_taps(taps);
  s.mutable_causal_conv()->set_chan(chan);
  s.mutable_causal_conv()->set_rows(rows);
  return s;
}

proto::OpSpec Gdn(int64_t hv, int64_t hk, int64_t d, int64_t rows) {
  proto::OpSpec spec = Spec({"q", "k", "v", "z", "beta", "alpha", "S", "gn"});
  proto::GatedDeltaSpec* g = spec.mutable_gated_delta();
  g->set_hv(hv);
  g->set_hk(hk);
  g->set_d(d);
  g->set_rows(rows);
  g->set_eps(1e-6);
  g->set_gate(proto::GatedDeltaSpec::SILU);
  return spec;
}

// test_tiny with a field changed.
Target Tiny(const std::function<void(proto::Target&)>& edit) {
  proto::Target p = Shipped("test_tiny").proto();
  p.set_name("test_edited");
  edit(p);
  return Target(p);
}

TEST(CarriedRefusalTest, CausalConv) {
  const Target& t = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(Conv(1, 0, 8), t), "NotLowered: a causal conv with no taps or no channels");
  EXPECT_EQ(RefusalOf(Conv(3, 4, 0), t), "NotLowered: a causal conv with no taps or no channels");
  // A ring of 4 x 12 is past one accumulator page (32 elements), so it is the matrix — of channels that are not
  // whole 8-wide tiles. The single step and a block both refuse it.
  EXPECT_EQ(RefusalOf(Conv(1, 4, 12), t),
            "NotLowered: a blocked causal conv whose channel count is not a whole number of tiles");
  EXPECT_EQ(RefusalOf(Conv(5, 4, 12), t),
            "NotLowered: a blocked causal conv whose channel count is not a whole number of tiles");
  // A window row must lie in its own tile row, the previous one or the ring.
  EXPECT_EQ(RefusalOf(Conv(2, 9, 4), t), "NotLowered: a block causal conv whose ring is taller than a tile row");
  // The matrix ring keeps every tap of a channel tile in one tile (beyond the seed, which would read past it).
  EXPECT_EQ(RefusalOf(Conv(1, 9, 16), t), "NotLowered: a blocked causal conv whose ring is taller than a tile row");
  proto::OpSpec two = Spec({"x", "w"});
  two.mutable_causal_conv()->set_taps(4);
  two.mutable_causal_conv()->set_chan(8);
  EXPECT_EQ(RefusalOf(two, t), "NotLowered: causal_conv takes 3 operands, got 2");
  EXPECT_EQ(RefusalOf(Conv(1, 4, 8), Shipped("grayskull_e150")),
            "MissingPrecision: an fp32 accumulator (Dst) for a causal conv (target grayskull_e150)");
  EXPECT_EQ(RefusalOf(Conv(1, 4, 8), Tiny([](proto::Target& p) { p.mutable_datapaths()->clear_elementwise_float(); })),
            "MissingCompute: a float elementwise datapath (target test_edited)");
  // A block's per-tile-row tables ride the index integer.
  EXPECT_EQ(RefusalOf(Conv(3, 4, 8), Tiny([](proto::Target& p) { p.mutable_datapaths()->clear_index_precisions(); })),
            "MissingPrecision: an index integer holding 9 (target test_edited)");
}

TEST(CarriedRefusalTest, GatedDelta) {
  const Target& t = Shipped("test_tiny");
  for (auto [hv, hk, d, rows] : std::vector<std::array<int64_t, 4>>{{0, 1, 4, 1}, {2, 0, 4, 1}, {2, 1, 0, 1},
                                                                   {2, 1, 4, 0}}) {
    EXPECT_EQ(RefusalOf(Gdn(hv, hk, d, rows), t),
              "NotLowered: a gated delta step with no heads, no head dimension or no rows");
  }
  // Whole-tile heads (8) past the flat page, 3 v-heads over 2 k-heads.
  EXPECT_EQ(RefusalOf(Gdn(3, 2, 8, 1), t),
            "NotLowered: a blocked gated delta needs a head dimension in whole tiles and v-heads a multiple of "
            "k-heads");
  // Heads of 12, widened to 16, 3 v-heads over 2 k-heads.
  EXPECT_EQ(RefusalOf(Gdn(3, 2, 12, 1), t), "NotLowered: a gated delta whose v-heads are not a multiple of its k-heads");
  // Heads of 5 widened to 8: narrowing back, an 8-wide output tile takes three heads' runs, a table page names two.
  EXPECT_EQ(RefusalOf(Gdn(2, 1, 5, 1), t),
            "NotLowered: a move whose output tiles each take more runs than a table page names");
  // Flat: the per-head norm folds an hv x d plane of one tile-high page.
  EXPECT_EQ(RefusalOf(Gdn(16, 1, 1, 1), t), "NotLowered: a flat gated delta over 16 value heads, more than a tile's 8 rows");
  // Flat: every operand of a row's section is loaded whole; 300 rows of q, k, v and z outgrow a site.
  const std::string flat = RefusalOf(Gdn(2, 1, 4, 300), t);
  EXPECT_TRUE(absl::StartsWith(flat, "NotLowered: a flat gated delta over 300 rows whose operands, loaded whole, need "))
      << flat;
  EXPECT_TRUE(absl::EndsWith(flat, " bytes of a site's 90112")) << flat;
  // Blocked: a head of 40 is five 8-wide tiles, an a-block's page wider than test_tiny's four accumulator tiles.
  EXPECT_EQ(RefusalOf(Gdn(1, 1, 40, 1), t),
            "AccTilesExceeded: stage 'gd_update0' of gd_step_1x40 computes a page of 5 tiles; the accumulator holds 4 "
            "fp32 tiles (target test_tiny)");
  EXPECT_EQ(RefusalOf(Gdn(2, 1, 8, 1), Tiny([](proto::Target& p) { p.mutable_tile()->set_cols(16); })),
            "NotLowered: a blocked gated delta on a tile that is not square");
  proto::OpSpec eps = Gdn(2, 1, 4, 1);
  eps.mutable_gated_delta()->set_eps(1.5e-10);
  EXPECT_EQ(RefusalOf(eps, t), "NotLowered: an epsilon of 1.5e-10 that is not a whole number of nano units");
  EXPECT_EQ(RefusalOf(Gdn(2, 1, 4, 1), Shipped("grayskull_e150")),
            "MissingPrecision: an fp32 accumulator (Dst) for a gated delta step (target grayskull_e150)");
  proto::OpSpec seven = Gdn(2, 1, 4, 1);
  seven.mutable_operands()->RemoveLast();
  EXPECT_EQ(RefusalOf(seven, t), "NotLowered: gated_delta takes 8 operands, got 7");
}

TEST(CarriedRefusalTest, MovedRuns) {
  const Target& t = Shipped("test_tiny");
  absl::StatusOr<Composition> none = MovedRuns({"x", {}}, 8, "y", {}, t);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "NotLowered: a move of nothing");
  absl::StatusOr<Composition> empty = MovedRuns({"x", {}}, 0, "y", {{8, 0}}, t);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "NotLowered: a move of nothing");
  EXPECT_EQ(JoinedZeroRuns({{4, 0}, {6, std::nullopt}, {8, std::nullopt}, {8, 2}, {12, 9}}),
            (std::vector<spatial::Run>{{4, 0}, {8, std::nullopt}, {12, 9}}));
}

// Malformed specs are errors (InvalidArgument), never refusals.
TEST(CarriedRefusalTest, MalformedSpecs) {
  const Target& t = Shipped("test_tiny");
  std::vector<proto::OpSpec> bad{Conv(1, -1, 8), Conv(-2, 4, 8), Gdn(2, 1, -4, 1)};
  proto::OpSpec no_gate = Gdn(2, 1, 4, 1);
  no_gate.mutable_gated_delta()->clear_gate();
  bad.push_back(no_gate);
  proto::OpSpec neg_eps = Gdn(2, 1, 4, 1);
  neg_eps.mutable_gated_delta()->set_eps(-1);
  bad.push_back(neg_eps);
  for (const proto::OpSpec& spec : bad) {
    absl::StatusOr<Composition> c = Lower(spec, t);
    ASSERT_FALSE(c.ok()) << spec.ShortDebugString();
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
    EXPECT_FALSE(IsRefusal(c.status())) << c.status();
  }
}

}  // namespace
}  // namespace spatial::testing
