// The grouped decode attention (seed 002, original lines 3809-3816 and 6180-6341): a one-row attention whose query
// heads share K/V heads, folded ONE ITEM PER K/V HEAD, in three sections:
//   1. "{out}__gqa_q" — the row's heads regrouped, a (kvw * tile) x hd matrix: K/V head x's `group` query heads are
//      rows 0 .. group - 1 of tile row x, the rows past them zero ("{tag}_gqa_groups_{kv}x{group}", Exact).
//   2. The flash fold over it (flash.h, grouped): item x streams K/V head x's cache ONCE for all `group` rows, every
//      row limited by the row's P, into "{out}__gqa_ctx".
//   3. The result — each query head's row lifted out of its tile row into its vd elements of the flat row
//      (relayout.h), query head v being row v mod group of tile row v / group. Where the fold splits the cache
//      (flash_split.h), its combine writes the flat row itself (FlashGeometry.ungroup_out) and this section is not
//      there.
//
// ★ ONE ROW'S QUERY HEADS THAT SHARE A K/V HEAD STREAM IT ONCE. A decode step's heads fold one item per K/V head when
// the group fits a tile's rows and its regrouping fits a site; otherwise an item per query head (FlashAttention).
#ifndef LOWERINGS_ATTENTION_GROUPED_DECODE_H_
#define LOWERINGS_ATTENTION_GROUPED_DECODE_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "lowerings/attention/geometry.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The three sections above (with a sinks spread before the fold when g.sinks). Operands as FlashAttention's; Q is
// the flat 1 x per_row*hd row, the result the flat 1 x per_row*vd row. Refused (NotLowered) on a tile that is not
// square, for more than one query row, a group of one or taller than a tile, values or keys wider than an
// accumulator page, heads not whole tiles, or a regrouping (or ungrouping) that does not fit a site — and as the
// fold is.
absl::StatusOr<Composition> GroupedDecodeAttention(const AttentionNames& names, const FlashGeometry& g,
                                                   std::string_view tag, const Target& target);

// The flash form as from_attention takes it (l.3809-3816): for a decode step whose group is more than one and fits a
// tile's rows, whose heads do not need blocking, GroupedDecodeAttention — falling back, on ANY refusal of it, to
// FlashAttention, one item per query head. Otherwise FlashAttention.
absl::StatusOr<Composition> FlashFormAttention(const AttentionNames& names, const FlashGeometry& g,
                                               std::string_view tag, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_GROUPED_DECODE_H_
