#include "lowerings/attention/backward.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/flash_fold.h"
#include "lowerings/attention/flash_mask.h"
#include "lowerings/attention/geometry.h"
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

// An item's own side (chunk, tiles) against the folded side (block, tiles).
struct Blocking {
  int64_t chunk = 1;
  int64_t block = 1;
};

// Chunks [first, last) of one section, folding `blocks` blocks from block `first_block`.
struct Range {
  int64_t first = 0;
  int64_t last = 0;
  int64_t first_block = 0;
  int64_t blocks = 1;
};

// What every section of the pass shares: names, sizes in tiles, precisions.
struct Plan {
  BackwardShape s;
  std::vector<OperandRef> ops;  // Q, K, V, O, dO, L
  std::string out;
  int64_t tr = 0, tw = 0;
  int64_t head_t = 0, v_t = 0;  // a head's key and value widths in tiles
  int64_t tiles_q = 0, tiles_l = 0;
  Precision precision = Precision::kBf16;
  Precision mat = Precision::kBf16;
  Precision ix = Precision::kBf16;  // set from the target

  int64_t q_width_t() const { return s.h * head_t; }
  int64_t o_width_t() const { return s.h * v_t; }
  int64_t k_width_t() const { return s.kv * head_t; }
  int64_t v_width_t() const { return s.kv * v_t; }
  std::string Internal(std::string_view part) const { return absl::StrCat(out, "__bwd_", std::string(part)); }
};

ElemAccess Terms(std::vector<Term> ts, int64_t base = 0) { return ElemAccess{base, std::move(ts), std::nullopt}; }

Body Scaled(Body x, double scale) { return scale == 1.0 ? x : Mul(x, Const(scale)); }

// Operand i with its spec's fill (the sizes were checked by the size budget before anything is built).
absl::StatusOr<TensorId> Operand(Template& t, const Plan& p, int i, int64_t rows, int64_t cols, Precision precision) {
  const OperandRef& op = p.ops[static_cast<size_t>(i)];
  ASSIGN_OR_RETURN(TensorInit init, InitOf(op.fill, rows * cols));
  return t.AddTensor(op.name, TensorRole::kInput, rows, cols, precision, std::move(init));
}

// Query head x's K/V head, as a table of one tile per head (element 0: the K/V head), loaded once per stream: an
// index page has one reader.
BufferId KvIndex(Template& t, const Plan& p, TensorId table, const std::string& stream) {
  const BufferId b = t.AddBufferDeep(absl::StrCat("in_kv_", stream), 1, 1, p.ix);
  t.AddLoadBlockAt(absl::StrCat("load_kv_", stream), table, 0, {{LoopVar::kItemX, 1}}, {}, b);
  return b;
}
TensorId KvTable(Template& t, const Plan& p) {
  std::vector<int64_t> kv_of(static_cast<size_t>(p.s.h * p.tw), 0);
  for (int64_t i = 0; i < p.s.h; ++i) kv_of[i * p.tw] = i / p.s.group();
  return t.AddTensor(p.Internal("kv_head"), TensorRole::kParam, 1, p.s.h * p.tw, p.ix,
                     TensorInit::Values(std::move(kv_of)));
}

// The first row (or position) of each chunk's tiles: tile y holds (y * chunk + i) * tile at element i.
BufferId ChunkRows(Template& t, const Plan& p, const std::string& what, int64_t chunks, int64_t chunk) {
  std::vector<int64_t> first_rows(static_cast<size_t>(chunks * p.tw), 0);
  for (int64_t y = 0; y < chunks; ++y) {
    for (int64_t i = 0; i < chunk; ++i) first_rows[y * p.tw + i] = (y * chunk + i) * p.tr;
  }
  const TensorId rows_t = t.AddTensor(p.Internal(absl::StrCat(what, "_rows")), TensorRole::kParam, 1, chunks * p.tw,
                                      p.ix, TensorInit::Values(std::move(first_rows)));
  const BufferId b = t.AddBufferDeep(absl::StrCat("in_", what, "_rows"), 1, 1, p.ix);
  t.AddLoadBlockAt(absl::StrCat("load_", what, "_rows"), rows_t, 0, {{LoopVar::kItemY, 1}}, {}, b);
  return b;
}
BufferId RowIndex(Template& t, const Plan& p) {
  std::vector<int64_t> index(static_cast<size_t>(p.tr * p.tw));
  for (int64_t e = 0; e < p.tr * p.tw; ++e) index[e] = e / p.tw;
  const TensorId row_index = t.AddTensor(p.Internal("row_index"), TensorRole::kParam, p.tr, p.tw, p.ix,
                                         TensorInit::Values(std::move(index)));
  const BufferId b = t.AddBufferDeep("in_row_index", 1, 1, p.ix);
  t.AddLoadBlockAt("load_row_index", row_index, 0, {}, {}, b);
  return b;
}

// A one-row tensor per head of each query row's statistic: head x, query q at column x * tiles_q * tile + q.
TensorId ColumnStat(Template& t, const Plan& p, std::string_view part, TensorRole role) {
  return t.AddTensor(p.Internal(part), role, 1, p.s.h * p.tiles_q * p.tw, Precision::kFp32,
                     role == TensorRole::kOutput ? TensorInit::Zero() : TensorInit::External());
}

// The carried block start (the first position or query of the block), initialised to `first`; the fold's mask
// advances it (AddNextStart) and reads it (AddBlockBound) through a guard below `tiles` tile rows.
BufferId AddStart(Template& t, int64_t first, Precision ix) {
  const BufferId start = t.AddScratchDeep("block_start", 2, 1, ix);
  t.AddGeneric("init_start", FlatSpace(1), {}, {}, IdentMap(t.PageWidth(1)), Const(static_cast<double>(first)),
               start);
  return start;
}

// The backward's claim. P = e^(scale S - L) is recomputed from scores that pass through a bf16 page, so the exponent
// carries an error of |scale S| 2^-8 and P that relative error; |scale S| grows with the scale. Measured dq rel L2
// (hd 128, O and L the forward's): 0.013 / 0.044 / 0.082 / 0.15 at scale sqrt(hd) = 1 / 5.7 / 11.3 / 22.6, against
// the default 0.031: the claim grows as scale sqrt(hd) above the default scale.
NumericsClaim BackwardClaim(const BackwardShape& s, Precision p) {
  NumericsClaim claim = ApproxIn("attention backward", p);
  claim.error_growth = std::max(1.0, s.scale / DefaultScale(s.hd));
  return claim;
}

// Seals a fold's section: an item per (chunk, query head) of the range, its result rectangle the chunk's tiles of
// the head; no placement grid (the items go round robin) and the packer accumulating the products (no reload).
absl::StatusOr<Composition> FinishFold(Template& t, const Plan& p, const Blocking& bk, const Range& r,
                                       const std::string& name, const Target& target) {
  std::vector<WorkItem> items;
  for (int64_t y = r.first; y < r.last; ++y) {
    for (int64_t x = 0; x < p.s.h; ++x) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = y, .x = x,
                               .out = TileRect{.row0_t = y * bk.chunk, .col0_t = x * p.head_t, .h_t = bk.chunk,
                                               .w_t = p.head_t}});
    }
  }
  t.SetPlan(BlockPlan{.per_site_m = bk.chunk, .per_site_n = bk.block, .grid_y = 0, .grid_x = 0,
                      .num_blocks = r.blocks, .osh = 0, .osw = 0, .pack_accumulate = true});
  return FinishSection(t, absl::StrCat(name, "_c", r.first, "to", r.last - 1), std::move(items), Precision::kFp32,
                       BackwardClaim(p.s, p.precision), target, DstPolicy::kStreamed);
}

// ── 1. dQ: item (chunk y of qc query tiles, head x), folding blocks of kb key tile rows ──
absl::StatusOr<Composition> DqSection(const Plan& p, const Blocking& bk, const Range& r, const Target& target) {
  const BackwardShape& s = p.s;
  const int64_t tr = p.tr, tw = p.tw, head_t = p.head_t, v_t = p.v_t;
  const int64_t qc = bk.chunk, kb = bk.block;
  const int64_t blocks = r.blocks;
  const bool fold = blocks > 1;
  const Precision acc = Precision::kFp32;
  const bool masked = s.causal || s.l % tr != 0;
  const int64_t wb = kb * tw;
  const int64_t wq = qc * wb;
  const ElemAccess stat = StatMap(qc, tw);
  const ElemAccess score_at = Terms({{LoopVar::kRow, wq}, {LoopVar::kCol, wb}, {LoopVar::kK, 1}});
  const std::vector<IterSpec> per_score{{LoopVar::kRow, tr, IterKind::kParallel},
                                        {LoopVar::kCol, qc, IterKind::kParallel},
                                        {LoopVar::kK, wb, IterKind::kParallel}};

  Template t(tr, tw);
  const TensorId scaler = OnesTile(t, p.Internal("scaler"), p.precision);
  ASSIGN_OR_RETURN(const TensorId q, Operand(t, p, 0, s.rows, s.h * s.hd, p.precision));
  ASSIGN_OR_RETURN(const TensorId k, Operand(t, p, 1, s.l, s.kv * s.hd, p.precision));
  ASSIGN_OR_RETURN(const TensorId v, Operand(t, p, 2, s.l, s.kv * s.vd, p.precision));
  ASSIGN_OR_RETURN(const TensorId o, Operand(t, p, 3, s.rows, s.h * s.vd, p.precision));
  ASSIGN_OR_RETURN(const TensorId d_o, Operand(t, p, 4, s.rows, s.h * s.vd, p.precision));
  ASSIGN_OR_RETURN(const TensorId lse, Operand(t, p, 5, s.rows, s.h, acc));
  const TensorId dq = t.AddTensor(p.out, TensorRole::kOutput, s.rows, s.h * s.hd, p.precision, TensorInit::Zero());
  const TensorId delta_cols = ColumnStat(t, p, "delta", TensorRole::kOutput);
  const TensorId lse_cols = ColumnStat(t, p, "lse", TensorRole::kOutput);

  // ── The prologue, once per item: the chunk's Q, dO and O tiles, its rows' L, D = rowsum(dO * O), the row limits.
  const BufferId sc_in = t.AddBufferDeep("in_scaler", 1, 1, p.precision);
  t.AddLoadBlockAt("load_scaler", scaler, 0, {}, {}, sc_in);
  const BufferId q_in = t.AddBufferDeep("in_q", 1, qc * head_t, p.precision);
  t.AddLoadBlockAt("load_q", q, 0, {{LoopVar::kItemY, qc * p.q_width_t()}, {LoopVar::kItemX, head_t}},
                   {.h = qc, .w = head_t, .pitch = p.q_width_t()}, q_in);
  const BufferId do_in = t.AddBufferDeep("in_do", 1, qc * v_t, p.precision);
  t.AddLoadBlockAt("load_do", d_o, 0, {{LoopVar::kItemY, qc * p.o_width_t()}, {LoopVar::kItemX, v_t}},
                   {.h = qc, .w = v_t, .pitch = p.o_width_t()}, do_in);
  const BufferId o_in = t.AddBufferDeep("in_o", 1, qc * v_t, p.precision);
  t.AddLoadBlockAt("load_o", o, 0, {{LoopVar::kItemY, qc * p.o_width_t()}, {LoopVar::kItemX, v_t}},
                   {.h = qc, .w = v_t, .pitch = p.o_width_t()}, o_in);
  // L is rows x h: head x's column is column x % tile of tile column x / tile, neither affine in x, so both come from
  // a table of one tile per head (element 0 the tile column, element 1 the column in it), each its own page.
  const int64_t l_width_t = CeilDiv(s.h, tw);
  std::vector<int64_t> where(static_cast<size_t>(s.h * tw), 0);
  for (int64_t i = 0; i < s.h; ++i) {
    where[i * tw] = i / tw;
    where[i * tw + 1] = i % tw;
  }
  const TensorId where_t = t.AddTensor(p.Internal("lse_column"), TensorRole::kParam, 1, s.h * tw, p.ix,
                                       TensorInit::Values(std::move(where)));
  const BufferId l_tile = t.AddBufferDeep("in_lse_tile", 1, 1, p.ix);
  t.AddLoadBlockAt("load_lse_tile", where_t, 0, {{LoopVar::kItemX, 1}}, {}, l_tile);
  const BufferId l_col = t.AddBufferDeep("in_lse_col", 1, 1, p.ix);
  t.AddLoadBlockAt("load_lse_col", where_t, 0, {{LoopVar::kItemX, 1}}, {}, l_col);
  const BufferId lse_in = t.AddBufferDeep("in_lse", 1, qc, acc);
  t.AddLoadPattern("load_lse", lse,
                   AccessPattern{TileAddr{0, {{LoopVar::kItemY, qc * l_width_t}},
                                          IndirectTile{l_tile, 1, 0, l_width_t - 1}},
                                 qc, 1, 1, l_width_t},
                   lse_in);
  const BufferId lse_row = t.AddScratchDeep("row_lse", 1, 1, acc);
  t.AddGeneric("row_lse", HeadSpace(tr, qc), {lse_in, l_col},
               {WithIndirect(Terms({{LoopVar::kRow, qc * tw}, {LoopVar::kCol, tw}}), 1, 1, tw), Fixed(1)}, stat,
               Op(0), lse_row);
  const BufferId delta = t.AddScratchDeep("row_delta", 1, 1, acc);
  {
    const int64_t wv = v_t * tw;
    const ElemAccess value_at = Terms({{LoopVar::kRow, qc * wv}, {LoopVar::kCol, wv}, {LoopVar::kK, 1}});
    t.AddGeneric("row_delta",
                 {{LoopVar::kRow, tr, IterKind::kParallel},
                  {LoopVar::kCol, qc, IterKind::kParallel},
                  {LoopVar::kK, wv, IterKind::kReduceSum}},
                 {do_in, o_in, sc_in}, {value_at, value_at, ConstMap()}, stat, Mul(Op(0), Op(1)), delta);
  }
  FoldMask mask;
  if (masked) {
    mask.masked = true;
    const BufferId row_lim = t.AddScratchDeep("row_limit", 1, 1, p.ix);
    if (!s.causal) {
      t.AddGeneric("row_limit", HeadSpace(tr, qc), {}, {}, stat, Const(static_cast<double>(s.l)), row_lim);
    } else {
      // Row t sees the positions below l - rows + t + 1.
      const BufferId q_rows = ChunkRows(t, p, "chunk", p.tiles_q / qc, qc);
      const BufferId r_in = RowIndex(t, p);
      t.AddGeneric("row_limit", HeadSpace(tr, qc), {q_rows, r_in}, {Terms({{LoopVar::kCol, 1}}), PerRowMap(tw)},
                   stat, Add(Add(Const(static_cast<double>(s.l - s.rows + 1)), Op(0)), Op(1)), row_lim);
    }
    mask.row_limit = row_lim;
    if (fold) {
      mask.counted = true;
      mask.start = AddStart(t, 0, p.ix);
    }
  }
  const BufferId dq_run = t.AddScratchDeep("run_dq", 2, qc * head_t, acc);
  t.AddGeneric("init_dq", HeadSpace(tr, qc * head_t * tw), {}, {}, IdentMap(qc * head_t * tw), Const(0.0), dq_run);

  // ── The body, once per block of kb key tile rows of K/V head x / group, the same for every chunk of the head.
  t.SetPhase(fold ? Phase::kBody : Phase::kPrologue);
  if (fold) t.Fold(blocks);
  const TensorId kv_t = KvTable(t, p);
  const BufferId kv_k = KvIndex(t, p, kv_t, "k");
  const BufferId kv_v = KvIndex(t, p, kv_t, "v");
  const BufferId k_in = t.AddBufferDeep("in_k", 2, kb * head_t, p.precision);
  const BufferId v_in = t.AddBufferDeep("in_v", 2, kb * v_t, p.precision);
  auto cache_block = [&](const std::string& name, TensorId tensor, BufferId index, int64_t cols, int64_t stride,
                         BufferId into) {
    std::vector<Term> steps;
    if (fold) steps.push_back({LoopVar::kKBlock, kb * stride});
    const StageId load = t.AddLoadPattern(
        name, tensor, AccessPattern{TileAddr{0, std::move(steps), IndirectTile{index, cols, 0, s.kv - 1}}, kb, cols, 1,
                                    stride},
        into);
    t.SetMulticast(load, LoopVar::kItemY);
  };
  cache_block("load_k", k, kv_k, head_t, p.k_width_t(), k_in);
  cache_block("load_v", v, kv_v, v_t, p.v_width_t(), v_in);
  mask.lim = mask.start ? AddBlockBound(t, "block_limit", *mask.row_limit, *mask.start, p.tiles_l * tr, qc, p.ix)
                        : mask.row_limit;

  // S = Q K^T, P = e^(scale S - L) where live (exactly 0 where masked), dP = dO V^T, dS = scale P (dP - D).
  const BufferId s_buf = t.AddScratchDeep("scores", 1, qc * kb, acc);
  t.AddMatmul("scores", MatmulTiles{.m_tiles = qc, .n_tiles = kb, .k_tiles = head_t, .transpose_b = true}, q_in, k_in,
              s_buf);
  const BufferId p_buf = t.AddScratchDeep("probs", 1, qc * kb, acc);
  {
    std::vector<BufferId> ins{s_buf, lse_row};
    std::vector<ElemAccess> maps{score_at, stat};
    AddLimitSlots(mask, ins, maps, stat);
    t.AddGeneric("probs", per_score, ins, maps, score_at,
                 Live(mask, LoopVar::kK, Unary(SfpuKind::Exp(), Sub(Scaled(Op(0), s.scale), Op(1))), Const(0.0), 2),
                 p_buf);
  }
  const BufferId dp_buf = t.AddScratchDeep("dprobs", 1, qc * kb, acc);
  t.AddMatmul("dprobs", MatmulTiles{.m_tiles = qc, .n_tiles = kb, .k_tiles = v_t, .transpose_b = true}, do_in, v_in,
              dp_buf);
  const BufferId ds_buf = t.AddScratchDeep("dscores", 1, qc * kb, p.mat);
  t.AddGeneric("dscores", per_score, {p_buf, dp_buf, delta}, {score_at, score_at, stat}, score_at,
               Scaled(Mul(Op(0), Sub(Op(1), Op(2))), s.scale), ds_buf);
  // dQ += dS K: the block's kb x head_t key tiles as B, accumulated onto the running dQ by the packer.
  t.AddMatmul("block_dq", MatmulTiles{.m_tiles = qc, .n_tiles = head_t, .k_tiles = kb, .accumulate = true}, ds_buf,
              k_in, dq_run);
  AddNextStart(t, mask, p.tiles_l, kb * tr);

  // ── The epilogue, once per item: dQ into the chunk's tiles; D and L as rows for the second fold.
  t.SetPhase(fold ? Phase::kEpilogue : Phase::kPrologue);
  const int64_t wd = qc * head_t * tw;
  const BufferId dq_out = t.AddBufferDeep("out_dq", 2, qc * head_t, p.precision);
  t.AddGeneric("dq", HeadSpace(tr, wd), {dq_run}, {IdentMap(wd)}, IdentMap(wd), Op(0), dq_out);
  t.AddStoreBlock("store_dq", dq, 0, {{LoopVar::kItemY, qc * p.q_width_t()}, {LoopVar::kItemX, head_t}},
                  {.h = qc, .w = head_t, .pitch = p.q_width_t()}, dq_out);
  // Row r of query tile i to column i * tile + r of row 0.
  const ElemAccess as_column = Terms({{LoopVar::kCol, tw}, {LoopVar::kRow, 1}});
  for (const auto& [name, stat_buf, tensor] :
       {std::tuple{"delta", delta, delta_cols}, std::tuple{"lse", lse_row, lse_cols}}) {
    const BufferId cols = t.AddBufferDeep(absl::StrCat("out_", name, "_cols"), 1, qc, acc);
    t.AddGeneric(absl::StrCat(name, "_cols"), HeadSpace(tr, qc), {stat_buf}, {stat}, as_column, Op(0), cols);
    t.AddStoreBlock(absl::StrCat("store_", name), tensor, 0, {{LoopVar::kItemX, p.tiles_q}, {LoopVar::kItemY, qc}},
                    {.h = 1, .w = qc, .pitch = 1}, cols);
  }
  WireFirstReaders(t);
  MulticastSharedPrologue(t, LoopVar::kItemX);

  return FinishFold(t, p, bk, r, absl::StrCat("attn_bwd_dq_", p.s.h, "x", p.s.hd, "_r", p.s.rows, "_l", p.s.l, "_q",
                                             qc, "_kb", kb), target);
}

// ── 2. dK, dV: item (chunk y of kc key tile rows, query head x), folding blocks of qb query tiles ──
absl::StatusOr<Composition> DkvSection(const Plan& p, const Blocking& bk, const Range& r, const Target& target) {
  const BackwardShape& s = p.s;
  const int64_t tr = p.tr, tw = p.tw, head_t = p.head_t, v_t = p.v_t;
  const int64_t kc = bk.chunk, qb = bk.block;
  const int64_t blocks = r.blocks;
  const bool fold = blocks > 1;
  const Precision acc = Precision::kFp32;
  const bool grouped = s.group() > 1;
  const int64_t wb = qb * tw;   // one key tile's queries in a block
  const int64_t wk = kc * wb;   // the transposed scores' plane: key tile a from column a * wb
  const ElemAccess stat = StatMap(kc, tw);
  const ElemAccess score_at = Terms({{LoopVar::kRow, wk}, {LoopVar::kCol, wb}, {LoopVar::kK, 1}});
  const ElemAccess per_query = Terms({{LoopVar::kK, 1}});  // a column statistic: row 0 of its page
  const std::vector<IterSpec> per_score{{LoopVar::kRow, tr, IterKind::kParallel},
                                        {LoopVar::kCol, kc, IterKind::kParallel},
                                        {LoopVar::kK, wb, IterKind::kParallel}};

  Template t(tr, tw);
  ASSIGN_OR_RETURN(const TensorId q, Operand(t, p, 0, s.rows, s.h * s.hd, p.precision));
  ASSIGN_OR_RETURN(const TensorId k, Operand(t, p, 1, s.l, s.kv * s.hd, p.precision));
  ASSIGN_OR_RETURN(const TensorId v, Operand(t, p, 2, s.l, s.kv * s.vd, p.precision));
  ASSIGN_OR_RETURN(const TensorId d_o, Operand(t, p, 4, s.rows, s.h * s.vd, p.precision));
  const TensorId delta_cols = ColumnStat(t, p, "delta", TensorRole::kInput);
  const TensorId lse_cols = ColumnStat(t, p, "lse", TensorRole::kInput);
  // Grouped: each query head's gradients, fp32, summed over the group by section 3.
  const Precision out_p = grouped ? acc : p.precision;
  const int64_t dk_width_t = grouped ? p.q_width_t() : p.k_width_t();
  const int64_t dv_width_t = grouped ? p.o_width_t() : p.v_width_t();
  const TensorId dk = t.AddTensor(grouped ? p.Internal("dk_heads") : absl::StrCat(p.out, "_dk"), TensorRole::kOutput,
                                  s.l, dk_width_t * tw, out_p, TensorInit::Zero());
  const TensorId dv = t.AddTensor(grouped ? p.Internal("dv_heads") : absl::StrCat(p.out, "_dv"), TensorRole::kOutput,
                                  s.l, dv_width_t * tw, out_p, TensorInit::Zero());

  // ── The prologue, once per item: the chunk's K and V tiles of K/V head x / group, each key row's first reader.
  const TensorId kv_t = KvTable(t, p);
  const BufferId kv_k = KvIndex(t, p, kv_t, "k");
  const BufferId kv_v = KvIndex(t, p, kv_t, "v");
  const BufferId k_in = t.AddBufferDeep("in_k", 1, kc * head_t, p.precision);
  t.AddLoadPattern("load_k", k,
                   AccessPattern{TileAddr{0, {{LoopVar::kItemY, kc * p.k_width_t()}},
                                          IndirectTile{kv_k, head_t, 0, s.kv - 1}},
                                 kc, head_t, 1, p.k_width_t()},
                   k_in);
  const BufferId v_in = t.AddBufferDeep("in_v", 1, kc * v_t, p.precision);
  t.AddLoadPattern("load_v", v,
                   AccessPattern{TileAddr{0, {{LoopVar::kItemY, kc * p.v_width_t()}},
                                          IndirectTile{kv_v, v_t, 0, s.kv - 1}},
                                 kc, v_t, 1, p.v_width_t()},
                   v_in);
  // Causal: key position j is read by the queries q >= j - (l - rows): each row's floor, from a table of the chunk's
  // first positions and a tile holding r in row r.
  std::optional<BufferId> row_floor;
  FoldMask floors;  // only its carried start: the floors are compared with Pred Ge below
  if (s.causal) {
    const BufferId k_rows = ChunkRows(t, p, "key", p.tiles_l / kc, kc);
    const BufferId r_in = RowIndex(t, p);
    row_floor = t.AddScratchDeep("row_floor", 1, 1, p.ix);
    t.AddGeneric("row_floor", HeadSpace(tr, kc), {k_rows, r_in}, {Terms({{LoopVar::kCol, 1}}), PerRowMap(tw)}, stat,
                 Sub(Add(Op(0), Op(1)), Const(static_cast<double>(s.l - s.rows))), *row_floor);
    if (fold) {
      floors.masked = floors.counted = true;
      floors.start = AddStart(t, r.first_block * qb * tr, p.ix);
    }
  }
  const BufferId dk_run = t.AddScratchDeep("run_dk", 2, kc * head_t, acc);
  const BufferId dv_run = t.AddScratchDeep("run_dv", 2, kc * v_t, acc);
  t.AddGeneric("init_dk", HeadSpace(tr, kc * head_t * tw), {}, {}, IdentMap(kc * head_t * tw), Const(0.0), dk_run);
  t.AddGeneric("init_dv", HeadSpace(tr, kc * v_t * tw), {}, {}, IdentMap(kc * v_t * tw), Const(0.0), dv_run);

  // ── The body, once per block of qb query tiles of head x, the same for every key chunk (multicast along ITEM_Y).
  t.SetPhase(fold ? Phase::kBody : Phase::kPrologue);
  if (fold) t.Fold(blocks);
  auto query_block = [&](const std::string& name, TensorId tensor, int64_t base, int64_t step, std::vector<Term> at,
                         BlockShape shape, Precision pr) {
    const BufferId b = t.AddBufferDeep(absl::StrCat("in_", name), 2, shape.h * shape.w, pr);
    if (fold) at.push_back({LoopVar::kKBlock, step});
    t.SetMulticast(t.AddLoadBlockAt(absl::StrCat("load_", name), tensor, base, std::move(at), shape, b),
                   LoopVar::kItemY);
    return b;
  };
  const int64_t q0 = r.first_block * qb;  // the first query tile folded
  const BufferId q_in = query_block("q", q, q0 * p.q_width_t(), qb * p.q_width_t(), {{LoopVar::kItemX, head_t}},
                                    {.h = qb, .w = head_t, .pitch = p.q_width_t()}, p.precision);
  const BufferId do_in = query_block("do", d_o, q0 * p.o_width_t(), qb * p.o_width_t(), {{LoopVar::kItemX, v_t}},
                                     {.h = qb, .w = v_t, .pitch = p.o_width_t()}, p.precision);
  const BufferId lse_in = query_block("lse", lse_cols, q0, qb, {{LoopVar::kItemX, p.tiles_q}},
                                      {.h = 1, .w = qb, .pitch = 1}, acc);
  const BufferId delta_in = query_block("delta", delta_cols, q0, qb, {{LoopVar::kItemX, p.tiles_q}},
                                        {.h = 1, .w = qb, .pitch = 1}, acc);
  std::optional<BufferId> floor_b;
  if (row_floor) {
    floor_b = floors.start ? AddBlockBound(t, "block_floor", *row_floor, *floors.start, p.tiles_q * tr, kc, p.ix)
                           : *row_floor;
  }
  // Unfolded, a range that starts past query 0 compares with the floor relative to its one block.
  if (row_floor && !floors.start && r.first_block > 0) {
    const BufferId shifted = t.AddScratchDeep("block_floor", 1, 1, p.ix);
    t.AddGeneric("block_floor", HeadSpace(tr, kc), {*row_floor}, {stat}, stat,
                 Sub(Op(0), Const(static_cast<double>(q0 * tr))), shifted);
    floor_b = shifted;
  }

  // S^T = K Q^T, P^T = e^(scale S^T - L) where live, dV += P^T dO, dP^T = V dO^T, dS^T = scale P^T (dP^T - D),
  // dK += dS^T Q.
  const BufferId st_buf = t.AddScratchDeep("scores_t", 1, kc * qb, acc);
  t.AddMatmul("scores_t", MatmulTiles{.m_tiles = kc, .n_tiles = qb, .k_tiles = head_t, .transpose_b = true}, k_in,
              q_in, st_buf);
  const BufferId pt_buf = t.AddScratchDeep("probs_t", 1, kc * qb, acc);
  {
    std::vector<BufferId> ins{st_buf, lse_in};
    std::vector<ElemAccess> maps{score_at, per_query};
    Body p_t = Unary(SfpuKind::Exp(), Sub(Scaled(Op(0), s.scale), Op(1)));
    if (floor_b) {
      ins.push_back(*floor_b);
      maps.push_back(stat);
      p_t = Select(Pred::GeOperand(LoopVar::kK, 2), p_t, Const(0.0));
    }
    t.AddGeneric("probs_t", per_score, ins, maps, score_at, p_t, pt_buf);
  }
  // The value product takes P^T packed to the matrix engine's operand precision.
  const BufferId pt_mat = t.AddScratchDeep("probs_t_packed", 1, kc * qb, p.mat);
  t.AddGeneric("probs_t_packed", HeadSpace(tr, wk), {pt_buf}, {IdentMap(wk)}, IdentMap(wk), Op(0), pt_mat);
  t.AddMatmul("block_dv", MatmulTiles{.m_tiles = kc, .n_tiles = v_t, .k_tiles = qb, .accumulate = true}, pt_mat,
              do_in, dv_run);
  const BufferId dpt_buf = t.AddScratchDeep("dprobs_t", 1, kc * qb, acc);
  t.AddMatmul("dprobs_t", MatmulTiles{.m_tiles = kc, .n_tiles = qb, .k_tiles = v_t, .transpose_b = true}, v_in, do_in,
              dpt_buf);
  const BufferId dst_buf = t.AddScratchDeep("dscores_t", 1, kc * qb, p.mat);
  t.AddGeneric("dscores_t", per_score, {pt_buf, dpt_buf, delta_in}, {score_at, score_at, per_query}, score_at,
               Scaled(Mul(Op(0), Sub(Op(1), Op(2))), s.scale), dst_buf);
  t.AddMatmul("block_dk", MatmulTiles{.m_tiles = kc, .n_tiles = head_t, .k_tiles = qb, .accumulate = true}, dst_buf,
              q_in, dk_run);
  AddNextStart(t, floors, p.tiles_q, qb * tr);

  // ── The epilogue: the chunk's dK and dV tiles (grouped: query head x's, fp32).
  t.SetPhase(fold ? Phase::kEpilogue : Phase::kPrologue);
  // x is the query head; ungrouped it is also the K/V head.
  for (const auto& [name, run, tensor, width_t, cols] :
       {std::tuple{"dk", dk_run, dk, dk_width_t, head_t}, std::tuple{"dv", dv_run, dv, dv_width_t, v_t}}) {
    const int64_t w = kc * cols * tw;
    const BufferId out = t.AddBufferDeep(absl::StrCat("out_", name), 2, kc * cols, out_p);
    t.AddGeneric(name, HeadSpace(tr, w), {run}, {IdentMap(w)}, IdentMap(w), Op(0), out);
    t.AddStoreBlock(absl::StrCat("store_", name), tensor, 0, {{LoopVar::kItemY, kc * width_t}, {LoopVar::kItemX, cols}},
                    {.h = kc, .w = cols, .pitch = width_t}, out);
  }
  WireFirstReaders(t);

  return FinishFold(t, p, bk, r, absl::StrCat("attn_bwd_dkv_", p.s.h, "x", p.s.hd, "_r", p.s.rows, "_l", p.s.l, "_k",
                                             kc, "_qb", qb), target);
}

// ── 3. Grouped: each K/V head's dK and dV, the sum of its group's query heads. Item (key tile row, K/V head).
absl::StatusOr<Composition> GroupSumSection(const Plan& p, const Target& target) {
  const BackwardShape& s = p.s;
  const int64_t tr = p.tr, tw = p.tw, group = s.group();
  Template t(tr, tw);
  for (const auto& [name, cols, width_t, heads_width_t] :
       {std::tuple{"dk", p.head_t, p.k_width_t(), p.q_width_t()}, std::tuple{"dv", p.v_t, p.v_width_t(),
                                                                          p.o_width_t()}}) {
    const TensorId heads = t.AddTensor(p.Internal(absl::StrCat(name, "_heads")), TensorRole::kInput, s.l,
                                       heads_width_t * tw, Precision::kFp32, TensorInit::External());
    const TensorId sum = t.AddTensor(absl::StrCat(p.out, "_", name), TensorRole::kOutput, s.l, width_t * tw,
                                     p.precision, TensorInit::Zero());
    const BufferId in = t.AddBufferDeep(absl::StrCat("in_", name), 2, group * cols, Precision::kFp32);
    t.AddLoadBlockAt(absl::StrCat("load_", name), heads, 0,
                     {{LoopVar::kItemY, heads_width_t}, {LoopVar::kItemX, group * cols}},
                     {.h = 1, .w = group * cols, .pitch = heads_width_t}, in);
    // An elementwise sum of the group's pages (no reduction: each output element adds `group` reads).
    const int64_t w = cols * tw;
    const int64_t plane = group * w;
    std::vector<BufferId> ins;
    std::vector<ElemAccess> maps;
    Body sum_body;
    for (int64_t g = 0; g < group; ++g) {
      ins.push_back(in);
      maps.push_back(Terms({{LoopVar::kRow, plane}, {LoopVar::kCol, 1}}, g * w));
      sum_body = g == 0 ? Op(0) : Add(sum_body, Op(static_cast<int>(g)));
    }
    const BufferId out = t.AddBufferDeep(absl::StrCat("out_", name), 2, cols, p.precision);
    t.AddGeneric(absl::StrCat("sum_", name), HeadSpace(tr, w), ins, maps, IdentMap(w), sum_body, out);
    t.AddStoreBlock(absl::StrCat("store_", name), sum, 0, {{LoopVar::kItemY, width_t}, {LoopVar::kItemX, cols}},
                    {.h = 1, .w = cols, .pitch = width_t}, out);
  }
  WireFirstReaders(t);
  std::vector<WorkItem> items;
  for (int64_t y = 0; y < p.tiles_l; ++y) {
    for (int64_t x = 0; x < s.kv; ++x) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = y, .x = x,
                               .out = TileRect{.row0_t = y, .col0_t = x * p.head_t, .h_t = 1, .w_t = p.head_t}});
    }
  }
  return FinishSection(t, absl::StrCat("attn_bwd_group_sum_", s.kv, "x", group, "_l", s.l), std::move(items),
                       Precision::kFp32, BackwardClaim(s, p.precision), target, DstPolicy::kStreamed);
}

// The chunks one section takes: enough items to fill the grid, and at most 32 sections.
int64_t ChunksPerSection(int64_t chunks, int64_t heads, int64_t sites) {
  return std::min(chunks, std::max<int64_t>({1, CeilDiv(sites, heads), CeilDiv(chunks, 32)}));
}

// One fold's sections over every chunk, cut into ranges (causal) that fold only the blocks they need; nullopt when a
// section does not fit a site.
using SectionFn = absl::StatusOr<Composition> (*)(const Plan&, const Blocking&, const Range&, const Target&);
using RangeFn = Range (*)(const Plan&, const Blocking&, int64_t first, int64_t last);

absl::StatusOr<std::optional<std::vector<Composition>>> Sections(const Plan& p, const Blocking& bk, int64_t own_tiles,
                                                                 SectionFn section, RangeFn range,
                                                                 const Target& target) {
  const int64_t chunks = own_tiles / bk.chunk;
  const int64_t per = p.s.causal ? ChunksPerSection(chunks, p.s.h, target.sites()) : chunks;
  std::vector<Composition> parts;
  for (int64_t first = 0; first < chunks; first += per) {
    const Range r = range(p, bk, first, std::min(chunks, first + per));
    ASSIGN_OR_RETURN(Composition c, section(p, bk, r, target));
    if (!FitSectionToSite(c.sections[0], target) || ExceedsCircularBuffers(c.sections[0], target.proto().num_cbs())) {
      return std::nullopt;
    }
    parts.push_back(std::move(c));
  }
  return parts;
}

// dQ: a range's last row sees the positions below its limit.
Range DqRange(const Plan& p, const Blocking& bk, int64_t first, int64_t last) {
  const int64_t last_row = std::min(last * bk.chunk * p.tr, p.s.rows) - 1;
  return Range{first, last, 0, CeilDiv(p.s.Limit(last_row), bk.block * p.tr)};
}
// dK/dV: a range's first position is first read by query row (first position) - (l - rows).
Range DkvRange(const Plan& p, const Blocking& bk, int64_t first, int64_t last) {
  const int64_t blocks = p.tiles_q / bk.block;
  if (!p.s.causal) return Range{first, last, 0, blocks};
  const int64_t first_reader = std::max<int64_t>(0, first * bk.chunk * p.tr - (p.s.l - p.s.rows));
  const int64_t first_block = std::min(blocks - 1, first_reader / (bk.block * p.tr));
  return Range{first, last, first_block, blocks - first_block};
}

// The blockings of one fold, best first: items enough to fill the grid, then the most score tiles a block, then the
// widest chunk. At most 8 x 8 tiles; a chunk divides its side's tiles and a block the other's (no load reads past a
// tensor).
std::vector<Blocking> Blockings(int64_t own_tiles, int64_t other_tiles, int64_t heads, int64_t sites) {
  std::vector<Blocking> out;
  for (int64_t c = std::min<int64_t>(own_tiles, 8); c >= 1; --c) {
    if (own_tiles % c != 0) continue;
    for (int64_t b = std::min<int64_t>(other_tiles, 8); b >= 1; --b) {
      if (other_tiles % b == 0) out.push_back(Blocking{c, b});
    }
  }
  auto busy = [&](const Blocking& b) { return std::min(sites, own_tiles / b.chunk * heads); };
  std::sort(out.begin(), out.end(), [&](const Blocking& a, const Blocking& b) {
    if (busy(a) != busy(b)) return busy(a) > busy(b);
    if (a.chunk * a.block != b.chunk * b.block) return a.chunk * a.block > b.chunk * b.block;
    return a.chunk > b.chunk;
  });
  return out;
}

absl::StatusOr<std::vector<Composition>> FoldSections(const Plan& p, int64_t own_tiles, int64_t other_tiles,
                                              SectionFn section, RangeFn range, std::string_view what,
                                              const Target& target) {
  for (const Blocking& bk : Blockings(own_tiles, other_tiles, p.s.h, target.sites())) {
    ASSIGN_OR_RETURN(std::optional<std::vector<Composition>> parts, Sections(p, bk, own_tiles, section, range, target));
    if (parts) return *std::move(parts);
  }
  return NotLowered(absl::StrCat("an attention backward whose narrowest ", std::string(what), " block does not fit a site"));
}

}  // namespace

absl::StatusOr<BackwardShape> BackwardShapeOf(const proto::OpSpec& spec) {
  if (spec.kind_case() != proto::OpSpec::kAttentionBackward) {
    return absl::InvalidArgumentError("an attention backward's shape is read from an OpSpec of kind "
                                      "'attention_backward'");
  }
  const proto::AttentionBackwardSpec& a = spec.attention_backward();
  RETURN_IF_ERROR(CheckNotNegative("attention_backward", {{"h", a.h()}, {"kv", a.kv()}, {"hd", a.hd()},
                                                          {"vd", a.vd()}, {"l", a.l()}, {"rows", a.rows()}}));
  if (!std::isfinite(a.scale()) || a.scale() < 0.0) {
    return absl::InvalidArgumentError(absl::StrCat("attention_backward.scale is ", a.scale(),
                                                   ": a score scale is finite and positive (0: 1 / sqrt(hd))"));
  }
  if (a.h() == 0 || a.kv() == 0 || a.hd() == 0 || a.rows() == 0) {
    return NotLowered("an attention backward with no heads, no query rows or no head dimension");
  }
  if (a.h() % a.kv() != 0) {
    return NotLowered(absl::StrCat("an attention backward whose ", a.h(), " query heads do not group over its ",
                                   a.kv(), " K/V heads"));
  }
  BackwardShape s;
  s.h = a.h();
  s.kv = a.kv();
  s.hd = a.hd();
  s.vd = a.vd() != 0 ? a.vd() : a.hd();
  s.rows = a.rows();
  s.l = a.l() != 0 ? a.l() : a.rows();
  s.causal = a.causal();
  s.scale = a.scale() != 0.0 ? a.scale() : DefaultScale(a.hd());
  if (s.causal && s.rows > s.l) {
    return absl::InvalidArgumentError(absl::StrCat("a causal attention backward of ", s.rows, " rows over ", s.l,
                                                   " positions: the rows are the last positions, so rows <= l"));
  }
  return s;
}

absl::StatusOr<Composition> FromAttentionBackward(const proto::OpSpec& spec, const Target& target) {
  ASSIGN_OR_RETURN(const BackwardShape s, BackwardShapeOf(spec));
  Plan p;
  p.s = s;
  ASSIGN_OR_RETURN(p.ops, OperandsOf(spec, "attention_backward", 6));
  p.out = spec.out();
  p.tr = target.tile_rows();
  p.tw = target.tile_cols();
  if (p.tr != p.tw) {
    return NotLowered("an attention backward on a tile that is not square — a block's positions are its scores' "
                      "columns");
  }
  if (s.hd % p.tw != 0 || s.vd % p.tw != 0) {
    return NotLowered(absl::StrCat("an attention backward whose head widths are not whole tiles (hd ", s.hd, ", vd ",
                                   s.vd, " on ", p.tr, " x ", p.tw, " tiles)"));
  }
  p.head_t = s.hd / p.tw;
  p.v_t = s.vd / p.tw;
  p.tiles_q = CeilDiv(s.rows, p.tr);
  p.tiles_l = CeilDiv(s.l, p.tr);
  const std::string what = absl::StrCat("an attention backward of ", s.rows, " rows x ", s.h, " heads over ", s.l);
  RETURN_IF_ERROR(WorkItemBudget(what, CheckedMul(p.tiles_q, s.h)));
  RETURN_IF_ERROR(WorkItemBudget(what, CheckedMul(p.tiles_l, s.h)));
  RETURN_IF_ERROR(TableBudget(what, CheckedMul(s.h, p.tw)));
  RETURN_IF_ERROR(TableBudget(what, CheckedMul(std::max(p.tiles_q, p.tiles_l), p.tw)));
  ASSIGN_OR_RETURN(p.precision, ElemPrecision(target));
  RETURN_IF_ERROR(RequireFp32Accumulator("an attention backward", target));
  const std::optional<Precision> mat = target.matrix_in();
  if (!mat) return MissingCompute("a matrix engine", target);
  p.mat = *mat;
  RETURN_IF_ERROR(DatapathPrecision(Datapath::kInt, target).status());
  // The largest index value: a row limit or key floor (below the padded rows plus the positions), a table entry.
  ASSIGN_OR_RETURN(p.ix, target.index_precision_for(p.tiles_q * p.tr + p.tiles_l * p.tr + s.h * p.tw));

  ASSIGN_OR_RETURN(std::vector<Composition> dq, FoldSections(p, p.tiles_q, p.tiles_l, &DqSection, &DqRange, "query", target));
  ASSIGN_OR_RETURN(std::vector<Composition> dkv,
                   FoldSections(p, p.tiles_l, p.tiles_q, &DkvSection, &DkvRange, "key", target));
  std::vector<Composition> parts = std::move(dq);
  for (Composition& c : dkv) parts.push_back(std::move(c));
  if (s.group() > 1) {
    ASSIGN_OR_RETURN(Composition sum, GroupSumSection(p, target));
    parts.push_back(std::move(sum));
  }
  return ComposeSections(absl::StrCat("attn_bwd_", s.rows, "x", s.h, "x", s.hd, "_l", s.l), std::move(parts),
                         target);
}

}  // namespace spatial
