#include "lowerings/gathers/gathers.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/row_blocks.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// A whole-tile table's element precision: the float datapath, or the index integer its fill needs.
absl::StatusOr<Precision> TileTablePrecision(bool is_float, const proto::Fill& fill, const Target& target) {
  if (is_float) return ElemPrecision(target);
  return IndexType(target, FillAbsBound(fill).value_or(0));
}

// A flat section (the seed's FlatBuild::new: the float datapath's section, fp32 accumulator) moving `dt` values:
// an integer table's gather runs on the integer datapath.
absl::Status FlatSectionFits(Precision dt, std::string_view what, const Target& target) {
  RETURN_IF_ERROR(RequireFp32Accumulator(what, target));
  if (!IsFloat(dt)) RETURN_IF_ERROR(RequireIndexArithmetic(what, target));
  return absl::OkStatus();
}

// The table loaded whole, one Generic gathering the row: at a constant offset for a literal row, through an
// IndirectTerm of extent rows·cols over the offset (index − 1)·cols for a named one.
absl::StatusOr<Composition> FlatRowGather(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                          const Target& target) {
  const proto::RowGatherSpec& g = spec.row_gather();
  const int64_t rows = g.rows();
  const int64_t cols = g.cols();
  const int64_t n = rows * cols;
  ASSIGN_OR_RETURN(FlatBuild b, FlatBuild::On(Datapath::kFloat, target));
  ASSIGN_OR_RETURN(Precision dt, TablePrecision(g.float_(), b.precision(), ops[0].fill, target));
  RETURN_IF_ERROR(FlatSectionFits(dt, "a row gather", target));
  ASSIGN_OR_RETURN(BufferId table, b.InputPaged(ops[0].name, n, ops[0].fill, dt, 2));
  const int64_t out_t = TilesOf(cols, target);
  const BufferId out_buf = b.t().AddBuffer("row", out_t, dt);
  const int64_t ow = b.t().PageWidth(out_t);
  std::vector<StageId> chain;
  if (g.index().kind_case() == proto::RowIndex::kLiteral) {
    ASSIGN_OR_RETURN(int64_t lo, LiteralRowOffset(g.index().literal(), rows, cols));
    chain.push_back(b.Compute("gather_row", FlatSpace(cols), {Slot{table, At(lo)}}, IdentMap(ow), Op(0), out_buf));
  } else {
    ASSIGN_OR_RETURN(Precision ix, IndexType(target, IndexSpace(n, cols, ops[1].fill)));
    RETURN_IF_ERROR(RequireIndexArithmetic("a row index", target));
    ASSIGN_OR_RETURN(BufferId index, b.InputPaged(ops[1].name, 1, ops[1].fill, ix, 2));
    IndexChain lo = RowOffsetStages(b, index, rows, cols, ix);
    chain = lo.stages;
    const ElemAccess gather = WithIndirect(At(0), 1, 1, n);
    chain.push_back(b.Compute("gather_row", FlatSpace(cols), {Slot{table, gather}, Slot{lo.out, Fixed(0)}},
                              IdentMap(ow), Op(0), out_buf));
  }
  return FinishFlatAs(b, spec.out(), cols, chain, out_buf, absl::StrCat("row_gather_", rows, "x", cols),
                      MovementClaim("row gather", g.float_(), dt), dt, target);
}

// x = row i of T for a table whose rows are WHOLE TILES — the real-width embedding lookup. Each work item loads its
// `blk` tiles of the row (an IndirectTile for a named row) and passes them out, so exactly the row's tiles move and a
// table far wider than a site is never brought on chip.
absl::StatusOr<Composition> TileRowGather(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                          const Target& target) {
  const proto::RowGatherSpec& g = spec.row_gather();
  const int64_t rows = g.rows();
  const int64_t cols = g.cols();
  const int64_t row_t = cols / target.tile_cols();
  const int64_t blk = RowBlock(row_t, target);
  const int64_t n = rows * cols;
  ASSIGN_OR_RETURN(Precision dt, TileTablePrecision(g.float_(), ops[0].fill, target));
  ASSIGN_OR_RETURN(Precision acc, SectionAcc(dt, "a row gather", target));
  Template t(target.tile_rows(), target.tile_cols());
  ASSIGN_OR_RETURN(TensorInit init, InitOf(ops[0].fill, n));
  const TensorId table = t.AddTensor(ops[0].name, TensorRole::kInput, 1, n, dt, std::move(init));
  const OperandRef& index_operand = ops.size() > 1 ? ops[1] : ops[0];
  ASSIGN_OR_RETURN(RowAddress at, RowBlockAddress(t, g.index(), index_operand, rows, row_t, blk, target));
  const TensorId x = t.AddTensor(spec.out(), TensorRole::kOutput, 1, cols, dt, TensorInit::Zero());
  const BufferId row = t.AddBuffer("in_row", blk, dt);
  const StageId load = t.AddLoadPattern("gather_row", table, AccessPattern{at.addr, 1, blk, 1, row_t}, row);
  if (at.feed) t.AddEdge(at.feed->first, at.feed->second, load);
  auto [copy, out] = CopyPage(t, row, blk, dt);
  t.AddEdge(load, row, copy);
  const StageId st = t.AddStore(absl::StrCat("store_", spec.out()), x, {{LoopVar::kItemX, blk}}, blk, out);
  t.AddEdge(copy, out, st);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a row gather of rows of ", cols), row_t / blk));
  return FinishSection(t, absl::StrCat("row_gather_", rows, "x", cols), RowItems(row_t, blk), acc,
                       MovementClaim("row gather", g.float_(), dt), target);
}

// x = row i of T for a DENSE table — a stacked batch a matmul wrote, rows x cols with a tile row holding `tile` rows.
// Each work item loads its `blk` tiles of tile row ⌊r / tile⌋ and lifts in-tile row r mod tile into row 0 of the
// result's page: x(c) = T(r mod tile, c), the in-tile row a constant offset for a literal row and an IndirectTerm
// one page row wide for a named one.
absl::StatusOr<Composition> DenseRowGather(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                           const Target& target) {
  const proto::RowGatherSpec& g = spec.row_gather();
  const int64_t rows = g.rows();
  const int64_t cols = g.cols();
  const int64_t tr = target.tile_rows();
  const int64_t row_t = CeilDiv(cols, target.tile_cols());
  const int64_t blk = RowBlock(row_t, target);
  ASSIGN_OR_RETURN(Precision dt, TileTablePrecision(g.float_(), ops[0].fill, target));
  ASSIGN_OR_RETURN(Precision acc, SectionAcc(dt, "a row gather", target));
  Template t(tr, target.tile_cols());
  ASSIGN_OR_RETURN(TensorInit init, InitOf(ops[0].fill, rows * cols));
  const TensorId table = t.AddTensor(ops[0].name, TensorRole::kInput, rows, cols, dt, std::move(init));
  const std::vector<Term> steps{{LoopVar::kItemX, blk}};
  const OperandRef& index_operand = ops.size() > 1 ? ops[1] : ops[0];
  ASSIGN_OR_RETURN(DenseRowAt at, DenseRow(t, g.index(), index_operand, rows, row_t, steps, 1, target));
  const TensorId x = t.AddTensor(spec.out(), TensorRole::kOutput, 1, cols, dt, TensorInit::Zero());
  const BufferId tile_row = t.AddBuffer("in_tile_row", blk, dt);
  const RowAddress& addr = at.tile_rows[0];
  const StageId load = t.AddLoadPattern("gather_tile_row", table, AccessPattern{addr.addr, 1, blk, 1, row_t}, tile_row);
  if (addr.feed) t.AddEdge(addr.feed->first, addr.feed->second, load);
  const int64_t w = t.PageWidth(blk);
  std::vector<BufferId> ins{tile_row};
  std::vector<ElemAccess> maps;
  if (at.in_tile.fixed) {
    maps.push_back(At(*at.in_tile.fixed * w));  // row y of the page, walked along its columns (the seed's at_row)
  } else {
    // The in-tile row is < tile by construction: its modulus is the tile's rows (the seed's tile·w admits rows
    // past the page's and proves nothing; the flash fold's identical lift uses tile).
    maps.push_back(WithIndirect(At(0), 1, w, tr));
    maps.push_back(Fixed(0));
    ins.push_back(at.in_tile.row);
  }
  const BufferId out = t.AddBuffer("row", blk, dt);
  const StageId lift = t.AddGeneric("lift_row", FlatSpace(w), ins, maps, IdentMap(w), Op(0), out);
  t.AddEdge(load, tile_row, lift);
  if (!at.in_tile.fixed) t.AddEdge(at.in_tile.stage, at.in_tile.row, lift);
  const StageId st = t.AddStore(absl::StrCat("store_", spec.out()), x, steps, blk, out);
  t.AddEdge(lift, out, st);
  t.SetPlan(TileRowPlan(row_t, blk));
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a dense row gather of rows of ", cols), row_t / blk));
  return FinishSection(t, absl::StrCat("row_gather_", rows, "x", cols, "_dense"), RowItems(row_t, blk), acc,
                       MovementClaim("row gather", g.float_(), dt), target);
}

// X = rows I of T for a table whose rows are WHOLE TILES: item (k, b) moves row I[k]'s b-th blk-tile block into row k
// of X. It reads its own index — element k of I, k taken from a compile-time table holding it in tile k — checks it
// against the table's rows and loads the row's block through an IndirectTile, so exactly the gathered rows' tiles move.
absl::StatusOr<Composition> TileRowsGather(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                           const Target& target) {
  const proto::RowsGatherSpec& g = spec.rows_gather();
  const int64_t rows = g.rows();
  const int64_t cols = g.cols();
  const int64_t n = g.count();
  const int64_t tw = target.tile_cols();
  const int64_t row_t = cols / tw;
  const int64_t blk = RowBlock(row_t, target);
  const int64_t tn = rows * cols;
  ASSIGN_OR_RETURN(Precision dt, TileTablePrecision(g.float_(), ops[0].fill, target));
  ASSIGN_OR_RETURN(Precision acc, SectionAcc(dt, "a rows gather", target));
  // n x row_t / blk items and a table of one tile per gathered row: checked before either is built.
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a rows gather of ", n, " rows of ", cols), CheckedMul(n, row_t / blk)));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a rows gather of ", n, " rows of ", cols), CheckedMul(n, tw)));
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, IndexSpace(std::max(rows, n), 1, ops[1].fill)));
  RETURN_IF_ERROR(RequireIndexArithmetic("a row index", target));
  Template t(target.tile_rows(), tw);
  ASSIGN_OR_RETURN(TensorInit t_init, InitOf(ops[0].fill, tn));
  ASSIGN_OR_RETURN(TensorInit i_init, InitOf(ops[1].fill, n));
  const TensorId table = t.AddTensor(ops[0].name, TensorRole::kInput, 1, tn, dt, std::move(t_init));
  const TensorId indices = t.AddTensor(ops[1].name, TensorRole::kInput, 1, n, ix, std::move(i_init));
  // Item k's own number, in tile k of a compile-time table: what makes element k of I an item's own read.
  std::vector<int64_t> item_values(n * tw, 0);
  for (int64_t k = 0; k < n; ++k) item_values[k * tw] = k;
  const TensorId item_of = t.AddTensor(absl::StrCat(spec.out(), "__rows_item"), TensorRole::kParam, 1, n * tw, ix,
                                       TensorInit::Values(std::move(item_values)));
  const int64_t i_t = TilesOf(n, target);
  const BufferId iin = t.AddBuffer("in_indices", i_t, ix);
  const StageId li = t.AddLoad("load_indices", indices, {}, i_t, iin);
  const BufferId kin = t.AddBuffer("in_item", 1, ix);
  const StageId lk = t.AddLoadBlockAt("load_item", item_of, 0, {{LoopVar::kItemY, 1}}, {}, kin);
  // I[k]: element k of the indices. Copied out before any arithmetic, so the guard that follows reads it as a value
  // of its own (a guard checks the element its slot reads; the pick reads a different one).
  const BufferId picked = t.AddScratch("index_pick", 1, ix);
  const StageId s_pick =
      ScalarStage(t, "index_pick", {iin, kin}, {WithIndirect(Fixed(0), 1, 1, n), Fixed(0)}, Op(0), picked);
  t.AddEdge(li, iin, s_pick);
  t.AddEdge(lk, kin, s_pick);
  // I[k] − 1, held to the table first; then checked against the table's rows into the FIFO the gather retires.
  const BufferId biased = t.AddScratch("index_biased", 1, ix);
  const StageId s_biased = BiasedIndex(t, "index_biased", picked, rows, biased);
  t.AddEdge(s_pick, picked, s_biased);
  const BufferId row0 = t.AddBuffer("row_index", 1, ix);
  const StageId s_row = GuardedCopy(t, "row_index", biased, rows, 0.0, row0);
  t.AddEdge(s_biased, biased, s_row);
  const TileAddr origin{0, {{LoopVar::kItemX, blk}}, IndirectTile{row0, row_t, 0, rows - 1}};
  const BufferId row = t.AddBuffer("in_row", blk, dt);
  const StageId load = t.AddLoadPattern("gather_row", table, AccessPattern{origin, 1, blk, 1, row_t}, row);
  t.AddEdge(s_row, row0, load);
  auto [copy, out] = CopyPage(t, row, blk, dt);
  t.AddEdge(load, row, copy);
  const TensorId x = t.AddTensor(spec.out(), TensorRole::kOutput, 1, n * cols, dt, TensorInit::Zero());
  const StageId st =
      t.AddStore(absl::StrCat("store_", spec.out()), x, {{LoopVar::kItemY, row_t}, {LoopVar::kItemX, blk}}, blk, out);
  t.AddEdge(copy, out, st);
  std::vector<WorkItem> items;
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t b = 0; b < row_t / blk; ++b) {
      const int64_t id = static_cast<int64_t>(items.size());
      items.push_back(WorkItem{.id = id, .y = k, .x = b, .out = TileRect{.col0_t = k * row_t + b * blk, .w_t = blk}});
    }
  }
  return FinishSection(t, absl::StrCat("rows_gather_", n, "x", rows, "x", cols), std::move(items), acc,
                       MovementClaim("rows gather", g.float_(), dt), target);
}

// X = rows I of T for rows narrower than a tile: one item gathers the block from the table held whole — one band of
// the output per row, each reading the table at its row's offset (I[k] − 1)·cols.
absl::StatusOr<Composition> FlatRowsGather(const proto::OpSpec& spec, const std::vector<OperandRef>& ops,
                                           const Target& target) {
  const proto::RowsGatherSpec& g = spec.rows_gather();
  const int64_t rows = g.rows();
  const int64_t cols = g.cols();
  const int64_t n = g.count();
  const int64_t tn = rows * cols;
  ASSIGN_OR_RETURN(FlatBuild b, FlatBuild::On(Datapath::kFloat, target));
  ASSIGN_OR_RETURN(Precision dt, TablePrecision(g.float_(), b.precision(), ops[0].fill, target));
  RETURN_IF_ERROR(FlatSectionFits(dt, "a rows gather", target));
  // One band (two input slots) per gathered row, unrolled into one Generic.
  RETURN_IF_ERROR(UnrollBudget(absl::StrCat("a flat rows gather of ", n, " rows"), "bands", n));
  ASSIGN_OR_RETURN(BufferId table, b.InputPaged(ops[0].name, tn, ops[0].fill, dt, 2));
  ASSIGN_OR_RETURN(Precision ix, IndexType(target, IndexSpace(tn, cols, ops[1].fill)));
  RETURN_IF_ERROR(RequireIndexArithmetic("a row index", target));
  ASSIGN_OR_RETURN(BufferId idx, b.InputPaged(ops[1].name, n, ops[1].fill, ix, 2));
  const int64_t i_t = TilesOf(n, target);
  const int64_t w_n = b.t().PageWidth(i_t);
  // Every index held to the table, less one; then checked against its rows; then scaled to an offset.
  const BufferId biased = b.t().AddScratch("rows_biased", i_t, ix);
  const StageId s0 = b.Compute("rows_biased", FlatSpace(n), {Slot{idx, At(0)}, Slot{idx, GuardOf(0, At(0), rows + 1)}},
                               IdentMap(w_n), Sub(Op(1), Const(1.0)), biased);
  const BufferId guarded = b.t().AddScratch("rows_guarded", i_t, ix);
  const StageId s1 =
      b.Compute("rows_guarded", FlatSpace(n), {Slot{biased, At(0)}, Slot{biased, GuardOf(0, At(0), rows)}},
                IdentMap(w_n), Op(1), guarded);
  const BufferId lo = b.t().AddScratch("rows_offset", i_t, ix);
  const StageId s2 = b.Compute("rows_offset", FlatSpace(n), {Slot{guarded, At(0)}}, IdentMap(w_n),
                               Mul(Op(0), Const(static_cast<double>(cols))), lo);
  // Band k — the output's columns [k·cols, (k + 1)·cols) — reads the table at c − k·cols + (I[k] − 1)·cols.
  std::vector<Slot> slots;
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t k = 0; k < n; ++k) {
    slots.push_back(Slot{lo, Fixed(k)});
    const int offset = static_cast<int>(slots.size()) - 1;
    slots.push_back(Slot{table, WithIndirect(At(-k * cols), offset, 1, tn)});
    bands.push_back({(k + 1) * cols, Op(static_cast<int>(slots.size()) - 1)});
  }
  const int64_t out_t = TilesOf(n * cols, target);
  const BufferId out_buf = b.t().AddBuffer("rows", out_t, dt);
  const StageId s3 = b.Compute("gather_rows", FlatSpace(n * cols), std::move(slots), IdentMap(b.t().PageWidth(out_t)),
                               Banded(bands), out_buf);
  return FinishFlatAs(b, spec.out(), n * cols, {s0, s1, s2, s3}, out_buf,
                      absl::StrCat("rows_gather_", n, "x", rows, "x", cols),
                      MovementClaim("rows gather", g.float_(), dt), dt, target);
}

}  // namespace

absl::StatusOr<Composition> FromRowGather(const proto::OpSpec& spec, const Target& target) {
  const proto::RowGatherSpec& g = spec.row_gather();
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, IndexedOperands(spec, "row_gather", 1, g.index()));
  RETURN_IF_ERROR(NonNegative("row_gather", "rows", g.rows()));
  RETURN_IF_ERROR(NonNegative("row_gather", "cols", g.cols()));
  RETURN_IF_ERROR(TensorSized("row_gather", g.rows(), g.cols()));
  if (g.rows() == 0 || g.cols() == 0) return NotLowered("a row gather from an empty table");
  if (g.dense()) return FitsSites(DenseRowGather(spec, ops, target), "row gather", target);
  if (g.cols() % target.tile_cols() == 0) return FitsSites(TileRowGather(spec, ops, target), "row gather", target);
  return FitsSites(FlatRowGather(spec, ops, target), "row gather", target);
}

absl::StatusOr<Composition> FromRowsGather(const proto::OpSpec& spec, const Target& target) {
  const proto::RowsGatherSpec& g = spec.rows_gather();
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "rows_gather", 2));
  RETURN_IF_ERROR(NonNegative("rows_gather", "rows", g.rows()));
  RETURN_IF_ERROR(NonNegative("rows_gather", "cols", g.cols()));
  RETURN_IF_ERROR(NonNegative("rows_gather", "count", g.count()));
  RETURN_IF_ERROR(TensorSized("rows_gather", g.rows(), g.cols()));
  RETURN_IF_ERROR(TensorSized("rows_gather", g.count(), g.cols()));
  if (g.rows() == 0 || g.cols() == 0 || g.count() == 0) {
    return NotLowered("a rows gather from an empty table, or of no indices");
  }
  if (g.dense()) return NotLowered("a rows gather from a table laid out as a matrix");
  if (g.cols() % target.tile_cols() == 0) return FitsSites(TileRowsGather(spec, ops, target), "rows gather", target);
  const int64_t budget = RowBlockTiles(target);
  if (TilesOf(g.rows() * g.cols(), target) > budget || TilesOf(g.count() * g.cols(), target) > budget) {
    return NotLowered(
        "a rows gather of rows narrower than a tile holds its table and its block whole, and this one is wider than "
        "a site's page");
  }
  return FitsSites(FlatRowsGather(spec, ops, target), "rows gather", target);
}

}  // namespace spatial
