#include "spatial/maps.h"

#include <algorithm>

namespace spatial {

ElemAccess At(int64_t base) { return {base, {{LoopVar::kCol, 1}}, std::nullopt}; }
ElemAccess Fixed(int64_t base) { return {base, {}, std::nullopt}; }
ElemAccess Map2(int64_t base, int64_t rs, int64_t cs) {
  return {base, {{LoopVar::kRow, rs}, {LoopVar::kCol, cs}}, std::nullopt};
}
ElemAccess IdentMap(int64_t w) { return Map2(0, w, 1); }
ElemAccess PerRowMap(int64_t w) { return {0, {{LoopVar::kRow, w}}, std::nullopt}; }
ElemAccess PerColMap() { return {0, {{LoopVar::kCol, 1}}, std::nullopt}; }
ElemAccess ConstMap() { return {0, {}, std::nullopt}; }
ElemAccess WithIndirect(ElemAccess m, int slot, int64_t stride, int64_t modulus) {
  m.indirect = IndirectTerm{slot, stride, modulus};
  return m;
}

std::vector<IterSpec> FlatSpace(int64_t n) {
  return {{LoopVar::kRow, 1, IterKind::kParallel}, {LoopVar::kCol, std::max<int64_t>(n, 1), IterKind::kParallel}};
}

std::vector<IterSpec> HeadSpace(int64_t rows, int64_t cols, std::optional<IterKind> pool) {
  return {{LoopVar::kRow, std::max<int64_t>(rows, 1), IterKind::kParallel},
          {LoopVar::kCol, std::max<int64_t>(cols, 1), pool.value_or(IterKind::kParallel)}};
}

std::vector<IterSpec> TileSpace(int64_t tile_rows, int64_t w, std::optional<IterKind> pool) {
  return HeadSpace(tile_rows, w, pool);
}

std::vector<WorkItem> WholeRow(int64_t cols_t) { return {WorkItem{0, 0, 0, TileRect{0, 0, 1, cols_t}}}; }

std::vector<WorkItem> ItemsPerTile(int64_t k) {
  std::vector<WorkItem> items;
  for (int64_t i = 0; i < k; ++i) items.push_back({i, 0, i, TileRect{0, i, 1, 1}});
  return items;
}

std::vector<WorkItem> ItemsPerTileGrid(int64_t rows_t, int64_t cols_t) {
  std::vector<WorkItem> items;
  for (int64_t r = 0; r < rows_t; ++r) {
    for (int64_t c = 0; c < cols_t; ++c) {
      items.push_back({r * cols_t + c, r, c, TileRect{r, c, 1, 1}});
    }
  }
  return items;
}

std::vector<WorkItem> RowItems(int64_t row_t, int64_t blk) {
  std::vector<WorkItem> items;
  for (int64_t i = 0; i < row_t / blk; ++i) items.push_back({i, 0, i, TileRect{0, i * blk, 1, blk}});
  return items;
}

std::vector<Term> TileGridSteps(int64_t cols_t) { return {{LoopVar::kItemY, cols_t}, {LoopVar::kItemX, 1}}; }

}  // namespace spatial
