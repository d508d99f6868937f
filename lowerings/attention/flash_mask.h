// The flash fold's mask (seed 002, original lines 5497-5638, 5702-5711, 5747-5792, 5824-5854, 5994-6006): each
// query row's limit, the block start carried from block to block, each block's limit and window floor, and the
// `live` predicate every masked stage of the block applies. Internal to lowerings/attention.
//
// ★ A MASK ONLY WHERE A POSITION CAN FALL PAST A LIMIT: a causal or decode bound, a window, or a cache that ends inside
// a tile row. Its block start moves only when there is more than one block — one block starts at 0, and its limit is
// the row's own.
//
// ★ ROW r OF QUERY TILE q SEES THE POSITIONS BELOW P + q*tile + r. P is checked first when the program reads it;
// q*tile comes from a compile-time table, one tile per item; r from a tile holding r in row r. Nothing is divided on
// the datapath.
//
// Index values ride the target's address integer (ix). Where the certifier cannot bound a value by its producer — the
// position operand, the carried block start — it is read through a guard (a stride-0 IndirectTerm on a second read
// of the same element): a run-time range check that also bounds the index arithmetic after it.
#ifndef LOWERINGS_ATTENTION_FLASH_MASK_H_
#define LOWERINGS_ATTENTION_FLASH_MASK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/attention/geometry.h"
#include "spatial/body.h"
#include "spatial/builder.h"
#include "spatial/program.h"

namespace spatial {

// A flash fold's query layout (the seed's fold_items): the query rows it holds, the heads a row carries, the query
// tile rows, and its items. Grouped: (kvw * g * tile, 1, kvw * g, kvw * g), g = GroupTiles.
struct FoldItems {
  int64_t rows = 1;
  int64_t per_row = 1;
  int64_t tiles_q = 1;
  int64_t items = 1;
};
FoldItems FoldItemsOf(const FlashGeometry& g, int64_t tile_rows);
// The rows of every item's query tile that hold queries: a regrouped tile's group (one tile a K/V head), or the
// one query tile's rows; else the whole tile. The fold's per-row stages run over these rows only, so the SFPU skips
// the faces of the tile's padding (VectorMode::R's half tile for a group of at most 16 rows on Tensix).
int64_t LiveTileRows(const FlashGeometry& g, const FoldItems& fi, int64_t tile_rows);
// The query tile rows one K/V head's group takes when regrouped: ceil(group / tile rows).
inline int64_t GroupTiles(const FlashGeometry& g, int64_t tile_rows) { return (g.q.group + tile_rows - 1) / tile_rows; }

// Appends the guard idiom to a Generic's inputs: `b` read through `map` twice, the first read admitted only in
// [0, modulus) through the second. Returns the slot of the guarded read (the body reads that one).
int AddGuardedRead(std::vector<BufferId>& ins, std::vector<ElemAccess>& maps, BufferId b, const ElemAccess& map,
                   int64_t modulus);

// What the mask adds to a fold. Everything is absent when the fold is unmasked.
struct FoldMask {
  bool masked = false;
  bool counted = false;               // more than one block: the block start is carried
  std::optional<BufferId> row_limit;  // each row's absolute limit (prologue)
  std::optional<TensorId> position;   // the tensor holding P, when the program reads it: the fold's trip
  std::optional<BufferId> start;      // the carried block start (counted only)
  std::optional<BufferId> lim;        // the block's limit per row (body)
  std::optional<BufferId> floor;      // the block's window floor per row (body, windowed only)
};

// The prologue part: `row_limit` (with P's load and guards when it is an operand) and `init_start`. `blocks` is the
// fold's block count (a split fold's, a part's), each `block_tiles` tile rows; `ix` the index precision. The start
// is carried where there is more than one block, or parts (part c starts at block c).
absl::StatusOr<FoldMask> AddRowLimits(Template& t, const AttentionNames& names, const FlashGeometry& g,
                                      const FoldItems& fi, int64_t blocks, int64_t block_tiles, Precision ix);

// The body part that precedes the scores: `block_limit` (lim = row_limit - start) and `block_floor`.
void AddBlockLimits(Template& t, FoldMask& m, const FlashGeometry& g, int64_t nb, Precision ix);

// A stage `name` writing each row's bound in the block's own coordinates: `row_bound` (StatMap(cols) layout: `cols`
// query tiles' rows) less the carried block start, read through a guard below `span` (the largest start plus one).
// The prefill fold's block limit and the attention backward's limits and floors.
BufferId AddBlockBound(Template& t, const std::string& name, BufferId row_bound, BufferId start, int64_t span,
                       int64_t cols, Precision ix);

// The last body stage: `next_start` (start += step: a tile, or a split fold's parts' tiles). No-op unless counted.
void AddNextStart(Template& t, const FoldMask& m, int64_t nb, int64_t step);

// `then` where position `axis` of the block is live for the row, `otherwise` where it is masked: below the row's
// block limit and, windowed, at or past its floor, read from input slots `at` and `at + 1`. Select is lazy, so a
// masked position reads nothing of `then`. With no mask, `then`.
Body Live(const FoldMask& m, LoopVar axis, Body then, Body otherwise, int at);

// Appends the mask's operands (lim, then floor) to a stage's inputs, each read per row through `map`.
void AddLimitSlots(const FoldMask& m, std::vector<BufferId>& ins, std::vector<ElemAccess>& maps, const ElemAccess& map);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_FLASH_MASK_H_
