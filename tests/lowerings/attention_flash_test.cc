// The flash fold against the naive f64 attention: decode at positions 1, l/2 and l, prefill blocks under a causal
// bound, GQA groups 1, 2, 4, 8, head widths from one tile to 128, values wider or narrower than the keys, caches that
// are not tile multiples, sliding and chunked windows, sinks and soft caps — every program validated and certified.
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lowerings/registry.h"
#include "spatial/maps.h"
#include "spatial/proto_io.h"
#include "tests/lowerings/attention_check.h"

namespace spatial::testing {
namespace {

const Section& FoldOf(const Composition& c) {
  const Section* s = SectionNamed(c, "_flash_blocks_");
  EXPECT_NE(s, nullptr) << "no fold section in " << c.name;
  return s != nullptr ? *s : c.sections.back();
}

// The parts a decode fold is split into (flash_split.h), read from its name ("_split{n}"); 1 when not split.
int64_t SplitOf(const Composition& comp) {
  const std::string& name = FoldOf(comp).name;
  const size_t at = name.find("_split");
  return at == std::string::npos ? 1 : std::stoll(name.substr(at + 6));
}

// Structure every fold shares: its carries at fp32 and depth 2, its name, its block count and trip (a split fold's
// parts each fold their share of the blocks, and the trip counts a part's blocks).
void ExpectFoldShape(const Composition& comp, const AttnCase& c, const Target& t) {
  const Section& s = FoldOf(comp);
  const int64_t tr = t.tile_rows();
  const int64_t attended = c.pos == Pos::kLiteral ? c.p + c.rows - 1 : c.l;
  const int64_t split = SplitOf(comp);
  const int64_t nb = CeilDiv(attended, tr);
  // A block is kb tile rows ("_b{kb * tile}"): they divide a part's, at most 128 positions and the accumulator's fp32
  // tiles; more than one only where its values are read whole, masked first where anything is.
  const size_t at = s.name.rfind("_b");
  ASSERT_NE(at, std::string::npos) << s.name;
  const int64_t positions = std::stoll(s.name.substr(at + 2));
  EXPECT_EQ(positions % tr, 0) << s.name;
  const int64_t kb = positions / tr;
  EXPECT_EQ(nb % split, 0) << s.name;
  EXPECT_EQ((nb / split) % kb, 0) << s.name;
  EXPECT_LE(kb, std::max<int64_t>(1, std::min<int64_t>(128 / tr, t.effective_acc_tiles(Precision::kFp32, true))));
  // Masked: a run-time position, causal rows, a tail inside a tile row, or a window (a literal decode row is not).
  const bool masked = c.pos == Pos::kNamed || (c.pos == Pos::kLiteral && c.rows > 1) || attended % tr != 0 ||
                      c.sliding > 0 || c.chunked > 0;
  const bool live_values = std::any_of(s.buffers.begin(), s.buffers.end(), [](const Buffer& b) {
    return absl::StartsWith(b.name, "live_values");
  });
  EXPECT_EQ(live_values, kb > 1 && masked) << s.name;
  EXPECT_EQ(s.num_blocks, nb / (split * kb)) << s.name;
  EXPECT_TRUE(absl::StrContains(s.name, absl::StrCat("_flash_blocks_"))) << s.name;
  EXPECT_TRUE(absl::EndsWith(s.name, absl::StrCat("_l", attended, "_b", kb * tr))) << s.name;
  // A running state only where blocks fold (or a sink starts the softmax): one block is the whole softmax.
  const bool carried = nb / (split * kb) > 1 || (c.sinks && split == 1);
  for (const char* carry : {"run_max", "run_sum"}) {
    const int b = s.FindBuffer(carry);
    EXPECT_EQ(b >= 0, carried) << carry;
    if (b < 0) continue;
    EXPECT_EQ(s.buffers[b].precision, Precision::kFp32);
    EXPECT_EQ(s.buffers[b].depth, 2);
  }
  // The blocks run to the position: a trip exactly when P is an operand and there is more than one block.
  EXPECT_EQ(s.trip.has_value(), c.pos == Pos::kNamed && nb / (split * kb) > 1) << s.name;
  if (s.trip) {
    EXPECT_EQ(s.trip->lo, 1);
    EXPECT_EQ(s.trip->hi, c.l + 1 - c.rows);
    EXPECT_EQ(s.trip->bias, c.rows - 1);
    EXPECT_EQ(s.trip->per, tr * kb * split);
  }
  EXPECT_EQ(s.claim.reason, "attention in bf16");
  EXPECT_EQ(s.acc_precision, Precision::kFp32);
}

struct Shaped {
  AttnCase c;
  Form form;
};

std::vector<Shaped> TinyCases() {
  std::vector<Shaped> v;
  auto add = [&](AttnCase c, Form f = Form::kFlash) { v.push_back({c, f}); };
  // ── Decode: one query row.
  add({.h = 4, .kv = 4, .hd = 8, .vd = 8, .l = 13});                                   // whole cache, tail mask
  add({.h = 4, .kv = 4, .hd = 8, .vd = 8, .l = 16});                                   // unmasked, 2 blocks
  add({.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 5});                                    // one block: no fold
  add({.h = 4, .kv = 2, .hd = 16, .vd = 16, .l = 24, .pos = Pos::kLiteral, .p = 17});  // literal length
  for (int64_t p : {1, 20, 40}) {                                                      // positions 1, l/2, l
    add({.h = 8, .kv = 2, .hd = 16, .vd = 24, .l = 40, .pos = Pos::kNamed, .p = p});
  }
  for (int64_t p : {1, 16, 33}) {  // l not a tile multiple
    add({.h = 2, .kv = 1, .hd = 8, .vd = 16, .l = 33, .pos = Pos::kNamed, .p = p});
  }
  add({.h = 8, .kv = 1, .hd = 8, .vd = 8, .l = 21, .pos = Pos::kNamed, .p = 19});     // GQA 8, per head
  add({.h = 4, .kv = 1, .hd = 16, .vd = 8, .l = 30, .pos = Pos::kNamed, .p = 11});    // GQA 4, vd < hd
  add({.h = 2, .kv = 2, .hd = 64, .vd = 64, .l = 20, .pos = Pos::kNamed, .p = 20});   // hd 64: 2 value pages
  add({.h = 4, .kv = 2, .hd = 128, .vd = 128, .l = 17, .pos = Pos::kNamed, .p = 9});  // hd 128: 4 value pages
  add({.h = 2, .kv = 1, .hd = 64, .vd = 128, .l = 12, .pos = Pos::kNamed, .p = 6});   // values wider than keys
  add({.h = 4, .kv = 2, .hd = 16, .vd = 16, .l = 40, .pos = Pos::kNamed, .p = 37, .sliding = 5});  // masked blocks
  add({.h = 4, .kv = 2, .hd = 16, .vd = 16, .l = 40, .pos = Pos::kNamed, .p = 3, .sliding = 5});
  add({.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 29, .sliding = 10});  // window, no position
  add({.h = 4, .kv = 4, .hd = 8, .vd = 16, .l = 40, .pos = Pos::kNamed, .p = 35, .chunked = 16});
  add({.h = 4, .kv = 4, .hd = 8, .vd = 16, .l = 40, .pos = Pos::kNamed, .p = 16, .chunked = 16});  // chunk edge
  add({.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 19, .pos = Pos::kLiteral, .p = 18, .chunked = 6});
  add({.h = 4, .kv = 2, .hd = 16, .vd = 16, .l = 26, .pos = Pos::kNamed, .p = 26, .sinks = true});
  add({.h = 4, .kv = 4, .hd = 8, .vd = 8, .l = 12, .sinks = true, .cap = 0.3});  // sinks and a cap
  add({.h = 2, .kv = 2, .hd = 16, .vd = 16, .l = 40, .pos = Pos::kNamed, .p = 21, .scale = 0.9, .cap = 0.5});
  add({.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 23, .pos = Pos::kNamed, .p = 23, .sliding = 7, .sinks = true,
       .cap = 1.5});
  // ── Grouped decode: one item per K/V head (groups 2, 4 and 8 fit a tile's 8 rows).
  add({.h = 4, .kv = 2, .hd = 16, .vd = 16, .l = 40, .pos = Pos::kNamed, .p = 20}, Form::kGrouped);
  add({.h = 8, .kv = 2, .hd = 8, .vd = 16, .l = 21, .pos = Pos::kNamed, .p = 1}, Form::kGrouped);
  add({.h = 8, .kv = 1, .hd = 32, .vd = 32, .l = 35, .pos = Pos::kNamed, .p = 35}, Form::kGrouped);
  add({.h = 16, .kv = 2, .hd = 16, .vd = 8, .l = 30, .pos = Pos::kNamed, .p = 17, .sinks = true}, Form::kGrouped);
  add({.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 33, .pos = Pos::kNamed, .p = 30, .sliding = 9}, Form::kGrouped);
  add({.h = 4, .kv = 1, .hd = 16, .vd = 16, .l = 18, .cap = 0.4}, Form::kGrouped);
  // ── Split decode (flash_split.h): two parts per K/V head of two blocks each (one block would need no parts), with
  // windows, sinks and a cap.
  add({.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 64, .pos = Pos::kNamed, .p = 30, .sliding = 9}, Form::kGrouped);
  add({.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 64, .pos = Pos::kNamed, .p = 3, .sliding = 9}, Form::kGrouped);
  add({.h = 4, .kv = 2, .hd = 8, .vd = 16, .l = 64, .pos = Pos::kNamed, .p = 27, .chunked = 12}, Form::kGrouped);
  add({.h = 8, .kv = 2, .hd = 16, .vd = 8, .l = 64, .pos = Pos::kNamed, .p = 9, .sinks = true, .cap = 0.7},
      Form::kGrouped);
  add({.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 64, .pos = Pos::kLiteral, .p = 61}, Form::kGrouped);
  // ── Prefill blocks: T > 1 rows under a causal bound.
  add({.h = 2, .kv = 1, .hd = 16, .vd = 16, .l = 20, .rows = 5, .pos = Pos::kLiteral, .p = 10});
  add({.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 30, .rows = 8, .pos = Pos::kNamed, .p = 12});
  add({.h = 4, .kv = 2, .hd = 16, .vd = 8, .l = 40, .rows = 13, .pos = Pos::kNamed, .p = 28});
  add({.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 27, .rows = 3, .pos = Pos::kNamed, .p = 1});
  add({.h = 1, .kv = 1, .hd = 8, .vd = 8, .l = 16, .rows = 16, .pos = Pos::kNamed, .p = 1});  // T = l
  add({.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 20, .rows = 10, .pos = Pos::kNamed, .p = 5, .sliding = 6});
  add({.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 24, .rows = 12, .pos = Pos::kNamed, .p = 3, .chunked = 8});
  add({.h = 4, .kv = 2, .hd = 8, .vd = 8, .l = 19, .rows = 6, .pos = Pos::kNamed, .p = 9, .sinks = true});
  add({.h = 2, .kv = 2, .hd = 16, .vd = 16, .l = 25, .rows = 9, .pos = Pos::kLiteral, .p = 4, .cap = 0.6});
  add({.h = 8, .kv = 2, .hd = 64, .vd = 64, .l = 18, .rows = 4, .pos = Pos::kNamed, .p = 7});
  add({.h = 2, .kv = 1, .hd = 128, .vd = 64, .l = 14, .rows = 3, .pos = Pos::kNamed, .p = 12});
  return v;
}

TEST(AttentionFlashTest, MatchesNaiveReferenceOnTestTiny) {
  const Target& t = Shipped("test_tiny");
  int checked = 0;
  int splits = 0;
  uint64_t seed = 11;
  for (const Shaped& s : TinyCases()) {
    SCOPED_TRACE(CaseText(s.c));
    const Composition comp = CheckAttention(s.c, t, s.form, seed++);
    if (comp.sections.empty()) continue;
    ExpectFoldShape(comp, s.c, t);
    if (s.form == Form::kGrouped) {
      ASSERT_GE(comp.sections.size(), 3u);
      EXPECT_TRUE(absl::StrContains(comp.sections.front().name, "_gqa_groups_"));
      EXPECT_EQ(FoldOf(comp).items.size(), static_cast<size_t>(s.c.kv * SplitOf(comp)));
    } else {
      EXPECT_EQ(FoldOf(comp).items.size(), static_cast<size_t>(CeilDiv(s.c.rows, 8) * s.c.h));
    }
    // One fold, or, where one fold's value pages need more buffers than a site has circular buffers, a fold per
    // value page and the joins between them.
    size_t folds = 0;
    for (const Section& sec : comp.sections) {
      folds += absl::StrContains(sec.name, "_flash_blocks_");
      EXPECT_LE(static_cast<int64_t>(sec.buffers.size()), t.proto().num_cbs()) << sec.name;
    }
    const size_t fold_sections = folds == 1 ? 1 : 2 * folds - 1;
    // Grouped: the regroup before the fold, and the relayout of the result after it — unless the fold is split,
    // whose combine writes the flat result itself (FlashGeometry.ungroup_out).
    const bool split = SplitOf(comp) > 1;
    EXPECT_EQ(comp.sections.size() - (s.form == Form::kGrouped ? (split ? 1 : 2) : 0),
              fold_sections + (s.c.sinks ? 1 : 0) + (split ? 1 : 0));
    if (s.form == Form::kGrouped && split) {
      EXPECT_TRUE(absl::StrContains(comp.sections.back().name, "_flash_combine_")) << comp.sections.back().name;
    }
    // Wherever else it lowers (the 32-wide targets take the heads of whole 32-wide tiles), it certifies.
    EXPECT_GE(CertifyOnShipped(AttnSpec(s.c), s.form), 1);
    splits += SplitOf(comp) > 1;
    ++checked;
  }
  EXPECT_GE(checked, 40);
  EXPECT_GE(splits, 5) << "the split decode's cases did not split";
}

// Real shapes on the 32 x 32 targets, modest in positions (the VM is f64 and simple).
TEST(AttentionFlashTest, MatchesNaiveReferenceOnRealTargets) {
  const std::vector<std::pair<const char*, Shaped>> cases = {
      {"wormhole_n150", {{.h = 4, .kv = 4, .hd = 128, .vd = 128, .l = 64, .pos = Pos::kNamed, .p = 64}, Form::kFlash}},
      {"wormhole_n150",
       {{.h = 8, .kv = 2, .hd = 64, .vd = 64, .l = 100, .pos = Pos::kNamed, .p = 77}, Form::kFlashForm}},
      {"wormhole_n150",
       {{.h = 2, .kv = 1, .hd = 64, .vd = 64, .l = 96, .rows = 40, .pos = Pos::kNamed, .p = 50}, Form::kFlash}},
      {"wormhole_n150",
       {{.h = 2, .kv = 2, .hd = 64, .vd = 128, .l = 70, .pos = Pos::kNamed, .p = 70, .sliding = 40}, Form::kFlash}},
      {"blackhole_p150",
       {{.h = 8, .kv = 1, .hd = 128, .vd = 128, .l = 45, .pos = Pos::kNamed, .p = 23, .sinks = true},
        Form::kFlashForm}},
  };
  uint64_t seed = 101;
  for (const auto& [name, s] : cases) {
    const Target& t = Shipped(name);
    SCOPED_TRACE(CaseText(s.c));
    const Composition comp = CheckAttention(s.c, t, s.form, seed++);
    if (comp.sections.empty()) continue;
    ExpectFoldShape(comp, s.c, t);
  }
}

// A split decode's parts of one query tile share their prologue (the position, the scaler, the query: multicast
// along ITEM_X, the part), a part's own first block is shared by every query tile (multicast along ITEM_Y), and the
// combine merges every part at once, with no fold, its value blocks sharing the parts' maxima and sums.
TEST(AttentionFlashTest, SplitDecodeSharesItsPrologueAndCombinesAtOnce) {
  const Target& wh = Shipped("wormhole_n150");
  const AttnCase c{.h = 32, .kv = 8, .hd = 128, .vd = 128, .l = 32768, .pos = Pos::kNamed, .p = 4096};
  absl::StatusOr<Composition> comp = LowerAttention(AttnSpec(c), wh, Form::kFlashForm);
  ASSERT_TRUE(comp.ok()) << comp.status();
  const Section* fold = SectionNamed(*comp, "_split");
  const Section* combine = SectionNamed(*comp, "_flash_combine_");
  ASSERT_NE(fold, nullptr);
  ASSERT_NE(combine, nullptr);
  for (const char* name : {"load_pos", "load_q"}) {
    const int i = fold->FindStage(name);
    ASSERT_GE(i, 0) << name;
    EXPECT_EQ(std::get<Load>(fold->stages[i].op).multicast, LoopVar::kItemX) << name;
  }
  const int part_start = fold->FindStage("load_part_start");
  ASSERT_GE(part_start, 0);
  EXPECT_EQ(std::get<Load>(fold->stages[part_start].op).multicast, LoopVar::kItemY);
  // Each part reads its own copy of the tables (tile x of 8) and multicasts it to the query tiles (the writer's
  // load), so the 8 parts' multicasts read different DRAM channels rather than one tile one after another.
  for (const char* name : {"load_scaler", "load_tile_offsets"}) {
    const int i = fold->FindStage(name);
    ASSERT_GE(i, 0) << name;
    const Load& ld = std::get<Load>(fold->stages[i].op);
    EXPECT_EQ(ld.multicast, LoopVar::kItemY) << name;
    EXPECT_EQ(ld.pattern.origin.steps, (std::vector<Term>{{LoopVar::kItemX, 1}})) << name;
    EXPECT_EQ(fold->tensors[ld.tensor].cols, 8 * wh.tile_cols()) << name;
  }
  // The query's regroup: an item per tile of the regrouped query (8 K/V heads x 4 column tiles), each reading its
  // column tile of the group's 4 query heads (4 tiles, a head's 4 tiles apart).
  const Section* regroup = SectionNamed(*comp, "_gqa_groups_");
  ASSERT_NE(regroup, nullptr);
  EXPECT_EQ(regroup->items.size(), 32u);
  const int heads = regroup->FindStage("load_heads");
  ASSERT_GE(heads, 0);
  EXPECT_EQ(std::get<Load>(regroup->stages[heads].op).pattern.block_w, 4);
  EXPECT_EQ(std::get<Load>(regroup->stages[heads].op).pattern.stride_w, 4);
  EXPECT_EQ(combine->num_blocks, 1);
  for (const Stage& st : combine->stages) EXPECT_EQ(st.phase, Phase::kPrologue) << st.name;
  // The combine is the last section and writes the flat result row itself: query head v at columns v * 128 (no
  // relayout section after it). Each item stores its K/V head's 4 query heads' tiles of one value block, a head
  // (4 tiles) apart.
  EXPECT_EQ(combine, &comp->sections.back());
  const int st = combine->FindStage("store_ctx");
  ASSERT_GE(st, 0);
  const Store& store = std::get<Store>(combine->stages[st].op);
  EXPECT_EQ(combine->tensors[store.tensor].name, "y");
  EXPECT_EQ(combine->tensors[store.tensor].rows, 1);
  EXPECT_EQ(combine->tensors[store.tensor].cols, 32 * 128);
  EXPECT_EQ(store.pattern.block_h, 4);
  EXPECT_EQ(store.pattern.stride_h, 4);
  // The combine's value blocks of a query tile (ITEM_X) share its parts' maxima and sums; each reads its own values.
  // The parts' bytes: the outputs on the datapath (bf16), the maxima and sums as bf16 pairs in one tile a part.
  for (const auto& [name, axis, precision] : std::vector<std::tuple<const char*, LoopVar, Precision>>{
           {"load_scaler", LoopVar::kItemY, Precision::kBf16},  // a copy a value block, the writer's
           {"load_part_stats", LoopVar::kItemX, Precision::kBf16},
           {"load_part_out", LoopVar::kUnspecified, Precision::kBf16}}) {
    const int i = combine->FindStage(name);
    ASSERT_GE(i, 0) << name;
    const Load& ld = std::get<Load>(combine->stages[i].op);
    EXPECT_EQ(ld.multicast, axis) << name;
    EXPECT_EQ(combine->tensors[ld.tensor].precision, precision) << name;
  }
  EXPECT_EQ(combine->FindStage("load_part_max"), -1);
  for (const char* name : {"store_part_stats", "store_part_out"}) {
    const int i = fold->FindStage(name);
    ASSERT_GE(i, 0) << name;
    const std::string& tensor = fold->tensors[std::get<Store>(fold->stages[i].op).tensor].name;
    EXPECT_GE(combine->FindTensor(tensor), 0) << name << " writes " << tensor << ", which the combine does not read";
  }
  ExpectAttnCertifies(*comp, wh);
}

// "lowered", or the refusal's message.
std::string LowerMessage(const proto::OpSpec& spec, const Target& target) {
  absl::StatusOr<Composition> r = Lower(spec, target);
  return r.ok() ? std::string("lowered") : std::string(r.status().message());
}

// A block the spec sets (kv_chunk, tt-metal's k_chunk_size) is whole tile rows that divide what a fold covers, and
// wider than one tile row only where a query tile's live rows share their limit: else refused by name. Negative is
// malformed.
TEST(AttentionFlashTest, KvChunkRefusals) {
  const Target& tiny = Shipped("test_tiny");
  auto message = [&](const AttnCase& c) { return LowerMessage(AttnSpec(c), tiny); };
  const AttnCase rows{.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 32, .rows = 2, .pos = Pos::kNamed, .p = 5};
  const std::string tail =
      " (a block is whole tile rows that divide them, at most the accumulator's 4 tiles, and more than one only where "
      "a query tile's rows share their limit)";
  AttnCase c = rows;
  c.kv_chunk = 12;
  EXPECT_EQ(message(c), "NotLowered: a flash fold in blocks of 12 positions over 4 tile rows of 8" + tail);
  c.kv_chunk = 16;  // two query rows, two limits
  EXPECT_EQ(message(c), "NotLowered: a flash fold in blocks of 16 positions over 4 tile rows of 8" + tail);
  c.kv_chunk = 8;
  EXPECT_EQ(message(c), "lowered");
  AttnCase decode{.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 32, .pos = Pos::kNamed, .p = 5, .kv_chunk = 40};
  EXPECT_EQ(message(decode), "NotLowered: a flash fold in blocks of 40 positions over 4 tile rows of 8" + tail);
  decode.kv_chunk = 32;  // one decode row: its block may be read whole
  EXPECT_EQ(message(decode), "lowered");
  decode.kv_chunk = -8;
  EXPECT_EQ(message(decode), "attention kv_chunk is negative (-8)");
}

// A contraction's own fidelity (qk_fidelity / pv_fidelity) goes on its tile product; where the contraction is not
// one it is refused by name: the three sections, and a fold whose query rows see different positions (its value
// contraction is guarded row by row; its scores are still a tile product). A value that is not a fidelity is
// malformed.
TEST(AttentionFlashTest, PerContractionFidelityRefusals) {
  const Target& tiny = Shipped("test_tiny");
  auto message = [&](const proto::OpSpec& spec) { return LowerMessage(spec, tiny); };
  const AttnCase causal{.h = 2, .kv = 1, .hd = 8, .vd = 8, .l = 27, .rows = 3, .pos = Pos::kNamed, .p = 1};
  proto::OpSpec spec = AttnSpec(causal);
  spec.mutable_attention()->set_qk_fidelity(proto::HIFI4);
  EXPECT_EQ(message(spec), "lowered");
  spec.mutable_attention()->set_pv_fidelity(proto::HIFI4);
  EXPECT_EQ(message(spec),
            "NotLowered: a per-contraction fidelity (pv_fidelity) on a flash fold whose query rows see different "
            "positions: its value contraction is guarded row by row, not a tile product");
  // A decode row's block is read whole: its value product is a tile product even over one tile row.
  proto::OpSpec decode = AttnSpec({.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 32, .pos = Pos::kNamed, .p = 5,
                                   .kv_chunk = 8});
  decode.mutable_attention()->set_pv_fidelity(proto::LOFI);
  EXPECT_EQ(message(decode), "lowered");
  decode.mutable_attention()->set_form(proto::AttentionSpec::FORM_SECTIONS);
  EXPECT_EQ(message(decode),
            "NotLowered: a per-contraction fidelity (qk_fidelity, pv_fidelity) in the three sections of an "
            "attention, whose contractions are not tile products");
  decode.mutable_attention()->set_form(proto::AttentionSpec::FORM_AUTO);
  decode.mutable_attention()->set_qk_fidelity(static_cast<proto::Fidelity>(7));
  EXPECT_EQ(message(decode), "attention qk_fidelity is not a fidelity (7)");
}

// The K/V caches' format (kv_format) is a float storage format the target keeps, in the flash forms only; refused by
// message otherwise.
TEST(AttentionFlashTest, KvFormatRefusals) {
  const Target& tiny = Shipped("test_tiny");
  auto message = [&](const proto::OpSpec& spec) { return LowerMessage(spec, tiny); };
  proto::OpSpec spec = AttnSpec({.h = 8, .kv = 2, .hd = 8, .vd = 8, .l = 64, .pos = Pos::kNamed, .p = 30});
  spec.mutable_attention()->set_kv_format(proto::BFP8_B);
  EXPECT_EQ(message(spec), "lowered");
  spec.mutable_attention()->set_kv_format(proto::INT32);
  EXPECT_EQ(message(spec), "attention.kv_format = int32 is not a float format (bf16, fp16, fp32, bfp8_b, bfp4_b)");
  spec.mutable_attention()->set_kv_format(static_cast<proto::Precision>(99));
  EXPECT_EQ(message(spec), "attention.kv_format is not a precision (99)");
  spec.mutable_attention()->set_kv_format(proto::BFP4_B);  // test_tiny stores no bfp4_b
  EXPECT_EQ(message(spec), "MissingPrecision: attention.kv_format bfp4_b (target test_tiny)");
  spec.mutable_attention()->set_kv_format(proto::BFP8_B);
  spec.mutable_attention()->set_form(proto::AttentionSpec::FORM_SECTIONS);
  EXPECT_EQ(message(spec), "NotLowered: a K/V format (kv_format) in the three sections of an attention");
}

// A 16-bit Dst (dest_acc BF16) is the prefill fold's: lowered there with a bf16 accumulator, refused by name in the
// one-tile fold (a decode's) and the three sections; a format other than FP32 or BF16 is malformed.
TEST(AttentionFlashTest, DestAccRefusals) {
  const Target& wh = Shipped("wormhole_n150");
  auto message = [&](const proto::OpSpec& spec) { return LowerMessage(spec, wh); };
  proto::OpSpec prefill =
      AttnSpec({.h = 4, .kv = 2, .hd = 128, .vd = 128, .l = 256, .rows = 64, .pos = Pos::kLiteral, .p = 193});
  prefill.mutable_attention()->set_dest_acc(proto::BF16);
  absl::StatusOr<Composition> c = Lower(prefill, wh);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->sections.size(), 1u);
  EXPECT_TRUE(absl::StrContains(c->sections[0].name, "_flash_prefill_")) << c->sections[0].name;
  EXPECT_EQ(c->sections[0].acc_precision, Precision::kBf16);
  ExpectAttnCertifies(*c, wh);
  // Its running state is fp32 buffers still: Grayskull (a 16-bit Dst only, no fp32 storage) refuses it as before.
  EXPECT_EQ(LowerMessage(prefill, Shipped("grayskull_e150")),
            "MissingPrecision: an fp32 accumulator (Dst) for the flash fold's running softmax (target grayskull_e150)");
  proto::OpSpec decode = AttnSpec({.h = 8, .kv = 2, .hd = 64, .vd = 64, .l = 100, .pos = Pos::kNamed, .p = 77});
  decode.mutable_attention()->set_dest_acc(proto::FP32);
  EXPECT_EQ(message(decode), "lowered");
  decode.mutable_attention()->set_dest_acc(proto::BF16);
  EXPECT_EQ(message(decode),
            "NotLowered: a 16-bit Dst (dest_acc BF16) outside the prefill fold (tt-metal's streaming kernel): this "
            "attention takes the one-tile fold, whose running state stays in a 32-bit Dst");
  decode.mutable_attention()->set_form(proto::AttentionSpec::FORM_SECTIONS);
  EXPECT_EQ(message(decode), "NotLowered: a 16-bit Dst (dest_acc BF16) in the three sections of an attention");
  const std::string malformed =
      "attention.dest_acc: expected FP32 or BF16 (the accumulator tt-metal's fp32_dest_acc_en chooses), got ";
  decode.mutable_attention()->set_dest_acc(proto::FP16);
  EXPECT_EQ(message(decode), malformed + "FP16");
  decode.mutable_attention()->set_dest_acc(static_cast<proto::Precision>(99));
  EXPECT_EQ(message(decode), malformed + "99");
}

// K/V read per item (kv_reads PER_ITEM) is the prefill fold's choice: refused by name elsewhere and when malformed.
TEST(AttentionFlashTest, KvReadsRefusals) {
  const Target& wh = Shipped("wormhole_n150");
  auto message = [&](const proto::OpSpec& spec) { return LowerMessage(spec, wh); };
  proto::OpSpec prefill =
      AttnSpec({.h = 4, .kv = 2, .hd = 128, .vd = 128, .l = 256, .rows = 64, .pos = Pos::kLiteral, .p = 193});
  prefill.mutable_attention()->set_kv_reads(proto::AttentionSpec::KV_READS_PER_ITEM);
  EXPECT_EQ(message(prefill), "lowered");
  proto::OpSpec decode = AttnSpec({.h = 8, .kv = 2, .hd = 64, .vd = 64, .l = 100, .pos = Pos::kNamed, .p = 77});
  decode.mutable_attention()->set_kv_reads(proto::AttentionSpec::KV_READS_SHARED);
  EXPECT_EQ(message(decode), "lowered");
  decode.mutable_attention()->set_kv_reads(proto::AttentionSpec::KV_READS_PER_ITEM);
  EXPECT_EQ(message(decode),
            "NotLowered: K/V read per item (kv_reads PER_ITEM) outside the prefill fold (tt-metal's causal SDPA "
            "kernels): this attention takes the one-tile fold");
  decode.mutable_attention()->set_form(proto::AttentionSpec::FORM_SECTIONS);
  EXPECT_EQ(message(decode), "NotLowered: K/V read per item (kv_reads PER_ITEM) in the three sections of an attention");
  decode.mutable_attention()->set_kv_reads(static_cast<proto::AttentionSpec::KvReads>(7));
  EXPECT_EQ(message(decode),
            "attention.kv_reads: expected KV_READS_SHARED or KV_READS_PER_ITEM (how the items read their K/V), got 7");
}

// tt-metal's chunk split is the prefill fold's (its items are query chunks), and only where its cores fill the grid
// (the items go round robin over every site); refused by message elsewhere, and when malformed.
TEST(AttentionFlashTest, ChunkSplitRefusals) {
  const Target& wh = Shipped("wormhole_n150");
  auto message = [&](const proto::OpSpec& spec) { return LowerMessage(spec, wh); };
  // 32 heads x 2 chunks of 8 query tiles fill the 64 sites.
  proto::OpSpec prefill =
      AttnSpec({.h = 32, .kv = 8, .hd = 128, .vd = 128, .l = 512, .rows = 512, .pos = Pos::kLiteral, .p = 1});
  prefill.mutable_attention()->set_chunk_split(proto::AttentionSpec::CHUNK_SPLIT_CONTIGUOUS);
  EXPECT_EQ(message(prefill), "lowered");
  prefill.mutable_attention()->set_h(10);
  prefill.mutable_attention()->set_kv(10);
  EXPECT_EQ(message(prefill),
            "NotLowered: tt-metal's contiguous chunk split (chunk_split CONTIGUOUS) of 10 heads x 8 query chunks on 64 "
            "sites: it keeps 10 x 6 cores busy, and the items go round robin over every site, so it needs min(sites, "
            "heads) x min(sites / that, chunks) = the sites (a grid or a chunk size that makes it so, or chunk_split "
            "BALANCED)");
  proto::OpSpec decode = AttnSpec({.h = 8, .kv = 2, .hd = 64, .vd = 64, .l = 100, .pos = Pos::kNamed, .p = 77});
  decode.mutable_attention()->set_chunk_split(proto::AttentionSpec::CHUNK_SPLIT_CONTIGUOUS);
  EXPECT_EQ(message(decode),
            "NotLowered: tt-metal's contiguous chunk split (chunk_split CONTIGUOUS) outside the prefill fold: this "
            "attention takes the one-tile fold, whose items are not query chunks");
  decode.mutable_attention()->set_form(proto::AttentionSpec::FORM_SECTIONS);
  EXPECT_EQ(message(decode),
            "NotLowered: tt-metal's contiguous chunk split (chunk_split CONTIGUOUS) in the three sections of an "
            "attention");
  decode.mutable_attention()->set_chunk_split(static_cast<proto::AttentionSpec::ChunkSplit>(5));
  EXPECT_EQ(message(decode),
            "attention.chunk_split: expected CHUNK_SPLIT_BALANCED or CHUNK_SPLIT_CONTIGUOUS (which site folds which "
            "query chunks), got 5");
}

// A causal prefill's row table (a tile per item column) is checked against the table budget before it is built:
// refused by message where only the prefill fold may take the attention (a 16-bit Dst).
TEST(AttentionFlashTest, APrefillRowTableOverItsBudgetIsRefused) {
  const Target& wh = Shipped("wormhole_n150");
  proto::OpSpec spec = AttnSpec(
      {.h = 4, .kv = 1, .hd = 128, .vd = 128, .l = 4194304, .rows = 4194304, .pos = Pos::kLiteral, .p = 1});
  spec.mutable_attention()->set_dest_acc(proto::BF16);
  EXPECT_EQ(LowerMessage(spec, wh),
            "NotLowered: a causal prefill fold's row table of 16384 chunks needs a compile-time table of 67108864 "
            "values, more than the 16777216 a program embeds");
}

// The flash form takes the grouped decode where the group fits a tile and the heads need no blocking, and one item
// per query head otherwise.
TEST(AttentionFlashTest, FlashFormPicksGroupedDecode) {
  const Target& tiny = Shipped("test_tiny");
  const AttnCase grouped{.h = 8, .kv = 2, .hd = 16, .vd = 16, .l = 24, .pos = Pos::kNamed, .p = 13};
  Composition c = CheckAttention(grouped, tiny, Form::kFlashForm);
  ASSERT_EQ(c.sections.size(), 3u);
  EXPECT_EQ(c.sections[0].name, "attn_gqa_groups_2x4");
  EXPECT_EQ(c.sections[1].name, "attn_flash_blocks_2x16_l24_b24");
  EXPECT_EQ(c.sections[2].name, "relayout_rows_8_of_16x16");
  // Heads wider than an accumulator page (64 = 8 tiles > 4): one item per query head.
  const AttnCase wide{.h = 4, .kv = 2, .hd = 64, .vd = 64, .l = 16, .pos = Pos::kNamed, .p = 9};
  c = CheckAttention(wide, tiny, Form::kFlashForm);
  ASSERT_EQ(c.sections.size(), 1u);
  EXPECT_EQ(c.sections[0].name, "attn_flash_blocks_4x64_l16_b16");
  // A group taller than a tile (16 > 8): one item per query head.
  const AttnCase tall{.h = 16, .kv = 1, .hd = 8, .vd = 8, .l = 10, .pos = Pos::kNamed, .p = 10};
  c = CheckAttention(tall, tiny, Form::kFlashForm);
  ASSERT_EQ(c.sections.size(), 1u);
  EXPECT_EQ(FoldOf(c).items.size(), 16u);
}

// Values wider than an accumulator page fold a page at a time: one carry, block product, update and normalization
// per page, all sharing one set of scores.
TEST(AttentionFlashTest, ValuesFoldAPageAtATime) {
  const Target& tiny = Shipped("test_tiny");
  const Composition c =
      CheckAttention({.h = 2, .kv = 1, .hd = 16, .vd = 96, .l = 20, .pos = Pos::kNamed, .p = 20, .kv_chunk = 8}, tiny,
                     Form::kFlash);
  const Section& s = FoldOf(c);
  EXPECT_EQ(s.name, "attn_flash_blocks_2x16_v96_l20_b8");
  for (int j = 0; j < 3; ++j) {
    for (const char* stage : {"init_out", "block_out", "fold_out", "normalize", "store_ctx"}) {
      EXPECT_GE(s.FindStage(absl::StrCat(stage, j)), 0) << stage << j;
    }
    const int b = s.FindBuffer(absl::StrCat("run_out", j));
    ASSERT_GE(b, 0);
    EXPECT_EQ(s.buffers[b].page_tiles, 4);
  }
  int scores = 0;
  for (const Stage& st : s.stages) scores += st.name == "scores";
  EXPECT_EQ(scores, 1);
}

// Four value pages would take 34 buffers, over test_tiny's 32 circular buffers (num_cbs): the values go one page
// per fold, joined after, every section within the site's buffers.
TEST(AttentionFlashTest, ValuePagesPastTheCircularBuffersFoldApart) {
  const Target& tiny = Shipped("test_tiny");
  const Composition c =
      CheckAttention({.h = 2, .kv = 1, .hd = 16, .vd = 128, .l = 20, .pos = Pos::kNamed, .p = 20, .kv_chunk = 8}, tiny,
                     Form::kFlash);
  int folds = 0;
  for (const Section& s : c.sections) {
    folds += absl::StrContains(s.name, "_flash_blocks_");
    EXPECT_LE(static_cast<int64_t>(s.buffers.size()), tiny.proto().num_cbs()) << s.name;
  }
  EXPECT_EQ(folds, 4);
  EXPECT_EQ(c.sections.size(), 7u);
}

// Phases: the prologue initializes every carry, the body streams the cache, the epilogue normalizes and stores. One
// block needs no fold at all.
TEST(AttentionFlashTest, FoldPhases) {
  const Target& tiny = Shipped("test_tiny");
  const AttnCase c{.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 30, .rows = 3, .pos = Pos::kNamed, .p = 10, .chunked = 8};
  absl::StatusOr<Composition> comp = LowerAttention(AttnSpec(c), tiny, Form::kFlash);
  ASSERT_TRUE(comp.ok()) << comp.status();
  const Section& s = comp->sections[0];
  auto phase = [&](const char* name) {
    const int i = s.FindStage(name);
    EXPECT_GE(i, 0) << name;
    return i < 0 ? Phase::kPrologue : s.stages[i].phase;
  };
  for (const char* p : {"load_scaler", "load_q", "load_pos", "count_biased", "row_limit", "init_max", "init_sum",
                        "init_out", "init_start"}) {
    EXPECT_EQ(phase(p), Phase::kPrologue) << p;
  }
  for (const char* b : {"load_k", "load_v", "block_limit", "block_floor", "scores", "block_max", "new_max", "rescale",
                        "probs", "block_sum", "block_out", "fold_sum", "fold_out", "fold_max", "next_start"}) {
    EXPECT_EQ(phase(b), Phase::kBody) << b;
  }
  EXPECT_EQ(phase("normalize"), Phase::kEpilogue);
  EXPECT_EQ(phase("store_ctx"), Phase::kEpilogue);
  EXPECT_EQ(std::get<Load>(s.stages[s.FindStage("load_k")].op).num_blocks, 4);
  // The carries' updates come after every read of them in the body.
  EXPECT_LT(s.FindStage("rescale"), s.FindStage("fold_max"));
  EXPECT_LT(s.FindStage("block_limit"), s.FindStage("next_start"));

  const AttnCase one{.h = 2, .kv = 2, .hd = 8, .vd = 8, .l = 7, .pos = Pos::kNamed, .p = 3};
  comp = LowerAttention(AttnSpec(one), tiny, Form::kFlash);
  ASSERT_TRUE(comp.ok()) << comp.status();
  const Section& s1 = comp->sections[0];
  EXPECT_FALSE(s1.has_fold());
  EXPECT_FALSE(s1.trip.has_value());
  for (const Stage& st : s1.stages) EXPECT_EQ(st.phase, Phase::kPrologue) << st.name;
  EXPECT_LT(s1.FindStage("block_limit"), 0);  // one block starts at 0: no carried start
}

// Same spec and target, byte-identical program; and the program survives the wire (the VM runs what was read back).
TEST(AttentionFlashTest, DeterministicAndSerializable) {
  const Target& tiny = Shipped("test_tiny");
  for (const auto& [c, form] : std::vector<std::pair<AttnCase, Form>>{
           {{.h = 8, .kv = 2, .hd = 16, .vd = 16, .l = 30, .pos = Pos::kNamed, .p = 9, .sinks = true}, Form::kGrouped},
           {{.h = 2, .kv = 1, .hd = 16, .vd = 8, .l = 33, .rows = 7, .pos = Pos::kNamed, .p = 4, .chunked = 8,
             .cap = 0.5},
            Form::kFlash}}) {
    SCOPED_TRACE(CaseText(c));
    absl::StatusOr<Composition> a = LowerAttention(AttnSpec(c), tiny, form);
    absl::StatusOr<Composition> b = LowerAttention(AttnSpec(c), tiny, form);
    ASSERT_TRUE(a.ok() && b.ok());
    std::string sa, sb;
    ASSERT_TRUE(ToProto(*a).SerializeToString(&sa));
    ASSERT_TRUE(ToProto(*b).SerializeToString(&sb));
    EXPECT_EQ(sa, sb);
    absl::StatusOr<Composition> back = FromProto(ToProto(*a));
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectMatchesReference(AttnSpec(c), *back, tiny, AttnInputs(*back, c.p, 21));
  }
}

}  // namespace
}  // namespace spatial::testing
