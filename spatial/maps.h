// The seed's small vocabulary of element maps, iteration spaces and work-item sets, shared by every lowering.
#ifndef SPATIAL_MAPS_H_
#define SPATIAL_MAPS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "spatial/program.h"

namespace spatial {

// ── Element maps ──
// Element c + base (COL coefficient 1).
ElemAccess At(int64_t base);
// One fixed element: a per-head scalar inside a band, a reduce scaler.
ElemAccess Fixed(int64_t base);
// base + rs * ROW + cs * COL.
ElemAccess Map2(int64_t base, int64_t rs, int64_t cs);
// (r, c) -> r * w + c: the out map of every stage over a page w wide.
ElemAccess IdentMap(int64_t w);
// r * w: one value per row at column 0 (the out map of a row reduction).
ElemAccess PerRowMap(int64_t w);
// c: the out map when ROW is folded.
ElemAccess PerColMap();
// Offset 0, no terms.
ElemAccess ConstMap();
// `m` with an indirect term added.
ElemAccess WithIndirect(ElemAccess m, int slot, int64_t stride, int64_t modulus);

// ── Iteration spaces ──
// [ROW 1, COL max(n,1)]: a single-row space, the 1 x n layout.
std::vector<IterSpec> FlatSpace(int64_t n);
// [ROW max(rows,1), COL max(cols,1)], COL reduced with `pool` when given.
std::vector<IterSpec> HeadSpace(int64_t rows, int64_t cols, std::optional<IterKind> pool = std::nullopt);
// A full tile_rows x w space, COL reduced with `pool` when given.
std::vector<IterSpec> TileSpace(int64_t tile_rows, int64_t w, std::optional<IterKind> pool = std::nullopt);

// ── Work items ──
// One item (0, 0) over the whole row: ONE ITEM, NOT ONE PER TILE (placement clones the program per site).
std::vector<WorkItem> WholeRow(int64_t cols_t);
// k items, one per tile along x: coord (0, i), rect (0, i, 1, 1).
std::vector<WorkItem> ItemsPerTile(int64_t k);
// Row-major items over a rows_t x cols_t tile grid: coord (r, c), rect (r, c, 1, 1).
std::vector<WorkItem> ItemsPerTileGrid(int64_t rows_t, int64_t cols_t);
// row_t / blk items of blk tiles: coord (0, i), rect (0, i * blk, 1, blk).
std::vector<WorkItem> RowItems(int64_t row_t, int64_t blk);
// Load/store steps over a tile grid: [(ITEM_Y, cols_t), (ITEM_X, 1)].
std::vector<Term> TileGridSteps(int64_t cols_t);

// ceil(a / b) for positive b.
inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace spatial

#endif  // SPATIAL_MAPS_H_
