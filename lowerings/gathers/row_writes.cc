#include "lowerings/gathers/row_writes.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/row_blocks.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

constexpr std::string_view kLiteralBlockOutside =
    "a literal block of rows outside its table — the program fails at run time on every tier, so there is no "
    "section to lower";

// A row write's program name: the table, a block's row count, and its layout's suffix (seed l.8964).
std::string SetRowName(const proto::SetRowSpec& s, std::string_view layout) {
  const std::string block = s.count() > 1 ? absl::StrCat("_block", s.count()) : "";
  return absl::StrCat("set_row_", s.rows(), "x", s.cols(), block, std::string(layout));
}

// The element precision of a whole-tile or dense write: the float datapath, or the index integer holding both the
// table's and the source's declared values.
absl::StatusOr<Precision> WritePrecision(bool is_float, const OperandRef& table, const OperandRef& source,
                                         const Target& target) {
  if (is_float) return ElemPrecision(target);
  return IndexType(target, std::max(FillAbsBound(table.fill).value_or(0), FillAbsBound(source.fill).value_or(0)));
}

// A Param of `values.size()` tiles at `ix`, value k in element 0 of tile k: a compile-time table one tile a value,
// read through the data by a movement (the seed's `param`).
TensorId TilePerValue(Template& t, const std::string& name, const std::vector<int64_t>& values, Precision ix) {
  const int64_t tw = t.tile_cols();
  std::vector<int64_t> tiles(values.size() * tw, 0);
  for (size_t k = 0; k < values.size(); ++k) tiles[k * tw] = values[k];
  return t.AddTensor(name, TensorRole::kParam, 1, static_cast<int64_t>(values.size()) * tw, ix,
                     TensorInit::Values(std::move(tiles)));
}

// A scalar's FIFO copy for one movement to wait on (a FIFO has one reader).
std::pair<StageId, BufferId> Fifo(Template& t, const std::string& name, std::pair<StageId, BufferId> from,
                                  Precision ix) {
  const BufferId out = t.AddBuffer(name, 1, ix);
  const StageId s = ScalarStage(t, name, {from.second}, {Fixed(0)}, Op(0), out);
  t.AddEdge(from.first, from.second, s);
  return {s, out};
}

// One element of a table, at `steps` plus — when given — the tile a data index selects, into a one-tile buffer
// `name` ("load_{name}").
std::pair<StageId, BufferId> Lookup(Template& t, const std::string& name, TensorId from, std::vector<Term> steps,
                                    std::optional<std::pair<StageId, BufferId>> index, int64_t lo, int64_t hi,
                                    Precision ix) {
  const BufferId out = t.AddBuffer(name, 1, ix);
  std::optional<IndirectTile> ind;
  if (index) ind = IndirectTile{index->second, 1, lo, hi};
  const StageId load = t.AddLoadPattern(absl::StrCat("load_", name), from,
                                        AccessPattern{TileAddr{0, std::move(steps), ind}, 1, 1, 1, 1}, out);
  if (index) t.AddEdge(index->first, index->second, load);
  return {load, out};
}

// The literal index as a one-element Param, or the named operand: either way `P`, checked at run time below. A
// literal the block cannot start at is refused with `outside`. The Param's name carries the row: tensors unify by
// name across a composition, so two literal writes of one table must not share it.
absl::StatusOr<TensorId> FirstRow(Template& t, const proto::SetRowSpec& s, const std::vector<OperandRef>& ops,
                                  Precision ix, std::string_view outside) {
  if (s.index().kind_case() == proto::RowIndex::kLiteral) {
    const int64_t i = s.index().literal();
    if (i < 1 || i > s.rows() + 1 - s.count()) return NotLowered(outside);
    return t.AddTensor(absl::StrCat(ops[0].name, "__block_first_", i), TensorRole::kParam, 1, 1, ix,
                       TensorInit::Values({i}));
  }
  ASSIGN_OR_RETURN(TensorInit init, InitOf(ops[2].fill, 1));
  return t.AddTensor(ops[2].name, TensorRole::kInput, 1, 1, ix, std::move(init));
}

// `r = P − 1`, checked so every row of the block is one of the table's: [0, rows − count]. Returns the stage and
// the scratch holding r.
std::pair<StageId, BufferId> CheckedFirstRow(Template& t, TensorId first, int64_t admitted, Precision ix) {
  const BufferId p_in = t.AddBuffer("in_first", 1, ix);
  const StageId l_p = t.AddLoadBlockAt("load_first", first, 0, {}, {}, p_in);
  const BufferId biased = t.AddScratch("first_biased", 1, ix);
  const StageId s_biased = BiasedIndex(t, "first_biased", p_in, admitted, biased);
  t.AddEdge(l_p, p_in, s_biased);
  const BufferId r = t.AddScratch("first_row", 1, ix);
  const StageId s_r = GuardedCopy(t, "first_row", biased, admitted, 0.0, r);
  t.AddEdge(s_biased, biased, s_r);
  return {s_r, r};
}

// A remainder the arithmetic already holds in [0, unit) (r − unit·⌊r / unit⌋, a select's wrap), clamped there: an
// identity on every value, which lets the certifier's intervals, blind to the relation between r and ⌊r / unit⌋,
// prove it too. Without it a block's offset over a range of positions spans two units, its guard never held, and the
// position had no admitted range (a prefill's cache write: --random-inputs drew any position and the run faulted).
Body InUnit(Body remainder, int64_t unit) {
  return Max(Const(0.0), Min(Const(static_cast<double>(unit - 1)), std::move(remainder)));
}

// `(c − o) mod unit` for every c of a unit, c read from a compile-time table `iota` (a Generic cannot see its axes as
// values): the in-unit position each position of the block comes from. Its reads of the two source pages are then
// provably inside them — the index's admitted range IS the page — where `c − o` against the band's bounds is a
// relation between two data no range can carry.
// The result is clamped to the unit (InUnit; o's guard holds o in [0, unit), so c − o is in (−unit, unit) and the
// select lifts the negative half): the interval analysis reads the select's branches apart from the relation c < o
// and bounded the write's page index by [−unit, 2·unit), a guard that never held.
StageId SourcePositions(Template& t, const std::string& name, std::vector<IterSpec> space, BufferId iota, ElemAccess at,
                        BufferId o, int64_t unit, LoopVar axis, ElemAccess out_map, BufferId out) {
  Body from = Sub(Op(0), Op(2));
  Body wrapped = Select(Pred::LtOperand(axis, 2), Add(from, Const(static_cast<double>(unit))), from);
  Body body = InUnit(wrapped, unit);
  return t.AddGeneric(name, std::move(space), {iota, o, o}, {std::move(at), Fixed(0), GuardOf(1, Fixed(0), unit)},
                      std::move(out_map), body, out);
}

// `(axis ≥ lo) ? ((axis < hi) ? ((axis < o) ? A : B) : T) : T` over slots [T, A, B, positions, o, lo, hi].
Body BlockSelect(LoopVar axis) {
  Body from_block = Select(Pred::LtOperand(axis, 4), Op(1), Op(2));
  return Select(Pred::GeOperand(axis, 5), Select(Pred::LtOperand(axis, 6), from_block, Op(0)), Op(0));
}

// Set row i of T to S for a table whose rows are WHOLE TILES — the real-width KV-cache append. Each work item stores
// its `blk` tiles of the source into the row (an IndirectTile scatter for a named row), so exactly the row's tiles
// move. A block of `count` rows is count·row_t contiguous tiles from its first row's: the one-row scatter, wider, its
// first row bounded so the last is the table's.
absl::StatusOr<Composition> TileSetRow(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                       const Target& target) {
  const proto::SetRowSpec& s = spec.set_row();
  const int64_t rows = s.rows();
  const int64_t cols = s.cols();
  const int64_t count = s.count();
  const int64_t row_t = cols / target.tile_cols();
  const int64_t span_t = count * row_t;
  const int64_t blk = RowBlock(span_t, target);
  const int64_t n = rows * cols;
  ASSIGN_OR_RETURN(Precision dt, WritePrecision(s.float_(), ops[0], ops[1], target));
  ASSIGN_OR_RETURN(Precision acc, SectionAcc(dt, "a row write", target));
  Template t(target.tile_rows(), target.tile_cols());
  ASSIGN_OR_RETURN(TensorInit s_init, InitOf(ops[1].fill, count * cols));
  const TensorId src = t.AddTensor(ops[1].name, TensorRole::kInput, 1, count * cols, dt, std::move(s_init));
  const OperandRef& index_operand = ops.size() > 2 ? ops[2] : ops[1];
  ASSIGN_OR_RETURN(RowAddress at, RowBlockAddress(t, s.index(), index_operand, rows + 1 - count, row_t, blk, target));
  // ★ THE TABLE IS `State`, NOT AN `Output`: this section writes one block of rows, and every other tile carries the
  // value it came in with — the table operand's own (the seed's comment says "its SOURCE fill", its code passes the
  // table's: the value the untouched rows hold).
  ASSIGN_OR_RETURN(TensorInit t_init, InitOf(ops[0].fill, n));
  const TensorId table = t.AddTensor(ops[0].name, TensorRole::kState, 1, n, dt, std::move(t_init));
  const BufferId sin = t.AddBuffer(absl::StrCat("in_", ops[1].name), blk, dt);
  const StageId ls = t.AddLoad(absl::StrCat("load_", ops[1].name), src, {{LoopVar::kItemX, blk}}, blk, sin);
  auto [copy, out] = CopyPage(t, sin, blk, dt);
  t.AddEdge(ls, sin, copy);
  const StageId st =
      t.AddStorePattern(absl::StrCat("scatter_", ops[0].name), table, AccessPattern{at.addr, 1, blk, 1, row_t}, out);
  t.AddEdge(copy, out, st);
  if (at.feed) t.AddEdge(at.feed->first, at.feed->second, st);
  // ★ THE PLAN IS THE ROW'S, NOT THE TABLE'S: the result is the whole carried table, the work is one block of rows.
  t.SetPlan(BlockPlan{.per_site_n = blk, .grid_x = span_t / blk, .osw = blk});
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a row write of ", span_t, " tiles"), span_t / blk));
  return FinishSection(t, SetRowName(s, ""), RowItems(span_t, blk), acc, MovementClaim("row write", s.float_(), dt),
                       target);
}

// Set row i of T to S for a DENSE table — rows x cols, a tile row holding `tile` rows: the KV cache a flash attention
// reads. Each work item READS its blk tiles of the row's tile row, replaces in-tile row r mod tile with its blk tiles
// of the source, and WRITES them back: T'(y, c) = (y = r mod tile) ? S(c) : T(y, c). A row that is not whole tiles is
// the same write over its last, partial tile.
//
// ★ THE TABLE IS `State`, read and written in one section: the write is downstream of the read on every site, so the
// other rows of the tile row carry the value they came in with and nothing races the rewrite.
absl::StatusOr<Composition> DenseSetRow(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                        const Target& target) {
  const proto::SetRowSpec& s = spec.set_row();
  const int64_t rows = s.rows();
  const int64_t cols = s.cols();
  const int64_t tr = target.tile_rows();
  const int64_t row_t = CeilDiv(cols, target.tile_cols());
  const int64_t blk = RowBlock(row_t, target);
  ASSIGN_OR_RETURN(Precision dt, WritePrecision(s.float_(), ops[0], ops[1], target));
  ASSIGN_OR_RETURN(Precision acc, SectionAcc(dt, "a row write", target));
  Template t(tr, target.tile_cols());
  ASSIGN_OR_RETURN(TensorInit s_init, InitOf(ops[1].fill, cols));
  ASSIGN_OR_RETURN(TensorInit t_init, InitOf(ops[0].fill, rows * cols));
  const TensorId src = t.AddTensor(ops[1].name, TensorRole::kInput, 1, cols, dt, std::move(s_init));
  const TensorId table = t.AddTensor(ops[0].name, TensorRole::kState, rows, cols, dt, std::move(t_init));
  const BufferId old = t.AddBuffer("in_tile_row", blk, dt);
  const BufferId sin = t.AddBuffer(absl::StrCat("in_", ops[1].name), blk, dt);
  const BufferId out = t.AddBuffer("tile_row", blk, dt);
  const std::vector<Term> steps{{LoopVar::kItemX, blk}};
  const OperandRef& index_operand = ops.size() > 2 ? ops[2] : ops[1];
  ASSIGN_OR_RETURN(DenseRowAt at, DenseRow(t, s.index(), index_operand, rows, row_t, steps, 2, target));
  // The in-tile row the select replaces: [lo, lo + 1).
  std::vector<BufferId> ins{old, sin};
  std::vector<ElemAccess> maps{IdentMap(t.PageWidth(blk)), PerColMap()};  // the source row broadcast down the rows
  Pred lo = Pred::Ge(LoopVar::kRow, 0);
  Pred hi = Pred::Lt(LoopVar::kRow, 0);
  StageId s_hi = -1;
  BufferId hi_buf = 0;
  if (at.in_tile.fixed) {
    lo = Pred::Ge(LoopVar::kRow, *at.in_tile.fixed);
    hi = Pred::Lt(LoopVar::kRow, *at.in_tile.fixed + 1);
  } else {
    hi_buf = t.AddScratch("in_tile_row_end", 1, t.section().buffers[at.in_tile.row].precision);
    s_hi = ScalarStage(t, "in_tile_row_end", {at.in_tile.row}, {Fixed(0)}, Add(Op(0), Const(1.0)), hi_buf);
    t.AddEdge(at.in_tile.stage, at.in_tile.row, s_hi);
    ins.insert(ins.end(), {at.in_tile.row, hi_buf});
    maps.insert(maps.end(), {Fixed(0), Fixed(0)});
    lo = Pred::GeOperand(LoopVar::kRow, 2);
    hi = Pred::LtOperand(LoopVar::kRow, 3);
  }
  const StageId l_old = t.AddLoadPattern(absl::StrCat("gather_", ops[0].name), table,
                                         AccessPattern{at.tile_rows[0].addr, 1, blk, 1, row_t}, old);
  if (at.tile_rows[0].feed) t.AddEdge(at.tile_rows[0].feed->first, at.tile_rows[0].feed->second, l_old);
  const StageId l_src = t.AddLoad(absl::StrCat("load_", ops[1].name), src, steps, blk, sin);
  const int64_t w = t.PageWidth(blk);
  const StageId s_rw = t.AddGeneric("write_row", TileSpace(tr, w), ins, maps, IdentMap(w),
                                    Select(lo, Select(hi, Op(1), Op(0)), Op(0)), out);
  t.AddEdge(l_old, old, s_rw);
  t.AddEdge(l_src, sin, s_rw);
  if (s_hi >= 0) t.AddEdge(s_hi, hi_buf, s_rw);
  const StageId st = t.AddStorePattern(absl::StrCat("scatter_", ops[0].name), table,
                                       AccessPattern{at.tile_rows[1].addr, 1, blk, 1, row_t}, out);
  t.AddEdge(s_rw, out, st);
  if (at.tile_rows[1].feed) t.AddEdge(at.tile_rows[1].feed->first, at.tile_rows[1].feed->second, st);
  t.SetPlan(TileRowPlan(row_t, blk));
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a dense row write of rows of ", cols), row_t / blk));
  return FinishSection(t, absl::StrCat("set_row_", rows, "x", cols, "_dense"), RowItems(row_t, blk), acc,
                       MovementClaim("row write", s.float_(), dt), target);
}

// Set rows from P of T to X for a DENSE table — the KV cache a prefill chunk appends its `count` keys or values to,
// X a dense count x cols block. Rows r … r + count − 1 (r = P − 1) are replaced; the block starts at in-tile row
// o = r mod tile of tile row K0 = ⌊r / tile⌋, both DATA, and touches at most m = min(⌈count/tile⌉ + 1, n_t) tile rows.
//
// ★ THE ITEMS' TILE ROWS ARE DISTINCT BY THEIR COORDINATE, NOT BY THE DATA. Item (i, b) rewrites column block b of
// tile row K0' + i, K0' = min(K0, n_t − m): affine in i over a data start, so every item's tile is its own for every
// P, and [K0', K0' + m) always lies in the table and covers the block's tile rows. With c = r − tile·K0', row y of item
// i is the block's row s = y + i·tile − c: membership is c − i·tile ≤ y < count + c − i·tile, and s lies in source tile
// rows i − δ − 1 and i − δ (δ = K0 − K0'), loaded as pages A and B, at in-tile row (y − o) mod tile. A clamped source
// tile row only ever holds non-members, and a tile row the block misses is written back unchanged.
//
// K0', tile·K0' and m − 1 − δ are compile-time tables read through K0 (the seed's design); K0 itself is one FloorDiv
// (row_blocks.h says why), and the in-tile source row (y − o) mod tile is one small Generic over a compile-time
// column of the tile's rows (SourcePositions says why).
absl::StatusOr<Composition> DenseSetRows(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                         const Target& target) {
  const proto::SetRowSpec& s = spec.set_row();
  const int64_t rows = s.rows();
  const int64_t cols = s.cols();
  const int64_t count = s.count();
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  if (cols % tw != 0) return NotLowered("a block of rows into a dense table whose rows are not whole tiles");
  const int64_t row_t = cols / tw;
  const int64_t blk = RowBlock(row_t, target);
  const int64_t w = blk * tw;
  const int64_t n_t = CeilDiv(rows, tr);
  const int64_t src_t = CeilDiv(count, tr);
  const int64_t m = std::min(src_t + 1, n_t);
  // Per-tile-row tables of the table's n_t tile rows (one tile each), then m x row_t / blk items: checked first.
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a block write into a table of ", rows, " rows"), CheckedMul(n_t, tw)));
  RETURN_IF_ERROR(
      WorkItemBudget(absl::StrCat("a block write of ", count, " rows of ", cols), CheckedMul(m, row_t / blk)));
  ASSIGN_OR_RETURN(Precision dt, WritePrecision(s.float_(), ops[0], ops[1], target));
  ASSIGN_OR_RETURN(Precision acc, SectionAcc(dt, "a row block write", target));
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, rows + tr * m));
  RETURN_IF_ERROR(RequireIndexArithmetic("a row index", target));
  Template t(tr, tw);
  ASSIGN_OR_RETURN(TensorInit t_init, InitOf(ops[0].fill, rows * cols));
  ASSIGN_OR_RETURN(TensorInit s_init, InitOf(ops[1].fill, count * cols));
  const TensorId table = t.AddTensor(ops[0].name, TensorRole::kState, rows, cols, dt, std::move(t_init));
  const TensorId src = t.AddTensor(ops[1].name, TensorRole::kInput, count, cols, dt, std::move(s_init));
  ASSIGN_OR_RETURN(TensorId first, FirstRow(t, s, ops, ix, kLiteralBlockOutside));
  const std::string tn = ops[0].name;
  auto start = [&](int64_t q) { return std::min(q, n_t - m); };
  std::vector<int64_t> starts, start_bases, shifts, item_rows, sources_a, sources_b;
  for (int64_t q = 0; q < n_t; ++q) {
    starts.push_back(start(q));
    start_bases.push_back(start(q) * tr);
    shifts.push_back(m - 1 - (q - start(q)));
  }
  for (int64_t i = 0; i < m; ++i) item_rows.push_back(i * tr);
  for (int64_t k = 0; k < 2 * m - 1; ++k) {
    sources_a.push_back(std::clamp<int64_t>(k - m, 0, src_t - 1));
    sources_b.push_back(std::clamp<int64_t>(k - m + 1, 0, src_t - 1));
  }
  const TensorId t_starts = TilePerValue(t, absl::StrCat(tn, "__block_start"), starts, ix);
  const TensorId t_start_bases = TilePerValue(t, absl::StrCat(tn, "__block_start_base"), start_bases, ix);
  const TensorId t_shifts = TilePerValue(t, absl::StrCat(tn, "__block_source_shift"), shifts, ix);
  const TensorId t_item_rows = TilePerValue(t, absl::StrCat(tn, "__block_item_row"), item_rows, ix);
  const TensorId t_sources_a = TilePerValue(t, absl::StrCat(tn, "__block_source_a"), sources_a, ix);
  const TensorId t_sources_b = TilePerValue(t, absl::StrCat(tn, "__block_source_b"), sources_b, ix);
  std::vector<int64_t> tile_rows(tr);
  for (int64_t y = 0; y < tr; ++y) tile_rows[y] = y;
  const TensorId t_rows =
      t.AddTensor(absl::StrCat(tn, "__block_rows"), TensorRole::kParam, tr, 1, ix, TensorInit::Values(tile_rows));

  // r = P − 1, then K0 = ⌊r / tile⌋ and o = r − tile·K0.
  const auto [s_r, r] = CheckedFirstRow(t, first, rows - count + 1, ix);
  // K0's page is "tile_row", as the seed names it; the rewritten page is "new_tile_row".
  const BufferId k0 = t.AddScratch("tile_row", 1, ix);
  const StageId s_k0 = ScalarStage(t, "tile_row", {r}, {Fixed(0)}, FloorDiv(Op(0), Const(static_cast<double>(tr))), k0);
  t.AddEdge(s_r, r, s_k0);
  const BufferId o = t.AddScratch("block_offset", 1, ix);
  const StageId s_o = ScalarStage(t, "block_offset", {r, k0}, {Fixed(0), Fixed(0)},
                                  InUnit(Sub(Op(0), Mul(Const(static_cast<double>(tr)), Op(1))), tr), o);
  t.AddEdge(s_k0, k0, s_o);
  // A table read at tile K0, through a FIFO copy of K0 of its own.
  auto by_k0 = [&](const std::string& what, TensorId from) {
    auto k = Fifo(t, absl::StrCat("tile_row_", what), {s_k0, k0}, ix);
    return Lookup(t, what, from, {}, k, 0, n_t - 1, ix);
  };
  // The membership thresholds: lo = r − tile·K0' − i·tile, hi = lo + count.
  const auto [l_sb, start_base] = by_k0("start_base", t_start_bases);
  const auto [l_it, it] = Lookup(t, "item_row", t_item_rows, {{LoopVar::kItemY, 1}}, std::nullopt, 0, 0, ix);
  const BufferId lo = t.AddScratch("member_lo", 1, ix);
  const StageId s_lo = ScalarStage(t, "member_lo", {r, start_base, it}, {Fixed(0), Fixed(0), Fixed(0)},
                                   Sub(Sub(Op(0), Op(1)), Op(2)), lo);
  t.AddEdge(l_sb, start_base, s_lo);
  t.AddEdge(l_it, it, s_lo);
  const BufferId hi = t.AddScratch("member_hi", 1, ix);
  const StageId s_hi = ScalarStage(t, "member_hi", {lo}, {Fixed(0)}, Add(Op(0), Const(static_cast<double>(count))), hi);
  t.AddEdge(s_lo, lo, s_hi);
  // The two source tile rows the item's rows come from: table tile i + m − 1 − δ.
  auto source_page = [&](const std::string& what, TensorId rows_of) {
    auto shift = by_k0(absl::StrCat(what, "_shift"), t_shifts);
    auto at = Lookup(t, absl::StrCat(what, "_row"), rows_of, {{LoopVar::kItemY, 1}}, shift, 0, m - 1, ix);
    const BufferId page = t.AddBuffer(absl::StrCat("in_", what), blk, dt);
    const TileAddr origin{0, {{LoopVar::kItemX, blk}}, IndirectTile{at.second, row_t, 0, src_t - 1}};
    const StageId load =
        t.AddLoadPattern(absl::StrCat("load_", what), src, AccessPattern{origin, 1, blk, 1, row_t}, page);
    t.AddEdge(at.first, at.second, load);
    return std::make_pair(load, page);
  };
  const auto [l_a, page_a] = source_page("source_a", t_sources_a);
  const auto [l_b, page_b] = source_page("source_b", t_sources_b);
  // The item's tile row K0' + i, once per movement that addresses it.
  auto tile_row_at = [&](const std::string& what) {
    auto sb = by_k0(absl::StrCat("start_", what), t_starts);
    const TileAddr addr{
        0, {{LoopVar::kItemY, row_t}, {LoopVar::kItemX, blk}}, IndirectTile{sb.second, row_t, 0, n_t - m}};
    return std::make_pair(addr, sb);
  };
  const auto [old_at, s_old] = tile_row_at("gather");
  const auto [new_at, s_new] = tile_row_at("scatter");
  const BufferId old = t.AddBuffer("in_tile_row", blk, dt);
  const StageId l_old =
      t.AddLoadPattern(absl::StrCat("gather_", tn), table, AccessPattern{old_at, 1, blk, 1, row_t}, old);
  t.AddEdge(s_old.first, s_old.second, l_old);
  // (y − o) mod tile for every row y of the tile.
  const BufferId rows_in = t.AddBuffer("in_block_rows", 1, ix);
  const StageId l_rows = t.AddLoadBlockAt("load_block_rows", t_rows, 0, {}, {}, rows_in);
  const BufferId positions = t.AddScratch("source_row", 1, ix);
  const StageId s_pos = SourcePositions(t, "source_row", HeadSpace(tr, 1), rows_in, PerRowMap(tw), o, tr, LoopVar::kRow,
                                        PerRowMap(tw), positions);
  t.AddEdge(l_rows, rows_in, s_pos);
  t.AddEdge(s_o, o, s_pos);
  // Operands: 0 the tile row, 1 and 2 the source halves at row (y − o) mod tile, 3 that row, 4 o, 5 lo, 6 hi.
  const ElemAccess shifted = WithIndirect(At(0), 3, w, tr);
  const BufferId out = t.AddBuffer("new_tile_row", blk, dt);
  const StageId s_rw = t.AddGeneric("write_rows", TileSpace(tr, w), {old, page_a, page_b, positions, o, lo, hi},
                                    {IdentMap(w), shifted, shifted, PerRowMap(tw), Fixed(0), Fixed(0), Fixed(0)},
                                    IdentMap(w), BlockSelect(LoopVar::kRow), out);
  t.AddEdge(l_old, old, s_rw);
  t.AddEdge(l_a, page_a, s_rw);
  t.AddEdge(l_b, page_b, s_rw);
  t.AddEdge(s_pos, positions, s_rw);
  t.AddEdge(s_hi, hi, s_rw);
  const StageId st =
      t.AddStorePattern(absl::StrCat("scatter_", tn), table, AccessPattern{new_at, 1, blk, 1, row_t}, out);
  t.AddEdge(s_rw, out, st);
  t.AddEdge(s_new.first, s_new.second, st);
  std::vector<WorkItem> items;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < row_t / blk; ++b) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = i, .x = b,
                               .out = TileRect{.row0_t = i, .col0_t = b * blk, .w_t = blk}});
    }
  }
  // An in-place update of carried state: its grid is its items' blocks, one per item.
  BlockPlan plan = TileRowPlan(row_t, blk);
  plan.grid_x = m * (row_t / blk);
  t.SetPlan(plan);
  return FinishSection(t, SetRowName(s, "_dense"), std::move(items), acc,
                       MovementClaim("row block write", s.float_(), dt), target);
}

// Set rows [P, P + count) of a FLAT table whose rows are narrower than a tile: ★ A BLOCK OF ROWS IS ONE CONTIGUOUS RUN
// of count·cols elements from lo = (P − 1)·cols — the one-row write, wider.
//
// The seed rewrites the whole table here (every operand loaded whole, the run's band selected by its bounds). Our
// program model forbids what that needs: an item of a column-blocked section would load tiles the other items write
// (DESIGN §3.5: items are independent), and the source read at c − lo, inside lo <= c < lo + span, is a relation no
// interval proves. So the run is written as the seed writes a block of rows into a dense cache (DenseSetRows), turned
// on its side: it touches at most m = min(⌈span/tile⌉ + 1, n_t) tiles of the row; item i reads and rewrites tile
// K0' + i (K0 = ⌊lo/tile⌋, K0' = min(K0, n_t − m), so the items' tiles are distinct by their coordinate); its elements
// come from source tiles i − δ − 1 and i − δ (δ = K0 − K0') at (x − o) mod tile, o = lo − tile·K0. Only the touched
// tiles move, and every other tile of the State table carries its value — exactly the seed's result.
absl::StatusOr<Composition> FlatSetRow(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                       const Target& target) {
  const proto::SetRowSpec& s = spec.set_row();
  const int64_t rows = s.rows();
  const int64_t cols = s.cols();
  const int64_t count = s.count();
  const int64_t tw = target.tile_cols();
  const int64_t n = rows * cols;
  const int64_t span = count * cols;
  const int64_t n_t = TilesOf(n, target);
  const int64_t src_t = TilesOf(span, target);
  const int64_t m = std::min(src_t + 1, n_t);
  // One item (and one table tile) per tile the write touches: checked before the tables are built.
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a row write of ", count, " rows of ", cols), m));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a row write of ", count, " rows of ", cols), CheckedMul(m, tw)));
  ASSIGN_OR_RETURN(Precision fp, ElemPrecision(target));  // the seed's FlatBuild::columns: a float section
  ASSIGN_OR_RETURN(Precision dt, RowWritePrecision(s.float_(), fp, ops[0].fill, ops[1].fill, target));
  ASSIGN_OR_RETURN(Precision acc, SectionAcc(dt, "a row write", target));
  // Every value the index arithmetic reaches: the run's ends (2n), the items' tiles past them, and a declared
  // position past the table, still held to be refused.
  const proto::Fill none;
  ASSIGN_OR_RETURN(Precision ix,
                   IndexType(target, std::max(2 * n + tw * (m + 1),
                                              IndexSpace(n + cols, cols, ops.size() > 2 ? ops[2].fill : none))));
  RETURN_IF_ERROR(RequireIndexArithmetic("a row index", target));
  Template t(target.tile_rows(), tw);
  ASSIGN_OR_RETURN(TensorInit t_init, InitOf(ops[0].fill, n));
  ASSIGN_OR_RETURN(TensorInit s_init, InitOf(ops[1].fill, span));
  const std::string tn = ops[0].name;
  const TensorId table = t.AddTensor(tn, TensorRole::kState, 1, n, dt, std::move(t_init));
  const TensorId src = t.AddTensor(ops[1].name, TensorRole::kInput, 1, span, dt, std::move(s_init));
  // The seed's flat write checks a literal as literal_row_offset(i, rows + 1 − count, cols) does.
  ASSIGN_OR_RETURN(TensorId first, FirstRow(t, s, ops, ix, kLiteralRowOutside));
  std::vector<int64_t> item_of(m);
  for (int64_t i = 0; i < m; ++i) item_of[i] = i;
  const TensorId t_items = TilePerValue(t, absl::StrCat(tn, "__block_item"), item_of, ix);
  std::vector<int64_t> iota(tw);
  for (int64_t x = 0; x < tw; ++x) iota[x] = x;
  const TensorId t_cols =
      t.AddTensor(absl::StrCat(tn, "__block_cols"), TensorRole::kParam, 1, tw, ix, TensorInit::Values(iota));
  const Body unit = Const(static_cast<double>(tw));

  // lo = (P − 1)·cols, P checked to start a block inside the table; K0 = ⌊lo/tile⌋, K0' and o.
  const auto [s_r, r] = CheckedFirstRow(t, first, rows - count + 1, ix);
  const BufferId lo = t.AddScratch("first_offset", 1, ix);
  const StageId s_lo =
      ScalarStage(t, "first_offset", {r}, {Fixed(0)}, Mul(Op(0), Const(static_cast<double>(cols))), lo);
  t.AddEdge(s_r, r, s_lo);
  const BufferId k0 = t.AddScratch("tile_row", 1, ix);
  const StageId s_k0 = ScalarStage(t, "tile_row", {lo}, {Fixed(0)}, FloorDiv(Op(0), unit), k0);
  t.AddEdge(s_lo, lo, s_k0);
  const BufferId k0s = t.AddScratch("block_start", 1, ix);
  const StageId s_k0s =
      ScalarStage(t, "block_start", {k0}, {Fixed(0)}, Min(Op(0), Const(static_cast<double>(n_t - m))), k0s);
  t.AddEdge(s_k0, k0, s_k0s);
  const BufferId o = t.AddScratch("block_offset", 1, ix);
  const StageId s_o =
      ScalarStage(t, "block_offset", {lo, k0}, {Fixed(0), Fixed(0)}, InUnit(Sub(Op(0), Mul(unit, Op(1))), tw), o);
  // The item's own number, and its membership thresholds lo_i = lo − tile·K0' − tile·i, hi_i = lo_i + span.
  const std::pair<StageId, BufferId> item = Lookup(t, "item", t_items, {{LoopVar::kItemX, 1}}, std::nullopt, 0, 0, ix);
  const BufferId it = item.second;
  const BufferId m_lo = t.AddScratch("member_lo", 1, ix);
  const StageId s_mlo = ScalarStage(t, "member_lo", {lo, k0s, it}, {Fixed(0), Fixed(0), Fixed(0)},
                                    Sub(Sub(Op(0), Mul(unit, Op(1))), Mul(unit, Op(2))), m_lo);
  t.AddEdge(s_k0s, k0s, s_mlo);
  t.AddEdge(item.first, it, s_mlo);
  const BufferId m_hi = t.AddScratch("member_hi", 1, ix);
  const StageId s_mhi =
      ScalarStage(t, "member_hi", {m_lo}, {Fixed(0)}, Add(Op(0), Const(static_cast<double>(span))), m_hi);
  t.AddEdge(s_mlo, m_lo, s_mhi);
  // The source tiles i − δ − 1 and i − δ, clamped into the source (a clamped tile only ever holds non-members).
  auto source_page = [&](const std::string& what, int64_t back) {
    const BufferId at = t.AddBuffer(absl::StrCat(what, "_tile"), 1, ix);
    Body delta = Sub(Op(1), Op(2));
    Body tile = Sub(Sub(Op(0), delta), Const(static_cast<double>(back)));
    const StageId s_at = ScalarStage(t, absl::StrCat(what, "_tile"), {it, k0, k0s}, {Fixed(0), Fixed(0), Fixed(0)},
                                     Min(Max(tile, Const(0.0)), Const(static_cast<double>(src_t - 1))), at);
    const BufferId page = t.AddBuffer(absl::StrCat("in_", what), 1, dt);
    const TileAddr origin{0, {}, IndirectTile{at, 1, 0, src_t - 1}};
    const StageId load = t.AddLoadPattern(absl::StrCat("load_", what), src, AccessPattern{origin, 1, 1, 1, 1}, page);
    t.AddEdge(s_at, at, load);
    return std::make_pair(load, page);
  };
  const auto [l_a, page_a] = source_page("source_a", 1);
  const auto [l_b, page_b] = source_page("source_b", 0);
  // The item's tile K0' + i, once per movement that addresses it.
  auto tile_at = [&](const std::string& what) {
    auto f = Fifo(t, absl::StrCat("start_", what), {s_k0s, k0s}, ix);
    return std::make_pair(TileAddr{0, {{LoopVar::kItemX, 1}}, IndirectTile{f.second, 1, 0, n_t - m}}, f);
  };
  const auto [old_at, f_old] = tile_at("gather");
  const auto [new_at, f_new] = tile_at("scatter");
  const BufferId old = t.AddBuffer("in_tile", 1, dt);
  const StageId l_old = t.AddLoadPattern(absl::StrCat("gather_", tn), table, AccessPattern{old_at, 1, 1, 1, 1}, old);
  t.AddEdge(f_old.first, f_old.second, l_old);
  // (x − o) mod tile for every element x of the tile.
  const BufferId cols_in = t.AddBuffer("in_block_cols", 1, ix);
  const StageId l_cols = t.AddLoadBlockAt("load_block_cols", t_cols, 0, {}, {}, cols_in);
  const BufferId positions = t.AddScratch("source_col", 1, ix);
  const StageId s_pos =
      SourcePositions(t, "source_col", FlatSpace(tw), cols_in, At(0), o, tw, LoopVar::kCol, IdentMap(tw), positions);
  t.AddEdge(l_cols, cols_in, s_pos);
  t.AddEdge(s_o, o, s_pos);
  const ElemAccess shifted = WithIndirect(Fixed(0), 3, 1, tw);
  const BufferId out = t.AddBuffer("tile", 1, dt);
  const StageId s_rw = t.AddGeneric("write_rows", FlatSpace(tw), {old, page_a, page_b, positions, o, m_lo, m_hi},
                                    {At(0), shifted, shifted, At(0), Fixed(0), Fixed(0), Fixed(0)}, IdentMap(tw),
                                    BlockSelect(LoopVar::kCol), out);
  t.AddEdge(l_old, old, s_rw);
  t.AddEdge(l_a, page_a, s_rw);
  t.AddEdge(l_b, page_b, s_rw);
  t.AddEdge(s_pos, positions, s_rw);
  t.AddEdge(s_mhi, m_hi, s_rw);
  const StageId st = t.AddStorePattern(absl::StrCat("scatter_", tn), table, AccessPattern{new_at, 1, 1, 1, 1}, out);
  t.AddEdge(s_rw, out, st);
  t.AddEdge(f_new.first, f_new.second, st);
  t.SetPlan(BlockPlan{.grid_x = m});
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a row write of ", m, " items"), m));
  return FinishSection(t, SetRowName(s, ""), ItemsPerTile(m), acc, MovementClaim("row write", s.float_(), dt), target);
}

}  // namespace

absl::StatusOr<Composition> FromSetRow(const proto::OpSpec& spec, const Target& target) {
  const proto::SetRowSpec& s = spec.set_row();
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, IndexedOperands(spec, "set_row", 2, s.index(), /*in_place=*/true));
  RETURN_IF_ERROR(NonNegative("set_row", "rows", s.rows()));
  RETURN_IF_ERROR(NonNegative("set_row", "cols", s.cols()));
  RETURN_IF_ERROR(NonNegative("set_row", "count", s.count()));
  RETURN_IF_ERROR(TensorSized("set_row", s.rows(), s.cols()));
  if (s.rows() == 0 || s.cols() == 0 || s.count() == 0 || s.count() > s.rows()) {
    return NotLowered("a row write into an empty table, or a block of rows taller than its table");
  }
  if (s.dense()) {
    return FitsSites(s.count() == 1 ? DenseSetRow(spec, ops, target) : DenseSetRows(spec, ops, target), "row write",
                     target);
  }
  if (s.cols() % target.tile_cols() == 0) return FitsSites(TileSetRow(spec, ops, target), "row write", target);
  return FitsSites(FlatSetRow(spec, ops, target), "row write", target);
}

}  // namespace spatial
