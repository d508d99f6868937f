#include "lowerings/rope/rope.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/pointwise.h"
#include "lowerings/toolkit/row_blocks.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

constexpr std::string_view kLiteralPositionOutside =
    "a literal rope position whose block leaves the cache — the program fails at run time on every tier, so there is "
    "no section to lower";

// What a rope spec says, checked once.
struct RopeShape {
  int64_t heads, hd, half, rows;
  bool from = false;   // reading a cache at a position
  bool named = false;  // ... read at run time from operand 3
  int64_t literal = 0;
  int64_t cache = 0;
  int64_t table_rows() const { return from ? cache : rows; }
  int64_t per_row() const { return heads / std::max<int64_t>(rows, 1); }
};

// A rope program's name: its heads, head dimension and rotated half — and its rows, when there is more than one.
std::string RopeName(const RopeShape& r) {
  return absl::StrCat("rope_", r.heads, "x", r.hd, "_half", r.half, r.rows > 1 ? absl::StrCat("_rows", r.rows) : "");
}

// The three regions of one head, over slots q[c], q[c + half], q[c − half] (0, 1, 2) and the tables read at the
// head's rows (rc1, rs1 in region 1; rs2, rc2 in region 2).
void HeadBands(std::vector<std::pair<int64_t, Body>>& bands, int64_t first, const RopeShape& r, int rc1, int rs1,
               int rs2, int rc2) {
  // Region 1: out = q[c]·rc − q[c + half]·rs; region 2: out = q[c − half]·rs + q[c]·rc; region 3 passes through.
  bands.push_back({first + r.half, Sub(Mul(Op(0), Op(rc1)), Mul(Op(1), Op(rs1)))});
  bands.push_back({first + 2 * r.half, Add(Mul(Op(2), Op(rs2)), Mul(Op(0), Op(rc2)))});
  if (2 * r.half < r.hd) bands.push_back({first + r.hd, Op(0)});
}

// The `rows` rows a rope block reads of a cache whose rows are half_t whole tiles: ONE tile run per table from tile
// (P − 1)·half_t. A literal P is the load's base; a named one is loaded, held, decremented and checked once — a guard
// keeping the block's last row among the cache's, as a row index is — and handed to each table's load as an
// IndirectTile through a FIFO copy of its own (a FIFO has one reader). Returns the cosine and sine buffers.
absl::StatusOr<std::pair<BufferId, BufferId>> CacheBlockLoads(ColumnBuild& b, const std::vector<OperandRef>& ops,
                                                              const RopeShape& r, int64_t half_t,
                                                              const Target& target) {
  Template& t = b.flat().t();
  const Precision p = b.flat().precision();
  const int64_t span = r.rows * half_t;
  const int64_t n = r.cache * half_t * target.tile_cols();
  std::vector<std::pair<TensorId, BufferId>> tables;
  for (int k : {1, 2}) {
    ASSIGN_OR_RETURN(TensorInit init, InitOf(ops[k].fill, n));
    tables.push_back({t.AddTensor(ops[k].name, TensorRole::kInput, 1, n, p, std::move(init)),
                      t.AddBuffer(absl::StrCat("in_", ops[k].name), span, p)});
  }
  const char* kLoads[] = {"load_rc", "load_rs"};
  std::optional<std::pair<StageId, BufferId>> row;
  Precision ix = Precision::kInt32;
  if (r.named) {
    ASSIGN_OR_RETURN(ix, IndexType(target, IndexSpace(r.cache, 1, ops[3].fill)));
    RETURN_IF_ERROR(RequireIndexArithmetic("a rope position", target));
    ASSIGN_OR_RETURN(TensorInit init, InitOf(ops[3].fill, 1));
    const TensorId pt = t.AddTensor(ops[3].name, TensorRole::kInput, 1, 1, ix, std::move(init));
    const BufferId pin = t.AddBuffer("in_position", 1, ix);
    const StageId lp = t.AddLoad("load_position", pt, {}, 1, pin);
    const int64_t admitted = r.cache - r.rows + 1;
    const BufferId biased = t.AddScratch("position_biased", 1, ix);
    const StageId s_biased = BiasedIndex(t, "position_biased", pin, admitted, biased);
    t.AddEdge(lp, pin, s_biased);
    const BufferId checked = t.AddScratch("position_row", 1, ix);
    const StageId s_row = GuardedCopy(t, "position_row", biased, admitted, 0.0, checked);
    t.AddEdge(s_biased, biased, s_row);
    row = std::make_pair(s_row, checked);
  }
  for (int k = 0; k < 2; ++k) {
    TileAddr origin{(r.literal - 1) * half_t, {}, std::nullopt};
    std::optional<std::pair<StageId, BufferId>> feed;
    if (row) {
      const BufferId copy = t.AddBuffer(absl::StrCat(kLoads[k], "_row"), 1, ix);
      const StageId s_copy = ScalarStage(t, absl::StrCat(kLoads[k], "_row"), {row->second}, {Fixed(0)}, Op(0), copy);
      t.AddEdge(row->first, row->second, s_copy);
      origin = TileAddr{0, {}, IndirectTile{copy, half_t, 0, r.cache - r.rows}};
      feed = std::make_pair(s_copy, copy);
    }
    const StageId l =
        t.AddLoadPattern(kLoads[k], tables[k].first, AccessPattern{origin, 1, span, 1, span}, tables[k].second);
    if (feed) t.AddEdge(feed->first, feed->second, l);
    b.flat().AddLoadToWire(l, tables[k].second);
  }
  return std::make_pair(tables[0].second, tables[1].second);
}

// ★ THREE REGIONS PER HEAD, ALL BANDS OF ONE FLAT AXIS. Head h's rotated first half is the columns [h·hd, h·hd + half),
// its second half [h·hd + half, h·hd + 2·half) and its pass-through tail [h·hd + 2·half, (h+1)·hd). Each bound is a
// CONSTANT, so the whole op is one Generic with 3·h − 1 predicates and no per-head stages at all. q is read through
// three shifted maps shared by every head; the tables through a per-head base, because their index is the position
// WITHIN the head.
//
// ★ A CACHE IS READ WHERE THE POSITION POINTS, IN THE ROPE'S OWN SECTION. Rows of WHOLE TILES are fetched alone
// (CacheBlockLoads); rows narrower than a tile load the cache whole and every table read adds the flat offset
// (P − 1)·half — a literal as one more constant, a named one as an IndirectTerm checked against the positions the
// block admits. Either way a position past the cache faults where every tier's check fails.
absl::StatusOr<Composition> FlatRope(const proto::OpSpec& spec, const std::vector<OperandRef>& ops, const RopeShape& r,
                                     const Target& target) {
  const int64_t n = r.heads * r.hd;
  const int64_t tw = target.tile_cols();
  RETURN_IF_ERROR(RequireFp32Accumulator("a rope", target));
  ASSIGN_OR_RETURN(ColumnBuild b, ColumnBuild::Columns(n, target));
  ASSIGN_OR_RETURN(BufferId q, b.flat().Input(ops[0].name, n, ops[0].fill));
  BufferId rc, rs;
  std::vector<StageId> chain;
  int64_t shift = 0;
  std::optional<std::pair<BufferId, int64_t>> position;  // (lo, extent)
  if (r.from && r.half % tw == 0) {
    ASSIGN_OR_RETURN(auto tables, CacheBlockLoads(b, ops, r, r.half / tw, target));
    std::tie(rc, rs) = tables;
  } else {
    const int64_t n_table = r.table_rows() * r.half;
    if (r.from && TilesOf(n_table, target) > RowBlockTiles(target)) {
      return NotLowered(
          "a rope reading a cache whose rows are narrower than a tile loads the cache whole, and this cache is wider "
          "than a site's page");
    }
    ASSIGN_OR_RETURN(rc, b.flat().Input(ops[1].name, n_table, ops[1].fill));
    ASSIGN_OR_RETURN(rs, b.flat().Input(ops[2].name, n_table, ops[2].fill));
    if (r.from && !r.named) shift = (r.literal - 1) * r.half;
    if (r.named) {
      ASSIGN_OR_RETURN(Precision ix, IndexType(target, IndexSpace(r.cache * r.half, r.half, ops[3].fill)));
      RETURN_IF_ERROR(RequireIndexArithmetic("a rope position", target));
      ASSIGN_OR_RETURN(BufferId index, b.flat().InputPaged(ops[3].name, 1, ops[3].fill, ix, 2));
      // lo = (P − 1)·half for a P a block of `rows` may start at.
      IndexChain lo = RowOffsetStages(b.flat(), index, r.cache - r.rows + 1, r.half, ix);
      chain = lo.stages;
      position = std::make_pair(lo.out, (r.cache - r.rows + 1) * r.half);
    }
  }
  if (position && b.blocks()) {
    // Column-blocked, a table read through the data offset AND the item's first column is a sum of two data no range
    // proves inside the page. So the block's rows·half angles are gathered first, once, through the checked offset
    // alone — a page of the angles the block turns by, read then like a fetched cache block (shift 0).
    const int64_t block_n = r.rows * r.half;
    const int64_t block_t = TilesOf(block_n, target);
    for (auto [table, name] : {std::pair<BufferId*, const char*>{&rc, "rc"}, {&rs, "rs"}}) {
      const BufferId page = b.flat().t().AddBuffer(absl::StrCat("block_", name), block_t, b.flat().precision());
      chain.push_back(
          b.flat().Compute(absl::StrCat("gather_", name), FlatSpace(block_n),
                           {Slot{*table, WithIndirect(At(0), 1, 1, position->second)}, Slot{position->first, Fixed(0)}},
                           IdentMap(b.flat().t().PageWidth(block_t)), Op(0), page));
      *table = page;
    }
    position.reset();
  }
  const BufferId out_buf = b.ResultPage("out", n, b.flat().precision());
  std::vector<Slot> slots{Slot{q, At(0)}, Slot{q, At(r.half)}, Slot{q, At(-r.half)}};
  std::optional<IndirectTerm> offset;
  if (position) {
    slots.push_back(Slot{position->first, Fixed(0)});
    offset = IndirectTerm{static_cast<int>(slots.size()) - 1, 1, position->second};
  }
  auto table = [&](BufferId buf, int64_t off) {
    ElemAccess m = At(off);
    m.indirect = offset;
    slots.push_back(Slot{buf, m});
    return static_cast<int>(slots.size()) - 1;
  };
  std::vector<std::pair<int64_t, Body>> bands;
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a flat rope of ", r.heads, " heads"), "unrolled heads", r.heads));
  for (int64_t h = 0; h < r.heads; ++h) {
    // Head h turns by table row h / per_row: its reads of the tables start row·half in.
    const int64_t base = h * r.hd - (h / r.per_row()) * r.half - shift;
    const int rc1 = table(rc, -base);
    const int rs1 = table(rs, -base);
    const int rs2 = table(rs, -base - r.half);
    const int rc2 = table(rc, -base - r.half);
    HeadBands(bands, h * r.hd, r, rc1, rs1, rs2, rc2);
  }
  ASSIGN_OR_RETURN(std::vector<StageId> rope, b.Pointwise("rope", n, std::move(slots), Banded(bands), out_buf));
  chain.insert(chain.end(), rope.begin(), rope.end());
  return b.Finish(spec.out(), n, chain, out_buf, RopeName(r), ApproxIn("rotary embedding", b.flat().precision()));
}

// FlatRope with the HEAD as the work item.
//
// ★ A ROTARY EMBEDDING NEVER CROSSES A HEAD, so the head is the natural work item: the flat form keeps all heads·hd
// elements resident and tells heads apart with three bands EACH, where one head is a few tiles and inside it the
// band structure collapses to the three regions the rotation actually has, because the page IS the head.
// ★ A HEAD TURNS BY ITS ROW'S TABLE ROW: item (y, x) is head x of query row y, so the query steps by a row's heads per
// y and the tables by one table row per y — a whole number of tiles only when half is.
// ★ A TABLE ROW THAT IS NOT WHOLE TILES IS READ THROUGH A WINDOW: row ρ starts at element ρ·half, mid-tile; the item
// loads the whole tiles around it and reads the row at its offset in the page — both from the row's first element,
// computed per item.
//
// ★ A PREFILL'S ROWS TURN AS THE DENSE MATRIX (`dense`: rows whole tile rows, half whole tiles): the query and the
// result are the rows x per_row·hd matrix a projection writes, item (token tile y, head x) turns a tile of rows at
// once, and its tables are the tile's rows' angles, one block of tile_rows·half tiles — row r's at page element
// r·half + c of row 0. No 1 x n row moves, so no relayout surrounds the rope at a prefill.
absl::StatusOr<Composition> BlockedRope(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                        const RopeShape& r, bool dense, const Target& target) {
  const int64_t n = r.heads * r.hd;
  const int64_t tw = target.tile_cols();
  const int64_t head_t = TilesOf(r.hd, target);
  const int64_t half_t = TilesOf(r.half, target);
  const int64_t per_row = r.per_row();
  const bool windowed = !dense && (r.rows > 1 || r.from) && r.half % tw != 0;
  const int64_t tr = target.tile_rows();
  // Table rows an item turns by: a tile of them (dense) or its one row.
  const int64_t rows_per_y = dense ? tr : 1;
  const int64_t rows_t = dense ? r.rows / tr : r.rows;
  // One item per head, and a table tile per query row: checked before either is built.
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a rope of ", r.heads, " heads"), r.heads));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a rope of ", r.rows, " rows"), CheckedMul(r.rows, tw)));
  auto row_steps = [&](int64_t per_y, std::vector<Term> v) {
    if (r.rows > 1) v.insert(v.begin(), {LoopVar::kItemY, per_y});
    return v;
  };
  ASSIGN_OR_RETURN(Precision precision, ElemPrecision(target));
  RETURN_IF_ERROR(RequireFp32Accumulator("a rope", target));
  Template t(target.tile_rows(), tw);
  const int64_t n_table = r.table_rows() * r.half;
  ASSIGN_OR_RETURN(TensorInit q_init, InitOf(ops[0].fill, n));
  ASSIGN_OR_RETURN(TensorInit c_init, InitOf(ops[1].fill, n_table));
  ASSIGN_OR_RETURN(TensorInit s_init, InitOf(ops[2].fill, n_table));
  const int64_t q_rows = dense ? r.rows : 1;
  const TensorId qt = t.AddTensor(ops[0].name, TensorRole::kInput, q_rows, n / q_rows, precision, std::move(q_init));
  const TensorId ct = t.AddTensor(ops[1].name, TensorRole::kInput, 1, n_table, precision, std::move(c_init));
  const TensorId st = t.AddTensor(ops[2].name, TensorRole::kInput, 1, n_table, precision, std::move(s_init));
  const TensorId yt = t.AddTensor(spec.out(), TensorRole::kOutput, q_rows, n / q_rows, precision, TensorInit::Zero());
  const int64_t table_t = TilesOf(n_table, target);
  const int64_t window_t = windowed ? std::min(CeilDiv(tw - 1 + r.half, tw), table_t) : rows_per_y * half_t;
  const BufferId qin = t.AddBufferDeep("in_q", 1, head_t, precision);
  const BufferId cin = t.AddBufferDeep("in_rc", 1, window_t, precision);
  const BufferId sin = t.AddBufferDeep("in_rs", 1, window_t, precision);
  const BufferId ob = t.AddBufferDeep("out", 1, head_t, precision);
  const StageId lq = t.AddLoadBlockAt("load_q", qt, 0, row_steps(per_row * head_t, {{LoopVar::kItemX, head_t}}),
                                      {.w = head_t, .pitch = head_t}, qin);
  // One table row is the SAME for every head of its row, so the tables' tile address moves only with the row — and,
  // reading a cache, starts at the position's row P − 1: a literal in the base; a named one an IndirectTile over
  // P − 1, computed per item on the integer datapath into a FIFO its load retires (one per table), behind the guard
  // that keeps the block's last row among the cache's.
  Precision pix = Precision::kInt32;
  std::optional<TensorId> pt;
  const int64_t admitted = r.cache - r.rows + 1;
  if (r.named) {
    ASSIGN_OR_RETURN(pix, IndexType(target, IndexSpace(r.cache, 1, ops[3].fill)));
    RETURN_IF_ERROR(RequireIndexArithmetic("a rope position", target));
    ASSIGN_OR_RETURN(TensorInit init, InitOf(ops[3].fill, 1));
    pt = t.AddTensor(ops[3].name, TensorRole::kInput, 1, 1, pix, std::move(init));
  }
  const int64_t base = r.from && !r.named ? (r.literal - 1) * half_t : 0;
  // `P − 1`, held and checked, into a scratch (or FIFO) `{name}_row`; the position is loaded afresh per consumer.
  auto position_row = [&](const std::string& name, bool fifo) {
    const BufferId pin = t.AddBuffer(absl::StrCat(name, "_position"), 1, pix);
    const StageId lp = t.AddLoad(absl::StrCat(name, "_position"), *pt, {}, 1, pin);
    const BufferId biased = t.AddScratch(absl::StrCat(name, "_biased"), 1, pix);
    const StageId sb = BiasedIndex(t, absl::StrCat(name, "_biased"), pin, admitted, biased);
    t.AddEdge(lp, pin, sb);
    const BufferId row0 =
        fifo ? t.AddBuffer(absl::StrCat(name, "_row"), 1, pix) : t.AddScratch(absl::StrCat(name, "_row"), 1, pix);
    const StageId s = GuardedCopy(t, absl::StrCat(name, "_row"), biased, admitted, 0.0, row0);
    t.AddEdge(sb, biased, s);
    return std::make_pair(s, row0);
  };
  auto table_load = [&](const std::string& name, TensorId tensor, BufferId out) -> StageId {
    if (!pt) {
      return t.AddLoadBlockAt(name, tensor, base, row_steps(rows_per_y * half_t, {}),
                              {.w = window_t, .pitch = window_t}, out);
    }
    auto [s, row0] = position_row(name, /*fifo=*/true);
    const TileAddr origin{0, row_steps(rows_per_y * half_t, {}), IndirectTile{row0, half_t, 0, r.cache - r.rows}};
    const StageId l = t.AddLoadPattern(name, tensor, AccessPattern{origin, 1, window_t, 1, window_t}, out);
    t.AddEdge(s, row0, l);
    // P - 1 is every item's (no step on an item coordinate), so the heads of a row share the block (certified:
    // MULTICAST_VARIES otherwise).
    t.SetMulticast(l, LoopVar::kItemX);
    return l;
  };
  // The windowed table read: item (y, ·)'s row starts at element e = (P₀ + y)·half — P₀ the position less one
  // (checked, as a row index is) or the literal's, y·half from a compile-time table one tile per query row — its
  // window at tile min(⌊e/tile⌋, T − W), so no window reads past the table, and the row at e − tile·start in the page.
  Precision ix_rows = Precision::kInt32;
  std::optional<TensorId> rows_table;
  if (windowed) {
    ASSIGN_OR_RETURN(ix_rows, IndexType(target, n_table + tw));
    RETURN_IF_ERROR(RequireIndexArithmetic("a rope window", target));
    const int64_t literal = r.from && !r.named ? r.literal - 1 : 0;
    std::vector<int64_t> tiles(r.rows * tw, 0);
    for (int64_t y = 0; y < r.rows; ++y) tiles[y * tw] = (literal + y) * r.half;
    rows_table = t.AddTensor(absl::StrCat(spec.out(), "__rope_rows"), TensorRole::kParam, 1, r.rows * tw, ix_rows,
                             TensorInit::Values(std::move(tiles)));
  }
  auto first_element = [&](const std::string& name) {
    const BufferId at_row = t.AddBufferDeep(absl::StrCat(name, "_row_start"), 1, 1, ix_rows);
    std::vector<Term> steps;
    if (r.rows > 1) steps.push_back({LoopVar::kItemY, 1});
    const StageId l_row =
        t.AddLoadBlockAt(absl::StrCat(name, "_row_start"), *rows_table, 0, std::move(steps), {}, at_row);
    const BufferId e = t.AddScratch(absl::StrCat(name, "_first"), 1, ix_rows);
    StageId s;
    if (!pt) {
      s = ScalarStage(t, absl::StrCat(name, "_first"), {at_row}, {Fixed(0)}, Op(0), e);
    } else {
      auto [s_row, row0] = position_row(name, /*fifo=*/false);
      s = ScalarStage(t, absl::StrCat(name, "_first"), {row0, at_row}, {Fixed(0), Fixed(0)},
                      Add(Mul(Op(0), Const(static_cast<double>(r.half))), Op(1)), e);
      t.AddEdge(s_row, row0, s);
    }
    t.AddEdge(l_row, at_row, s);
    return std::make_pair(s, e);
  };
  auto window_start = [&](const std::string& name, std::pair<StageId, BufferId> e, bool fifo) {
    const BufferId start = fifo ? t.AddBuffer(absl::StrCat(name, "_window"), 1, ix_rows)
                                : t.AddScratch(absl::StrCat(name, "_window"), 1, ix_rows);
    const Body body =
        Min(FloorDiv(Op(0), Const(static_cast<double>(tw))), Const(static_cast<double>(table_t - window_t)));
    const StageId s = ScalarStage(t, absl::StrCat(name, "_window"), {e.second}, {Fixed(0)}, body, start);
    t.AddEdge(e.first, e.second, s);
    return std::make_pair(s, start);
  };
  auto windowed_load = [&](const std::string& name, TensorId tensor, BufferId out) {
    auto [s_start, start] = window_start(name, first_element(name), /*fifo=*/true);
    const TileAddr origin{0, {}, IndirectTile{start, 1, 0, table_t - window_t}};
    const StageId l = t.AddLoadPattern(name, tensor, AccessPattern{origin, 1, window_t, 1, window_t}, out);
    t.AddEdge(s_start, start, l);
    return l;
  };
  StageId lc, ls;
  std::optional<std::pair<StageId, BufferId>> offset;
  if (windowed) {
    lc = windowed_load("load_rc", ct, cin);
    ls = windowed_load("load_rs", st, sin);
    // The row's offset in its window: e − tile·start, from a first element of its own.
    auto e = first_element("rope_offset");
    auto [s_start, start] = window_start("rope_offset", e, /*fifo=*/false);
    const BufferId off = t.AddScratch("rope_offset", 1, ix_rows);
    const StageId s_off = ScalarStage(t, "rope_offset", {e.second, start}, {Fixed(0), Fixed(0)},
                                      Sub(Op(0), Mul(Op(1), Const(static_cast<double>(tw)))), off);
    t.AddEdge(s_start, start, s_off);
    offset = std::make_pair(s_off, off);
  } else {
    lc = table_load("load_rc", ct, cin);
    ls = table_load("load_rs", st, sin);
  }
  // Inside one head the three regions are the rotation's own: rotate the low half against the high, the high half
  // against the low, and pass through whatever the rotary does not cover.
  const int64_t w = t.PageWidth(head_t);
  std::vector<ElemAccess> maps{At(0), At(r.half), At(-r.half), At(0), At(0), At(-r.half), At(-r.half)};
  if (dense) {
    // Row r of the query page is r·w in; its table row r·half (row 0 of the tables' page).
    for (int k = 0; k < 7; ++k) maps[k].terms.insert(maps[k].terms.begin(), {LoopVar::kRow, k < 3 ? w : r.half});
  }
  std::vector<BufferId> ins{qin, qin, qin, cin, sin, sin, cin};
  if (offset) {
    for (int k = 3; k < 7; ++k) maps[k].indirect = IndirectTerm{7, 1, window_t * tw};
    maps.push_back(Fixed(0));
    ins.push_back(offset->second);
  }
  std::vector<std::pair<int64_t, Body>> bands;
  HeadBands(bands, 0, r, 3, 4, 5, 6);
  const StageId s =
      t.AddGeneric("rope", dense ? TileSpace(tr, w) : FlatSpace(w), ins, maps, IdentMap(w), Banded(bands), ob);
  const StageId store = t.AddStoreBlock("store_y", yt, 0, row_steps(per_row * head_t, {{LoopVar::kItemX, head_t}}),
                                        {.w = head_t, .pitch = head_t}, ob);
  t.AddEdge(lq, qin, s);
  t.AddEdge(lc, cin, s);
  t.AddEdge(ls, sin, s);
  if (offset) t.AddEdge(offset->first, offset->second, s);
  t.AddEdge(s, ob, store);
  // ★ THE HEADS OF A ROW TURN BY ONE TABLE ROW: its tables are read once and multicast to the row's heads (ITEM_X),
  // not once a head (a prefill of 128 rows over Qwen3-8B's 32 heads read 36.7 MB of tables for 1 MB of queries); a
  // named position's table loads are marked where they are built.
  MulticastSharedPrologue(t, LoopVar::kItemX);
  std::vector<WorkItem> items;
  for (int64_t h = 0; h < rows_t * per_row; ++h) {
    const int64_t y = r.rows > 1 ? h / per_row : 0;
    const int64_t x = r.rows > 1 ? h % per_row : h;
    items.push_back(WorkItem{.id = h, .y = y, .x = x,
                             .out = dense ? TileRect{.row0_t = y, .col0_t = x * head_t, .w_t = head_t}
                                          : TileRect{.col0_t = h * head_t, .w_t = head_t}});
  }
  return FinishSection(t, absl::StrCat(RopeName(r), dense ? "_dense" : ""), std::move(items), Precision::kFp32,
                       ApproxIn("rotary embedding", precision), target);
}

}  // namespace

absl::StatusOr<Composition> FromRope(const proto::OpSpec& spec, const Target& target) {
  const proto::RopeSpec& s = spec.rope();
  RopeShape r{s.h(), s.hd(), s.half(), s.rows()};
  r.from = s.has_from() && s.from().kind_case() != proto::RowIndex::KIND_NOT_SET;
  r.named = r.from && s.from().kind_case() == proto::RowIndex::kNamed;
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "rope", r.named ? 4 : 3));
  if (r.named && ops[3].name != s.from().named()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope.from names '", s.from().named(), "' but operand 3 is '", ops[3].name, "'"));
  }
  for (auto [field, v] : {std::pair<const char*, int64_t>{"h", s.h()},
                          {"hd", s.hd()},
                          {"half", s.half()},
                          {"rows", s.rows()},
                          {"cache", s.cache()}}) {
    RETURN_IF_ERROR(NonNegative("rope", field, v));
  }
  RETURN_IF_ERROR(TensorSized("rope", r.heads, r.hd));
  RETURN_IF_ERROR(TensorSized("rope", std::max(s.cache(), s.rows()), s.half()));
  if (r.heads == 0 || r.hd == 0 || r.half == 0 || 2 * r.half > r.hd) {
    return NotLowered("a rope whose rotated width does not fit its head dimension");
  }
  if (r.rows == 0 || r.heads % r.rows != 0) {
    return NotLowered(absl::StrCat("a rope whose rows do not divide its heads (h = ", r.heads, " over rows = ", r.rows,
                                   "): rope.h counts the heads of every row, heads per token x rows"));
  }
  if (r.from) {
    r.cache = s.cache();
    if (!r.named) {
      r.literal = s.from().literal();
      // literal + rows - 1 > cache, written so a literal near INT64_MAX cannot overflow (rows >= 1, checked above).
      if (r.literal < 1 || r.literal > r.cache - (r.rows - 1)) return NotLowered(kLiteralPositionOutside);
    } else if (r.cache < r.rows) {
      // No position admits the block: every run would fault (the seed's `cache − rows + 1` underflows here).
      return NotLowered("a rope block of more rows than its cache has positions");
    }
  }
  const int64_t n = r.heads * r.hd;
  const int64_t tw = target.tile_cols(), tr = target.tile_rows();
  if (r.rows > 1 && r.rows % tr == 0 && tr == tw && r.hd % tw == 0 && r.half % tw == 0 &&
      !RowNeedsBlocking(r.hd, target)) {
    return FitsSites(BlockedRope(spec, ops, r, /*dense=*/true, target), "rope", target);
  }
  if (RowNeedsBlocking(n, target) && !RowNeedsBlocking(r.hd, target) && r.hd % tw == 0) {
    return FitsSites(BlockedRope(spec, ops, r, /*dense=*/false, target), "rope", target);
  }
  return FitsSites(FlatRope(spec, ops, r, target), "rope", target);
}

}  // namespace spatial
