// The three-section attention (seed 002, original lines 3896-4272): the form every attention whose heads are NOT
// whole tiles takes — scores, the row softmax, the weighted V sum — each a flat section over the whole 1 x n row.
//
// ★ THREE SECTIONS, because a softmax cannot be one Generic: its maximum and its denominator are reductions whose
// results the next stage broadcasts back. Everything is flat (★ EVERY ACTIVATION IS FLAT): query head v's scores are
// the band [v*l, (v+1)*l) of one 1 x h*l row, its probabilities the same band of the next, its context the band
// [v*vd, (v+1)*vd) of the result.
//
// Layouts (all flat 1 x n): Q holds the T*per_row query heads, head v's key at v*hd; K holds position j's K/V head x at
// j*(kv*hd) + x*hd; V likewise at j*(kv*vd) + x*vd. The result holds head v's context at v*vd.
//
// Sections, in order:
//   1. "{tag}_scores_{h}x{l}" -> "{out}_scores": attn_scores (scale*(q.k), the fold on the ROW: ★ THE FOLD IS ON THE
//      ROW, THE ANSWER IS ON THE COLUMN), [attn_cap] (★ A SOFT CAP takes every scaled score before the mask, so a
//      masked score stays masked), and — masked — [count_biased, count_checked, thresholds] for a named position,
//      [floors] for a window over one, and mask (MASKED = -2^100 past each head's threshold and below its floor).
//   2. [spread_sinks_{h}] -> "{out}__sink_rows" when there are sinks and more than one query row (a decode row's
//      softmax rows are its heads, so its sinks are read as they are).
//   3. "{tag}_softmax_{h}x{l}" -> "{out}_probs": the tables-rows family's FlatSoftmaxRowsAt, the sinks joining each
//      row's maximum and denominator.
//   4. "{tag}_wv_{h}x{vd}" -> out: attn_weighted, sum_j p[v*l + j] * V[j, kv_of(v)], the fold on the ROW.
// Claims "attention scores in {p}", "row softmax in {p}", "attention weighted sum in {p}"; the spread is Exact.
//
// The mask (★ THE MASK): head v's position j sits at column v*l + j, live iff the column is below v*l + P + r (r the
// head's query row) and, windowed, at or past v*l + first(P + r) - 1 — one threshold per head, a constant for a literal
// P, else computed from P once P is checked: 1 <= P <= rows - (T - 1), or the run faults (IndexOutOfRange).
//
// Two departures from the seed, both refusals where the seed would build a program that is not the attention:
//   - query heads that do not group over the K/V heads (h = 6 over kv = 4: heads 4 and 5 would read "K/V head" 4
//     and 5, the next position's) are refused, where the seed reads past the head;
//   - a section whose flat operands (the whole cache, loaded whole) do not fit a site is refused by name.
// And one sizing: the index integer holds the thresholds and floors (up to h*l + rows, down to -W), not just the
// cache's rows as the seed sizes it, since the certifier proves every intermediate of index arithmetic in its type.
#ifndef LOWERINGS_ATTENTION_SECTIONS_H_
#define LOWERINGS_ATTENTION_SECTIONS_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "lowerings/attention/geometry.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The three sections above over `names` (operands as the spec orders them: Q, K, V, [P], [sinks]; `sinks` the sinks'
// operand index, the limit's Operand(i) the position's), as one composition named after the scores section.
//
// Refusals: NotLowered("an attention whose query heads do not group over its K/V heads — ..."); NotLowered("a
// three-section attention whose flat {scores|weighted sum} section does not fit a site ..."); MissingCompute without a
// float datapath (or, with a named position, an integer one); MissingPrecision without an fp32 accumulator or an index
// integer; AccTilesExceeded when the h*l scores or h*vd results are wider than an accumulator page; and the row
// softmax's (more query heads than a tile has rows).
absl::StatusOr<Composition> AttentionSections(const AttentionNames& names, const QueryHeads& heads,
                                              const HeadWidths& widths, const Cache& cache,
                                              std::optional<int64_t> sinks, std::string_view tag,
                                              const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_SECTIONS_H_
