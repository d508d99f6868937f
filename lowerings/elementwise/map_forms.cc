#include "lowerings/elementwise/map_forms.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lowerings/toolkit/flat_build.h"
#include "lowerings/toolkit/size_budget.h"
#include "spatial/builder.h"
#include "spatial/maps.h"
#include "spatial/status_macros.h"

namespace spatial {
namespace {

// One whole-row item: every operand's row loaded once (two pages), one stage over the row.
absl::StatusOr<Composition> FlatMap(const std::string& name, const std::string& kind, Precision p, Precision acc,
                                    const Body& body, const std::vector<MapOperand>& xs, const std::string& out,
                                    int64_t n, const Target& target) {
  FlatBuild b = FlatBuild::At(p, target);
  b.SetAcc(acc);
  std::vector<Slot> slots;
  for (const MapOperand& x : xs) {
    ASSIGN_OR_RETURN(BufferId in, b.InputPaged(x.ref.name, x.scalar ? 1 : n, x.ref.fill, x.in, 2));
    slots.push_back(Slot{in, x.scalar ? ConstMap() : At(0)});
  }
  const int64_t cols_t = TilesOf(n, target);
  BufferId out_buf = b.t().AddBuffer("out", cols_t, p);
  const int64_t w = b.t().PageWidth(cols_t);
  StageId s = b.Compute(kind, FlatSpace(n), std::move(slots), IdentMap(w), body, out_buf);
  return b.Finish(out, n, {s}, out_buf, absl::StrCat(name, "_", n), ClaimOf(kind, body, p));
}

// ★ A POINTWISE MAP HAS NO CROSS-ELEMENT DEPENDENCE, so a row wider than a site holds is simply work: one item per
// tile, a one-tile page, and the row streams. The rule is about the row, not the op: one item while the row fits
// the budget (place clones the program per site, so splitting a narrow row only multiplies stages).
//
// A MATRIX keeps its rows x cols, and every tile of the tile grid is one item mapped over its full tile page — the
// tiling a matmul reads the same tensor in, so the two compose without a relayout. ★ A BROADCAST IS A MISSING TERM:
// a broadcast operand's page is its tile of the item's columns, read down every row.
absl::StatusOr<Composition> PerTileMap(const std::string& name, const std::string& kind, Precision p, Precision acc,
                                       const Body& body, const std::vector<MapOperand>& xs, const std::string& out,
                                       int64_t rows, int64_t n, const Target& target) {
  const bool matrix = rows > 1;
  const int64_t tr = target.tile_rows(), tw = target.tile_cols();
  const int64_t rows_t = CeilDiv(rows, tr), cols_t = CeilDiv(n, tw);
  int64_t elems = n;
  if (matrix) {
    ASSIGN_OR_RETURN(elems, CheckedElements(absl::StrCat(kind, " shape"), rows, n));
    RETURN_IF_ERROR(WorkItemBudget(absl::StrCat(kind, " of ", rows, " x ", n), CheckedMul(rows_t, cols_t)));
  } else {
    RETURN_IF_ERROR(WorkItemBudget(absl::StrCat(kind, " n = ", n), cols_t));
  }
  Template t(tr, tw);
  std::vector<TensorId> ins;
  for (const MapOperand& x : xs) {
    const bool one_row = !matrix || x.row_broadcast;
    const int64_t cols = x.scalar ? 1 : n;
    ASSIGN_OR_RETURN(TensorInit init, InitOf(x.ref.fill, x.scalar ? 1 : one_row ? n : elems));
    ins.push_back(t.AddTensor(x.ref.name, TensorRole::kInput, one_row || x.scalar ? 1 : rows, cols, x.in,
                              std::move(init)));
  }
  TensorId yt = t.AddTensor(out, TensorRole::kOutput, matrix ? rows : 1, n, p, TensorInit::Zero());
  std::vector<BufferId> bufs;
  for (const MapOperand& x : xs) bufs.push_back(t.AddBuffer(absl::StrCat("in_", x.label), 1, x.in));
  BufferId out_buf = t.AddBuffer("out", 1, p);
  const std::vector<Term> steps = matrix ? TileGridSteps(cols_t) : std::vector<Term>{{LoopVar::kItemX, 1}};
  std::vector<StageId> loads;
  for (size_t i = 0; i < xs.size(); ++i) {
    const bool down_rows = matrix && xs[i].row_broadcast;
    // A scalar's one tile is every item's.
    loads.push_back(t.AddLoad(absl::StrCat("load_", xs[i].label), ins[i],
                              xs[i].scalar  ? std::vector<Term>{}
                              : down_rows ? std::vector<Term>{{LoopVar::kItemX, 1}}
                                          : steps,
                              1, bufs[i]));
  }
  // One row: the last tile computes over its padding columns too, and the store drops them.
  const int64_t w = matrix ? tw : t.PageWidth(1);
  std::vector<ElemAccess> maps;
  for (const MapOperand& x : xs) {
    maps.push_back(x.scalar ? ConstMap() : matrix && x.row_broadcast ? PerColMap() : IdentMap(w));
  }
  StageId s = t.AddGeneric(kind, matrix ? TileSpace(tr, w) : FlatSpace(w), bufs, std::move(maps), IdentMap(w), body,
                           out_buf);
  StageId st = t.AddStore(absl::StrCat("store_", out), yt, steps, 1, out_buf);
  for (size_t i = 0; i < xs.size(); ++i) t.AddEdge(loads[i], bufs[i], s);
  t.AddEdge(s, out_buf, st);
  if (matrix) {
    return FinishSection(t, absl::StrCat(name, "_", rows, "x", n), ItemsPerTileGrid(rows_t, cols_t), acc,
                         ClaimOf(kind, body, p), target);
  }
  return FinishSection(t, absl::StrCat(name, "_", n), ItemsPerTile(cols_t), acc, ClaimOf(kind, body, p), target);
}

}  // namespace

absl::StatusOr<Composition> PointwiseMap(const std::string& name, const std::string& kind, Precision p,
                                         Precision acc, const Body& body, const std::vector<MapOperand>& xs,
                                         const std::string& out, int64_t rows, int64_t n, const Target& target) {
  if (rows > 1 || TilesOf(n, target) > RowBlockTiles(target)) {
    return PerTileMap(name, kind, p, acc, body, xs, out, rows, n, target);
  }
  return FlatMap(name, kind, p, acc, body, xs, out, n, target);
}

}  // namespace spatial
