// The prefill fold (lowerings/attention/flash_prefill.h) against the naive f64 attention: causal blocks of query
// rows whose cache ends at the last row's limit, GQA 1/2/4, tails that are not whole tiles, sinks, soft caps, values
// wider than an accumulator page, full attention; its structure (blocks of several tile rows, K/V multicast along the
// query heads, one section per query range folding only the blocks its rows see); and where it does not apply.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/attention/flash_prefill.h"
#include "lowerings/registry.h"
#include "spatial/maps.h"
#include "spatial/semantics/trip.h"
#include "tests/lowerings/attention_check.h"

namespace spatial::testing {
namespace {

std::vector<const Section*> PrefillSections(const Composition& c) {
  std::vector<const Section*> out;
  for (const Section& s : c.sections) {
    if (absl::StrContains(s.name, "_flash_prefill_")) out.push_back(&s);
  }
  return out;
}

// qc and kb from a section's name ("..._q{qc}_kb{kb}_c...").
int64_t NameField(const Section& s, const std::string& field) {
  const size_t at = s.name.rfind(field);
  return at == std::string::npos ? 0 : std::stoll(s.name.substr(at + field.size()));
}
int64_t ChunkTilesOf(const Section& s) { return NameField(s, "_q"); }
int64_t BlockTilesOf(const Section& s) { return NameField(s, "_kb"); }

// The edge blocks a section runs unrolled after its fold ("scores_edge{e}").
int64_t EdgesOf(const Section& s) {
  int64_t edges = 0;
  for (const Stage& st : s.stages) edges += absl::StartsWith(st.name, "scores_edge") ? 1 : 0;
  return edges;
}

// The blocks a section computes: the fold's (or its one block) and the edges.
int64_t BlocksOf(const Section& s) { return (s.has_fold() ? s.num_blocks : 1) + EdgesOf(s); }

// The blocks one item of it computes: its own fold count (WorkItem.blocks), else the section's.
int64_t ItemBlocksOf(const Section& s, const WorkItem& it) {
  return it.blocks >= 0 ? ItemBlocks(it, s.num_blocks) + EdgesOf(s) : BlocksOf(s);
}

// Every item computes exactly the blocks its chunk's last query row sees, the K/V loads are multicast along ITEM_X
// (the chunks of a head: the reader's, as tt-metal's reader kernel reads K and V), the items are (head, chunk) pairs,
// and together they cover every query tile of every head once. With edges, the fold's blocks are unmasked (every
// row sees them whole) and each edge is masked; without, the fold masks every block.
void ExpectPrefillShape(const Composition& comp, const AttnCase& c, const Target& t) {
  const std::vector<const Section*> secs = PrefillSections(comp);
  ASSERT_FALSE(secs.empty()) << "no prefill section in " << comp.name;
  const int64_t tr = t.tile_rows();
  const int64_t tiles_q = CeilDiv(c.rows, tr);
  std::vector<int> covered(static_cast<size_t>(tiles_q * c.h), 0);
  for (const Section* s : secs) {
    SCOPED_TRACE(s->name);
    const int64_t qc = ChunkTilesOf(*s);
    const int64_t kb = BlockTilesOf(*s);
    ASSERT_GE(qc, 1);
    ASSERT_GE(kb, 1);
    EXPECT_EQ(CeilDiv(c.l, tr) % kb, 0);
    EXPECT_EQ(tiles_q % qc, 0);
    int64_t last_qt = -1;
    // Grouped (GQA without sinks), item (y, x) is query head y * group + x % group over chunk x / group: the items
    // of K/V head y share its stream. Otherwise (head y, chunk x).
    const int64_t group = c.h / c.kv;
    const bool grouped = group > 1 && !c.sinks;
    const int64_t v_t = CeilDiv(c.vd, t.tile_cols());
    for (const WorkItem& it : s->items) {
      // Each item folds exactly the blocks its chunk's last row sees.
      const int64_t it_last = std::min((it.out.row0_t + it.out.h_t) * tr, c.rows) - 1;
      EXPECT_EQ(ItemBlocksOf(*s, it), CeilDiv(c.pos == Pos::kLiteral ? c.p + it_last : c.l, kb * tr)) << it.id;
      const int64_t head = it.out.col0_t / v_t;
      EXPECT_EQ(it.out.col0_t, head * v_t);
      EXPECT_EQ(it.out.row0_t, (grouped ? it.x / group : it.x) * qc);
      EXPECT_EQ(head, grouped ? it.y * group + it.x % group : it.y);
      EXPECT_EQ(it.out.h_t, qc);
      for (int64_t q = it.out.row0_t; q < it.out.row0_t + it.out.h_t; ++q) {
        ++covered.at(static_cast<size_t>(q * c.h + head));
        last_qt = std::max(last_qt, q);
      }
    }
    const int64_t last_row = std::min((last_qt + 1) * tr, c.rows) - 1;
    const int64_t limit = c.pos == Pos::kLiteral ? c.p + last_row : c.l;
    const int64_t blocks = CeilDiv(limit, kb * tr);
    EXPECT_EQ(BlocksOf(*s), blocks);
    EXPECT_FALSE(s->trip.has_value());
    const int64_t edges = EdgesOf(*s);
    if (edges > 0) {
      int64_t first_row_t = s->items.front().out.row0_t;
      for (const WorkItem& it : s->items) first_row_t = std::min(first_row_t, it.out.row0_t);
      const int64_t first_limit = c.pos == Pos::kLiteral ? c.p + first_row_t * tr : c.l;
      EXPECT_EQ(first_limit / (kb * tr), blocks - edges) << "the fold takes exactly the blocks every row sees whole";
      EXPECT_LT(s->FindStage("mask_scores"), 0);
      for (int64_t e = 0; e < edges; ++e) EXPECT_GE(s->FindStage(absl::StrCat("mask_scores_edge", e)), 0);
    } else if (const int mask = s->FindStage("mask_scores"); mask >= 0 && s->has_fold()) {
      // Without edges the mask runs on each item's last blocks only, the most any item's first row sees in part
      // (its diagonal): every block before them is whole to every row of the item (Stage.last_blocks).
      int64_t diagonal = 0;
      for (const WorkItem& it : s->items) {
        const int64_t own = ItemBlocks(it, s->num_blocks);
        const int64_t first_limit = c.pos == Pos::kLiteral ? c.p + it.out.row0_t * tr : c.l;
        diagonal = std::max(diagonal, own - std::min(own, first_limit / (kb * tr)));
      }
      EXPECT_EQ(s->stages[mask].last_blocks, diagonal > 0 && diagonal < s->num_blocks ? diagonal : 0);
    }
    int multicast = 0;
    for (const Stage& st : s->stages) {
      const auto* ld = std::get_if<Load>(&st.op);
      const bool kv = (absl::StartsWith(st.name, "load_k") || absl::StartsWith(st.name, "load_v")) &&
                      !absl::StartsWith(st.name, "load_kv_");  // the K/V blocks, not their heads' index tables
      if (ld == nullptr || !kv) continue;
      EXPECT_EQ(ld->multicast, LoopVar::kItemX) << st.name;
      EXPECT_EQ(ld->pattern.block_h, kb) << st.name;
      ++multicast;
    }
    EXPECT_GE(multicast, 2);
    // The block's row sums are the packer's (BlockPlan.pack_row_sums): each block_sum stage directly follows the
    // probabilities it sums, as the machine's recognition needs.
    ASSERT_TRUE(s->plan.has_value());
    EXPECT_TRUE(s->plan->pack_row_sums);
    // And its stages stream a query tile row at a time (BlockPlan.stream_rows, tt-metal's streaming kernel): the
    // machine's row groups are the chunk's query tile rows.
    EXPECT_TRUE(s->plan->stream_rows);
    EXPECT_EQ(s->plan->per_site_m, qc);
    int sums = 0;
    for (size_t i = 0; i < s->stages.size(); ++i) {
      if (!absl::StartsWith(s->stages[i].name, "block_sum")) continue;
      ++sums;
      ASSERT_GT(i, 0u);
      EXPECT_TRUE(absl::StartsWith(s->stages[i - 1].name, "probs")) << s->stages[i - 1].name;
      EXPECT_EQ(s->stages[i].ins[0], s->stages[i - 1].outs[0]);
    }
    EXPECT_EQ(sums, 1 + edges);
    EXPECT_EQ(s->items.size() % static_cast<size_t>(c.h), 0u);
    // Grouped, the K/V blocks step on ITEM_X (the K/V head) and read no head table, which the section then lacks.
    auto has_table = [&](const char* suffix) {
      return std::any_of(s->tensors.begin(), s->tensors.end(),
                         [&](const Tensor& t) { return absl::EndsWith(t.name, suffix); });
    };
    EXPECT_EQ(has_table("__flash_kv_head"), !grouped);
    EXPECT_EQ(has_table("__flash_head_at"), grouped);
    for (const Stage& st : s->stages) {
      const auto* ld = std::get_if<Load>(&st.op);
      if (ld == nullptr || !(st.name == "load_k" || st.name == "load_v")) continue;
      EXPECT_EQ(ld->pattern.origin.indirect.has_value(), !grouped) << st.name;
    }
  }
  for (size_t i = 0; i < covered.size(); ++i) EXPECT_EQ(covered[i], 1) << "query tile x head " << i;
}

std::vector<AttnCase> TinyPrefillCases() {
  return {
      {.h = 2, .kv = 1, .hd = 16, .vd = 16, .l = 20, .rows = 11, .pos = Pos::kLiteral, .p = 10},  // cache tail
      {.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 40, .rows = 40, .pos = Pos::kLiteral, .p = 1},     // T = l
      {.h = 4, .kv = 1, .hd = 8, .vd = 8, .l = 64, .rows = 30, .pos = Pos::kLiteral, .p = 35},    // GQA 4
      {.h = 4, .kv = 2, .hd = 16, .vd = 8, .l = 30, .rows = 7, .pos = Pos::kLiteral, .p = 24, .sinks = true,
       .cap = 0.6},
      {.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 33, .rows = 33, .pos = Pos::kLiteral, .p = 1, .scale = 0.9},
      {.h = 2, .kv = 1, .hd = 8, .vd = 64, .l = 24, .rows = 9, .pos = Pos::kLiteral, .p = 16},  // 2 value pages
      // Blocks of 16 tile rows (the spec's), the last ones masked: edge blocks after an unmasked fold.
      {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 256, .rows = 16, .pos = Pos::kLiteral, .p = 241, .kv_chunk = 128},
      {.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 384, .rows = 136, .pos = Pos::kLiteral, .p = 249, .sinks = true,
       .cap = 0.7},
  };
}

TEST(AttentionPrefillTest, MatchesNaiveReferenceOnTestTiny) {
  const Target& t = Shipped("test_tiny");
  uint64_t seed = 31;
  int64_t with_edges = 0;
  for (const AttnCase& c : TinyPrefillCases()) {
    SCOPED_TRACE(CaseText(c));
    const Composition comp = CheckAttention(c, t, Form::kFlash, seed++);
    if (comp.sections.empty()) continue;
    ExpectPrefillShape(comp, c, t);
    for (const Section* s : PrefillSections(comp)) with_edges += EdgesOf(*s) > 0 ? 1 : 0;
    EXPECT_GE(CertifyOnShipped(AttnSpec(c), Form::kFlash), 1);
  }
  EXPECT_GE(with_edges, 1) << "the VM's check covers sections with edge blocks";
}

TEST(AttentionPrefillTest, MatchesNaiveReferenceOnRealTargets) {
  const std::vector<std::pair<const char*, AttnCase>> cases = {
      {"wormhole_n150", {.h = 8, .kv = 2, .hd = 64, .vd = 64, .l = 160, .rows = 130, .pos = Pos::kLiteral, .p = 31}},
      {"wormhole_n150", {.h = 4, .kv = 1, .hd = 128, .vd = 128, .l = 96, .rows = 96, .pos = Pos::kLiteral, .p = 1}},
      {"blackhole_p150", {.h = 2, .kv = 2, .hd = 64, .vd = 64, .l = 70, .rows = 45, .pos = Pos::kLiteral, .p = 26,
                          .sinks = true}},
  };
  uint64_t seed = 301;
  for (const auto& [name, c] : cases) {
    const Target& t = Shipped(name);
    const Composition comp = CheckAttention(c, t, Form::kFlash, seed++);
    if (comp.sections.empty()) continue;
    ExpectPrefillShape(comp, c, t);
  }
}

// The items fold only what their rows see: a 2048-row causal prefill of Qwen3-8B's heads (32 over 8) computes
// well under the score tiles of folding the whole cache for every query tile (half of them, and the blocks on the
// diagonal whole: 36 of 64 per head), in one section whose items fold their own chunk's blocks, in tt-metal's
// tt_transformers chunks: 8 query tiles (q_chunk 256) against blocks of 8 key tiles (k_chunk 256: blocks of the
// chunk's own rows waste the least of the diagonal; 16 would compute 40 of 64).
TEST(AttentionPrefillTest, CausalRangesFoldAboutHalfTheBlocks) {
  const Target& wh = Shipped("wormhole_n150");
  const AttnCase c{.h = 32, .kv = 8, .hd = 128, .vd = 128, .l = 2048, .rows = 2048, .pos = Pos::kLiteral, .p = 1};
  absl::StatusOr<Composition> comp = LowerAttention(AttnSpec(c), wh, Form::kFlash);
  ASSERT_TRUE(comp.ok()) << comp.status();
  ExpectPrefillShape(*comp, c, wh);
  ExpectAttnCertifies(*comp, wh);
  int64_t score_tiles = 0;
  for (const Section* s : PrefillSections(*comp)) {
    EXPECT_EQ(ChunkTilesOf(*s), 8) << s->name;
    EXPECT_EQ(BlockTilesOf(*s), 8) << s->name;
    for (const WorkItem& it : s->items) score_tiles += ItemBlocksOf(*s, it) * ChunkTilesOf(*s) * BlockTilesOf(*s);
  }
  EXPECT_EQ(PrefillSections(*comp).size(), 1u);
  const int64_t whole = 64 * 32 * 64;  // every query tile of every head over every cache tile
  EXPECT_EQ(score_tiles, whole * 36 / 64);
}

// The probabilities' exp is the spec's recipe (AttentionSpec.probs_exp), in the prefill fold and in the one-tile
// fold alike; the rescale stays the accurate exp. The VM computes every exp exactly, so the values match the reference.
TEST(AttentionPrefillTest, ProbsExpFollowsTheSpec) {
  const Target& tiny = Shipped("test_tiny");
  for (const auto& [c, fold] : std::vector<std::pair<AttnCase, const char*>>{
           {{.h = 2, .kv = 1, .hd = 16, .vd = 16, .l = 20, .rows = 11, .pos = Pos::kLiteral, .p = 10},
            "_flash_prefill_"},
           {{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 30, .rows = 5, .pos = Pos::kNamed, .p = 11}, "_flash_blocks_"},
       }) {
    for (auto [recipe, kind] : std::vector<std::pair<proto::AttentionSpec::ProbsExp, const char*>>{
             {proto::AttentionSpec::PROBS_EXP_TARGET, "exp("},
             {proto::AttentionSpec::PROBS_EXP_FAST, "exp_fast("},
             {proto::AttentionSpec::PROBS_EXP_ACCURATE, "exp_accurate("}}) {
      AttnCase r = c;
      r.probs_exp = recipe;
      SCOPED_TRACE(CaseText(r) + " " + kind);
      const Composition comp = CheckAttention(r, tiny, Form::kFlash);
      const Section* s = SectionNamed(comp, fold);
      ASSERT_NE(s, nullptr);
      const int probs = s->FindStage("probs");
      ASSERT_GE(probs, 0);
      const std::string body = BodyToString(std::get<Generic>(s->stages[probs].op).body);
      EXPECT_TRUE(absl::StrContains(body, kind)) << body;
      const std::string rescale = BodyToString(std::get<Generic>(s->stages[s->FindStage("rescale")].op).body);
      EXPECT_TRUE(absl::StrContains(rescale, "exp_accurate(")) << rescale;
    }
  }
}

// tt-metal's chunk split (AttentionSpec.chunk_split CONTIGUOUS): the heads over the sites, then each site a run of
// consecutive chunks of its head — paired (i, n - 1 - i) where the run is even and exact — as its SDPA program
// factory deals them; the items go round robin, so item k's site is k mod sites. The values are the reference's.
TEST(AttentionPrefillTest, ContiguousChunkSplitIsTtMetals) {
  const Target& tiny = Shipped("test_tiny");  // 4 sites
  // 2 heads over 4 sites: 2 cores a head; 6 chunks of 8 query tiles -> 3 consecutive chunks a core, unpaired.
  // 2 chunks a core of 4 chunks would be paired: core 0 chunks 0 and 3, core 1 chunks 1 and 2.
  for (const auto& [rows, want] : std::vector<std::pair<int64_t, std::vector<std::vector<int64_t>>>>{
           {384, {{0, 1, 2}, {3, 4, 5}}},
           {256, {{0, 3}, {1, 2}}},
       }) {
    const AttnCase c{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = rows, .rows = rows, .pos = Pos::kLiteral, .p = 1};
    SCOPED_TRACE(CaseText(c));
    proto::OpSpec spec = AttnSpec(c);
    spec.mutable_attention()->set_chunk_split(proto::AttentionSpec::CHUNK_SPLIT_CONTIGUOUS);
    absl::StatusOr<Composition> comp = Lower(spec, tiny);
    ASSERT_TRUE(comp.ok()) << comp.status();
    ExpectAttnCertifies(*comp, tiny);
    ExpectMatchesReference(spec, *comp, tiny, AttnInputs(*comp, c.p, 17));
    ASSERT_EQ(PrefillSections(*comp).size(), 1u);
    const Section& s = *PrefillSections(*comp)[0];
    ASSERT_EQ(ChunkTilesOf(s), 8);
    // site -> (head, chunk) in run order
    std::vector<std::vector<std::pair<int64_t, int64_t>>> sites(4);
    for (size_t k = 0; k < s.items.size(); ++k) {
      const WorkItem& it = s.items[k];
      sites[k % 4].push_back({it.out.col0_t, it.out.row0_t / 8});  // vd = one tile: col0_t is the head
    }
    std::vector<std::vector<std::pair<int64_t, int64_t>>> expected;
    for (int64_t h = 0; h < 2; ++h) {
      for (const std::vector<int64_t>& chunks : want) {
        expected.emplace_back();
        for (const int64_t q : chunks) expected.back().push_back({h, q});
      }
    }
    std::sort(sites.begin(), sites.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(sites, expected);
  }
}

// Where it does not apply the one-tile fold stays: a position read at run time, a window, a cache that runs past
// the last row (its slots there could hold anything, and the value product would read them), a decode row.
TEST(AttentionPrefillTest, OtherShapesKeepTheOneTileFold) {
  const Target& tiny = Shipped("test_tiny");
  for (const AttnCase& c : std::vector<AttnCase>{
           {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 30, .rows = 5, .pos = Pos::kNamed, .p = 11},
           {.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 20, .rows = 10, .pos = Pos::kLiteral, .p = 11, .sliding = 6},
           {.h = 2, .kv = 1, .hd = 16, .vd = 16, .l = 20, .rows = 5, .pos = Pos::kLiteral, .p = 10},
           {.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 16, .pos = Pos::kLiteral, .p = 16},
       }) {
    SCOPED_TRACE(CaseText(c));
    absl::StatusOr<AttentionShape> shape = AttentionShapeOf(AttnSpec(c));
    ASSERT_TRUE(shape.ok()) << shape.status();
    EXPECT_FALSE(PrefillFoldApplies(FlashGeometryOf(*shape), tiny));
    const Composition comp = CheckAttention(c, tiny, Form::kFlash);
    EXPECT_TRUE(PrefillSections(comp).empty());
    EXPECT_NE(SectionNamed(comp, "_flash_blocks_"), nullptr);
  }
}

}  // namespace
}  // namespace spatial::testing
