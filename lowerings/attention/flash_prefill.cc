#include "lowerings/attention/flash_prefill.h"

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/flash_fold.h"
#include "lowerings/attention/flash_mask.h"
#include "lowerings/elementwise/elementwise.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "passes/fit_site.h"
#include "spatial/builder.h"
#include "spatial/checked.h"
#include "spatial/maps.h"
#include "spatial/semantics/footprint.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// The last query row's limit: every position a block reads lies below it.
int64_t LastLimit(const FlashGeometry& g) { return g.limit ? g.limit->value + g.q.rows - 1 : g.l; }

// How one item covers the cache and its queries: qc query tiles (a chunk) against blocks of kb tile rows, its values
// vt tiles a page.
struct Chunking {
  int64_t qc = 1;
  int64_t kb = 1;
  int64_t vt = 1;
};

// The section's chunks, all of them: [0, chunks).
struct Range {
  int64_t chunks = 0;
  int64_t blocks = 1;
  int64_t edges = 0;  // the last blocks, masked, each at its own literal start; the blocks before them unmasked
};

// ★ ONE K/V STREAM FOR A GROUP'S HEADS. Where query heads share a K/V head (GQA, in contiguous groups) and no sink is
// read per head, item (y, x) is query head y * group + x % group over chunk x / group: every item of K/V head y then
// reads its blocks at an address affine in y alone, so a block is multicast to the chunks and the heads of its group
// at once (tt-metal's K/V chain forwarding shares it along the heads), instead of once a query head. The query and
// the result are addressed through a table.
bool GroupedItems(const FlashGeometry& g) {
  if (g.q.group < 2 || g.sinks) return false;
  for (int64_t h = 0; h < g.q.per_row; ++h) {
    if (g.q.kv_of(h) != h / g.q.group) return false;
  }
  return true;
}

// At most this many edge blocks are unrolled after the fold (each is a copy of the block's chain).
constexpr int64_t kMaxEdges = 4;

// The blocks at the end of range `r` some row of it sees only in part, when they can run unrolled after unmasked
// ones: the range's first row sees `whole` blocks entirely (every later row sees more), the rest are the edges.
// 0 — the start carried, the mask on each item's last blocks — when nothing is masked, no block is whole or the edges
// are too many.
int64_t EdgeBlocks(const FlashGeometry& g, const Chunking& ch, const Range& r, int64_t tr) {
  if (!g.limit && g.l % tr == 0) return 0;
  const int64_t first_limit = g.limit ? g.limit->value : g.l;
  const int64_t whole = std::min(r.blocks, first_limit / (ch.kb * tr));
  const int64_t edges = r.blocks - whole;
  return whole >= 1 && edges >= 1 && edges <= kMaxEdges ? edges : 0;
}

// ★ TT-METAL'S CHUNK SPLIT (AttentionSpec.chunk_split CONTIGUOUS), as its SDPA program factory computes it for one
// batch: the heads spread over the cores first (nh_parallel = min(cores, heads)), then the chunks (q_parallel =
// min(cores / nh_parallel, chunks)); core i takes nh_per_core heads from ((i / q_parallel) % nh_parallel) *
// nh_per_core and q_per_core = ceil(chunks / q_parallel) consecutive chunks from (i % q_parallel) * q_per_core —
// paired (i, n - 1 - i), the first half from q_start / 2 up and the second from n - 1 - q_start / 2 down, only where
// q_per_core is even and q_per_core * q_parallel == chunks (BALANCED_Q_PARALLEL). `items` are indexed chunk * heads +
// head. Returns them in the order whose round robin over `sites` (sim/place/placement.h: item k on site k mod sites)
// gives each core's items to one site, in the core's order: the cores with the most items on the first sites. That
// needs a core for every site (nh_parallel * q_parallel == sites); otherwise a refusal.
absl::StatusOr<std::vector<WorkItem>> TtMetalChunkOrder(const std::vector<WorkItem>& items, int64_t chunks,
                                                        int64_t heads, int64_t sites) {
  const int64_t nh_par = std::max<int64_t>(1, std::min(sites, heads));
  const int64_t q_par = std::max<int64_t>(1, std::min(sites / nh_par, chunks));
  if (nh_par * q_par != sites) {
    return NotLowered(absl::StrCat("tt-metal's contiguous chunk split (chunk_split CONTIGUOUS) of ", heads,
                                   " heads x ", chunks, " query chunks on ", sites, " sites: it keeps ", nh_par,
                                   " x ", q_par, " cores busy, and the items go round robin over every site, so it "
                                   "needs min(sites, heads) x min(sites / that, chunks) = the sites (a grid or a "
                                   "chunk size that makes it so, or chunk_split BALANCED)"));
  }
  const int64_t nh_per = CeilDiv(heads, nh_par), q_per = CeilDiv(chunks, q_par);
  const bool paired = q_per % 2 == 0 && q_per * q_par == chunks;
  std::vector<std::vector<int64_t>> cores(static_cast<size_t>(nh_par * q_par));
  for (int64_t i = 0; i < nh_par * q_par; ++i) {
    const int64_t h0 = ((i / q_par) % nh_par) * nh_per, q0 = (i % q_par) * q_per;
    for (int64_t h = h0; h < std::min(heads, h0 + nh_per); ++h) {
      for (int64_t k = 0; k < q_per; ++k) {
        const int64_t chunk = !paired ? q0 + k : k < q_per / 2 ? q0 / 2 + k : chunks - 1 - (q0 / 2 + k - q_per / 2);
        if (chunk < chunks) cores[static_cast<size_t>(i)].push_back(chunk * heads + h);
      }
    }
  }
  std::stable_sort(cores.begin(), cores.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::vector<WorkItem> order;
  for (size_t o = 0; !cores.empty() && o < cores[0].size(); ++o) {
    for (const auto& c : cores) {
      if (o < c.size()) order.push_back(items[static_cast<size_t>(c[o])]);
    }
  }
  return order;
}

Body Scaled(Body x, double scale) { return scale == 1.0 ? x : Mul(x, Const(scale)); }

absl::StatusOr<Composition> PrefillSection(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                           const Target& target, const Chunking& ch, const Range& range) {
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const FoldItems fi = FoldItemsOf(g, tr);
  const int64_t qc = ch.qc, kb = ch.kb, vt = ch.vt;
  const int64_t head_t = g.hd / tw;
  const int64_t width_t = fi.per_row * head_t;
  const int64_t v_t = g.vd / tw;
  const int64_t nv = v_t / vt;
  const int64_t out_width_t = fi.per_row * v_t;
  auto part = [nv](const std::string& name, int64_t j) { return nv == 1 ? name : absl::StrCat(name, j); };
  const bool grouped = GroupedItems(g);
  const int64_t blocks = range.blocks;
  const int64_t lead = blocks - range.edges;  // the blocks the fold runs (all of them without edges)
  // The blocks chunk `chunk` folds: those its last row sees (with edges, every chunk folds them all).
  auto chunk_blocks = [&](int64_t chunk) {
    const int64_t last_row = std::min((chunk + 1) * qc * tr, g.q.rows) - 1;
    return g.limit && range.edges == 0 ? std::min(blocks, CeilDiv(g.limit->value + last_row, kb * tr)) : blocks;
  };
  const bool fold = lead > 1;
  const Phase body_phase = fold ? Phase::kBody : Phase::kPrologue;
  const Phase epilogue_phase = fold ? Phase::kEpilogue : Phase::kPrologue;
  ASSIGN_OR_RETURN(const Precision precision, ElemPrecision(target));
  // The running state's buffers, in the Dst's format (AttentionSpec.dest_acc): in a 32-bit Dst fp32; in a 16-bit
  // one bf16, as tt-metal keeps every SDPA intermediate (sdpa_program_factory.cpp: im_df = Float16_b for the output
  // and the statistics, "need to disable fp32 cbs"). Every update of the state rounds to bf16 in such a Dst anyway;
  // held at 16 bits only the value product's accumulation onto the output (the packer's) rounds once more, and each
  // update's unpack and pack move half the bytes.
  const Precision acc = g.dest;
  const Precision mat = *target.matrix_in();
  const bool masked = g.limit.has_value() || g.l % tr != 0;
  if (masked) RETURN_IF_ERROR(DatapathPrecision(Datapath::kInt, target).status());
  ASSIGN_OR_RETURN(const Precision ix, target.index_precision_for(g.rows + fi.tiles_q * tr));
  const int64_t w1 = tw;
  const int64_t wb = kb * tw;       // one query tile's positions in a block
  const int64_t wq = qc * wb;       // the scores' and the probabilities' plane: query tile i from column i * wb
  const int64_t wd = qc * vt * tw;  // a value page's plane: query tile i from column i * vt * tw
  const ElemAccess stat = StatMap(qc, w1);
  auto terms = [](std::vector<Term> ts) { return ElemAccess{0, std::move(ts), std::nullopt}; };
  // (row r, query tile i, position p of the block) -> the scores' plane.
  const ElemAccess score_at = terms({{LoopVar::kRow, wq}, {LoopVar::kCol, wb}, {LoopVar::kK, 1}});
  const std::vector<IterSpec> per_score{{LoopVar::kRow, tr, IterKind::kParallel},
                                        {LoopVar::kCol, qc, IterKind::kParallel},
                                        {LoopVar::kK, wb, IterKind::kParallel}};
  auto per_score_pool = [&](IterKind pool) {
    std::vector<IterSpec> space = per_score;
    space.back().kind = pool;
    return space;
  };
  // (row r, query tile i, value column e) -> a value page's plane, and the per-row statistic it scales by.
  const ElemAccess value_at = terms({{LoopVar::kRow, wd}, {LoopVar::kCol, vt * tw}, {LoopVar::kK, 1}});
  const std::vector<IterSpec> per_value{{LoopVar::kRow, tr, IterKind::kParallel},
                                        {LoopVar::kCol, qc, IterKind::kParallel},
                                        {LoopVar::kK, vt * tw, IterKind::kParallel}};

  Template t(tr, tw);
  ASSIGN_OR_RETURN(const FlashOperands ops, AddFlashOperands(t, names, g, fi, precision));
  const TensorId q = ops.q;
  const TensorId k = ops.k;
  const TensorId v = *ops.v;  // a prefill fold is never latent (PrefillFoldApplies)
  const TensorId c = t.AddTensor(names.out, TensorRole::kOutput, fi.rows, fi.per_row * g.vd, precision,
                                 TensorInit::Zero());

  // ── The prologue, once per item (chunk x of head y; grouped, x = chunk * group + i of K/V head y's query head
  // y * group + i): the scaler, the chunk's query tiles, its K/V head's index, each row's limit, the empty softmax.
  // The chunk runs along ITEM_X so that the K/V blocks, multicast along it, are the reader's to move (tt-metal's
  // reader kernel reads Q, K and V; its writer writes the result): on the writer they would queue behind the
  // previous item's result. The query and the result are two pages deep, so the reader loads the next item's while
  // this one folds, and so is the scaler (made on the site: the next item's is made before this one's last sum has
  // read its own); K and V are one (a site holds one of the two, and the next block's loads once the scores have read
  // the page).
  const BufferId sc_in = t.AddBufferDeep("in_scaler", 2, 1, precision);
  const BufferId q_in = t.AddBufferDeep("in_q", 2, qc * head_t, precision);
  // The reductions' scaler, a tile of ones, made on the site (tt-metal's reader kernel generates it in L1,
  // generate_reduce_scaler): read from DRAM, every site's copy would come from one channel at each item's start.
  t.AddGeneric("make_scaler", HeadSpace(tr, tw), {}, {}, IdentMap(tw), Const(1.0), sc_in);
  const int64_t group = g.q.group;
  const int64_t chunks = fi.tiles_q / qc;
  // The causal row table (add_row_limit, below) holds a tile per item column, checked before it is built (chunks x
  // group <= the items, which WorkItemBudget bounded).
  if (g.limit) {
    RETURN_IF_ERROR(TableBudget(absl::StrCat("a causal prefill fold's row table of ", chunks, " chunks"),
                                CheckedMul(CheckedMul(tr, grouped ? chunks * group : chunks), tw)));
  }
  // Grouped, item x's chunk and head in its group index the query and the result through a table (not affine in
  // x): element x * tile holds chunk * qc * heads + i, the head's first tile in units of a head's tiles.
  std::optional<TensorId> at_t;
  if (grouped) {
    std::vector<int64_t> at(static_cast<size_t>(chunks * group * tw), 0);
    for (int64_t x = 0; x < chunks * group; ++x) at[x * tw] = (x / group) * qc * fi.per_row + x % group;
    at_t = t.AddTensor(absl::StrCat(names.out, "__flash_head_at"), TensorRole::kParam, 1, chunks * group * tw, ix,
                       TensorInit::Values(std::move(at)));
  }
  // Each stream reads the table into its own index page (an index page has one reader).
  auto head_at = [&](const std::string& stream, std::vector<Term> steps, int64_t base, int64_t tile_stride,
                     int64_t w, int64_t pitch) {
    const BufferId b = t.AddBufferDeep(absl::StrCat("in_", stream, "_at"), 1, 1, ix);
    t.AddLoadBlockAt(absl::StrCat("load_", stream, "_at"), *at_t, 0, {{LoopVar::kItemX, 1}}, {}, b);
    const int64_t hi = (chunks - 1) * qc * fi.per_row + group - 1;
    return AccessPattern{TileAddr{base, std::move(steps), IndirectTile{b, tile_stride, 0, hi}}, qc, w, 1, pitch};
  };
  // ★ UNGROUPED, HEAD x READS K/V HEAD x / group: not affine in x, so each item reads its K/V head from a table (one
  // tile per query head, the K/V head in element 0), once for each of the two streams (an index page has one reader).
  std::optional<TensorId> kv_t;
  if (!grouped) {
    std::vector<int64_t> kv_of(static_cast<size_t>(fi.per_row * tw), 0);
    for (int64_t h = 0; h < fi.per_row; ++h) kv_of[h * tw] = g.q.kv_of(h);
    kv_t = t.AddTensor(absl::StrCat(names.out, "__flash_kv_head"), TensorRole::kParam, 1, fi.per_row * tw, ix,
                       TensorInit::Values(std::move(kv_of)));
  }
  auto kv_index = [&](const std::string& stream) {
    const BufferId b = t.AddBufferDeep(absl::StrCat("in_kv_", stream), 1, 1, ix);
    t.AddLoadBlockAt(absl::StrCat("load_kv_", stream), *kv_t, 0, {{LoopVar::kItemY, 1}}, {}, b);
    return b;
  };
  // Each block chain's loads read their own index pages: chain 0 the fold's, chain 1 + e edge e's. Grouped, item y
  // is the K/V head itself: no table.
  auto chain_suffix = [](int64_t chain) { return chain == 0 ? std::string() : absl::StrCat("_edge", chain - 1); };
  std::vector<BufferId> kv_k;
  std::vector<std::vector<BufferId>> kv_vs(static_cast<size_t>(range.edges + 1));
  for (int64_t chain = 0; chain <= range.edges && !grouped; ++chain) {
    const std::string sfx = chain_suffix(chain);
    kv_k.push_back(kv_index(absl::StrCat("k", sfx)));
    for (int64_t j = 0; j < nv; ++j) kv_vs[chain].push_back(kv_index(absl::StrCat(part("v", j), sfx)));
  }
  // Row r of the chunk's query tile i sees the positions below P + (x * qc + i) * tile + r (or all l of them): the
  // row index (x * qc + i) * tile + r from a table of one tile per item.
  FoldMask mask;
  mask.masked = masked;
  mask.counted = masked && fold && range.edges == 0;
  // Each row's limit: in the prologue when the fold masks its blocks, else just before the edges (so that neither its
  // tables' loads nor its stage stand before the first block's scores).
  auto add_row_limit = [&] {
    const BufferId row_lim = t.AddScratchDeep("row_limit", 1, 1, ix);
    mask.row_limit = row_lim;
    if (!g.limit) {
      // Every row attends the l positions; only the last tile's tail is masked.
      t.AddGeneric("row_limit", HeadSpace(tr, qc), {}, {}, stat, Const(static_cast<double>(g.l)), row_lim);
      return;
    }
    // Item x's chunk: x, or grouped x / group.
    const int64_t xs = grouped ? chunks * group : chunks;
    // Tile x of the table holds, at (row r, query tile i), the row index of item x's query tile i's row r: one
    // tile per item, on its own DRAM channel, where a table of each chunk's first rows and a tile of row indices
    // (the same tile for every item, on one channel) were two reads at every item's start.
    std::vector<int64_t> rows_of(static_cast<size_t>(tr * xs * tw), 0);
    for (int64_t r = 0; r < tr; ++r) {
      for (int64_t x = 0; x < xs; ++x) {
        for (int64_t i = 0; i < qc; ++i) {
          rows_of[static_cast<size_t>((r * xs + x) * tw + i)] = ((grouped ? x / group : x) * qc + i) * tr + r;
        }
      }
    }
    const TensorId rows_t = t.AddTensor(absl::StrCat(names.out, "__flash_chunk_rows"), TensorRole::kParam, tr,
                                        xs * tw, ix, TensorInit::Values(std::move(rows_of)));
    const BufferId q_rows = t.AddBufferDeep("in_chunk_rows", 1, 1, ix);
    t.AddLoadBlockAt("load_chunk_rows", rows_t, 0, {{LoopVar::kItemX, 1}}, {}, q_rows);
    t.AddGeneric("row_limit", HeadSpace(tr, qc), {q_rows}, {terms({{LoopVar::kRow, tw}, {LoopVar::kCol, 1}})}, stat,
                 Add(Const(static_cast<double>(g.limit->value)), Op(0)), row_lim);
  };
  if (masked && range.edges == 0) {
    add_row_limit();
    if (mask.counted) {
      const BufferId start = t.AddScratchDeep("block_start", 2, 1, ix);
      t.AddGeneric("init_start", FlatSpace(1), {}, {}, IdentMap(w1), Const(0.0), start);
      mask.start = start;
    }
  }
  // The chunk's query tiles after the limits' small tables: the reader issues its loads in order, and those tables
  // would otherwise queue at DRAM behind every site's query block.
  if (grouped) {
    t.AddLoadPattern("load_q", q, head_at("q", {{LoopVar::kItemY, group * head_t}}, 0, head_t, head_t, width_t),
                     q_in);
  } else {
    t.AddLoadBlockAt("load_q", q, 0, {{LoopVar::kItemX, qc * width_t}, {LoopVar::kItemY, head_t}},
                     {.h = qc, .w = head_t, .pitch = width_t}, q_in);
  }
  // The softmax's scale, 1 when capped (the cap takes the scaled scores).
  const double scale = g.cap ? 1.0 : g.scale;
  const BufferId m_run = t.AddScratchDeep("run_max", 2, 1, acc);
  const BufferId s_run = t.AddScratchDeep("run_sum", 2, 1, acc);
  std::vector<BufferId> o_runs;
  for (int64_t j = 0; j < nv; ++j) o_runs.push_back(t.AddScratchDeep(part("run_out", j), 2, qc * vt, acc));
  // The sinks' spread holds head h's sink in every row of tile h: item (y, x) reads tile y.
  AddSoftmaxStart(t, names.out, g.sinks.has_value(), fi.items, precision, m_run, s_run, LoopVar::kItemY, qc,
                  scale);
  for (int64_t j = 0; j < nv; ++j) {
    t.AddGeneric(part("init_out", j), HeadSpace(tr, wd), {}, {}, IdentMap(wd), Const(0.0), o_runs[j]);
  }

  // ── The body, once per block: block b of K/V head v is tile rows [b*kb, (b+1)*kb) of the cache from tile
  // v * head_t, the same block for every chunk of the head — grouped, of the group (multicast along ITEM_X).
  t.SetPhase(body_phase);
  if (fold) t.Fold(lead);
  const Precision kv = g.kv_precision.value_or(precision);
  const BufferId k_in = t.AddBufferDeep("in_k", 1, kb * head_t, kv);
  std::vector<BufferId> v_ins;
  for (int64_t j = 0; j < nv; ++j) v_ins.push_back(t.AddBufferDeep(part("in_v", j), 1, kb * vt, kv));
  // ★ THE MASK ON THE DIAGONAL ONLY, PER ITEM. Where each item folds its own count with the start carried, a chunk's
  // first row sees all but the last few of its blocks whole (a causal chunk: its diagonal), so the mask runs on each
  // item's last `diagonal` blocks only (Stage.last_blocks; on the blocks before, it would leave every score as it
  // is): tt-metal masks only its diagonal chunks. `diagonal` is the most any chunk needs.
  int64_t diagonal = 0;
  if (mask.counted) {
    for (int64_t chunk = 0; chunk < range.chunks; ++chunk) {
      const int64_t own = chunk_blocks(chunk);
      const int64_t first_row = chunk * qc * tr;
      const int64_t whole = std::min(own, (g.limit ? g.limit->value + first_row : g.l) / (kb * tr));
      diagonal = std::max(diagonal, own - whole);
    }
  }
  const BufferId s_buf = t.AddScratchDeep("scores", 1, qc * kb, mat);
  const BufferId capped = g.cap ? t.AddScratchDeep("capped_scores", 1, qc * kb, mat) : s_buf;
  const BufferId m_blk = t.AddScratchDeep("block_max", 1, 1, acc);
  const BufferId p_buf = t.AddScratchDeep("probs", 1, qc * kb, mat);
  const BufferId l_blk = t.AddScratchDeep("block_sum", 1, 1, acc);
  // One block's chain, its stages and index pages named by `chain` (0: the fold's block, whose K/V loads step on the
  // fold, masked with the carried start when the fold takes every block; 1 + e: edge e, at literal block `at`).
  auto add_block = [&](int64_t chain, std::optional<int64_t> at, const FoldMask& mk) {
    const std::string sfx = chain_suffix(chain);
    auto nm = [&sfx](const std::string& n) { return absl::StrCat(n, sfx); };
    auto cache_block = [&](const std::string& name, TensorId tensor, BufferId index, int64_t base, int64_t cols,
                           int64_t head, int64_t stride, BufferId into) {
      std::vector<Term> steps;
      if (grouped) steps.push_back({LoopVar::kItemY, head});
      if (!at && fold) steps.push_back({LoopVar::kKBlock, kb * stride});
      const int64_t origin = base + (at ? *at * kb * stride : 0);
      std::optional<IndirectTile> by_table;
      if (!grouped) by_table = IndirectTile{index, head, 0, g.kvw - 1};
      const StageId load = t.AddLoadPattern(
          nm(name), tensor, AccessPattern{TileAddr{origin, std::move(steps), by_table}, kb, cols, 1, stride}, into);
      if (!g.kv_per_item) t.SetMulticast(load, LoopVar::kItemX);
    };
    cache_block("load_k", k, grouped ? 0 : kv_k[chain], 0, head_t, head_t, g.kvw * head_t, k_in);
    for (int64_t j = 0; j < nv; ++j) {
      cache_block(part("load_v", j), v, grouped ? 0 : kv_vs[chain][j], j * vt, vt, v_t, g.kvw * v_t, v_ins[j]);
    }
    // Each (row, query tile)'s limit in the block's own positions: its limit less the block's start (carried, or
    // the edge's literal one).
    FoldMask m = mk;
    if (m.row_limit && at) {
      const BufferId lim = t.AddScratchDeep(nm("block_limit"), 1, 1, ix);
      t.AddGeneric(nm("block_limit"), HeadSpace(tr, qc), {*m.row_limit}, {stat}, stat,
                   Sub(Op(0), Const(static_cast<double>(*at * wb))), lim);
      m.lim = lim;
    } else if (m.start) {
      m.lim = AddBlockBound(t, nm("block_limit"), *m.row_limit, *m.start, blocks * wb, qc, ix);
    } else {
      m.lim = m.row_limit;
    }
    // S = Q · K^T: the chunk's qc x head_t query tiles against the block's kb x head_t key tiles, qc x kb score
    // tiles, packed to the datapath's format as tt-metal's SDPA packs them (sdpa_program_factory.cpp: im_df =
    // Float16_b for cb_qk_im, "need to disable fp32 cbs"); the softmax's running state stays fp32.
    t.AddMatmul(nm("scores"),
                MatmulTiles{
                    .m_tiles = qc, .n_tiles = kb, .k_tiles = head_t, .transpose_b = true, .fidelity = g.qk_fidelity},
                q_in,
                k_in, s_buf);
    // ★ THE MAXIMUM OF THE RAW SCORES, THE SCALE IN THE EXP. With scale > 0 the maximum's position is the scaled
    // one's, so the running maximum is kept in the scores' own units and the scale rides the exponent: P =
    // e^(scale * (S - m')) and a = e^(scale * (m - m')), as tt-metal's sub_exp_block_bcast_cols_inplace (exp_tile
    // with its scale). Capped, the cap of the scaled score is taken first and the scale is then 1.
    if (g.cap) {
      t.AddGeneric(nm("score_cap"), HeadSpace(tr, wq), {s_buf}, {IdentMap(wq)}, IdentMap(wq),
                   Capped(Mul(Op(0), Const(g.scale)), *g.cap), capped);
    }
    // ★ THE MASK ONCE A BLOCK, ONLY WHERE A ROW CAN END: a masked position's score becomes MASKED in place (tt-metal
    // adds its -inf mask tile to the scores), so the maximum is a plain pool and e^(scale * (MASKED - m')) is exactly
    // 0 in the probabilities. Every row sees position 0 of the first block (a limit of at least 1:
    // PrefillFoldApplies), so m' is a live score from the first block on.
    if (m.lim) {
      std::vector<BufferId> ins{capped};
      std::vector<ElemAccess> maps{score_at};
      AddLimitSlots(m, ins, maps, stat);
      const StageId masking = t.AddGeneric(nm("mask_scores"), per_score, ins, maps, score_at,
                                           Live(m, LoopVar::kK, Op(0), Const(kMasked), 1), capped);
      if (!at && m.start && diagonal > 0 && diagonal < blocks) t.SetLastBlocks(masking, diagonal);
    }
    t.AddGeneric(nm("block_max"), per_score_pool(IterKind::kReduceMax), {capped, sc_in}, {score_at, ConstMap()}, stat,
                 Op(0), m_blk);
    const auto [m_new, alpha] = AddMaxUpdate(t, m_run, m_blk, sc_in, qc, scale, sfx);
    // P = e^(scale * (S - m')), packed for the value product.
    t.AddGeneric(nm("probs"), per_score, {capped, m_new}, {score_at, stat}, score_at,
                 Unary(g.probs_exp, Scaled(Sub(Op(0), Op(1)), scale)), p_buf);
    // The sum of the probabilities the value product weighs, as packed.
    t.AddGeneric(nm("block_sum"), per_score_pool(IterKind::kReduceSum), {p_buf, sc_in}, {score_at, ConstMap()}, stat,
                 Op(0), l_blk);
    // O' = a * O + P · V, a value page at a time, as tt-metal's SDPA folds it: the running output is scaled in
    // place, then the chunk's qc x kb probability tiles against the block's kb x vt value tiles accumulate onto it,
    // the packer adding each Dst sub-block into the page (packer L1 accumulation, the plan's pack_accumulate).
    for (int64_t j = 0; j < nv; ++j) {
      t.AddGeneric(nm(part("rescale_out", j)), per_value, {o_runs[j], alpha}, {value_at, stat}, value_at,
                   Mul(Op(0), Op(1)), o_runs[j]);
      t.AddMatmul(nm(part("block_out", j)),
                  MatmulTiles{
                      .m_tiles = qc, .n_tiles = vt, .k_tiles = kb, .accumulate = true, .fidelity = g.pv_fidelity},
                  p_buf, v_ins[j],
                  o_runs[j]);
    }
    t.AddGeneric(nm("fold_sum"), HeadSpace(tr, qc), {s_run, alpha, l_blk}, {stat, stat, stat}, stat,
                 Add(Mul(Op(0), Op(1)), Op(2)), s_run);
    t.AddGeneric(nm("fold_max"), HeadSpace(tr, qc), {m_run, m_new}, {stat, stat}, stat, Op(1), m_run);
  };
  // ★ THE MASK ONLY ON THE EDGE. A range's first rows see its first `lead` blocks whole, so those fold unmasked and
  // the `edges` blocks after them — where some row's limit falls — run each once, masked, at their literal starts
  // (tt-metal masks only its diagonal chunks). Without edges the mask takes the carried start, on each item's last
  // `diagonal` blocks only.
  add_block(0, std::nullopt, range.edges > 0 ? FoldMask{} : mask);
  AddNextStart(t, mask, blocks * kb, kb * tr);
  if (range.edges > 0) {
    t.SetPhase(epilogue_phase);
    add_row_limit();
  }
  for (int64_t e = 0; e < range.edges; ++e) add_block(1 + e, lead + e, mask);

  // ── The epilogue, once per item: O / s into the chunk's tiles of the dense result. The reciprocal is taken once
  // a row, on the sums' column (tt-metal's recip_block_inplace on the statistics), and the output scaled by it on
  // the FPU, not once an output element.
  t.SetPhase(epilogue_phase);
  const BufferId inv_sum = InverseSum(t, s_run, tr, 0.0, qc);
  for (int64_t j = 0; j < nv; ++j) {
    const BufferId out = t.AddBufferDeep(part("out", j), 2, qc * vt, precision);
    t.AddGeneric(part("normalize", j), per_value, {o_runs[j], inv_sum}, {value_at, stat}, value_at,
                 Mul(Op(0), Op(1)), out);
    if (grouped) {
      t.AddStorePattern(part("store_ctx", j), c,
                        head_at(part("out", j), {{LoopVar::kItemY, group * v_t}}, j * vt, v_t, vt, out_width_t), out);
    } else {
      t.AddStoreBlock(part("store_ctx", j), c, j * vt,
                      {{LoopVar::kItemX, qc * out_width_t}, {LoopVar::kItemY, v_t}},
                      {.h = qc, .w = vt, .pitch = out_width_t}, out);
    }
  }
  WireFirstReaders(t);
  // What the items of a K/V head read alike in the prologue (ungrouped, the K/V head's index tiles; a fold of one
  // block, its K/V) is multicast along ITEM_X with the K/V blocks: 64 sites reading one tile would queue at one DRAM
  // channel. (Multicast along the heads, ITEM_Y, they would be the writer's and wait behind the previous item's
  // result.) A fold of one block read per item keeps its K/V each item's own.
  MulticastSharedPrologue(t, LoopVar::kItemX, g.kv_per_item ? std::vector<TensorId>{k, v} : std::vector<TensorId>{});

  // ★ CAUSAL TRIPS PER ITEM: a chunk folds only the blocks its last row sees (WorkItem.blocks), the section's count
  // being the last chunk's. (With edges every chunk folds the `lead` blocks its first row sees whole, then the
  // edges: no item's count differs.) The items go round robin over the sites, heaviest first, each round of `sites`
  // items in turn reversed (a snake): every site gets about the same number of blocks (tt-metal's causal balancing
  // pairs chunks i and n - 1 - i on a core to the same end), and the items that share a K/V block stream — the heads
  // of a group, the chunks of equal count — run at the same ordinal.
  std::vector<WorkItem> items;
  for (int64_t chunk = 0; chunk < range.chunks; ++chunk) {
    const int64_t own = chunk_blocks(chunk);
    for (int64_t h = 0; h < fi.per_row; ++h) {
      const int64_t x = grouped ? chunk * group + h % group : chunk;
      const int64_t y = grouped ? h / group : h;
      items.push_back(WorkItem{.y = y, .x = x,
                               .out = TileRect{.row0_t = chunk * qc, .col0_t = h * v_t, .h_t = qc, .w_t = v_t},
                               .blocks = own < blocks ? own : -1});
    }
  }
  const int64_t sites = target.sites();
  if (g.contiguous_chunks) {
    // Every (chunk, head) item on the core tt-metal gives it (TtMetalChunkOrder).
    ASSIGN_OR_RETURN(items, TtMetalChunkOrder(items, range.chunks, fi.per_row, sites));
  } else {
    const auto count = [blocks](const WorkItem& w) { return w.blocks < 0 ? blocks : w.blocks; };
    std::stable_sort(items.begin(), items.end(),
                     [&](const WorkItem& a, const WorkItem& b) { return count(a) > count(b); });
    for (int64_t round = 1; round * sites < static_cast<int64_t>(items.size()); round += 2) {
      const auto first = items.begin() + round * sites;
      std::reverse(first, first + std::min<int64_t>(sites, static_cast<int64_t>(items.size()) - round * sites));
    }
  }
  for (size_t i = 0; i < items.size(); ++i) items[i].id = static_cast<int64_t>(i);
  // No placement grid: the items go round robin, so the chunks of a head that run together sit on many sites. No
  // sub-block either: each product takes tt-metal's own for its page (SubBlockOf, sim/machine/stage_cost.cc). The
  // value products accumulate onto the running output with the packer (pack_accumulate: no reload), and the block's
  // row sums are the packer's too, packing the probabilities a second time as tt-metal's sub_exp_block_bcast_cols
  // does (pack_row_sums: the block_sum stage right after the probabilities). The stages stream a query tile row
  // at a time over the compute threads, as that kernel interleaves them (stream_rows, sim/machine/row_stream.h).
  t.SetPlan(BlockPlan{.per_site_m = qc, .per_site_n = kb, .grid_y = 0, .grid_x = 0, .num_blocks = blocks, .osh = 0,
                      .osw = 0, .pack_accumulate = true, .pack_row_sums = true, .stream_rows = true});
  const std::string values = g.vd != g.hd ? absl::StrCat("_v", g.vd) : "";
  return FinishSection(t,
                       absl::StrCat(std::string(tag), "_flash_prefill_", fi.items, "x", g.hd, values, "_l", g.l, "_q",
                                    qc, "_kb", kb, "_c0to", range.chunks - 1),
                       std::move(items), g.dest, FlashClaim(g, precision, target), target, DstPolicy::kStreamed);
}

}  // namespace

bool PrefillFoldApplies(const FlashGeometry& g, const Target& target) {
  if (target.tile_rows() != target.tile_cols() || !FlashApplies(g.hd, g.vd, target)) return false;
  if (g.grouped || g.split != 1 || g.latent || g.v_part || g.q.rows < 2 || g.window) return false;
  // ★ ONE QUERY TILE THAT SEES EVERY POSITION IS THE ONE-TILE FOLD'S: its rows share their blocks whole
  // (ReadsBlocksWhole), with none of the prefill fold's per-row limits to balance (an attention composed of 4 rows
  // over 16 positions on test_tiny: 1,784 cycles against 3,807).
  if (g.q.rows <= target.tile_rows() && !g.limit) return false;
  if (g.limit && g.limit->is_operand()) return false;
  if (g.kvw < 1 || g.q.per_row < 1 || g.q.group < 1 || g.q.kv_of(g.q.per_row - 1) >= g.kvw) return false;
  if (g.limit && g.limit->value < 1) return false;
  // No cached position past the last row's limit is read: the value product reads every position of a block, so
  // the cache ends at that limit, or the limit is a whole tile row (the blocks then end at it: PrefillFold).
  if (LastLimit(g) != g.rows && LastLimit(g) % target.tile_rows() != 0) return false;
  const std::optional<Precision> mat = target.matrix_in();
  absl::StatusOr<Precision> elem = ElemPrecision(target);
  return mat && elem.ok() && *mat == *elem && RequireFp32Accumulator("", target).ok();
}

absl::StatusOr<Composition> PrefillFold(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                        const Target& target) {
  if (!PrefillFoldApplies(g, target)) return NotLowered("a prefill fold of this attention (flash_prefill.h)");
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const FoldItems fi = FoldItemsOf(g, tr);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a flash fold of ", g.q.rows, " x ", g.q.per_row, " query heads"),
                                 fi.items));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a flash fold of ", g.q.rows, " x ", g.q.per_row, " query heads"),
                              CheckedMul(fi.items, tw)));
  const int64_t rows_t = CeilDiv(g.rows, tr);
  // The tile rows the blocks may cover: all the cache's, or — where the cache runs past the last row's limit — only
  // those below it, so that the last block ends there.
  const int64_t span_t = LastLimit(g) == g.rows ? rows_t : LastLimit(g) / tr;
  const int64_t v_t = g.vd / tw;
  // The candidates, best first: items enough to fill the grid (a chunk of qc tiles makes qc times fewer items), then
  // the most query tiles a chunk (each block's K/V crosses the NoC once for qc query tiles: tt-metal's q_chunk), then
  // the least work: the score tiles computed in all (a causal chunk folds whole blocks up to its last row: finer
  // blocks waste less of the diagonal) with each block's chain — the maximum, the rescale, the updates — counted as
  // one more column of score tiles (on Wormhole ~3.8 k cycles a block of 8 query tiles, ~10 score tiles' products),
  // then the most score tiles a block. Qwen3-8B's 2048-row causal prefill on Wormhole, 8 query tiles a chunk: 16 key
  // tiles a block 654 k cycles, 8 (the chunk's own rows: tt-metal's Q256/K256) 615 k, 4 683 k.
  // The probabilities and the output are elementwise pages, which stream through Dst (the section is sealed with
  // DstPolicy::kStreamed); a site's memory and circular buffers bound them (checked below).
  // At most tt-metal's largest chunks: 8 query tiles (256 rows) and 16 key tiles (512 positions). A chunk divides the
  // query tiles and a block the cache's tile rows (no load reads past a tensor); the values one page if it fits.
  std::vector<Chunking> candidates;
  for (int64_t qc = std::min<int64_t>({fi.tiles_q, 8, tw}); qc >= 1; --qc) {
    if (fi.tiles_q % qc != 0) continue;
    for (int64_t kb = std::min<int64_t>(span_t, 16); kb >= 1; --kb) {
      if (rows_t % kb != 0 || span_t % kb != 0 || (g.kv_chunk > 0 && kb * tr != g.kv_chunk)) continue;
      for (int64_t vt = v_t; vt >= 1; --vt) {
        if (v_t % vt == 0) candidates.push_back(Chunking{qc, kb, vt});
      }
    }
  }
  auto busy = [&](const Chunking& c) { return std::min(target.sites(), fi.tiles_q / c.qc * fi.per_row); };
  // A head's work in score tiles: each chunk's blocks up to its last row's limit, a block qc x (kb + 1) of them.
  auto work = [&](const Chunking& c) {
    int64_t tiles = 0;
    for (int64_t chunk = 0; chunk < fi.tiles_q / c.qc; ++chunk) {
      const int64_t last_row = std::min((chunk + 1) * c.qc * tr, g.q.rows) - 1;
      tiles += CeilDiv(g.limit ? g.limit->value + last_row : g.l, c.kb * tr) * c.qc * (c.kb + 1);
    }
    return tiles;
  };
  // A total order ((qc, kb, vt) is unique), so the choice is deterministic; each candidate's key is taken once.
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;  // ascending: best first
  std::vector<std::pair<Key, Chunking>> ranked;
  for (const Chunking& c : candidates) ranked.push_back({Key{-busy(c), -c.qc, work(c), -c.kb, -c.vt}, c});
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [key, ch] : ranked) {
    // One section of every chunk: each item folds only its chunk's blocks (WorkItem.blocks), so no range of chunks
    // needs a section of its own.
    Range r{.chunks = fi.tiles_q / ch.qc};
    // The last row sees the positions below its limit: the blocks that cover them.
    const int64_t last_row = std::min(r.chunks * ch.qc * tr, g.q.rows) - 1;
    const int64_t limit = g.limit ? g.limit->value + last_row : g.l;
    r.blocks = CeilDiv(limit, ch.kb * tr);
    // Edges only where every chunk folds the same blocks (the first chunk's last row sees the last block too);
    // otherwise each item folds its own count, the mask on its last blocks.
    const int64_t first_last_row = std::min(ch.qc * tr, g.q.rows) - 1;
    if (!g.limit || CeilDiv(g.limit->value + first_last_row, ch.kb * tr) == r.blocks) {
      r.edges = EdgeBlocks(g, ch, r, tr);
    }
    ASSIGN_OR_RETURN(Composition s, PrefillSection(names, g, tag, target, ch, r));
    if (FitSectionToSite(s.sections[0], target) && !ExceedsCircularBuffers(s.sections[0], target.proto().num_cbs())) {
      return s;
    }
  }
  return NotLowered("a prefill fold whose narrowest block does not fit a site");
}

}  // namespace spatial
