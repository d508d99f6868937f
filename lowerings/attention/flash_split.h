// Flash-decoding (tt-metal's SDPA decode, FlashDecoding): a decode step's cache split across sites. A fold of
// FlashGeometry.split parts deals its blocks round robin — part c folds blocks c, c + split, ... — and leaves each
// part's maximum m_c and sum s_c (as pairs of the datapath's format) and its output normalized by its own sum, Ô_c =
// O_c / s_c, on the datapath (FlashPartialOutPrecision); the combine section then merges every part at once: M = max_c
// m_c, w_c = e^(m_c - M) s_c, S = sum_c w_c, O = sum_c w_c Ô_c, and divides once. The rescale identity is exact, so the
// split changes only the order of the sums.
//
// ★ ONE ITEM PER K/V HEAD LEAVES THE GRID IDLE. A decode step of 8 K/V heads (or MLA's one latent cache) is 8 (or
// 4) items over a 64-site grid; split 8 (or 16) ways, every site streams its own part of the cache.
#ifndef LOWERINGS_ATTENTION_FLASH_SPLIT_H_
#define LOWERINGS_ATTENTION_FLASH_SPLIT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lowerings/attention/geometry.h"
#include "spatial/precision.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The partial tensors a split fold writes for result `out`: "{out}__flash_part_{stats,out}", part c of query tile y
// at tile row c * tiles_q + y (stats one tile wide, row r's maximum and sum in row r as pairs of the datapath's
// format, columns kPartStat*; out as wide as the result, at FlashPartialOutPrecision).
// The floor a part's sum takes in its own normalization: far below any live part's s >= 1, so it is exact there,
// and it keeps a part with no live position at Ô = 0 instead of 0/0.
inline constexpr double kPartSumFloor = 1e-30;

// ★ A PART'S OUTPUT TRAVELS ON THE DATAPATH: Ô_c is bounded like an attention's output (a convex mix of value
// rows), so rounding it to the datapath costs what rounding the result does, and it is most of the parts' bytes — a
// DRAM round trip a decode step pays in full (Qwen3-8B, cache 32768, position 1024: 1.0 of 1.5 MB written and read
// again at fp32). tt-metal's decode keeps its intermediate outputs in bf16 too (sdpa_decode_program_factory.cpp:
// im_df = Float16_b).
Precision FlashPartialOutPrecision(Precision datapath);

// ★ A PART'S MAXIMUM AND SUM TRAVEL AS PAIRS: hi, the value rounded to the datapath, and lo, what is left of it,
// rounded again — ~16 significant bits in bf16, where one bf16 maximum of raw scores would move a weight
// e^(scale (m_c - M)) by percents (tt-metal's decode keeps its statistics in bf16: stats_df = Float16_b). The
// combine adds each pair back. Four columns of one tile of the datapath's format: half the bytes of an fp32 tile.
inline constexpr int64_t kPartMaxHiCol = 0;
inline constexpr int64_t kPartMaxLoCol = 1;
inline constexpr int64_t kPartSumHiCol = 2;
inline constexpr int64_t kPartSumLoCol = 3;

struct FlashPartials {
  std::string stats;
  std::string out;
};
FlashPartials FlashPartialsOf(const std::string& out);

// A fold whose parts may split the cache: one query tile whose K/V head is affine in the tile — a regrouped decode
// (one K/V head a tile, or the one latent cache), or one head over its one K/V head (a composed attention's,
// passes/online_softmax.h): a decode row, or a tile of rows that all see every position — and not a value part.
bool SplitsCache(const FlashGeometry& g, int64_t tile_rows);

// The split a decode fold takes on `target`: the most parts that divide its tile rows, leave each part two or more
// (and a whole number of the spec's kv_chunk blocks, when it sets one), keep the items within the grid's sites, and
// leave the parts' weights (and a sink's) within a tile's columns; 1 (no split) where SplitsCache does not hold.
int64_t DecodeSplit(const FlashGeometry& g, const Target& target);

// The combine section of a split fold `g` into names.out (the fold's result, as the unsplit fold writes it), an item
// per query tile and block of value tiles, loading its g.split parts in one block each; with sinks, each row's
// head's sink (the fold's "{out}__flash_sinks") is one more term of the softmax. No fold: one pass per item. Section
// "{tag}_flash_combine_{items}x{split}_v{vd}", claim "attention in {precision}". NotLowered when the parts (and the
// sink) outnumber a tile's columns (DecodeSplit never asks for that).
absl::StatusOr<Composition> CombineParts(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                         const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_FLASH_SPLIT_H_
