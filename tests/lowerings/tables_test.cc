// Tables and heads (transpose, head_slice, join, head_matmul) against their op references on the VM, validated and
// certified on every shipped target that lowers them: toy shapes on test_tiny (8x8 tiles, a 4-tile accumulator),
// real model widths on wormhole_n150 (32x32, 8 tiles), every form the seed picks (flat, column-blocked, tiled).
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/lowerings/table_specs.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

struct Case {
  const char* target;
  proto::OpSpec spec;
  std::string section;  // the section name the seed's dispatch gives
  size_t items;         // work items of that section
};

// Runs every case through the three-way check; data movement is exact (tol 0).
void RunCases(const std::vector<Case>& cases, const Draw& draw, double tol, int at_least = 20) {
  EXPECT_GE(static_cast<int>(cases.size()), at_least);
  for (const Case& k : cases) {
    SCOPED_TRACE(k.spec.ShortDebugString() + " on " + k.target);
    Composition c = ThreeWay(k.spec, Shipped(k.target), draw, tol, /*seed=*/k.items * 7 + k.section.size());
    ASSERT_EQ(c.sections.size(), 1u);
    EXPECT_EQ(c.sections[0].name, k.section);
    EXPECT_EQ(c.sections[0].items.size(), k.items);
  }
}

std::vector<Case> TransposeCases(bool is_float) {
  std::vector<Case> cases;
  auto add = [&](const char* target, int64_t r, int64_t c) {
    cases.push_back({target, Transpose(r, c, is_float), absl::StrCat("transpose_", r, "x", c), 1});
  };
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 5}, {5, 1}, {2, 3}, {3, 2}, {4, 8}, {8, 4},
                                                               {2, 16}, {16, 2}, {3, 7}, {7, 3}, {5, 5}, {1, 32},
                                                               {32, 1}, {6, 5}}) {
    add("test_tiny", r, c);
  }
  // A head of Qwen3's 128 for two cache rows, and the widest square the accumulator holds.
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{2, 128}, {128, 2}, {16, 16}, {3, 85}, {1, 256}}) {
    add("wormhole_n150", r, c);
  }
  return cases;
}

TEST(TablesTest, TransposeFloatMatchesReference) { RunCases(TransposeCases(true), Reals(-50, 50), 0.0); }

TEST(TablesTest, TransposeIntMatchesReferenceExactly) {
  RunCases(TransposeCases(false), Ints(INT32_MIN, INT32_MAX), 0.0);
}

// A vector transposes to itself: one read, no bands. A matrix: one band per new row, cols - 1 predicates.
TEST(TablesTest, TransposeBandsPerNewRow) {
  const Target& t = Shipped("test_tiny");
  absl::StatusOr<Composition> vec = Lower(Transpose(1, 7, true), t);
  absl::StatusOr<Composition> mat = Lower(Transpose(3, 5, true), t);
  ASSERT_TRUE(vec.ok() && mat.ok());
  const Stage& vs = vec->sections[0].stages[vec->sections[0].FindStage("transpose")];
  const Stage& ms = mat->sections[0].stages[mat->sections[0].FindStage("transpose")];
  EXPECT_EQ(std::get<Generic>(vs.op).ins.size(), 1u);
  EXPECT_EQ(std::get<Generic>(ms.op).ins.size(), 5u);
  EXPECT_EQ(BodyToString(std::get<Generic>(vs.op).body), "x0");
  EXPECT_TRUE(vec->sections[0].claim.exact && mat->sections[0].claim.exact);
  EXPECT_EQ(mat->sections[0].tensors[0].precision, Precision::kBf16);
  absl::StatusOr<Composition> ints = Lower(Transpose(3, 5, false), t);
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(ints->sections[0].tensors[0].precision, Precision::kInt32);
}

TEST(TablesTest, HeadSliceMatchesReference) {
  std::vector<Case> cases;
  auto flat = [&](const char* target, int64_t every, int64_t from, int64_t width, int64_t n, size_t items) {
    cases.push_back({target, HeadSlice(every, from, width, n),
                     absl::StrCat("head_slice_", n / every, "x", width, "_of_", every), items});
  };
  auto tiled = [&](const char* target, int64_t every, int64_t from, int64_t width, int64_t n, size_t items) {
    cases.push_back({target, HeadSlice(every, from, width, n),
                     absl::StrCat("head_slice_", n / every, "x", width, "_of_", every, "_tiled"), items});
  };
  // test_tiny, one whole-row item: first, last and middle parts, a trailing partial group ignored.
  flat("test_tiny", 5, 0, 3, 20, 1);
  flat("test_tiny", 5, 2, 3, 20, 1);
  flat("test_tiny", 7, 1, 1, 23, 1);
  flat("test_tiny", 1, 0, 1, 9, 1);
  flat("test_tiny", 12, 0, 12, 24, 1);  // the whole group
  flat("test_tiny", 3, 1, 2, 48, 1);    // 32 results: exactly the accumulator
  // Column-blocked: 90 results = 12 tiles, blocks of 4 (3 items); 33 results = 5 tiles, blocks of 1.
  flat("test_tiny", 12, 2, 9, 120, 3);
  flat("test_tiny", 3, 0, 1, 99, 5);
  flat("test_tiny", 10, 3, 7, 400, 35);  // 280 results = 35 tiles = 5 * 7: blocks of 1
  // Whole tiles: a tile copy per block.
  tiled("test_tiny", 16, 8, 8, 64, 4);
  tiled("test_tiny", 24, 0, 16, 48, 2);
  tiled("test_tiny", 8, 0, 8, 60, 7);  // 7 groups; the tensor's last partial tile is never read
  // wormhole_n150 -- Qwen3-0.6B: the first half of every 128-wide query head (16 heads), and the K part of a fused
  // QKV row (2048 + 1024 + 1024 per token) for two tokens.
  tiled("wormhole_n150", 128, 0, 64, 16 * 128, 16);
  tiled("wormhole_n150", 4096, 2048, 1024, 2 * 4096, 8);
  // Qwen3-8B: the second half of every 128-wide head of its 32 query heads.
  tiled("wormhole_n150", 128, 64, 64, 32 * 128, 32);
  // A head of 80 shares tiles with its neighbours, so it stays flat, blocked by the result's columns: 24 heads'
  // first 40 are 960 results = 30 tiles, blocks of 6.
  flat("wormhole_n150", 80, 0, 40, 24 * 80, 5);
  flat("wormhole_n150", 80, 40, 40, 24 * 80, 5);
  flat("wormhole_n150", 100, 10, 30, 500, 1);
  flat("wormhole_n150", 3, 1, 1, 3000, 4);  // 1000 results = 32 tiles, blocks of 8
  // One row's worth: a single group.
  flat("wormhole_n150", 40, 5, 33, 40, 1);
  // Dense: the rows x n/rows matrix a projection leaves, a tile of 32 rows an item. test_tiny (8 x 8 tiles): 20 rows
  // (3 tile rows, the last partial) of 4 groups of 16, the last 8 of each: 3 x 4 items. wormhole_n150: DeepSeek-V3's
  // q_pe (the last 64 of every 192) over 40 tokens of 4 heads (2 tile rows x 4 heads, blocks of 2 tiles), and
  // Qwen3-Next's z part (the last 1024 of every 3072) over 64 tokens (2 tile rows x 4 blocks of 8 tiles).
  auto dense = [&](const char* target, int64_t every, int64_t from, int64_t width, int64_t n, int64_t rows,
                   size_t items) {
    cases.push_back({target, HeadSlice(every, from, width, n, rows),
                     absl::StrCat("head_slice_", n / every, "x", width, "_of_", every, "_tiled_rows", rows), items});
  };
  dense("test_tiny", 16, 8, 8, 20 * 64, 20, 12);
  dense("wormhole_n150", 192, 128, 64, 40 * 4 * 192, 40, 8);
  dense("wormhole_n150", 3072, 2048, 1024, 64 * 3072, 64, 2 * 4);
  RunCases(cases, Reals(-50, 50), 0.0);
}

TEST(TablesTest, JoinMatchesReference) {
  std::vector<Case> cases;
  auto add = [&](const char* target, int64_t rows, int64_t heads, int64_t wa, int64_t wb, size_t items, bool tiled) {
    cases.push_back({target, Join(rows, heads, wa, wb),
                     absl::StrCat("join_", rows, "x", heads, "_", wa / heads, "+", wb / heads, tiled ? "_tiled" : ""),
                     items});
  };
  // test_tiny, flat: one head, several heads, several rows, one part empty.
  add("test_tiny", 1, 1, 3, 5, 1, false);
  add("test_tiny", 1, 2, 6, 4, 1, false);
  add("test_tiny", 2, 2, 4, 6, 1, false);
  add("test_tiny", 1, 4, 0, 8, 1, false);
  add("test_tiny", 3, 1, 5, 0, 1, false);
  add("test_tiny", 1, 1, 31, 1, 1, false);
  // Column-blocked: 6 units of 3 + 5 = 48 results = 6 tiles, blocks of 3; 17 units of 1 + 2 = 51 = 7 tiles.
  add("test_tiny", 2, 3, 9, 15, 2, false);
  add("test_tiny", 1, 17, 17, 34, 7, false);
  add("test_tiny", 4, 4, 20, 12, 4, false);  // 16 units of 5 + 3 = 128 results = 16 tiles, blocks of 4
  // Whole tiles: a table-driven tile move.
  add("test_tiny", 1, 1, 8, 8, 2, true);
  add("test_tiny", 1, 2, 16, 32, 6, true);   // ha 8, hb 16: blocks of 1
  add("test_tiny", 2, 1, 16, 32, 6, true);   // ha 16, hb 32: blocks of 2 (1 + 2 per unit)
  add("test_tiny", 1, 1, 24, 8, 4, true);
  // wormhole_n150 -- Qwen3-0.6B: the rotated half and the pass-through half of 16 query heads of 128 joined back
  // (64 + 64 = 2 + 2 tiles, blocks of 2), and of 8 KV heads; Qwen3-8B's 32 query heads.
  add("wormhole_n150", 1, 16, 16 * 64, 16 * 64, 32, true);
  add("wormhole_n150", 1, 8, 8 * 64, 8 * 64, 16, true);
  add("wormhole_n150", 1, 32, 32 * 64, 32 * 64, 64, true);
  // A latent attention's query: 128 nope + 64 rope per head, 16 heads (4 + 2 tiles, blocks of 2: 2 + 1 per head).
  add("wormhole_n150", 1, 16, 16 * 128, 16 * 64, 48, true);
  // Dense: the rows x heads*ha and rows x heads*hb matrices, a unit a tile row's head. DeepSeek-V3's query (128 nope +
  // 64 rope, 4 heads) over 40 tokens: 2 tile rows x 4 heads x (2 + 1) blocks; test_tiny over 10 rows (2 tile rows).
  cases.push_back({"wormhole_n150", Join(40, 4, 4 * 128, 4 * 64, true), "join_40x4_128+64_tiled_dense", 24});
  cases.push_back({"test_tiny", Join(10, 2, 2 * 16, 2 * 8, true), "join_10x2_16+8_tiled_dense", 12});
  // Not whole tiles: a head of 80 from 40 + 40, 24 heads: 1920 results = 60 tiles, blocks of 6.
  add("wormhole_n150", 1, 24, 24 * 40, 24 * 40, 10, false);
  add("wormhole_n150", 2, 3, 30, 45, 1, false);
  add("wormhole_n150", 1, 1, 100, 156, 1, false);
  RunCases(cases, Reals(-50, 50), 0.0);
}

// ★ EVERY ITEM RUNS THE SAME STAGES, SO THE SOURCE IS DATA: the tables hold, per block, A's block, B's block and
// how many columns to keep from A.
TEST(TablesTest, TileJoinTables) {
  absl::StatusOr<Composition> c = Lower(Join(1, 2, 16, 32), Shipped("test_tiny"));
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& s = c->sections[0];
  auto values = [&](const std::string& name) {
    const Tensor& t = s.tensors[s.FindTensor(name)];
    EXPECT_EQ(t.role, TensorRole::kParam);
    EXPECT_EQ(t.precision, Precision::kInt32);
    std::vector<int64_t> per_block;
    for (size_t i = 0; i < t.init.values.size(); i += 8) per_block.push_back(t.init.values[i]);
    return per_block;
  };
  EXPECT_EQ(values("y__join_from_a"), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(values("y__join_from_b"), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(values("y__join_keep_a"), (std::vector<int64_t>{8, 0, 0}));
}

proto::OpSpec HeadMatmul(int64_t m, int64_t heads, int64_t a, int64_t b) {
  proto::OpSpec s = HeadMatmulSpec(m, heads, a, b);
  // W is an Input of the flat form and a Param of the tiled one: its fill gives the tiled form its values (the run
  // gives the flat form's), and the reference reads whichever the lowering used.
  auto* rp = s.mutable_operands(1)->mutable_fill()->mutable_real_pattern();
  rp->set_modulus(7919);
  rp->set_scale(2.0 / 7919);
  rp->set_offset(-1.0);
  return s;
}

TEST(TablesTest, HeadMatmulMatchesReference) {
  std::vector<Case> cases;
  auto flat = [&](const char* target, int64_t m, int64_t heads, int64_t a, int64_t b) {
    cases.push_back({target, HeadMatmul(m, heads, a, b), absl::StrCat("head_matmul_", m, "x", heads, "x", a, "x", b),
                     1});
  };
  auto tiled = [&](const char* target, int64_t heads, int64_t a, int64_t b, size_t items) {
    cases.push_back({target, HeadMatmul(1, heads, a, b),
                     absl::StrCat("head_matmul_1x", heads, "x", a, "x", b, "_tiled"), items});
  };
  flat("test_tiny", 1, 1, 1, 1);
  flat("test_tiny", 1, 1, 5, 7);
  flat("test_tiny", 1, 2, 3, 4);
  flat("test_tiny", 2, 2, 3, 4);
  flat("test_tiny", 3, 1, 9, 10);
  flat("test_tiny", 2, 3, 2, 5);
  flat("test_tiny", 1, 4, 17, 8);  // b whole, a not: flat
  flat("test_tiny", 2, 1, 8, 8);   // two rows: flat even at whole tiles
  flat("test_tiny", 1, 1, 41, 32);
  tiled("test_tiny", 1, 8, 8, 1);
  tiled("test_tiny", 2, 16, 8, 2);
  tiled("test_tiny", 3, 8, 24, 9);
  tiled("test_tiny", 4, 32, 16, 8);
  flat("wormhole_n150", 1, 4, 25, 60);
  flat("wormhole_n150", 2, 2, 16, 32);
  // Qwen3-0.6B's head geometry: 16 query heads of 128 through a 128 x 128 per-head projection; its 8 KV heads; and
  // Qwen3-8B's 32 query heads. A latent attention's 128 -> 512 expansion for 4 heads.
  tiled("wormhole_n150", 16, 128, 128, 64);
  tiled("wormhole_n150", 8, 128, 128, 32);
  tiled("wormhole_n150", 32, 128, 128, 128);
  tiled("wormhole_n150", 4, 128, 512, 64);
  tiled("wormhole_n150", 2, 512, 64, 4);
  RunCases(cases, Reals(-2, 2), 1e-12);
}

// Item (h, o) reads head h's input tiles and the tile column o of its rows of W: W never comes on chip whole.
TEST(TablesTest, TileHeadMatmulLoadsOneWeightColumnAnItem) {
  absl::StatusOr<Composition> c = Lower(HeadMatmul(1, 16, 128, 128), Shipped("wormhole_n150"));
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& s = c->sections[0];
  const Tensor& w = s.tensors[s.FindTensor("w")];
  EXPECT_EQ(w.role, TensorRole::kParam);
  EXPECT_EQ(w.rows, 16 * 128);
  EXPECT_EQ(w.cols, 128);
  const Load& lw = std::get<Load>(s.stages[s.FindStage("load_w")].op);
  EXPECT_EQ(lw.pattern.block_h, 4);
  EXPECT_EQ(lw.pattern.block_w, 1);
  EXPECT_EQ(s.acc_precision, Precision::kFp32);
  EXPECT_EQ(s.claim.reason, "per-head matmul in bf16");
}

}  // namespace
}  // namespace spatial::testing


namespace spatial::testing {
namespace {

// The column-blocked join's reads are in range only relative to its item's table (inside band j, c >= k_{j-1} - o,
// so c + o - u*hb >= 0): the certifier proves them item by item.
TEST(TablesTest, ColumnBlockedJoinCertifies) {
  const Target& t = Shipped("test_tiny");
  absl::StatusOr<Composition> c = Lower(Join(2, 3, 9, 15), t);
  ASSERT_TRUE(c.ok()) << c.status();
  const Section& s = c->sections[0];
  ASSERT_EQ(s.items.size(), 2u);  // column-blocked
  EXPECT_GE(s.FindTensor("join__columns"), 0);
  ExpectCertifies(*c, t);
}

}  // namespace
}  // namespace spatial::testing
