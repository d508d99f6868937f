// The prefill fold (issue #12): the flash fold of flash_fold.h for a block of T query rows, laid out the way
// tt-metal's SDPA runs it rather than one tile at a time.
//
// ★ THE SAME RUNNING SOFTMAX, OVER WIDER BLOCKS AND CHUNKS. Item (y, x) is chunk x — qc query tiles — of head y
// (tt-metal's q_chunk); a block is kb tile rows of the cache (k_chunk). The per-block chain — the maximum, the
// rescale e^(m - m'), the sum's update — runs once per qc x kb score tiles, and a block's K/V crosses the NoC once
// for qc query tiles. The two contractions are the matrix engine's tile products (MatmulTiles): S = Q · K^T with
// K's block as B transposed, and P · V with P packed to the datapath (tt-metal packs P to bf16), accumulated onto
// the running output after it is scaled in place (the packer's L1 accumulation). The scores are packed to the
// datapath's format, masked once in place, and pooled for the maximum of the raw scores; the scale rides the exp:
// P = e^(scale * (S - m')) (scale > 0 keeps the maximum's position), as tt-metal's SDPA computes it.
// The probabilities and the output are elementwise pages, which stream through Dst (DstPolicy::kStreamed).
//
// ★ ONE K/V STREAM FOR A GROUP'S CHUNKS AND HEADS. Where query heads share a K/V head in contiguous groups (and no
// sink is read per head), item (y, x) is query head y * group + x % group over chunk x / group: every item of K/V
// head y reads block b at an address affine in y, so the loads are multicast along ITEM_X (DESIGN §3.4) to the
// chunks and the group's heads that run together and fold the same blocks; the query and the result are addressed
// through a table. Otherwise item (y, x) is chunk x of head y, which reads its K/V head from a table (kv_of(y): not
// affine in y), multicast to the head's chunks. The machine reads a block once for its group and sends it over the
// NoC; the meaning is unchanged. Along ITEM_X the K/V loads are the reader sequencer's, as tt-metal's reader kernel
// reads Q, K and V while its writer writes the result. With AttentionSpec.kv_reads PER_ITEM every item reads its own
// blocks instead, as tt-metal's causal SDPA kernels do (no K/V chain): to time the program they run.
//
// ★ CAUSAL TRIPS PER ITEM. A chunk sees only the blocks below its last row's limit: one section holds every chunk,
// and each item folds exactly its chunk's blocks (WorkItem.blocks), so the prefill does little more than half the
// work of folding every block for every chunk, with no section boundary between chunks. The items go round robin
// over the sites heaviest first, in snake rounds, so every site folds about as many blocks (tt-metal balances chunks
// i and n - 1 - i on a core to the same end); with AttentionSpec.chunk_split CONTIGUOUS each site takes the run of
// chunks tt-metal's program factory gives a core instead, to time tt-metal's own runs. The start is carried and the
// mask runs on each item's last blocks only, the most any chunk's first row sees in part (Stage.last_blocks: its
// diagonal; tt-metal masks only its diagonal chunks); where every chunk folds the same blocks, the blocks every row
// sees whole fold unmasked and the few after them (the edges, at most 4) run once each after the fold, masked at
// their literal starts.
//
// ★ THE RUNNING MAXIMUM STAYS A REDUCTION, NOT FOLDED INTO THE QK CONTRACTION. tt-metal's STANDARD and FAST recipes
// fold a reference maximum into the product ([Q | m_ref] x [K^T ; -e0] leaves S - m_ref in Dst: no row maximum, no
// subtraction, no rescale after the first K chunk), but that is safe only with a data-dependent repair: m_ref is the
// first chunk's maximum, the exp is shifted 28 octaves down for headroom, and a row group whose partial sums reach
// 0.5 is redone on the reduction path with a new reference (recipe_fused_chunk.hpp, SDPAPrecisionRecipes.md "Fused
// K chunks"). A stage of the algebra runs the same way for every block (DESIGN §3.5), so the redo has no form here;
// without it a later score more than ~88 / scale above the first chunk's maximum overflows the exp, a wrong answer
// the fold does not risk. The cost: the one-core FAST recipe times 1.07 of tt-metal's with the 16-bit Dst FAST runs
// in, 1.20 with a 32-bit one (bench/fidelity/RESULTS.md).
//
// ★ THE ACCUMULATOR IS THE SPEC'S (AttentionSpec.dest_acc, tt-metal's fp32_dest_acc_en): a 32-bit Dst, or a 16-bit
// one holding twice the tiles — wider product sub-blocks (fewer unpacked tiles a product, on Wormhole fewer held-pair
// waits) — in which every sum and SFPU result rounds to bf16, the running state's updates too (the legacy streaming
// kernel's numerics; the claim doubles). The state's buffers stay fp32 either way.
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

// The prefill fold of `g`: one section "{tag}_flash_prefill_{items}x{hd}[_v{vd}]_l{l}_q{qc}_kb{kb}_c0to{last}", an
// item per (head, chunk) computing ceil(limit / (kb * tile)) blocks of kb tile rows for its chunk's last row (the
// fold's, then any edges' stages "..._edge{e}").
// Operands and result as flash_fold.h's (with sinks it reads "{out}__flash_sinks", which flash.h spreads). The
// chunking keeps the grid busy first, then takes the most query tiles a chunk, then the least work (the score tiles
// computed, a block's chain counted as one more column of them), then the most score tiles a block (at most 8 x 16
// tiles, chunks dividing the query tiles and blocks the cache's tile rows) that fits a site. NotLowered when
// PrefillFoldApplies is false or no chunking fits a site (the caller then takes the one-tile fold).
absl::StatusOr<Composition> PrefillFold(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                        const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_FLASH_PREFILL_H_
