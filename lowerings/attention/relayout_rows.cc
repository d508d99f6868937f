#include "lowerings/attention/relayout_rows.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/attention/flash.h"
#include "lowerings/attention/relayout.h"
#include "lowerings/toolkit/index.h"
#include "lowerings/toolkit/row_blocks.h"
#include "lowerings/toolkit/size_budget.h"
#include "lowerings/toolkit/tables_rows_common.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// One item per blk-tile block of each of tiles_r dense tile rows, the first at tile row r0.
std::vector<WorkItem> RelayoutItems(int64_t tiles_r, int64_t row_t, int64_t blk, int64_t r0) {
  std::vector<WorkItem> items;
  for (int64_t r = 0; r < tiles_r; ++r) {
    for (int64_t b = 0; b < row_t / blk; ++b) {
      items.push_back(WorkItem{.id = static_cast<int64_t>(items.size()), .y = r, .x = b,
                               .out = TileRect{.row0_t = r0 + r, .col0_t = b * blk, .w_t = blk}});
    }
  }
  return items;
}

// The plan of a relayout: tiles_r tile rows of row_t / blk items; a part's grid counts its items.
BlockPlan RelayoutPlan(int64_t tiles_r, int64_t row_t, int64_t blk, bool part) {
  BlockPlan plan = TileRowPlan(row_t, blk);
  plan.grid_y = part ? 1 : tiles_r;
  plan.grid_x = part ? tiles_r * (row_t / blk) : row_t / blk;
  return plan;
}

// x below `bound` on `axis`, zero past it.
Body Below(LoopVar axis, int64_t bound, Body x) { return Select(Pred::Lt(axis, bound), std::move(x), Const(0.0)); }

struct Declared {
  TensorId src = 0;
  TensorId dst = 0;
};

absl::StatusOr<Declared> Declare(Template& t, const OperandRef& from, const std::string& to, int64_t rows,
                                 int64_t cols, Precision dt, bool part) {
  ASSIGN_OR_RETURN(TensorInit init, InitOf(from.fill, rows * cols));
  Declared d;
  d.src = t.AddTensor(from.name, TensorRole::kInput, 1, rows * cols, dt, std::move(init));
  // ★ A section that writes part of a tensor declares it updated in part: State.
  d.dst = t.AddTensor(to, part ? TensorRole::kState : TensorRole::kOutput, rows, cols, dt, TensorInit::Zero());
  return d;
}

// Rows first .. first + n - 1 of whole-tile rows (a number of whole tile rows, or the last tile row's rest), blk tiles
// an item.
absl::StatusOr<Composition> TiledSection(const OperandRef& from, const std::string& to, int64_t rows, int64_t cols,
                                         Precision dt, Precision acc, int64_t first, int64_t n, bool part,
                                         int64_t blk, const Target& target) {
  const int64_t tr = target.tile_rows();
  const int64_t row_t = cols / target.tile_cols();
  const int64_t h = std::min(n, tr);
  const int64_t tiles_r = CeilDiv(n, tr);
  RETURN_IF_ERROR(
      WorkItemBudget(absl::StrCat("a relayout of ", n, " rows of ", cols), CheckedMul(tiles_r, row_t / blk)));
  const int64_t r0 = first / tr;
  Template t(tr, target.tile_cols());
  ASSIGN_OR_RETURN(const Declared d, Declare(t, from, to, rows, cols, dt, part));
  const int64_t w = t.PageWidth(blk);
  const BufferId in = t.AddBuffer("in_rows", h * blk, dt);
  const BufferId out = t.AddBuffer("out", blk, dt);
  // The h flat rows' blk-tile segments, row_t tiles apart, side by side in one page.
  const StageId load = t.AddLoadBlockAt("load_rows", d.src, first * row_t,
                                        {{LoopVar::kItemY, tr * row_t}, {LoopVar::kItemX, blk}}, {.h = h, .w = blk,
                                        .pitch = row_t}, in);
  const StageId s = t.AddGeneric("relayout", TileSpace(tr, w), {in}, {IdentMap(w)}, IdentMap(w),
                                 Below(LoopVar::kRow, h, Op(0)), out);
  const StageId st = t.AddStoreBlock("store_dense", d.dst, r0 * row_t,
                                     {{LoopVar::kItemY, row_t}, {LoopVar::kItemX, blk}}, {.w = blk,
                                     .pitch = row_t}, out);
  t.AddEdge(load, in, s);
  t.AddEdge(s, out, st);
  t.SetPlan(RelayoutPlan(tiles_r, row_t, blk, part));
  return FinishSection(t, absl::StrCat("relayout_dense_", rows, "x", cols, "_rows", first),
                       RelayoutItems(tiles_r, row_t, blk, r0), acc, NumericsClaim::Exact(), target);
}

// The widest block of columns the site holds: built and measured, so the sizing cannot disagree with the section it
// sizes.
absl::StatusOr<Composition> RowsSection(const OperandRef& from, const std::string& to, int64_t rows, int64_t cols,
                                        Precision dt, Precision acc, int64_t first, int64_t n, bool part,
                                        const Target& target) {
  const int64_t row_t = cols / target.tile_cols();
  for (int64_t blk = RowBlock(row_t, target); blk >= 1; --blk) {
    if (row_t % blk != 0) continue;
    absl::StatusOr<Composition> c = TiledSection(from, to, rows, cols, dt, acc, first, n, part, blk, target);
    if (c.ok() && SiteFootprint(c->sections[0], target) <= target.max_local_mem_bytes()) return c;
  }
  return NotLowered("a relayout of one tile row of flat rows does not fit a site");
}

// Rows narrower than a tile: a dense tile row's tile rows are ONE contiguous run of tile*cols flat elements, each
// tile row an item that loads its run as one page and reads out(y, c) = in[y*cols + c].
absl::StatusOr<Composition> NarrowSection(const OperandRef& from, const std::string& to, int64_t rows, int64_t cols,
                                          Precision dt, Precision acc, int64_t first, int64_t n, bool part,
                                          const Target& target) {
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const int64_t row_t = CeilDiv(cols, tw);
  const int64_t run_t = CeilDiv(tr * cols, tw);
  const int64_t h = std::min(n, tr);
  const int64_t tiles_r = CeilDiv(n, tr);
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a relayout of ", n, " rows of ", cols), tiles_r));
  const int64_t r0 = first / tr;
  const int64_t n_t = TilesOf(h * cols, target);
  Template t(tr, tw);
  ASSIGN_OR_RETURN(const Declared d, Declare(t, from, to, rows, cols, dt, part));
  const BufferId in = t.AddBuffer("in_rows", n_t, dt);
  const BufferId out = t.AddBuffer("out", row_t, dt);
  const StageId load = t.AddLoadBlockAt("load_rows", d.src, r0 * run_t, {{LoopVar::kItemY, run_t}},
                                        {.w = n_t, .pitch = n_t}, in);
  const int64_t w = t.PageWidth(row_t);
  const StageId s = t.AddGeneric("relayout", TileSpace(tr, w), {in}, {Map2(0, cols, 1)}, IdentMap(w),
                                 Below(LoopVar::kRow, h, Below(LoopVar::kCol, cols, Op(0))), out);
  const StageId st = t.AddStoreBlock("store_dense", d.dst, r0 * row_t, {{LoopVar::kItemY, row_t}},
                                     {.w = row_t, .pitch = row_t}, out);
  t.AddEdge(load, in, s);
  t.AddEdge(s, out, st);
  t.SetPlan(RelayoutPlan(tiles_r, row_t, row_t, part));
  return FinishSection(t, absl::StrCat("relayout_dense_", rows, "x", cols, "_rows", first),
                       RelayoutItems(tiles_r, row_t, row_t, r0), acc, NumericsClaim::Exact(), target);
}

}  // namespace

absl::StatusOr<Composition> RelayoutRowsToDense(const OperandRef& from, const std::string& to, int64_t rows,
                                                int64_t cols, Precision dt, const Target& target) {
  if (rows < 1 || cols < 1) return NotLowered("a relayout of no rows");
  ASSIGN_OR_RETURN(const Precision acc, SectionAcc(dt, "a relayout", target));
  const int64_t tr = target.tile_rows();
  const int64_t tw = target.tile_cols();
  const bool tiled = cols % tw == 0;
  if (!tiled) {
    const int64_t page_t = rows <= tr ? TilesOf(rows * cols, target) : CeilDiv(tr * cols, tw);
    if ((rows > tr && (tr * cols) % tw != 0) || page_t > RowBlockTiles(target)) {
      return NotLowered(
          "a block of rows whose relayout into a matrix is neither whole tiles across nor a tile row of narrow rows "
          "one page holds");
    }
  }
  auto section = [&](int64_t first, int64_t n, bool part) {
    return tiled ? RowsSection(from, to, rows, cols, dt, acc, first, n, part, target)
                 : NarrowSection(from, to, rows, cols, dt, acc, first, n, part, target);
  };
  // The whole tile rows, then the last tile row's rest.
  const int64_t whole = rows <= tr ? rows : rows - rows % tr;
  std::vector<Composition> parts;
  if (whole == rows) {
    ASSIGN_OR_RETURN(Composition c, section(0, rows, false));
    parts.push_back(std::move(c));
  } else {
    ASSIGN_OR_RETURN(Composition a, section(0, whole, true));
    ASSIGN_OR_RETURN(Composition b, section(whole, rows - whole, true));
    parts.push_back(std::move(a));
    parts.push_back(std::move(b));
  }
  return ComposeSections(absl::StrCat("relayout_dense_", rows, "x", cols), std::move(parts), target);
}

absl::StatusOr<Composition> RelayoutDenseToRows(const OperandRef& from, const std::string& to, int64_t rows,
                                                int64_t cols, Precision dt, const Target& target) {
  if (cols % target.tile_cols() != 0) return RelayoutSmallDenseToRows(from, to, rows, cols, dt, target);
  RETURN_IF_ERROR(SectionAcc(dt, "a relayout", target).status());
  // One pick (and at least one item) per row: checked before the picks are built.
  RETURN_IF_ERROR(WorkItemBudget(absl::StrCat("a relayout of ", rows, " rows of ", cols), rows));
  std::vector<int64_t> picks(static_cast<size_t>(std::max<int64_t>(rows, 0)));
  for (int64_t y = 0; y < rows; ++y) picks[y] = y;
  return RelayoutDensePicksToRows(from, to, rows, picks, cols, dt, target);
}

absl::StatusOr<Composition> RelayoutSmallDenseToRows(const OperandRef& from, const std::string& to, int64_t rows,
                                                     int64_t cols, Precision dt, const Target& target) {
  if (rows < 1 || cols < 1) return NotLowered("a relayout of no rows");
  const int64_t row_t = CeilDiv(cols, target.tile_cols());
  const int64_t n_t = TilesOf(rows * cols, target);
  const int64_t budget = RowBlockTiles(target);
  if (rows > target.tile_rows() || row_t > budget || n_t > budget) {
    return NotLowered("a matrix whose relayout into flat rows is neither whole tiles across nor one small tile row");
  }
  ASSIGN_OR_RETURN(const Precision acc, SectionAcc(dt, "a relayout", target));
  Template t(target.tile_rows(), target.tile_cols());
  ASSIGN_OR_RETURN(TensorInit init, InitOf(from.fill, rows * cols));
  const TensorId src = t.AddTensor(from.name, TensorRole::kInput, rows, cols, dt, std::move(init));
  const TensorId dst = t.AddTensor(to, TensorRole::kOutput, 1, rows * cols, dt, TensorInit::Zero());
  const BufferId in = t.AddBuffer("in_dense", row_t, dt);
  const BufferId out = t.AddBuffer("out", n_t, dt);
  const StageId load = t.AddLoadBlockAt("load_dense", src, 0, {}, {.w = row_t, .pitch = row_t}, in);
  const int64_t w = t.PageWidth(row_t);
  // Flat element C = y*cols + c of row y's band is plane offset C + y*(W - cols) = y*W + c: one slot per row.
  std::vector<BufferId> ins;
  std::vector<ElemAccess> maps;
  std::vector<std::pair<int64_t, Body>> bands;
  for (int64_t y = 0; y < rows; ++y) {
    ins.push_back(in);
    maps.push_back(At(y * (w - cols)));
    bands.push_back({(y + 1) * cols, Op(static_cast<int>(y))});
  }
  const StageId s = t.AddGeneric("relayout", FlatSpace(rows * cols), std::move(ins), std::move(maps),
                                 IdentMap(t.PageWidth(n_t)), Banded(bands), out);
  const StageId st = t.AddStoreBlock("store_rows", dst, 0, {}, {.w = n_t, .pitch = n_t}, out);
  t.AddEdge(load, in, s);
  t.AddEdge(s, out, st);
  BlockPlan plan = TileRowPlan(n_t, n_t);
  plan.grid_y = plan.grid_x = 1;
  t.SetPlan(plan);
  return FinishSection(t, absl::StrCat("relayout_rows_", rows, "x", cols), {WorkItem{.id = 0, .y = 0, .x = 0,
                                                                                     .out = TileRect{.w_t = n_t}}},
                       acc, NumericsClaim::Exact(), target);
}

}  // namespace spatial
