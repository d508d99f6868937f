// The `attention` op kind through Lower(spec): the three-way check (VM against the naive f64 attention, validated,
// certified on every shipped target that does not refuse it) over decode and prefill blocks, GQA groups 1, 2, 4 and
// 8, head widths 64 and 128 and values narrower or wider than the keys, sliding and chunked windows, sinks, soft caps,
// literal and named positions at 1, l/2 and l, caches that are not tile multiples — in the form from_attention picks
// (the flash fold for whole-tile heads, the three sections otherwise). Where both forms apply, they agree; a position
// outside the cache faults the VM; every refusal is the seed's.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/attention/sections.h"
#include "tests/lowerings/attention_check.h"
#include "tests/lowerings/three_way.h"

namespace spatial::testing {
namespace {

// The VM against the f64 reference: f64 rounding (the reference takes the softmax directly, the program centres and
// rescales, so the two round differently in the last bits).
constexpr double kTol = 1e-12;

Draw AttnDraw(int64_t p) {
  return [p](const std::string& name, Rng& r) {
    if (name == "pos") return static_cast<double>(p);
    if (name == "sinks") return r.Real(-2, 2);
    return r.Real(-1, 1);
  };
}

enum class Expect { kFlash, kSections };

struct Case {
  const char* target;
  AttnCase c;
  Expect form;
};

std::string Tag(const AttnCase& c) { return c.rows == 1 ? "attn" : "causal_attn"; }
int64_t Attended(const AttnCase& c) { return c.pos == Pos::kLiteral ? c.p + c.rows - 1 : c.l; }

// The form the composition is in, and the three-section form's section names and claims.
void ExpectForm(const Composition& comp, const Case& k) {
  const AttnCase& c = k.c;
  if (k.form == Expect::kFlash) {
    EXPECT_NE(SectionNamed(comp, "_flash_blocks_"), nullptr) << comp.name;
    EXPECT_EQ(SectionNamed(comp, "_wv_"), nullptr) << comp.name;
    return;
  }
  const int64_t h = c.rows * c.h;
  const int64_t l = Attended(c);
  std::vector<std::string> names{absl::StrCat(Tag(c), "_scores_", h, "x", l)};
  if (c.sinks && c.rows > 1) names.push_back(absl::StrCat("spread_sinks_", h));
  names.push_back(absl::StrCat(Tag(c), "_softmax_", h, "x", l));
  names.push_back(absl::StrCat(Tag(c), "_wv_", h, "x", c.vd));
  ASSERT_EQ(comp.sections.size(), names.size()) << comp.name;
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(comp.sections[i].name, names[i]);
  EXPECT_EQ(comp.name, names[0]);
  EXPECT_EQ(comp.sections.front().claim, NumericsClaim::Approx("attention scores in bf16"));
  EXPECT_EQ(comp.sections.back().claim, NumericsClaim::Approx("attention weighted sum in bf16"));
  if (c.sinks && c.rows > 1) {
    EXPECT_TRUE(comp.sections[1].claim.exact);
  }
  // The mask is there exactly when a position can fall past a limit.
  const Section& scores = comp.sections.front();
  const bool masked = c.pos == Pos::kNamed || (c.pos == Pos::kLiteral && c.rows > 1) || c.sliding || c.chunked;
  EXPECT_EQ(scores.FindStage("mask") >= 0, masked);
  EXPECT_EQ(scores.FindStage("count_checked") >= 0, c.pos == Pos::kNamed);
  EXPECT_EQ(scores.FindStage("floors") >= 0, c.pos == Pos::kNamed && (c.sliding || c.chunked));
  EXPECT_EQ(scores.FindStage("attn_cap") >= 0, c.cap != 0.0);
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  auto sec = [&](const char* t, AttnCase c) { v.push_back({t, c, Expect::kSections}); };
  auto fl = [&](const char* t, AttnCase c) { v.push_back({t, c, Expect::kFlash}); };
  const char* tiny = "test_tiny";
  const char* wh = "wormhole_n150";
  // ── The three sections: heads that are not whole 8-wide tiles, caches that are not tile multiples.
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 16});                     // GQA group 2, whole cache
  sec(tiny, {.h = 4, .kv = 1, .hd = 5, .vd = 4, .l = 8});                      // group 4
  sec(tiny, {.h = 8, .kv = 1, .hd = 3, .vd = 4, .l = 4});                      // group 8
  sec(tiny, {.h = 2, .kv = 2, .hd = 4, .vd = 4, .l = 12, .pos = Pos::kNamed, .p = 1});   // group 1, P = 1
  sec(tiny, {.h = 2, .kv = 2, .hd = 4, .vd = 4, .l = 12, .pos = Pos::kNamed, .p = 6});   // P = l/2
  sec(tiny, {.h = 2, .kv = 2, .hd = 4, .vd = 4, .l = 12, .pos = Pos::kNamed, .p = 12});  // P = l
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 5, .l = 14, .pos = Pos::kLiteral, .p = 1});
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 5, .l = 14, .pos = Pos::kLiteral, .p = 7});
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 5, .l = 14, .pos = Pos::kLiteral, .p = 14});
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 12, .pos = Pos::kNamed, .p = 9, .sliding = 3});
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 12, .pos = Pos::kNamed, .p = 2, .sliding = 5});  // P < W
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 12, .pos = Pos::kNamed, .p = 10, .chunked = 4});
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 15, .pos = Pos::kLiteral, .p = 10, .sliding = 4});
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 15, .pos = Pos::kLiteral, .p = 11, .chunked = 5});
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 13, .sliding = 5});       // a window masks an unbounded row
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 10, .pos = Pos::kNamed, .p = 7, .sinks = true});
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 10, .pos = Pos::kNamed, .p = 7, .scale = 2.0, .cap = 0.5});
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 4, .l = 8, .rows = 2, .pos = Pos::kLiteral, .p = 5});
  sec(tiny, {.h = 2, .kv = 2, .hd = 3, .vd = 2, .l = 4, .rows = 4, .pos = Pos::kNamed, .p = 1});
  sec(tiny, {.h = 2, .kv = 1, .hd = 5, .vd = 4, .l = 8, .rows = 2, .pos = Pos::kNamed, .p = 3, .sliding = 3,
             .sinks = true});
  sec(tiny, {.h = 2, .kv = 1, .hd = 5, .vd = 3, .l = 5, .rows = 3, .pos = Pos::kNamed, .p = 2, .chunked = 2});
  sec(tiny, {.h = 2, .kv = 1, .hd = 8, .vd = 6, .l = 12, .pos = Pos::kNamed, .p = 11});  // keys whole, values not
  sec(tiny, {.h = 2, .kv = 1, .hd = 6, .vd = 8, .l = 9, .sinks = true, .cap = 0.3});      // values whole, keys not
  sec(wh, {.h = 4, .kv = 2, .hd = 48, .vd = 40, .l = 60, .pos = Pos::kNamed, .p = 30});
  sec(wh, {.h = 8, .kv = 1, .hd = 80, .vd = 24, .l = 30, .pos = Pos::kNamed, .p = 30, .sliding = 7});
  sec(wh, {.h = 4, .kv = 2, .hd = 40, .vd = 24, .l = 50, .rows = 2, .pos = Pos::kLiteral, .p = 20, .chunked = 8,
           .sinks = true});
  // ── The flash form: whole-tile heads, grouped decode where the group fits a tile's rows.
  fl(tiny, {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 16});
  fl(tiny, {.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 20, .pos = Pos::kNamed, .p = 1});
  fl(tiny, {.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 20, .pos = Pos::kNamed, .p = 10});
  fl(tiny, {.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 20, .pos = Pos::kNamed, .p = 20});
  fl(tiny, {.h = 4, .kv = 1, .hd = 8, .vd = 8, .l = 20, .pos = Pos::kNamed, .p = 10});
  fl(tiny, {.h = 8, .kv = 1, .hd = 8, .vd = 8, .l = 12, .pos = Pos::kNamed, .p = 12});
  fl(tiny, {.h = 4, .kv = 4, .hd = 8, .vd = 8, .l = 13, .pos = Pos::kNamed, .p = 1});
  fl(tiny, {.h = 4, .kv = 2, .hd = 16, .vd = 8, .l = 12, .pos = Pos::kLiteral, .p = 6});
  fl(tiny, {.h = 2, .kv = 1, .hd = 8, .vd = 24, .l = 10, .pos = Pos::kNamed, .p = 9, .sliding = 4});
  fl(tiny, {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 16, .rows = 3, .pos = Pos::kLiteral, .p = 5, .chunked = 4});
  fl(tiny, {.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 14, .rows = 4, .pos = Pos::kNamed, .p = 7, .sinks = true});
  fl(tiny, {.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 11, .pos = Pos::kNamed, .p = 11, .sinks = true, .cap = 0.7});
  fl(wh, {.h = 8, .kv = 2, .hd = 64, .vd = 64, .l = 100, .pos = Pos::kNamed, .p = 50});
  fl(wh, {.h = 4, .kv = 1, .hd = 128, .vd = 128, .l = 64, .pos = Pos::kNamed, .p = 64});
  fl(wh, {.h = 2, .kv = 2, .hd = 64, .vd = 128, .l = 40, .pos = Pos::kLiteral, .p = 1});
  fl(wh, {.h = 2, .kv = 1, .hd = 64, .vd = 64, .l = 70, .rows = 4, .pos = Pos::kLiteral, .p = 33, .sliding = 16});
  fl(wh, {.h = 16, .kv = 2, .hd = 64, .vd = 64, .l = 48, .pos = Pos::kNamed, .p = 24, .sinks = true});
  fl(wh, {.h = 4, .kv = 4, .hd = 128, .vd = 64, .l = 80, .rows = 2, .pos = Pos::kNamed, .p = 40, .chunked = 32,
          .cap = 30.0});
  return v;
}

TEST(AttentionTest, ThreeWayOverManyShapes) {
  const std::vector<Case> cases = Cases();
  ASSERT_GE(cases.size(), 40u);
  int sections = 0, flash = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& k = cases[i];
    SCOPED_TRACE(CaseText(k.c) + " on " + k.target);
    const Composition c = ThreeWay(AttnSpec(k.c), Shipped(k.target), AttnDraw(k.c.p), kTol, 11 + i);
    ExpectForm(c, k);
    (k.form == Expect::kFlash ? flash : sections)++;
  }
  EXPECT_GE(sections, 20);
  EXPECT_GE(flash, 15);
}

// Every input of `c`, its values drawn from `values` by name, shaped as `c` declares it (the two forms read the same
// row-major values as dense matrices or as flat rows).
TensorMap Reshaped(const Composition& c, const TensorMap& values) {
  TensorMap out;
  for (const Tensor& t : CompositionInputs(c)) {
    TensorData d = values.at(t.name);
    EXPECT_EQ(static_cast<int64_t>(d.values.size()), t.rows * t.cols) << t.name;
    d.rows = t.rows;
    d.cols = t.cols;
    out[t.name] = std::move(d);
  }
  return out;
}

// Where both the flash fold and the three sections apply to one spec, their VM results agree to f64 rounding.
TEST(AttentionTest, FlashAndSectionsAgree) {
  const Target& t = Shipped("test_tiny");
  const std::vector<AttnCase> cases = {
      {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 12},
      {.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 12, .pos = Pos::kNamed, .p = 5},
      {.h = 4, .kv = 1, .hd = 8, .vd = 8, .l = 8, .pos = Pos::kNamed, .p = 8},
      {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 8, .rows = 2, .pos = Pos::kLiteral, .p = 3},
      {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 12, .pos = Pos::kNamed, .p = 11, .sliding = 4},
      {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 12, .pos = Pos::kNamed, .p = 10, .chunked = 4, .sinks = true},
      {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 8, .rows = 2, .pos = Pos::kNamed, .p = 6, .sinks = true, .cap = 0.4},
  };
  for (const AttnCase& ac : cases) {
    SCOPED_TRACE(CaseText(ac));
    const proto::OpSpec spec = AttnSpec(ac);
    absl::StatusOr<Composition> flash = LowerAttention(spec, t, Form::kFlashForm);
    ASSERT_TRUE(flash.ok()) << flash.status();
    absl::StatusOr<AttentionShape> shape = AttentionShapeOf(spec);
    absl::StatusOr<AttentionNames> names = AttentionNamesOf(spec);
    ASSERT_TRUE(shape.ok() && names.ok());
    absl::StatusOr<Composition> sections =
        AttentionSections(*names, shape->heads, shape->widths, shape->cache, shape->sinks, shape->tag, t);
    ASSERT_TRUE(sections.ok()) << sections.status();
    EXPECT_NE(SectionNamed(*flash, "_flash_blocks_"), nullptr);
    EXPECT_NE(SectionNamed(*sections, "_wv_"), nullptr);
    ExpectAttnCertifies(*sections, t);
    const TensorMap inputs = AttnInputs(*flash, ac.p, 5);
    absl::StatusOr<TensorMap> a = RunComposition(*flash, t.tile_rows(), t.tile_cols(), inputs);
    absl::StatusOr<TensorMap> b = RunComposition(*sections, t.tile_rows(), t.tile_cols(), Reshaped(*sections, inputs));
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    const std::vector<double>& x = a->at("y").values;
    const std::vector<double>& y = b->at("y").values;
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(Near(x[i], y[i], kTol)) << i << ": " << x[i] << " vs " << y[i];
  }
}

// A named position outside [1, l - (T - 1)] faults the VM, in either form; inside, the same program runs.
TEST(AttentionTest, PositionOutsideTheCacheFaults) {
  const Target& t = Shipped("test_tiny");
  const std::vector<AttnCase> cases = {
      {.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 12, .pos = Pos::kNamed},                  // three sections
      {.h = 2, .kv = 1, .hd = 6, .vd = 4, .l = 8, .rows = 2, .pos = Pos::kNamed, .sliding = 3},
      {.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 20, .pos = Pos::kNamed},                  // grouped decode
      {.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 14, .rows = 4, .pos = Pos::kNamed},       // flash prefill
  };
  for (const AttnCase& ac : cases) {
    SCOPED_TRACE(CaseText(ac));
    absl::StatusOr<Composition> c = Lower(AttnSpec(ac), t);
    ASSERT_TRUE(c.ok()) << c.status();
    const int64_t bound = ac.l - (ac.rows - 1);
    for (int64_t p : {int64_t{0}, bound + 1, ac.l + 5, int64_t{-3}}) {
      absl::StatusOr<TensorMap> run = RunComposition(*c, t.tile_rows(), t.tile_cols(), AttnInputs(*c, p, 3));
      ASSERT_FALSE(run.ok()) << "P = " << p;
      const std::string m(run.status().message());
      EXPECT_TRUE(absl::StartsWith(m, "IndexOutOfRange") || absl::StartsWith(m, "TripOutOfRange")) << m;
    }
    EXPECT_TRUE(RunComposition(*c, t.tile_rows(), t.tile_cols(), AttnInputs(*c, bound, 3)).ok());
  }
}

// The three-section form's masks: the scores of a masked position are MASKED, the probabilities exactly zero.
TEST(AttentionTest, SectionsMaskExactly) {
  const Target& t = Shipped("test_tiny");
  const AttnCase ac{.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 12, .pos = Pos::kNamed, .p = 9, .sliding = 3};
  absl::StatusOr<Composition> c = Lower(AttnSpec(ac), t);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<TensorMap> run = RunComposition(*c, t.tile_rows(), t.tile_cols(), AttnInputs(*c, ac.p, 9));
  ASSERT_TRUE(run.ok()) << run.status();
  const TensorData& scores = run->at("y_scores");
  const TensorData& probs = run->at("y_probs");
  ASSERT_EQ(scores.values.size(), 24u);
  for (int64_t v = 0; v < 2; ++v) {
    double sum = 0;
    for (int64_t j = 0; j < 12; ++j) {
      const bool live = j >= 6 && j < 9;  // the last 3 of the first 9
      const double s = scores.values[v * 12 + j];
      const double p = probs.values[v * 12 + j];
      if (live) {
        EXPECT_GT(s, -10.0) << v << "," << j;
        EXPECT_GT(p, 0.0) << v << "," << j;
      } else {
        EXPECT_EQ(s, kMasked) << v << "," << j;
        EXPECT_EQ(p, 0.0) << v << "," << j;
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-14);
  }
}

// ── Refusals ──

std::string Refused(const AttnCase& c, const Target& t) { return RefusalOf(AttnSpec(c), t); }

TEST(AttentionTest, SpecRefusalsAreTheSeeds) {
  const Target& t = Shipped("test_tiny");
  const std::string empty =
      "NotLowered: an attention with no heads, no query rows, no head dimension or an empty cache";
  EXPECT_EQ(Refused({.h = 0, .kv = 1, .hd = 6, .vd = 6, .l = 8}, t), empty);
  EXPECT_EQ(Refused({.h = 2, .kv = 0, .hd = 6, .vd = 6, .l = 8}, t), empty);
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 0, .vd = 6, .l = 8}, t), empty);
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 0}, t), empty);
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8, .rows = 0}, t), empty);
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 6, .vd = 0, .l = 8}, t),
            "NotLowered: an attention whose values have no width");
  const std::string no_window = "NotLowered: a window of no positions — every row's softmax would be empty";
  proto::OpSpec sliding0 = AttnSpec({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8});
  sliding0.mutable_attention()->mutable_window()->set_sliding(0);
  EXPECT_EQ(RefusalOf(sliding0, t), no_window);
  proto::OpSpec chunked0 = AttnSpec({.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 8});
  chunked0.mutable_attention()->mutable_window()->set_chunked(0);
  EXPECT_EQ(RefusalOf(chunked0, t), no_window);
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8, .rows = 2}, t),
            "NotLowered: a block of query rows with no causal bound");
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8, .pos = Pos::kLiteral, .p = 0}, t),
            "NotLowered: a literal attention position 0 outside [1, 8] (1-based, the query row's; its 1 row "
            "within the 8-position cache) — the program fails at run time on every tier, so there is no "
            "section to lower");
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8, .pos = Pos::kLiteral, .p = 9}, t),
            "NotLowered: a literal attention position 9 outside [1, 8] (1-based, the query row's; its 1 row "
            "within the 8-position cache) — the program fails at run time on every tier, so there is no "
            "section to lower");
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 8, .rows = 3, .pos = Pos::kLiteral, .p = 7}, t),
            "NotLowered: a literal attention position 7 outside [1, 6] (1-based, the first query row's; its "
            "3 rows within the 8-position cache) — the program fails at run time on every tier, so there is "
            "no section to lower");
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 3, .rows = 4, .pos = Pos::kNamed}, t),
            "NotLowered: a block of query rows longer than its cache — no position admits every row");
  // The operands the spec names: Q, K, V, then P when named, then the sinks.
  proto::OpSpec missing = AttnSpec({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8, .pos = Pos::kNamed, .p = 3});
  missing.mutable_operands()->RemoveLast();
  EXPECT_EQ(RefusalOf(missing, t), "NotLowered: attention takes 4 operands, got 3");
  proto::OpSpec extra = AttnSpec({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8});
  extra.add_operands()->set_name("sinks");
  EXPECT_EQ(RefusalOf(extra, t), "NotLowered: attention takes 3 operands, got 4");
  // Malformed specs are errors, not refusals.
  proto::OpSpec negative = AttnSpec({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8});
  negative.mutable_attention()->set_l(-8);
  absl::StatusOr<Composition> neg = Lower(negative, t);
  ASSERT_FALSE(neg.ok());
  EXPECT_FALSE(IsRefusal(neg.status())) << neg.status();
}

TEST(AttentionTest, SectionsRefusals) {
  const Target& tiny = Shipped("test_tiny");
  // Six query heads over four K/V heads: heads 4 and 5 would read past the last K/V head.
  EXPECT_EQ(Refused({.h = 3, .kv = 2, .hd = 6, .vd = 6, .l = 8}, tiny),
            "NotLowered: an attention whose query heads do not group over its K/V heads — query head 2 of 3 would "
            "read K/V head 2 of 2");
  EXPECT_EQ(Refused({.h = 6, .kv = 4, .hd = 3, .vd = 3, .l = 4}, tiny),
            "NotLowered: an attention whose query heads do not group over its K/V heads — query head 4 of 6 would "
            "read K/V head 4 of 4");
  // 2 x 20 scores are five 8x8 tiles; the accumulator holds four.
  const std::string wide = Refused({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 20}, tiny);
  EXPECT_TRUE(absl::StartsWith(wide, "AccTilesExceeded: stage 'attn_scores' of attn_scores_2x20 computes a page of 5 "
                                     "tiles; the accumulator holds 4 fp32 tiles (target test_tiny)"))
      << wide;
  // 2 x 10 contexts of 20 values: five tiles.
  const std::string values = Refused({.h = 2, .kv = 1, .hd = 6, .vd = 20, .l = 10}, tiny);
  EXPECT_TRUE(absl::StartsWith(values, "AccTilesExceeded: stage 'attn_weighted' of attn_wv_2x20")) << values;
  // A cache of 32 positions of 705 keys, loaded whole, is 353 tiles: more than a site's 88 KiB at two pages.
  const std::string site = Refused({.h = 1, .kv = 1, .hd = 705, .vd = 4, .l = 32}, tiny);
  EXPECT_TRUE(absl::StartsWith(site, "NotLowered: a three-section attention whose flat scores section does not fit "
                                     "a site ("))
      << site;
  // Nine query heads (three rows of three) are nine softmax rows: more than an 8-row tile.
  EXPECT_EQ(Refused({.h = 3, .kv = 3, .hd = 3, .vd = 2, .l = 3, .rows = 3, .pos = Pos::kNamed, .p = 1}, tiny),
            "NotLowered: a flat row softmax over 9 rows, more than a tile's 8");
}

TEST(AttentionTest, TargetRefusals) {
  // Grayskull has no fp32 accumulator: both forms are refused, neither builds a program that would not certify.
  const Target& gs = Shipped("grayskull_e150");
  const std::string sections = Refused({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8}, gs);
  EXPECT_EQ(sections, "MissingPrecision: an fp32 accumulator (Dst) for attention scores (target grayskull_e150)");
  const std::string flash = Refused({.h = 2, .kv = 2, .hd = 32, .vd = 32, .l = 40}, gs);
  EXPECT_TRUE(absl::StartsWith(flash, "MissingPrecision:")) << flash;
  // A target with an fp32 accumulator but no integer datapath cannot check a named position.
  proto::Target p = Shipped("test_tiny").proto();
  p.set_name("test_tiny_noint");
  p.mutable_datapaths()->clear_elementwise_int();
  const Target noint(p);
  EXPECT_EQ(Refused({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8, .pos = Pos::kNamed, .p = 3}, noint),
            "MissingCompute: an integer elementwise datapath for an attention's computed position (target "
            "test_tiny_noint)");
  // Without it a literal position needs no index arithmetic.
  EXPECT_TRUE(Lower(AttnSpec({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8, .pos = Pos::kLiteral, .p = 3}), noint).ok());
}

// The same spec and target give the same program.
TEST(AttentionTest, Deterministic) {
  const Target& t = Shipped("test_tiny");
  for (const AttnCase& ac : {AttnCase{.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 12, .pos = Pos::kNamed, .p = 4,
                                      .chunked = 4, .sinks = true},
                             AttnCase{.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 20, .pos = Pos::kNamed, .p = 4}}) {
    absl::StatusOr<Composition> a = Lower(AttnSpec(ac), t);
    absl::StatusOr<Composition> b = Lower(AttnSpec(ac), t);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->sections.size(), b->sections.size());
    for (size_t i = 0; i < a->sections.size(); ++i) {
      EXPECT_EQ(a->sections[i].name, b->sections[i].name);
      EXPECT_EQ(a->sections[i].tensors, b->sections[i].tensors);
      EXPECT_EQ(a->sections[i].edges, b->sections[i].edges);
    }
  }
}

// `form` forces a form (`spatial lower --attention-form`): the three sections even where the heads are whole tiles,
// the flash fold only where they are; both compute the same values (the same row-major numbers in each form's
// layout) to f64 rounding.
TEST(AttentionTest, FormForcesSectionsOrFlash) {
  const Target& t = Shipped("test_tiny");
  // Small enough for the sections' flat pages (test_tiny's accumulator holds 4 tiles of 8 x 8).
  for (const AttnCase& ac : {AttnCase{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 12, .pos = Pos::kLiteral, .p = 12},
                             AttnCase{.h = 2, .kv = 1, .hd = 16, .vd = 8, .l = 8, .rows = 2, .pos = Pos::kLiteral,
                                      .p = 7, .sinks = true, .cap = 0.7}}) {
    SCOPED_TRACE(CaseText(ac));
    proto::OpSpec sections = AttnSpec(ac);
    sections.mutable_attention()->set_form(proto::AttentionSpec::FORM_SECTIONS);
    proto::OpSpec flash = AttnSpec(ac);
    flash.mutable_attention()->set_form(proto::AttentionSpec::FORM_FLASH);
    absl::StatusOr<Composition> a = Lower(sections, t);
    absl::StatusOr<Composition> b = Lower(flash, t);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    auto has = [](const Composition& c, const std::string& part) {
      for (const Section& s : c.sections) {
        if (s.name.find(part) != std::string::npos) return true;
      }
      return false;
    };
    EXPECT_TRUE(has(*a, "_softmax_")) << a->name;
    EXPECT_FALSE(has(*a, "_flash_")) << a->name;
    EXPECT_TRUE(has(*b, "_flash_")) << b->name;
    // The same values in each program's own layout of every input.
    TensorMap in_a = MakeInputs(*a, Reals(-1, 1), 5);
    TensorMap in_b;
    for (const Tensor& x : CompositionInputs(*b)) {
      ASSERT_TRUE(in_a.count(x.name)) << x.name;
      in_b[x.name] = TensorData{x.rows, x.cols, x.precision, in_a.at(x.name).values};
    }
    absl::StatusOr<TensorMap> va = RunComposition(*a, t.tile_rows(), t.tile_cols(), in_a);
    absl::StatusOr<TensorMap> vb = RunComposition(*b, t.tile_rows(), t.tile_cols(), in_b);
    ASSERT_TRUE(va.ok() && vb.ok());
    const std::vector<double>& ya = va->at("y").values;
    const std::vector<double>& yb = vb->at("y").values;
    ASSERT_EQ(ya.size(), yb.size());
    for (size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(ya[i], yb[i], 1e-12 * std::max(1.0, std::fabs(ya[i]))) << i;
  }
  proto::OpSpec ragged = AttnSpec({.h = 2, .kv = 1, .hd = 6, .vd = 6, .l = 8, .pos = Pos::kLiteral, .p = 3});
  ragged.mutable_attention()->set_form(proto::AttentionSpec::FORM_FLASH);
  EXPECT_EQ(RefusalOf(ragged, t),
            "NotLowered: the flash form of an attention whose heads are not whole tiles, or whose query heads do not "
            "group over its K/V heads (h 2, kv 1, hd 6, vd 6 on 8 x 8 tiles)");
}

}  // namespace
}  // namespace spatial::testing
