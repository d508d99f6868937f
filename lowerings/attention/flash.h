// Attention in the flash form (seed 002, original lines 3696-3733, 6113-6178): the fold of flash_fold.h, with the
// sinks spread before it, refused by name when a site cannot hold it — or, for a decode step whose values are wider
// than a site holds, one fold per value page joined back together.
//
// This is what from_attention calls for an attention whose heads are whole tiles (geometry.h, AttentionReadsDense),
// with FlashGeometryOf(AttentionShapeOf(spec)); grouped_decode.h first tries one item per K/V head.
#ifndef LOWERINGS_ATTENTION_FLASH_H_
#define LOWERINGS_ATTENTION_FLASH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/attention/geometry.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The flash attention of `g` over `names` (operands as the spec orders them: Q, K, V, [P], [sinks]; see
// flash_fold.h for their shapes). Sections: [spread_sinks_{n}] when g.sinks, then the fold; when the fold does not
// fit a site, ValuePages. Refused (NotLowered) on a tile that is not square, and as flash_fold.h and ValuePages say.
// The composition is named after the fold section.
absl::StatusOr<Composition> FlashAttention(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                           const Target& target);

// A decode attention whose fold does not fit a site, as one fold per value page: fold j streams the keys and its page
// of every head's values into "{out}__values{j}", and tile joins lay the pages side by side per head into the result
// ("{out}__values0to{j}" between). Each fold reads the keys again — the price of a site that cannot hold a head's
// every value page. Refused ("a flash attention fold — one tile of queries against one tile row of its K/V head —
// does not fit a site") unless the values take at least two pages, the fold is not grouped, has one query row and
// is not itself a value part.
absl::StatusOr<Composition> ValuePages(const AttentionNames& names, const FlashGeometry& g, std::string_view tag,
                                       const Target& target);

// A flat 1 x n section writing `out`, whose element e is the sink logit of query head head_of(e), or MASKED where
// head_of(e) is nullopt (a row no head fills), from the attention's one logit per head (`sinks`, `per_row` of them).
// Runs of elements with one head share a band; the section is column-blocked when n is wider than an accumulator
// page. Section "spread_sinks_{n}", claim Exact (a copy).
absl::StatusOr<Composition> SpreadSinks(const OperandRef& sinks, int64_t per_row, const std::string& out, int64_t n,
                                        const std::function<std::optional<int64_t>(int64_t)>& head_of,
                                        const Target& target);

// The sections of `parts`, in order, as one composition named `name` for `target`, its state order declared.
Composition ComposeSections(std::string name, std::vector<Composition> parts, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_FLASH_H_
