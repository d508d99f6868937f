// The relayouts between flat rows and dense matrices (lowerings/attention/relayout_rows.h): every value lands exactly
// where the other layout holds it, on the VM, validated and certified — whole-tile rows (one section, or two when the
// rows end inside a tile row), narrow rows, small dense matrices back to rows, round trips — and the refusals.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "gtest/gtest.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/relayout_rows.h"
#include "tests/lowerings/harness.h"

namespace spatial::testing {
namespace {

void ExpectCertified(const Composition& c, const Target& t) {
  CertifyResult r = Certify(c, t);
  for (const proto::Diagnostic& d : r.diagnostics) ADD_FAILURE() << FormatDiagnostic(d, c.name);
}

// Runs `c` (reading "x", writing "y") and checks that y holds x's values in the same logical row-major order, shaped
// rows_out x cols_out. Integers over int32's whole range for an integer dt.
void ExpectMoves(const Composition& c, const Target& t, int64_t rows_out, int64_t cols_out, bool ints) {
  EXPECT_TRUE(ValidateComposition(c, t.tile_rows(), t.tile_cols()).ok());
  ExpectCertified(c, t);
  for (const Section& s : c.sections) EXPECT_TRUE(s.claim.exact) << s.name;
  const TensorMap inputs = MakeInputs(c, ints ? Ints(INT32_MIN, INT32_MAX) : Reals(-100, 100), rows_out * 31 + cols_out);
  ASSERT_EQ(inputs.size(), 1u);
  absl::StatusOr<TensorMap> run = RunComposition(c, t.tile_rows(), t.tile_cols(), inputs);
  ASSERT_TRUE(run.ok()) << run.status();
  const TensorData& y = run->at("y");
  EXPECT_EQ(y.rows, rows_out);
  EXPECT_EQ(y.cols, cols_out);
  EXPECT_EQ(y.values, inputs.at("x").values);
}

struct Shape {
  const char* target;
  int64_t rows, cols;
  std::vector<std::string> sections;
};

TEST(AttentionRelayoutRowsTest, RowsToDense) {
  const std::vector<Shape> shapes = {
      {"test_tiny", 5, 16, {"relayout_dense_5x16_rows0"}},                      // fewer rows than a tile
      {"test_tiny", 8, 8, {"relayout_dense_8x8_rows0"}},
      {"test_tiny", 16, 24, {"relayout_dense_16x24_rows0"}},                    // whole tile rows
      {"test_tiny", 13, 16, {"relayout_dense_13x16_rows0", "relayout_dense_13x16_rows8"}},  // and the rest
      {"test_tiny", 20, 40, {"relayout_dense_20x40_rows0", "relayout_dense_20x40_rows16"}},  // 5 tiles: blk 1
      {"test_tiny", 5, 3, {"relayout_dense_5x3_rows0"}},                        // narrow rows, one tile row
      {"test_tiny", 16, 4, {"relayout_dense_16x4_rows0"}},                      // narrow, tile rows of 32 elements
      {"test_tiny", 13, 2, {"relayout_dense_13x2_rows0", "relayout_dense_13x2_rows8"}},
      {"test_tiny", 12, 3, {"relayout_dense_12x3_rows0", "relayout_dense_12x3_rows8"}},
      {"test_tiny", 1, 1, {"relayout_dense_1x1_rows0"}},
      {"wormhole_n150", 40, 128, {"relayout_dense_40x128_rows0", "relayout_dense_40x128_rows32"}},
      {"wormhole_n150", 64, 320, {"relayout_dense_64x320_rows0"}},              // 10 tiles: blocks of 5
      {"wormhole_n150", 5, 48, {"relayout_dense_5x48_rows0"}},  // narrow: 8 tiles, a full page
  };
  for (bool ints : {false, true}) {
    for (const Shape& s : shapes) {
      SCOPED_TRACE(absl::StrCat(s.rows, "x", s.cols, " on ", s.target, ints ? " int32" : " bf16"));
      const Target& t = Shipped(s.target);
      absl::StatusOr<Composition> c = RelayoutRowsToDense(OperandRef{"x", proto::Fill()}, "y", s.rows, s.cols,
                                                          ints ? Precision::kInt32 : Precision::kBf16, t);
      ASSERT_TRUE(c.ok()) << c.status();
      ASSERT_EQ(c->sections.size(), s.sections.size());
      for (size_t i = 0; i < s.sections.size(); ++i) EXPECT_EQ(c->sections[i].name, s.sections[i]);
      EXPECT_EQ(c->name, absl::StrCat("relayout_dense_", s.rows, "x", s.cols));
      // Written in part by two sections: State in both; written whole: an Output.
      const TensorRole role = s.sections.size() == 2 ? TensorRole::kState : TensorRole::kOutput;
      for (const Section& sec : c->sections) EXPECT_EQ(sec.tensors[sec.FindTensor("y")].role, role);
      ExpectMoves(*c, t, s.rows, s.cols, ints);
    }
  }
}

TEST(AttentionRelayoutRowsTest, DenseToRows) {
  const std::vector<Shape> shapes = {
      {"test_tiny", 13, 16, {"relayout_rows_13x16"}},   // whole tiles: every row picked in order (relayout.h)
      {"test_tiny", 5, 6, {"relayout_rows_5x6"}},       // one small tile row
      {"test_tiny", 3, 10, {"relayout_rows_3x10"}},     // two tiles across
      {"test_tiny", 8, 4, {"relayout_rows_8x4"}},
      {"test_tiny", 1, 3, {"relayout_rows_1x3"}},
      {"wormhole_n150", 40, 64, {"relayout_rows_40x64"}},
      {"wormhole_n150", 6, 40, {"relayout_rows_6x40"}},
  };
  for (const Shape& s : shapes) {
    SCOPED_TRACE(absl::StrCat(s.rows, "x", s.cols, " on ", s.target));
    const Target& t = Shipped(s.target);
    absl::StatusOr<Composition> c =
        RelayoutDenseToRows(OperandRef{"x", proto::Fill()}, "y", s.rows, s.cols, Precision::kBf16, t);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->sections.size(), 1u);
    EXPECT_EQ(c->sections[0].name, s.sections[0]);
    ExpectMoves(*c, t, 1, s.rows * s.cols, false);
  }
}

// Flat rows to a dense matrix and back: the same values in the same places.
TEST(AttentionRelayoutRowsTest, RoundTrip) {
  const Target& t = Shipped("test_tiny");
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{13, 16}, {5, 3}, {8, 4}, {20, 8}}) {
    SCOPED_TRACE(absl::StrCat(rows, "x", cols));
    absl::StatusOr<Composition> there = RelayoutRowsToDense(OperandRef{"x", proto::Fill()}, "d", rows, cols,
                                                            Precision::kBf16, t);
    absl::StatusOr<Composition> back =
        RelayoutDenseToRows(OperandRef{"d", proto::Fill()}, "y", rows, cols, Precision::kBf16, t);
    ASSERT_TRUE(there.ok()) << there.status();
    ASSERT_TRUE(back.ok()) << back.status();
    std::vector<Composition> parts{*there, *back};
    const Composition c = ComposeSections("round_trip", std::move(parts), t);
    ExpectMoves(c, t, 1, rows * cols, false);
  }
}

TEST(AttentionRelayoutRowsTest, Refusals) {
  const Target& tiny = Shipped("test_tiny");
  const OperandRef x{"x", proto::Fill()};
  auto to_dense = [&](int64_t rows, int64_t cols, Precision dt, const Target& t) {
    absl::StatusOr<Composition> c = RelayoutRowsToDense(x, "y", rows, cols, dt, t);
    EXPECT_FALSE(c.ok());
    EXPECT_TRUE(IsRefusal(c.status())) << c.status();
    return std::string(c.status().message());
  };
  auto to_rows = [&](int64_t rows, int64_t cols, Precision dt, const Target& t) {
    absl::StatusOr<Composition> c = RelayoutDenseToRows(x, "y", rows, cols, dt, t);
    EXPECT_FALSE(c.ok());
    EXPECT_TRUE(IsRefusal(c.status())) << c.status();
    return std::string(c.status().message());
  };
  const std::string narrow =
      "NotLowered: a block of rows whose relayout into a matrix is neither whole tiles across nor a tile row of narrow "
      "rows one page holds";
  EXPECT_EQ(to_dense(12, 5, Precision::kBf16, tiny), narrow);  // a tile row of 8 x 5 is 5 tiles: the page holds 4
  EXPECT_EQ(to_dense(8, 5, Precision::kBf16, tiny), narrow);
  const std::string small =
      "NotLowered: a matrix whose relayout into flat rows is neither whole tiles across nor one small tile row";
  EXPECT_EQ(to_rows(9, 3, Precision::kBf16, tiny), small);   // more rows than a tile
  EXPECT_EQ(to_rows(4, 10, Precision::kBf16, tiny), small);  // 40 elements: 5 tiles
  EXPECT_EQ(to_dense(0, 8, Precision::kBf16, tiny), "NotLowered: a relayout of no rows");
  // A site too small for one tile row of one-tile segments.
  proto::Target p = tiny.proto();
  p.set_name("test_tiny_small");
  p.set_local_mem_bytes(p.local_mem_reserved() + 2048);
  const Target small_site(p);
  EXPECT_EQ(to_dense(16, 8, Precision::kFp32, small_site),
            "NotLowered: a relayout of one tile row of flat rows does not fit a site");
  // Grayskull folds neither a float relayout (no fp32 accumulator) nor an integer one (no integer datapath).
  const Target& gs = Shipped("grayskull_e150");
  EXPECT_TRUE(absl::StartsWith(to_dense(32, 32, Precision::kBf16, gs), "MissingPrecision: an fp32 accumulator"));
  EXPECT_TRUE(absl::StartsWith(to_rows(32, 32, Precision::kInt32, gs), "MissingCompute: an integer elementwise"));
}

}  // namespace
}  // namespace spatial::testing
