// Multi-head latent attention, one decode step (lowerings/attention/mla.h): the absorbed form's seven sections
// against the naive reference that materializes every head's keys and values from the latent cache, on the VM, and
// certified on every shipped target that lowers it — DeepSeek-V3's widths (128 heads, nope 128, rope 64, latent
// 512, values 128) at positions 1, 4095 and 4096, and reduced shapes around every boundary of the fold.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "gtest/gtest.h"
#include "tests/lowerings/harness.h"
#include "tests/lowerings/mla_cases.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

void CheckCase(const MlaCase& c) {
  const proto::OpSpec spec = MlaSpecOf(c);
  SCOPED_TRACE(spec.ShortDebugString());
  const Composition comp = ThreeWay(spec, Shipped(c.target), MlaDraw(c), 1e-12, static_cast<uint64_t>(c.l * 7 + 1));
  // Seven sections, and the combine of a split fold.
  bool split = false;
  for (const Section& sec : comp.sections) split = split || sec.name.find("_flash_combine_") != std::string::npos;
  EXPECT_EQ(comp.sections.size(), split ? 8u : 7u);
}

TEST(MlaTest, MatchesReference) {
  const std::vector<MlaCase> cases = {
      // test_tiny's 8 x 8 tiles: heads one and two tile rows, one block, a fold of blocks, the last block partial.
      {"test_tiny", 8, 8, 8, 16, 8, 8},
      {"test_tiny", 8, 8, 8, 16, 8, 40},
      {"test_tiny", 16, 8, 8, 16, 8, 24},  // two query tiles: the blocks multicast
      {"test_tiny", 8, 16, 8, 32, 16, 33, 33},
      {"test_tiny", 8, 8, 8, 16, 8, 30, 17},                     // a literal position inside a block
      {"test_tiny", 8, 8, 8, 16, 8, 30, 1},                      // position 1: one live key
      {"test_tiny", 16, 8, 8, 16, 16, 40, 9, /*named=*/true},    // P read at run time, just past a block
      {"test_tiny", 16, 8, 8, 16, 16, 40, 40, true},             // the whole cache
      {"test_tiny", 8, 8, 16, 8, 8, 16, 5, true, 0.3},           // values narrower than the rope part, a scale
      {"test_tiny", 24, 8, 8, 16, 8, 16, 16, true},              // three query tiles
      {"test_tiny", 8, 16, 8, 32, 8, 64, 57, true},              // a latent of four tiles: value pages
      // Wormhole's and Blackhole's 32 x 32 tiles.
      {"wormhole_n150", 32, 32, 32, 64, 32, 64},
      {"wormhole_n150", 32, 64, 32, 128, 64, 100, 77, true},
      {"wormhole_n150", 64, 32, 32, 256, 32, 96, 33, true},      // two query tiles, a latent of eight tiles
      {"wormhole_n150", 32, 128, 64, 512, 128, 64, 64, true},    // DeepSeek-V3's head widths, 32 heads
      {"wormhole_n150", 32, 128, 64, 512, 128, 128, 1, true},
      {"wormhole_n150", 32, 32, 32, 64, 32, 200, 131},
      {"blackhole_p150", 32, 64, 64, 128, 64, 70, 70, true},
      {"blackhole_p150", 64, 32, 32, 64, 32, 65, 2, true},
      {"blackhole_p150", 32, 32, 32, 96, 32, 40},
  };
  for (const MlaCase& c : cases) CheckCase(c);
  EXPECT_GE(cases.size(), 20u);
}

// A prefill's rows (mla.h): row t of every head attends the first P + t positions of the one latent cache; the
// absorbed products over the rows on the matrix engine. One and several tiles of rows, a last tile part full, P
// literal and read at run time, a latent of value pages.
TEST(MlaTest, PrefillRowsMatchReference) {
  auto rows = [](MlaCase c, int64_t t) {
    c.rows = t;
    return c;
  };
  const std::vector<MlaCase> cases = {
      rows({"test_tiny", 8, 8, 8, 16, 8, 16, 1}, 5),
      rows({"test_tiny", 16, 8, 8, 16, 8, 40, 1}, 13),  // two tiles of rows, two tiles of heads
      rows({"test_tiny", 8, 16, 8, 32, 16, 40, 7, true}, 9),
      rows({"wormhole_n150", 32, 32, 32, 64, 32, 64, 1}, 40),
      rows({"wormhole_n150", 32, 128, 64, 512, 128, 128, 1}, 33),  // DeepSeek-V3's head widths, 32 heads
  };
  for (const MlaCase& c : cases) {
    const proto::OpSpec spec = MlaSpecOf(c);
    SCOPED_TRACE(spec.ShortDebugString());
    const Composition comp =
        ThreeWay(spec, Shipped(c.target), MlaDraw(c), 1e-12, static_cast<uint64_t>(c.l * 7 + c.rows));
    EXPECT_EQ(comp.sections.front().name,
              absl::StrCat("head_matmul_", c.rows, "x", c.heads, "x", c.nope, "x", c.rank, "_rows"));
  }
}

// DeepSeek-V3's latent attention at its real widths — 128 heads, nope 128, rope 64, latent 512, values 128 — over a
// cache of 4096 positions: the first position, the one before a block boundary, and the full cache.
TEST(MlaTest, DeepSeekV3AtPositions1And4095And4096) {
  for (int64_t pos : {1, 4095, 4096}) {
    CheckCase(MlaCase{"wormhole_n150", 128, 128, 64, 512, 128, 4096, pos, true, 0.1352});
  }
}

// ★ THE LATENT CACHE IS READ ONCE: the fold has an item per tile of heads and part of the cache, every item of a
// part reads the same blocks of the one cache, its key page is its value page (no V is declared), and its blocks
// are multicast along the tiles of heads. Split 16 ways (flash_split.h), the 4 x 16 items fill the grid.
TEST(MlaTest, TheCacheIsReadOnce) {
  const MlaCase c{"wormhole_n150", 128, 128, 64, 512, 128, 4096, 4096, true};
  absl::StatusOr<Composition> comp = Lower(MlaSpecOf(c), Shipped(c.target));
  ASSERT_TRUE(comp.ok()) << comp.status();
  ASSERT_EQ(comp->sections.size(), 8u);
  EXPECT_EQ(comp->name, "mla_128x128+64_r512_v128_l4096");
  const std::vector<std::string> names = {"head_matmul_1x128x128x512_tiled", "head_slice_128x64_of_192_tiled",
                                          "join_1x128_512+64_tiled", "relayout_dense_128x576_rows0",
                                          "mla_flash_blocks_4x576_latent_split16_v512_l4096_b128",
                                          "mla_flash_combine_4x16_v512", "relayout_rows_128x512",
                                          "head_matmul_1x128x512x128_tiled"};
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(comp->sections[i].name, names[i]) << i;
  const Section& fold = comp->sections[4];
  EXPECT_EQ(fold.items.size(), 64u);
  EXPECT_EQ(fold.num_blocks, 2);  // 128 tile rows, 8 a part, in blocks of 4 (128 positions)
  EXPECT_LT(fold.FindTensor("v"), 0) << "a latent fold declares no V";
  int cache_loads = 0;
  for (const Stage& s : fold.stages) {
    const auto* load = std::get_if<Load>(&s.op);
    if (load == nullptr || fold.tensors[load->tensor].name != "c") continue;
    ++cache_loads;
    EXPECT_EQ(load->multicast, LoopVar::kItemY) << s.name;
  }
  EXPECT_EQ(cache_loads, 1);
  EXPECT_EQ(comp->sections[5].items.size(), 64u);  // 4 tiles of heads x 16 one-tile blocks of the values
  EXPECT_EQ(comp->sections[5].num_blocks, 1);  // the combine merges its 16 parts at once, with no fold
  const CertifyResult cert = Certify(*comp, Shipped(c.target));
  EXPECT_TRUE(cert.ok()) << (cert.diagnostics.empty() ? "" : cert.diagnostics[0].message());
}

TEST(MlaTest, Refusals) {
  const Target& tiny = Shipped("test_tiny");
  MlaCase c{"test_tiny", 8, 8, 8, 16, 8, 16};
  c.heads = 12;
  EXPECT_EQ(RefusalOf(MlaSpecOf(c), tiny),
            "NotLowered: a latent attention whose widths are not whole tiles, or whose heads are not whole tile "
            "rows (nope 8, rope 8, rank 16, vd 8, heads 12 on 8 x 8 tiles)");
  c.heads = 8;
  c.rank = 0;
  EXPECT_EQ(RefusalOf(MlaSpecOf(c), tiny),
            "NotLowered: a latent attention with no heads, no head widths, no latent or an empty cache");
  c.rank = 16;
  c.pos = 17;
  EXPECT_EQ(RefusalOf(MlaSpecOf(c), tiny),
            "NotLowered: a literal attention position 17 outside [1, 16] (1-based, the query row's; its 1 "
            "row within the 16-position cache) — the program fails at run time on every tier, so there is no "
            "section to lower");
  c.pos = 0;
  c.nope = -8;
  absl::StatusOr<Composition> bad = Lower(MlaSpecOf(c), tiny);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "mla.nope is negative (-8)");
  c.nope = 8;
  c.scale = NAN;
  bad = Lower(MlaSpecOf(c), tiny);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "mla.scale is nan: a score scale is finite (0: 1 / sqrt(nope + rope))");
  c.scale = 0.0;
  proto::OpSpec three = MlaSpecOf(c);
  three.mutable_operands()->RemoveLast();
  EXPECT_EQ(RefusalOf(three, tiny), "NotLowered: mla takes 4 operands, got 3");
}

}  // namespace
}  // namespace spatial::testing
