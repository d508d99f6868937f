// The prefill fold (issue #12): the flash fold of flash_fold.h for a block of T query rows, laid out the way
// tt-metal's SDPA runs it rather than one tile at a time.
//
// ★ THE SAME RUNNING SOFTMAX, OVER WIDER BLOCKS. A block is kb tile rows of the cache (kb * tile positions), so the
// per-block chain — the block's maximum, the new maximum, the rescale e^(m - m') on the SFPU, the running sum's and
// output's updates — runs once per kb tiles instead of once per tile (tt-metal's k_chunk). The two contractions are
// the matrix engine's tile products (MatmulTiles): S = Q · K^T with K's block as B transposed, O_b = P · V with P
// packed to the datapath first (tt-metal packs P to bf16 before P·V). The scale rides the softmax, not the products:
// P = e^(scale*S - m') with m' the running maximum of the scaled scores (scale > 0 keeps the maximum's position).
//
// ★ ONE K/V STREAM FOR A GQA GROUP. Every item of K/V head x reads the same block b, whatever its query tile or head,
// so the loads are multicast along ITEM_Y (DESIGN §3.4): the machine reads a block once for the items of a group that
// run together and sends it over the NoC. The meaning is unchanged.
//
// ★ CAUSAL TRIPS BY QUERY RANGE. A query tile sees only the blocks below its last row's limit. The query tiles are
// cut into ranges, one section each; a section folds exactly the blocks its last row can see (a literal count), so
// the prefill does about half the work of folding every block for every tile. Sections write disjoint tiles of the
// result.
//
// ★ WHERE IT APPLIES. A block of query rows (T > 1) that is not regrouped, split, latent or a value part, whose
// bound is literal (or absent) and without a window; and — since the value product reads every position of its block
// through the matrix engine, where a masked position's P is 0 but 0 * NaN is NaN — only where no block reads a
// cached position past the last row's limit: the cache ends there, or the limit is a whole number of tile rows and
// the blocks divide them, so every position a block reads is one some row of the prefill attends. (tt-metal's SDPA
// reads its K/V the same way.) Everything else takes flash_fold.h.
#ifndef LOWERINGS_ATTENTION_FLASH_PREFILL_H_
#define LOWERINGS_ATTENTION_FLASH_PREFILL_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "lowerings/attention/geometry.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Whether the prefill fold applies to `g` on `target` (see above), before its footprint is known.
bool PrefillFoldApplies(const FlashGeometry& g, const Target& target);

// The prefill fold of `g`: sections "{tag}_flash_prefill_{items}x{hd}[_v{vd}]_l{l}_kb{kb}_q{first}to{last}", one per
// range of query tiles, each an item per (query tile, head) folding ceil(limit / (kb * tile)) blocks of kb tile rows.
// Operands and result as flash_fold.h's (with sinks it reads "{out}__flash_sinks", which flash.h spreads). kb is the
// largest divisor of the cache's tile rows up to the accumulator's page that fits a site. NotLowered when
// PrefillFoldApplies is false or no kb fits a site (the caller then takes the one-tile fold).
absl::StatusOr<Composition> PrefillFold(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                        const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_FLASH_PREFILL_H_
