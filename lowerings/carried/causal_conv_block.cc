// BlockCausalConv (seed 002, original lines 2840-3294): the causal conv over a block of rows tokens.
//
// `Y = causal conv(X, W, CS)` over a block of `rows` rows. The rows enter the ring one after another, so with
// `E = [CS; X]` — the ring's `taps` rows, then the block's — row `r` convolves the window `E[r + 1 … r + taps]` and the
// ring the block leaves is `E[rows … rows + taps − 1]`. TWO sections: every output row against the ring as it came in,
// then the ring update — the barrier between them is the order "read the old ring, then write the new one" (the
// reverse of the single step's order, because here the outputs read the INCOMING ring).
//
// X and Y are the DENSE rows x chan matrices a projection writes and a pointwise op reads. The ring and the weight keep
// the layout the single step gives them (RingIsMatrix), so a decode step continues from the ring a prefill chunk
// leaves. A column block is whole tiles of a matrix ring, the whole row of a flat one.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"  // ComposeSections
#include "lowerings/carried/causal_conv.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// {base, [(ROW, stride), (COL, 1)]}: plane row ROW of a page `stride` wide, shifted by `base`.
ElemAccess RowsMap(int64_t base, int64_t stride) { return Map2(base, stride, 1); }

// The seed's tile_row_plan(row_t, blk, dt) over a (rows_t, n_b) grid.
BlockPlan TileRowPlan(int64_t grid_y, int64_t grid_x, int64_t blk) {
  return BlockPlan{.per_site_n = blk, .grid_y = grid_y, .grid_x = grid_x, .osw = blk};
}

struct Geometry {
  int64_t rows, taps, chan, tr, tw;
  bool matrix_ring;
  int64_t cols_t, rows_t, blk, n_b, wc_w, ring_t;
  int64_t seg;         // where ring row k sits in its page: offset k·seg (plane row k of a matrix ring, k·chan flat)
  int64_t ring_tiles;  // the ring page's tiles
  Precision dt;
};

// The ring or the weight, as the single step lays it out: the taps x chan matrix or the flat 1 x taps·chan row.
TensorId RingTensor(Template& t, const Geometry& g, const std::string& name, TensorRole role, TensorInit init) {
  return g.matrix_ring ? t.AddTensor(name, role, g.taps, g.chan, g.dt, std::move(init))
                       : t.AddTensor(name, role, 1, g.taps * g.chan, g.dt, std::move(init));
}

// The item's page of the ring: its column block of tile row 0 (matrix), or the whole flat ring.
StageId RingPage(Template& t, const Geometry& g, const std::string& name, TensorId tensor, BufferId into) {
  if (g.matrix_ring) return t.AddLoadBlockAt(name, tensor, 0, {{LoopVar::kItemX, g.blk}},
                                             {.w = g.blk, .pitch = g.cols_t}, into);
  return t.AddLoadBlockAt(name, tensor, 0, {}, {.w = g.ring_t, .pitch = g.ring_t}, into);
}

// ★ THE HALO IS THE ONLY NON-UNIFORM READ, AND ITS SOURCE IS DATA. Output row y of tile row R reads window row
// j = y + 1 + t − taps of the block: its own tile row when j ≥ 0, else the row j before it — the previous tile row of
// X, or, for the first tile row, the ring. The choice is a per-item threshold from a compile-time table (the tile
// height for the first tile row, zero after), so every item runs the same stages.
absl::StatusOr<Composition> Outputs(const Geometry& g, const std::vector<OperandRef>& ops, const std::string& out,
                                    Precision ix, const Target& target) {
  const OperandRef& x = ops[0];
  const OperandRef& w = ops[1];
  const OperandRef& cs = ops[2];
  Template t(g.tr, g.tw);
  ASSIGN_OR_RETURN(TensorInit x_init, InitOf(x.fill, g.rows * g.chan));
  ASSIGN_OR_RETURN(TensorInit w_init, InitOf(w.fill, g.taps * g.chan));
  ASSIGN_OR_RETURN(TensorInit cs_init, InitOf(cs.fill, g.taps * g.chan));
  const TensorId xt = t.AddTensor(x.name, TensorRole::kInput, g.rows, g.chan, g.dt, std::move(x_init));
  const TensorId wt = RingTensor(t, g, w.name, TensorRole::kInput, std::move(w_init));
  // The ring is carried state: this section's read of it is the first step of its declared order.
  const TensorId cst = RingTensor(t, g, cs.name, TensorRole::kState, std::move(cs_init));
  const TensorId yt = t.AddTensor(out, TensorRole::kOutput, g.rows, g.chan, g.dt, TensorInit::Zero());
  // A per-tile-row table: the value of tile row r in element 0 of tile r.
  auto per_tile_row = [&](const std::string& what, auto value_of) {
    std::vector<int64_t> values(g.rows_t * g.tw, 0);
    for (int64_t r = 0; r < g.rows_t; ++r) values[r * g.tw] = value_of(r);
    return t.AddTensor(absl::StrCat(out, "__conv_", what), TensorRole::kParam, 1, g.rows_t * g.tw, ix,
                       TensorInit::Values(std::move(values)));
  };
  const TensorId prev_rows = per_tile_row("previous_row", [](int64_t r) { return r > 0 ? r - 1 : 0; });
  const TensorId halo = per_tile_row("halo", [&](int64_t r) { return r == 0 ? g.tr : 0; });
  const BufferId c_in = t.AddBuffer("in_rows", g.blk, g.dt);
  const BufferId p_in = t.AddBuffer("in_previous_rows", g.blk, g.dt);
  const BufferId ring_in = t.AddBuffer("in_ring", g.ring_tiles, g.dt);
  const BufferId w_in = t.AddBuffer("in_weight", g.ring_tiles, g.dt);
  const BufferId prev_in = t.AddBuffer("in_previous_row", 1, ix);
  const BufferId halo_in = t.AddBuffer("in_halo", 1, ix);
  const StageId l_c = t.AddLoadBlockAt("load_rows", xt, 0, {{LoopVar::kItemY, g.cols_t}, {LoopVar::kItemX, g.blk}},
                                       {.w = g.blk, .pitch = g.cols_t}, c_in);
  const StageId l_prev = t.AddLoadBlockAt("load_previous_row", prev_rows, 0, {{LoopVar::kItemY, 1}}, {}, prev_in);
  // The previous tile row of X, addressed by the table: row R − 1 (row 0 for the first, which reads the ring instead).
  AccessPattern prev_pattern{
      TileAddr{0, {{LoopVar::kItemX, g.blk}}, IndirectTile{prev_in, g.cols_t, 0, g.rows_t - 1}}, 1, g.blk, 1, g.cols_t};
  const StageId l_p = t.AddLoadPattern("load_previous_rows", xt, std::move(prev_pattern), p_in);
  t.AddEdge(l_prev, prev_in, l_p);
  const StageId l_ring = RingPage(t, g, "load_ring", cst, ring_in);
  const StageId l_w = RingPage(t, g, "load_weight", wt, w_in);
  const StageId l_halo = t.AddLoadBlockAt("load_halo", halo, 0, {{LoopVar::kItemY, 1}}, {}, halo_in);
  std::vector<BufferId> ins{halo_in};
  std::vector<ElemAccess> maps{Fixed(0)};
  auto slot = [&](BufferId b, ElemAccess m) {
    ins.push_back(b);
    maps.push_back(std::move(m));
    return Op(static_cast<int>(ins.size()) - 1);
  };
  Body body;
  for (int64_t tap = 0; tap < g.taps; ++tap) {
    const int64_t shift = 1 + tap - g.taps;  // window row j = y + shift
    Body own = slot(c_in, RowsMap(shift * g.wc_w, g.wc_w));
    Body before = slot(p_in, RowsMap((g.tr + shift) * g.wc_w, g.wc_w));
    Body ring = slot(ring_in, RowsMap((1 + tap) * g.seg, g.seg));
    Body weight = slot(w_in, At(tap * g.seg));
    Body halo_read = Select(Pred::LtOperand(LoopVar::kRow, 0), ring, before);
    Body window = Select(Pred::Ge(LoopVar::kRow, g.taps - 1 - tap), own, halo_read);
    Body term = Mul(weight, window);
    body = body.defined() ? Add(body, term) : term;
  }
  const BufferId out_buf = t.AddBuffer("out", g.blk, g.dt);
  const StageId s = t.AddGeneric("conv_rows", TileSpace(g.tr, g.wc_w), ins, maps, IdentMap(g.wc_w), body, out_buf);
  for (auto [from, buf] : {std::pair{l_c, c_in}, {l_p, p_in}, {l_ring, ring_in}, {l_w, w_in}, {l_halo, halo_in}}) {
    t.AddEdge(from, buf, s);
  }
  const StageId st = t.AddStoreBlock("store_y", yt, 0, {{LoopVar::kItemY, g.cols_t}, {LoopVar::kItemX, g.blk}},
                                     {.w = g.blk, .pitch = g.cols_t}, out_buf);
  t.AddEdge(s, out_buf, st);
  std::vector<WorkItem> items;
  for (int64_t r = 0; r < g.rows_t; ++r) {
    for (int64_t b = 0; b < g.n_b; ++b) {
      items.push_back(WorkItem{.id = r * g.n_b + b, .y = r, .x = b, .out = TileRect{.row0_t = r, .col0_t = b * g.blk,
                                                                                    .w_t = g.blk}});
    }
  }
  t.SetPlan(TileRowPlan(g.rows_t, g.n_b, g.blk));
  return FinishSection(t, absl::StrCat("conv_rows_", g.rows, "x", g.chan, "_taps", g.taps), std::move(items),
                       Precision::kFp32, ApproxIn("causal convolution", g.dt), target);
}

// The ring the block leaves, `CS'[t] = E[rows + t]` — the old ring's rows past the block's start, then the block's
// last rows, each from the tile row of X that holds it. Only the sources a band reads are loaded.
absl::StatusOr<Composition> Ring(const Geometry& g, const std::vector<OperandRef>& ops, const Target& target) {
  const OperandRef& x = ops[0];
  const OperandRef& cs = ops[2];
  Template t(g.tr, g.tw);
  ASSIGN_OR_RETURN(TensorInit x_init, InitOf(x.fill, g.rows * g.chan));
  ASSIGN_OR_RETURN(TensorInit cs_init, InitOf(cs.fill, g.taps * g.chan));
  const TensorId xt = t.AddTensor(x.name, TensorRole::kInput, g.rows, g.chan, g.dt, std::move(x_init));
  const TensorId cst = RingTensor(t, g, cs.name, TensorRole::kState, std::move(cs_init));
  // Tap t's source and the row it sits at: ring row rows + t (source -1), or row xr of X at plane row xr mod tile
  // (source: its tile row).
  constexpr int64_t kRing = -1;
  struct Page {
    int64_t source;
    StageId load;
    BufferId buf;
  };
  std::vector<std::pair<int64_t, int64_t>> sources;
  std::vector<Page> pages;
  for (int64_t tap = 0; tap < g.taps; ++tap) {
    const int64_t e = g.rows + tap;
    const std::pair<int64_t, int64_t> src =
        e < g.taps ? std::pair{kRing, e} : std::pair{(e - g.taps) / g.tr, (e - g.taps) % g.tr};
    sources.push_back(src);
    bool loaded = false;
    for (const Page& p : pages) loaded = loaded || p.source == src.first;
    if (loaded) continue;
    if (src.first == kRing) {
      const BufferId b = t.AddBuffer("in_ring", g.ring_tiles, g.dt);
      pages.push_back({kRing, RingPage(t, g, "load_ring", cst, b), b});
    } else {
      const BufferId b = t.AddBuffer(absl::StrCat("in_rows_", src.first), g.blk, g.dt);
      pages.push_back({src.first,
                       t.AddLoadBlockAt(absl::StrCat("load_rows_", src.first), xt, src.first * g.cols_t,
                                        {{LoopVar::kItemX, g.blk}}, {.w = g.blk, .pitch = g.cols_t}, b),
                       b});
    }
  }
  std::vector<BufferId> ins;
  std::vector<ElemAccess> maps;
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t tap = 0; tap < g.taps; ++tap) {
    const auto [source, row] = sources[tap];
    for (const Page& p : pages) {
      if (p.source == source) ins.push_back(p.buf);
    }
    // A matrix ring's tap t is plane row t of the output: read plane row `row`, `row − t` rows away. A flat ring's tap
    // t is the band [t·chan, (t+1)·chan) along the output row.
    if (g.matrix_ring) {
      maps.push_back(RowsMap((row - tap) * g.wc_w, g.wc_w));
    } else if (source == kRing) {
      maps.push_back(At((row - tap) * g.seg));
    } else {
      maps.push_back(At(row * g.wc_w - tap * g.seg));
    }
    bands.push_back({g.matrix_ring ? tap + 1 : (tap + 1) * g.seg, Op(static_cast<int>(ins.size()) - 1)});
  }
  std::vector<IterSpec> iters;
  Body body;
  int64_t out_w;
  if (g.matrix_ring) {
    // Rows past the ring's taps are the tile's padding: they carry a zero.
    bands.push_back({g.tr, Const(0.0)});
    iters = TileSpace(g.tr, g.wc_w);
    // banded_on(ROW, ...): band k covers ROW < hi_k.
    body = bands.back().second;
    for (auto it = bands.rbegin() + 1; it != bands.rend(); ++it) {
      body = Select(Pred::Lt(LoopVar::kRow, it->first), it->second, body);
    }
    out_w = g.wc_w;
  } else {
    iters = FlatSpace(g.taps * g.seg);
    body = Banded(bands);
    out_w = g.tw * g.ring_t;
  }
  const BufferId out_buf = t.AddBuffer("ring", g.ring_tiles, g.dt);
  const StageId s = t.AddGeneric("ring_update", iters, ins, maps, IdentMap(out_w), body, out_buf);
  for (const Page& p : pages) t.AddEdge(p.load, p.buf, s);
  const StageId st = g.matrix_ring
                         ? t.AddStoreBlock("store_ring", cst, 0, {{LoopVar::kItemX, g.blk}},
                                           {.w = g.blk, .pitch = g.cols_t}, out_buf)
                         : t.AddStoreBlock("store_ring", cst, 0, {}, {.w = g.ring_t, .pitch = g.ring_t}, out_buf);
  t.AddEdge(s, out_buf, st);
  // An item writes its column block of a matrix ring, or — flat — the whole ring.
  const int64_t ring_w = g.matrix_ring ? g.blk : g.ring_t;
  const int64_t n_items = g.matrix_ring ? g.n_b : 1;
  std::vector<WorkItem> items;
  for (int64_t b = 0; b < n_items; ++b) items.push_back(WorkItem{.id = b, .y = 0, .x = b,
                                                                 .out = TileRect{.col0_t = b * ring_w, .w_t = ring_w}});
  t.SetPlan(TileRowPlan(1, n_items, ring_w));
  return FinishSection(t, absl::StrCat("conv_ring_rows_", g.rows, "x", g.chan, "_taps", g.taps), std::move(items),
                       Precision::kFp32, NumericsClaim::Exact(), target);
}

}  // namespace

absl::StatusOr<Composition> BlockCausalConv(const proto::CausalConvSpec& spec, const std::vector<OperandRef>& ops,
                                            const std::string& out, const Target& target) {
  Geometry g;
  g.rows = spec.rows();
  g.taps = spec.taps();
  g.chan = spec.chan();
  g.tr = target.tile_rows();
  g.tw = target.tile_cols();
  // Every window row is then in its own tile row, the previous one, or the ring.
  if (g.taps > g.tr) return NotLowered("a block causal conv whose ring is taller than a tile row");
  // The single step's ring layout, decided the way FromCausalConv decides it.
  g.matrix_ring = RingIsMatrix(spec, target);
  if (g.matrix_ring && g.chan % g.tw != 0) {
    return NotLowered("a blocked causal conv whose channel count is not a whole number of tiles");
  }
  g.cols_t = CeilDiv(g.chan, g.tw);
  g.rows_t = CeilDiv(g.rows, g.tr);
  ASSIGN_OR_RETURN(g.dt, ElemPrecision(target));
  ASSIGN_OR_RETURN(Precision ix, target.index_precision_for(g.rows_t * g.cols_t + g.tr));
  g.blk = g.matrix_ring ? RowBlock(g.cols_t, target) : g.cols_t;
  g.n_b = g.cols_t / g.blk;
  // One item per block of a tile row of the output (and a per-tile-row table): checked before either is built.
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a causal conv of ", g.rows, " rows x ", g.chan, " channels"),
                                 CheckedMul(g.rows_t, g.n_b)));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a causal conv of ", g.rows, " rows"), CheckedMul(g.rows_t, g.tw)));
  g.wc_w = g.blk * g.tw;
  g.ring_t = TilesOf(g.taps * g.chan, target);
  g.seg = g.matrix_ring ? g.wc_w : g.chan;
  g.ring_tiles = g.matrix_ring ? g.blk : g.ring_t;
  ASSIGN_OR_RETURN(Composition outputs, Outputs(g, ops, out, ix, target));
  ASSIGN_OR_RETURN(Composition ring, Ring(g, ops, target));
  std::vector<Composition> parts;
  parts.push_back(std::move(outputs));
  parts.push_back(std::move(ring));
  return ComposeSections(absl::StrCat("conv_rows_", g.rows, "x", g.chan, "_taps", g.taps), std::move(parts), target);
}

}  // namespace spatial
