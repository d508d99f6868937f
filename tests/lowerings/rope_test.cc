// RoPE against its op reference on the VM — the reference computes the real rotation from theta, the program reads
// the angle tables it is handed (built here from the same theta) — to 1e-12 relative, validated and certified on
// every shipped target that lowers it. Every form the seed picks: the flat stage (column-blocked past a page), the
// head as the work item (whole-tile tables, or a window around a table row that is not whole tiles), the cache read
// at a literal or a named position at BOTH edges of the cache; full and partial rotary; Qwen3's real shapes.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "certify/certify.h"
#include "gtest/gtest.h"
#include "spatial/maps.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

constexpr double kQwenTheta = 1e6;
constexpr double kTol = 1e-12;

struct Rope {
  int64_t h, hd, half, rows;
  int64_t cache = 0;   // 0: no cache, positions 0..rows
  bool named = false;  // the position read from operand "p"
  double theta = kQwenTheta;
};

proto::OpSpec RopeSpec(const Rope& r, int64_t at) {
  proto::OpSpec s = r.cache > 0 && r.named ? Spec({"q", "rc", "rs", "p"}) : Spec({"q", "rc", "rs"});
  auto* p = s.mutable_rope();
  p->set_h(r.h);
  p->set_hd(r.hd);
  p->set_half(r.half);
  p->set_rows(r.rows);
  p->set_theta(r.theta);
  if (r.cache > 0) {
    p->set_cache(r.cache);
    if (r.named) {
      p->mutable_from()->set_named("p");
    } else {
      p->mutable_from()->set_literal(at);
    }
  }
  return s;
}

// q at random; the tables the real angles of every table row ρ (position ρ): rc[ρ·half + i] = cos(ρ·θ^(−i/half));
// the position "p" = `at`.
Draw RopeDraw(int64_t half, double theta, int64_t at) {
  auto counts = std::make_shared<std::map<std::string, int64_t>>();
  return [=](const std::string& name, Rng& r) -> double {
    if (name == "p") return static_cast<double>(at);
    if (name != "rc" && name != "rs") return r.Real(-2, 2);
    const int64_t e = (*counts)[name]++;
    const double angle = static_cast<double>(e / half) * std::pow(theta, -static_cast<double>(e % half) / half);
    return name == "rc" ? std::cos(angle) : std::sin(angle);
  };
}

struct Case {
  const char* target;
  Rope rope;
  std::string form;  // "flat", "blocked" (the head as the item), "dense" (a prefill's rows as the matrix)
  size_t items;
};

void CheckRopes(const std::vector<Case>& cases) {
  for (const Case& k : cases) {
    const Rope& r = k.rope;
    const std::vector<int64_t> ats =
        r.cache > 0 ? std::vector<int64_t>{1, r.cache - r.rows + 1} : std::vector<int64_t>{1};
    for (int64_t at : ats) {
      proto::OpSpec spec = RopeSpec(r, at);
      SCOPED_TRACE(spec.ShortDebugString() + " on " + k.target);
      Composition c = ThreeWay(spec, Shipped(k.target), RopeDraw(r.half, r.theta, at), kTol, at + r.h);
      ASSERT_EQ(c.sections.size(), 1u);
      const Section& s = c.sections[0];
      EXPECT_EQ(s.name, absl::StrCat("rope_", r.h, "x", r.hd, "_half", r.half,
                                     r.rows > 1 ? absl::StrCat("_rows", r.rows) : "", k.form == "dense" ? "_dense" : ""));
      EXPECT_EQ(s.items.size(), k.items);
      EXPECT_FALSE(s.claim.exact);
      // The head form loads one head of q an item; the flat form the whole row, the same page for every item.
      const int in_q = s.FindBuffer("in_q");
      ASSERT_GE(in_q, 0);
      const int64_t tc = Shipped(k.target).tile_cols();
      EXPECT_EQ(s.buffers[in_q].page_tiles, k.form != "flat" ? CeilDiv(r.hd, tc) : CeilDiv(r.h * r.hd, tc));
      // The dense form reads the rows x per_row·hd matrix a projection writes.
      const Tensor& q = s.tensors[s.FindTensor("q")];
      EXPECT_EQ(q.rows, k.form == "dense" ? r.rows : 1);
    }
  }
}

TEST(RopeTest, FlatStage) {
  CheckRopes({
      // One page: 2 heads of 8, full rotary; partial rotary (2 of 6 rotated... half 2); two rows of two heads.
      {"test_tiny", {2, 8, 4, 1}, "flat", 1},
      {"test_tiny", {1, 6, 2, 1}, "flat", 1},
      {"test_tiny", {4, 4, 2, 2}, "flat", 1},
      {"test_tiny", {3, 5, 2, 3}, "flat", 1},
      // Past a page and heads not in whole tiles: the stage blocked by the result's columns.
      {"test_tiny", {4, 10, 3, 1}, "flat", 5},
      {"test_tiny", {6, 12, 6, 3}, "flat", 3},
      {"test_tiny", {8, 10, 5, 2}, "flat", 5},
      // Qwen3.8's partial rotary of a head of 80 (half 20 of 40): it shares tiles with its neighbours, so stays flat.
      {"wormhole_n150", {4, 80, 20, 1}, "flat", 2},
  });
}

TEST(RopeTest, HeadAsTheItem) {
  CheckRopes({
      {"test_tiny", {8, 8, 4, 1}, "blocked", 8},
      {"test_tiny", {6, 16, 4, 2}, "blocked", 6},  // a table row of 4: read through a window
      {"test_tiny", {4, 16, 8, 2}, "blocked", 4},  // whole-tile table rows, stepped per query row
      {"test_tiny", {6, 16, 5, 3}, "blocked", 6},  // partial rotary, windowed
      // Qwen3-0.6B: 16 query heads and 8 KV heads of 128, full rotary (half 64), theta 1e6, one decode row.
      {"wormhole_n150", {16, 128, 64, 1}, "blocked", 16},
      {"wormhole_n150", {8, 128, 64, 1}, "blocked", 8},
      // Qwen3-8B's 32 query heads over a 3-token prefill (96 (row, head) units), and its 8 KV heads.
      {"wormhole_n150", {96, 128, 64, 3}, "blocked", 96},
      {"blackhole_p150", {8, 128, 64, 1}, "blocked", 8},
  });
}

// A prefill's rows in whole tile rows and whole-tile halves: the dense matrix, a tile of rows an item, its tables'
// rows one block — unset, literal and named positions at both edges, partial rotary.
TEST(RopeTest, DenseRowsOfAPrefill) {
  std::vector<Case> cases{
      {"test_tiny", {16, 16, 8, 8}, "dense", 2},
      {"test_tiny", {32, 16, 8, 16}, "dense", 4},
      {"test_tiny", {24, 24, 8, 8}, "dense", 3},  // partial rotary: a tile passes through
      {"blackhole_p150", {64, 64, 32, 32}, "dense", 2},
  };
  for (bool named : {false, true}) {
    cases.push_back({"test_tiny", {16, 16, 8, 8, 20, named}, "dense", 2});
    // Llama-3.1-8B's query heads over a 32-row prefill; Qwen3-Next's partial rotary (64 of 256).
    cases.push_back({"wormhole_n150", {128, 128, 64, 32, 64, named}, "dense", 4});
    cases.push_back({"wormhole_n150", {64, 256, 32, 32, 40, named}, "dense", 2});
  }
  CheckRopes(cases);
}

// The heads of a row turn by one table row, so its tables are read once and multicast along ITEM_X (the head) —
// with a literal position or a named one (its guarded row is computed per item from the one position tile, which
// the certifier proves the same along the axis). A prefill's 32-row dense items and a decode step's heads alike.
TEST(RopeTest, TheHeadsOfARowShareItsTables) {
  for (bool named : {false, true}) {
    for (const Rope& r : {Rope{128, 128, 64, 32, 64, named}, Rope{16, 128, 64, 1, 512, named}}) {
      const proto::OpSpec spec = RopeSpec(r, 7);
      SCOPED_TRACE(spec.ShortDebugString());
      absl::StatusOr<Composition> c = Lower(spec, Shipped("wormhole_n150"));
      ASSERT_TRUE(c.ok()) << c.status();
      const Section& s = c->sections.back();
      for (const char* name : {"load_rc", "load_rs"}) {
        const int i = s.FindStage(name);
        ASSERT_GE(i, 0) << name;
        EXPECT_EQ(std::get<Load>(s.stages[i].op).multicast, LoopVar::kItemX) << name;
      }
      const CertifyResult cert = Certify(*c, Shipped("wormhole_n150"));
      EXPECT_TRUE(cert.ok()) << (cert.ok() ? "" : cert.diagnostics[0].message());
    }
  }
}

TEST(RopeTest, CacheAtBothEdges) {
  std::vector<Case> cases;
  for (bool named : {false, true}) {
    // Flat: rows narrower than a tile load the cache whole; whole-tile rows fetch the block alone.
    cases.push_back({"test_tiny", {2, 8, 4, 1, 5, named}, "flat", 1});
    cases.push_back({"test_tiny", {2, 6, 2, 2, 7, named}, "flat", 1});
    cases.push_back({"test_tiny", {2, 16, 8, 1, 9, named}, "flat", 1});
    cases.push_back({"test_tiny", {2, 16, 8, 2, 6, named}, "flat", 1});
    cases.push_back({"test_tiny", {4, 10, 3, 1, 8, named}, "flat", 5});
    // The head as the item: whole-tile table rows, and a window.
    cases.push_back({"test_tiny", {8, 16, 8, 2, 12, named}, "blocked", 8});
    cases.push_back({"test_tiny", {8, 16, 6, 2, 10, named}, "blocked", 8});
    cases.push_back({"test_tiny", {8, 8, 3, 1, 9, named}, "blocked", 8});
    // Qwen3-0.6B decode at the first and the last of 512 cached positions; Qwen3-8B's 8 KV heads, a 2-token chunk.
    cases.push_back({"wormhole_n150", {16, 128, 64, 1, 512, named}, "blocked", 16});
    cases.push_back({"wormhole_n150", {16, 128, 64, 2, 300, named}, "blocked", 16});
  }
  CheckRopes(cases);
}

TEST(RopeTest, AnglesFromTheTablesWithoutTheta) {
  // theta 0: the reference reads the tables' angles too — any table, not only a real one.
  for (const Rope& r : {Rope{2, 8, 4, 1, 0, false, 0.0}, Rope{8, 16, 6, 2, 10, true, 0.0}}) {
    proto::OpSpec spec = RopeSpec(r, 3);
    SCOPED_TRACE(spec.ShortDebugString());
    ThreeWay(
        spec, Shipped("test_tiny"), [](const std::string& name, Rng& g) { return name == "p" ? 3.0 : g.Real(-1, 1); },
        kTol);
  }
}

// ── Faults and refusals ──

absl::Status RunAt(const Rope& r, int64_t at) {
  const Target& tiny = Shipped("test_tiny");
  absl::StatusOr<Composition> c = Lower(RopeSpec(r, at), tiny);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return c.status();
  return RunComposition(*c, tiny.tile_rows(), tiny.tile_cols(), MakeInputs(*c, RopeDraw(r.half, r.theta, at), 1))
      .status();
}

TEST(RopeTest, NamedPositionOutsideTheCacheFaults) {
  struct F {
    Rope rope;
    std::string past, zero;  // the stages that refuse a position past the block's last start, and position 0
  };
  for (const F& f : {F{{2, 8, 4, 1, 5, true}, "row_biased", "row_guarded"},
                     F{{2, 16, 8, 2, 6, true}, "position_biased", "position_row"},
                     F{{8, 16, 8, 2, 12, true}, "load_rc_biased", "load_rc_row"},
                     F{{8, 16, 6, 2, 10, true}, "load_rc_biased", "load_rc_row"}}) {
    SCOPED_TRACE(RopeSpec(f.rope, 0).ShortDebugString());
    const int64_t last = f.rope.cache - f.rope.rows + 1;
    const absl::Status past = RunAt(f.rope, last + 1);
    EXPECT_TRUE(absl::StartsWith(past.message(), "IndexOutOfRange: ")) << past;
    EXPECT_TRUE(absl::StrContains(past.message(), absl::StrCat("stage '", f.past, "'"))) << past;
    EXPECT_TRUE(absl::StrContains(past.message(), absl::StrCat("index value ", last + 1))) << past;
    const absl::Status zero = RunAt(f.rope, 0);
    EXPECT_TRUE(absl::StrContains(zero.message(), absl::StrCat("stage '", f.zero, "'"))) << zero;
    EXPECT_TRUE(absl::StrContains(zero.message(), "index value -1")) << zero;
    EXPECT_TRUE(RunAt(f.rope, last).ok());
  }
}

TEST(RopeTest, Refusals) {
  const Target& tiny = Shipped("test_tiny");
  const std::string width = "NotLowered: a rope whose rotated width does not fit its head dimension";
  EXPECT_EQ(RefusalOf(RopeSpec({2, 8, 5, 1}, 1), tiny), width);
  EXPECT_EQ(RefusalOf(RopeSpec({2, 8, 0, 1}, 1), tiny), width);
  EXPECT_EQ(RefusalOf(RopeSpec({0, 8, 4, 1}, 1), tiny), width);
  EXPECT_EQ(RefusalOf(RopeSpec({3, 8, 4, 2}, 1), tiny),
            "NotLowered: a rope whose rows do not divide its heads (h = 3 over rows = 2): rope.h counts the heads of "
            "every row, heads per token x rows");
  EXPECT_EQ(RefusalOf(RopeSpec({2, 8, 4, 0}, 1), tiny),
            "NotLowered: a rope whose rows do not divide its heads (h = 2 over rows = 0): rope.h counts the heads of "
            "every row, heads per token x rows");
  const std::string literal =
      "NotLowered: a literal rope position whose block leaves the cache — the program fails at run time on every "
      "tier, so there is no section to lower";
  for (const Rope& r : {Rope{2, 8, 4, 2, 5}, Rope{8, 16, 8, 2, 12}, Rope{2, 16, 8, 2, 6}}) {
    for (int64_t at : {int64_t{0}, r.cache - r.rows + 2}) {
      EXPECT_EQ(RefusalOf(RopeSpec(r, at), tiny), literal) << at;
    }
  }
  EXPECT_EQ(RefusalOf(RopeSpec({3, 8, 4, 3, 2, true}, 0), tiny),
            "NotLowered: a rope block of more rows than its cache has positions");
  EXPECT_EQ(RefusalOf(RopeSpec({2, 6, 3, 1, 20}, 1), tiny),
            "NotLowered: a rope reading a cache whose rows are narrower than a tile loads the cache whole, and this "
            "cache is wider than a site's page");
  EXPECT_EQ(RefusalOf(RopeSpec({16, 128, 64, 1}, 1), Shipped("grayskull_e150")),
            "MissingPrecision: an fp32 accumulator (Dst) for a rope (target grayskull_e150)");
  proto::OpSpec two = RopeSpec({2, 8, 4, 1}, 1);
  two.mutable_operands()->RemoveLast();
  EXPECT_EQ(RefusalOf(two, tiny), "NotLowered: rope takes 3 operands, got 2");
}

}  // namespace
}  // namespace spatial::testing
