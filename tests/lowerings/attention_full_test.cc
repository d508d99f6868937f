// Full attention through the registry (three-way: VM against the naive reference, validated, certified wherever it
// lowers), the fold's page choice (two pages where they fit, one where they do not), the per-value-page fallback
// for a decode fold no site holds, and the refusals of every attention entry point.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/attention/flash_fold.h"
#include "lowerings/attention/full_attention.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/maps.h"
#include "tests/lowerings/attention_check.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

proto::OpSpec FullSpec(int64_t t, int64_t h, int64_t hd) {
  proto::OpSpec s = Spec({"q", "k", "v"});
  s.mutable_full_attention()->set_t(t);
  s.mutable_full_attention()->set_h(h);
  s.mutable_full_attention()->set_hd(hd);
  return s;
}

TEST(AttentionFullTest, ThreeWay) {
  struct Case {
    const char* target;
    int64_t t, h, hd;
  };
  for (const Case& c : std::vector<Case>{{"test_tiny", 5, 2, 8},
                                         {"test_tiny", 20, 3, 16},
                                         {"test_tiny", 9, 1, 64},
                                         {"test_tiny", 16, 2, 8},
                                         {"wormhole_n150", 40, 2, 64}}) {
    const Target& target = Shipped(c.target);
    const proto::OpSpec spec = FullSpec(c.t, c.h, c.hd);
    const Composition comp = ThreeWay(spec, target, Reals(-1, 1), 1e-12, c.t * 31 + c.h);
    ASSERT_EQ(comp.sections.size(), 1u);
    const Section& s = comp.sections[0];
    const int64_t tr = target.tile_rows();
    // One query tile takes the one-tile fold (flash_prefill.h: ★ ONE QUERY TILE THAT SEES EVERY POSITION IS THE
    // ONE-TILE FOLD'S), an item per head.
    if (c.t <= tr) {
      EXPECT_TRUE(absl::StartsWith(s.name, absl::StrCat("full_attn_flash_blocks_", c.h, "x", c.hd, "_l", c.t)))
          << s.name;
      EXPECT_EQ(s.items.size(), static_cast<size_t>(c.h));
      continue;
    }
    // More rows over T positions take the prefill fold (flash_prefill.h): every row sees every position, so one
    // section of chunks of qc query tiles, folding blocks of kb tile rows (qc * kb at most an accumulator page).
    const int64_t tiles = CeilDiv(c.t, tr);
    const std::string prefix = "full_attn_flash_prefill_" + std::to_string(tiles * c.h) + "x" + std::to_string(c.hd) +
                               "_l" + std::to_string(c.t) + "_q";
    ASSERT_TRUE(absl::StartsWith(s.name, prefix)) << s.name;
    const int64_t qc = std::stoll(s.name.substr(prefix.size()));
    const int64_t kb = std::stoll(s.name.substr(s.name.find("_kb") + 3));
    EXPECT_EQ(tiles % qc, 0) << s.name;
    EXPECT_EQ(tiles % kb, 0) << s.name;
    EXPECT_LE(qc * kb, RowBlockTiles(target)) << s.name;
    EXPECT_TRUE(absl::EndsWith(s.name, "_c0to" + std::to_string(tiles / qc - 1))) << s.name;
    EXPECT_EQ(tiles / kb > 1 ? s.num_blocks : 1, tiles / kb) << s.name;
    EXPECT_FALSE(s.trip.has_value());
    // Unmasked where the positions fill whole tile rows: no limit, no mask.
    EXPECT_EQ(s.FindStage("row_limit") >= 0, c.t % tr != 0);
  }
  // A head that is not whole tiles takes the three flat sections, the same values as flat rows.
  const Composition narrow = ThreeWay(FullSpec(3, 1, 10), Shipped("test_tiny"), Reals(-1, 1), 1e-12, 5);
  EXPECT_EQ(narrow.sections.size(), 3u);
  EXPECT_EQ(SectionNamed(narrow, "_flash_blocks_"), nullptr);
  // ... refused by name where its flat rows are wider than an accumulator page.
  const std::string wide = RefusalOf(FullSpec(4, 2, 12), Shipped("test_tiny"));
  EXPECT_TRUE(absl::StartsWith(wide, "AccTilesExceeded: ")) << wide;
  // Grayskull has no fp32 accumulator for the running softmax: every shape is refused there, by name.
  const std::string why = RefusalOf(FullSpec(64, 2, 64), Shipped("grayskull_e150"));
  EXPECT_TRUE(absl::StartsWith(why, "MissingPrecision: an fp32 accumulator")) << why;
}

TEST(AttentionFullTest, Refusals) {
  const Target& tiny = Shipped("test_tiny");
  EXPECT_EQ(RefusalOf(FullSpec(0, 2, 8), tiny),
            "NotLowered: a full attention with no positions, no heads or no head dimension");
  EXPECT_EQ(RefusalOf(FullSpec(4, 0, 8), tiny),
            "NotLowered: a full attention with no positions, no heads or no head dimension");
  absl::StatusOr<Composition> neg = Lower(FullSpec(-1, 2, 8), tiny);
  EXPECT_EQ(neg.status().code(), absl::StatusCode::kInvalidArgument) << neg.status();
  proto::OpSpec two = FullSpec(4, 2, 8);
  two.mutable_operands()->RemoveLast();
  EXPECT_TRUE(absl::StartsWith(RefusalOf(two, tiny), "NotLowered: full_attention takes 3 operands, got 2"));
}

// ★ TWO PAGES WHERE THEY FIT, ONE WHERE THEY DO NOT: a key 300 tiles wide leaves no room for a second page of it on
// test_tiny's 88 KiB, and the one-page fold computes the same values.
TEST(AttentionFullTest, OnePageWhenTwoDoNotFit) {
  const Target& tiny = Shipped("test_tiny");
  const AttnCase fits{.h = 1, .kv = 1, .hd = 64, .vd = 32, .l = 16};
  const Composition two = CheckAttention(fits, tiny, Form::kFlash);
  ASSERT_EQ(two.sections.size(), 1u);
  EXPECT_EQ(two.sections[0].buffers[two.sections[0].FindBuffer("in_k")].depth, 2);
  const AttnCase wide{.h = 1, .kv = 1, .hd = 2400, .vd = 32, .l = 16};
  const Composition one = CheckAttention(wide, tiny, Form::kFlash);
  ASSERT_EQ(one.sections.size(), 1u);
  const Section& s = one.sections[0];
  for (const char* b : {"in_k", "in_v", "out"}) EXPECT_EQ(s.buffers[s.FindBuffer(b)].depth, 1) << b;
  EXPECT_EQ(s.buffers[s.FindBuffer("run_out")].depth, 2);  // a carry keeps its two pages
  EXPECT_LE(SiteFootprint(s, tiny), tiny.max_local_mem_bytes());
  absl::StatusOr<AttentionShape> shape = AttentionShapeOf(AttnSpec(wide));
  ASSERT_TRUE(shape.ok());
  absl::StatusOr<Composition> doubled =
      FlashFoldPaged(*AttentionNamesOf(AttnSpec(wide)), FlashGeometryOf(*shape), "attn", tiny, 2);
  ASSERT_TRUE(doubled.ok()) << doubled.status();
  EXPECT_GT(SiteFootprint(doubled->sections[0], tiny), tiny.max_local_mem_bytes());
}

// A decode fold whose two value pages do not fit one site is one fold per value page, each re-reading the keys,
// joined back per head: still the attention. (Blocks of one tile row: a wider block reads its values whole, without
// the guarded contraction's per-page buffers, and fits one site.)
TEST(AttentionFullTest, ValuePagesWhenTheFoldDoesNotFit) {
  const Target& tiny = Shipped("test_tiny");
  const AttnCase c{.h = 2, .kv = 1, .hd = 2496, .vd = 64, .l = 16, .kv_chunk = 8};
  const Composition comp = CheckAttention(c, tiny, Form::kFlash);
  ASSERT_EQ(comp.sections.size(), 3u);
  EXPECT_EQ(comp.sections[0].name, "attn_flash_blocks_2x2496_v64_pages0+1_l16_b8");
  EXPECT_EQ(comp.sections[1].name, "attn_flash_blocks_2x2496_v64_pages1+1_l16_b8");
  EXPECT_TRUE(absl::StartsWith(comp.sections[2].name, "join_1x2_32+32")) << comp.sections[2].name;
  EXPECT_GE(comp.sections[0].FindTensor("y__values0"), 0);
  for (const Section& s : comp.sections) EXPECT_LE(SiteFootprint(s, tiny), tiny.max_local_mem_bytes()) << s.name;
  // With sinks, each page's fold spreads them under its own name.
  const AttnCase sinks{.h = 2, .kv = 1, .hd = 2496, .vd = 64, .l = 16, .sinks = true, .kv_chunk = 8};
  const Composition with = CheckAttention(sinks, tiny, Form::kFlash);
  EXPECT_EQ(with.sections.size(), 5u);
  // Not for a block of query rows: refused by name.
  const AttnCase block{.h = 2, .kv = 1, .hd = 2640, .vd = 64, .l = 16, .rows = 2, .pos = Pos::kLiteral, .p = 3};
  absl::StatusOr<Composition> r = LowerAttention(AttnSpec(block), tiny, Form::kFlash);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "NotLowered: a flash attention fold — one tile of queries against one tile row of its K/V head — does "
            "not fit a site");
}

std::string RefusalMessage(const AttnCase& c, const Target& t, Form form) {
  absl::StatusOr<Composition> r = LowerAttention(AttnSpec(c), t, form);
  EXPECT_FALSE(r.ok()) << CaseText(c) << " lowered on " << t.name();
  if (r.ok()) return "";
  EXPECT_TRUE(IsRefusal(r.status())) << r.status();
  return std::string(r.status().message());
}

// The from_attention refusals of AttentionShapeOf, and the flash entry points' own.
TEST(AttentionFullTest, AttentionRefusals) {
  const Target& tiny = Shipped("test_tiny");
  const std::string empty =
      "NotLowered: an attention with no heads, no query rows, no head dimension or an empty cache";
  EXPECT_EQ(RefusalMessage({.h = 0}, tiny, Form::kFlash), empty);
  EXPECT_EQ(RefusalMessage({.kv = 0}, tiny, Form::kFlash), empty);
  EXPECT_EQ(RefusalMessage({.hd = 0}, tiny, Form::kFlash), empty);
  EXPECT_EQ(RefusalMessage({.l = 0}, tiny, Form::kFlash), empty);
  EXPECT_EQ(RefusalMessage({.rows = 0}, tiny, Form::kFlash), empty);
  proto::OpSpec zero_window = AttnSpec({.l = 16});
  zero_window.mutable_attention()->mutable_window()->set_sliding(0);
  EXPECT_EQ(AttentionShapeOf(zero_window).status().message(),
            "NotLowered: a window of no positions — every row's softmax would be empty");
  EXPECT_EQ(RefusalMessage({.l = 16, .rows = 2}, tiny, Form::kFlash),
            "NotLowered: a block of query rows with no causal bound");
  // The position, the range its rows allow, and why it is 1-based.
  EXPECT_EQ(RefusalMessage({.l = 16, .pos = Pos::kLiteral, .p = 0}, tiny, Form::kFlash),
            "NotLowered: a literal attention position 0 outside [1, 16] (1-based, the query row's; its 1 row "
            "within the 16-position cache) — the program fails at run time on every tier, so there is no "
            "section to lower");
  EXPECT_EQ(RefusalMessage({.l = 16, .pos = Pos::kLiteral, .p = 17}, tiny, Form::kFlash),
            "NotLowered: a literal attention position 17 outside [1, 16] (1-based, the query row's; its 1 "
            "row within the 16-position cache) — the program fails at run time on every tier, so there is no "
            "section to lower");
  EXPECT_EQ(RefusalMessage({.l = 16, .rows = 4, .pos = Pos::kLiteral, .p = 14}, tiny, Form::kFlash),
            "NotLowered: a literal attention position 14 outside [1, 13] (1-based, the first query row's; "
            "its 4 rows within the 16-position cache) — the program fails at run time on every tier, so "
            "there is no section to lower");
  EXPECT_TRUE(absl::StrContains(RefusalMessage({.l = 3, .rows = 4, .pos = Pos::kNamed, .p = 1}, tiny, Form::kFlash),
                                "longer than its cache"));
  // Malformed specs are errors, not refusals.
  EXPECT_EQ(AttentionShapeOf(AttnSpec({.h = -1})).status().code(), absl::StatusCode::kInvalidArgument);
  proto::OpSpec renamed = AttnSpec({.l = 16, .pos = Pos::kNamed, .p = 3});
  renamed.mutable_attention()->mutable_pos()->set_named("other");
  EXPECT_EQ(AttentionShapeOf(renamed).status().code(), absl::StatusCode::kInvalidArgument);
  proto::OpSpec missing = AttnSpec({.l = 16, .sinks = true});
  missing.mutable_operands()->RemoveLast();
  EXPECT_EQ(AttentionNamesOf(missing).status().message(), "NotLowered: attention takes 4 operands, got 3");

  // The flash fold's: grayskull has no fp32 accumulator (and no integer datapath); heads not whole tiles; query heads
  // reading a K/V head past the cache's.
  const std::string gs = RefusalMessage({.hd = 32, .vd = 32, .l = 40}, Shipped("grayskull_e150"), Form::kFlash);
  EXPECT_TRUE(absl::StartsWith(gs,
                               "MissingPrecision: an fp32 accumulator (Dst) for the flash fold's running "
                               "softmax (target grayskull_e150)"))
      << gs;
  EXPECT_EQ(RefusalMessage({.hd = 8, .vd = 8, .l = 40}, Shipped("wormhole_n150"), Form::kFlash),
            "NotLowered: a flash attention fold whose heads are not whole tiles");
  EXPECT_TRUE(absl::StrContains(RefusalMessage({.h = 6, .kv = 4, .l = 16}, tiny, Form::kFlash),
                                "K/V head is past the cache's heads"));
  // A tile that is not square: a block's positions are its scores' columns.
  proto::Target oblong = tiny.proto();
  oblong.mutable_tile()->set_cols(16);
  const Target wide(oblong);
  EXPECT_EQ(RefusalMessage({.hd = 16, .vd = 16, .l = 16}, wide, Form::kFlash),
            "NotLowered: a flash attention fold on a tile that is not square — a block's positions are its scores' "
            "columns");
  // The grouped decode's: one query row, a group of two to a tile's rows, heads within an accumulator page.
  EXPECT_EQ(RefusalMessage({.h = 4, .kv = 2, .l = 16, .rows = 2, .pos = Pos::kNamed}, tiny, Form::kGrouped),
            "NotLowered: a grouped decode attention of more than one query row, or of a group of one or taller "
            "than a tile");
  EXPECT_TRUE(absl::StrContains(RefusalMessage({.h = 2, .kv = 2, .l = 16}, tiny, Form::kGrouped), "group of one"));
  EXPECT_TRUE(absl::StrContains(RefusalMessage({.h = 16, .kv = 1, .l = 16}, tiny, Form::kGrouped), "taller"));
  EXPECT_EQ(RefusalMessage({.h = 4, .kv = 2, .hd = 64, .vd = 8, .l = 16}, tiny, Form::kGrouped),
            "NotLowered: a grouped decode attention whose head is wider than an accumulator page");
  EXPECT_EQ(RefusalMessage({.h = 4, .kv = 2, .l = 16}, wide, Form::kGrouped),
            "NotLowered: a grouped decode attention on a tile that is not square");
  // The flash form falls back from a refused grouped decode to the flash fold, whose refusal it then reports.
  EXPECT_EQ(RefusalMessage({.h = 4, .kv = 2, .hd = 16, .vd = 16, .l = 16}, wide, Form::kFlashForm),
            "NotLowered: a flash attention fold on a tile that is not square — a block's positions are its scores' "
            "columns");
}

// Every program of the attention cases certifies on every shipped target that does not refuse it.
TEST(AttentionFullTest, CertifiesWhereverItLowers) {
  const std::vector<std::pair<AttnCase, Form>> cases = {
      {{.h = 4, .kv = 2, .hd = 64, .vd = 64, .l = 100, .pos = Pos::kNamed, .p = 5}, Form::kFlashForm},
      {{.h = 8, .kv = 1, .hd = 128, .vd = 128, .l = 70, .rows = 9, .pos = Pos::kNamed, .p = 3, .sliding = 20,
        .sinks = true, .cap = 30},
       Form::kFlash},
      {{.h = 4, .kv = 4, .hd = 64, .vd = 128, .l = 50, .pos = Pos::kLiteral, .p = 44, .chunked = 32}, Form::kFlash},
      {{.h = 8, .kv = 2, .hd = 32, .vd = 32, .l = 33, .pos = Pos::kNamed, .p = 3, .sinks = true}, Form::kGrouped},
  };
  for (const auto& [c, form] : cases) {
    SCOPED_TRACE(CaseText(c));
    EXPECT_GE(CertifyOnShipped(AttnSpec(c), form), 2);
  }
}

}  // namespace
}  // namespace spatial::testing
