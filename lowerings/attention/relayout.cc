#include "lowerings/attention/relayout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<Composition> RelayoutDensePicksToRows(const OperandRef& from, const std::string& to, int64_t rows,
                                                     const std::vector<int64_t>& picks, int64_t cols, Precision dt,
                                                     const Target& target) {
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  if (cols < 1 || cols % tw != 0) return NotLowered("a relayout of dense rows that are not whole tiles");
  if (rows < 1 || picks.empty()) return NotLowered("a relayout of no rows");
  for (int64_t y : picks) {
    if (y < 0 || y >= rows) return NotLowered("a relayout picking a row outside its matrix");
  }
  const int64_t row_t = cols / tw;
  const int64_t blk = RowBlock(row_t, target);
  const int64_t w = blk * tw;
  const int64_t tiles_r = CeilDiv(rows, tr);
  // One item per block of each picked row, and two table tiles per picked row: checked before either is built.
  const int64_t picked = static_cast<int64_t>(picks.size());
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a relayout of ", picked, " rows of ", cols),
                                 CheckedMul(picked, row_t / blk)));
  RETURN_IF_ERROR(TableBudget(absl::StrCat("a relayout of ", picked, " rows"), CheckedMul(CheckedMul(picked, 2), tw)));
  ASSIGN_OR_RETURN(const Precision ix, target.index_precision_for(std::max(rows, tiles_r * row_t)));
  Template t(tr, tw);
  ASSIGN_OR_RETURN(TensorInit init, InitOf(from.fill, rows * cols));
  const TensorId src = t.AddTensor(from.name, TensorRole::kInput, rows, cols, dt, std::move(init));
  const int64_t flat_rows = static_cast<int64_t>(picks.size());
  const TensorId dst = t.AddTensor(to, TensorRole::kOutput, 1, flat_rows * cols, dt, TensorInit::Zero());
  // Two tiles per flat row, the value in element 0 of each: the dense TILE row holding the pick (the IndirectTile
  // adds tile_stride * v for the v it reads, so the table holds the tile row itself), then its row within that tile.
  std::vector<int64_t> at(static_cast<size_t>(2 * flat_rows * tw), 0);
  for (int64_t y = 0; y < flat_rows; ++y) {
    at[2 * y * tw] = picks[y] / tr;
    at[(2 * y + 1) * tw] = picks[y] % tr;
  }
  const TensorId table = t.AddTensor(absl::StrCat(to, "__row_at"), TensorRole::kParam, 1, 2 * flat_rows * tw, ix,
                                     TensorInit::Values(std::move(at)));
  const BufferId row_in = t.AddBufferDeep("in_row", 1, 1, ix);
  const BufferId in_tile = t.AddBufferDeep("in_tile_row", 1, 1, ix);
  const StageId l_row = t.AddLoadBlockAt("load_row", table, 0, {{LoopVar::kItemY, 2}}, {}, row_in);
  const StageId l_in = t.AddLoadBlockAt("load_in_tile_row", table, 1, {{LoopVar::kItemY, 2}}, {}, in_tile);
  const BufferId page = t.AddBuffer("in_tile_rows", blk, dt);
  // The index page has one reader, the gather: a FIFO the movement engine retires.
  const AccessPattern gather{TileAddr{0, {{LoopVar::kItemX, blk}}, IndirectTile{row_in, row_t, 0, tiles_r - 1}}, 1, blk,
                             1, row_t};
  const StageId l_page = t.AddLoadPattern("gather_tile_row", src, gather, page);
  t.AddEdge(l_row, row_in, l_page);
  const BufferId out = t.AddBuffer("out", blk, dt);
  // Element c of the row is plane row (pick mod tile), column c of the page: COL + w * v, v guarded to [0, tile).
  const ElemAccess lift = WithIndirect(PerColMap(), 1, w, tr);
  const StageId s = t.AddGeneric("lift_row", FlatSpace(w), {page, in_tile}, {lift, Fixed(0)}, IdentMap(w), Op(0), out);
  t.AddEdge(l_page, page, s);
  t.AddEdge(l_in, in_tile, s);
  const StageId st = t.AddStoreBlock("store_row", dst, 0, {{LoopVar::kItemY, row_t}, {LoopVar::kItemX, blk}},
                                     {.w = blk, .pitch = flat_rows * row_t}, out);
  t.AddEdge(s, out, st);
  std::vector<WorkItem> items;
  for (int64_t y = 0; y < flat_rows; ++y) {
    for (int64_t b = 0; b < row_t / blk; ++b) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = y, .x = b,
                               .out = TileRect{.col0_t = y * row_t + b * blk, .w_t = blk}});
    }
  }
  bool identity = flat_rows == rows;
  for (int64_t y = 0; identity && y < flat_rows; ++y) identity = picks[y] == y;
  const std::string name = identity ? absl::StrCat("relayout_rows_", rows, "x", cols)
                                    : absl::StrCat("relayout_rows_", flat_rows, "_of_", rows, "x", cols);
  // The grid counts the flat result's blocks: one tile row of every row's segments.
  t.SetPlan(BlockPlan{.per_site_n = blk, .grid_x = flat_rows * (row_t / blk), .osw = blk});
  return FinishSection(t, name, std::move(items), AccFor(dt), NumericsClaim::Exact(), target);
}

}  // namespace spatial
