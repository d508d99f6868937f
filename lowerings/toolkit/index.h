// Index types and the index arithmetic every gather, row write, argmax and rope shares (seed 002, original lines
// 5252-5318 and 6343-6493): the integer an index rides, how wide its space is, the compile-time check of a literal
// row, and the run-time checks of a named one.
//
// ★ AN INDEX RIDES THE TARGET'S ADDRESS INTEGER, SIZED BY ITS INDEX SPACE. Never the float datapath — bf16 holds
// integers exactly only up to 256, and a Qwen3.8 token id reaches 248,319 — and never a width the chip does not have:
// a space past every integer the target has is refused (MissingPrecision), never wrapped.
//
// One departure from the seed, and why. The seed computes `index − 1 + B` first and guards it after ("even where the
// addition itself wraps"). Our certifier proves every intermediate value of index arithmetic inside its integer type
// from the values a buffer can hold, and an index given at run time can hold any int32: `index − 1` is unprovable.
// So here the raw index is HELD FIRST — read through a guard of stride zero admitting [0, admitted] — and only then
// decremented: nothing after the guard can wrap, which is exactly what the seed's ★ THE MULTIPLY MAY NOT WRAP asks,
// and the bias B has nothing left to protect. The −1 an index of 0 becomes is caught by the next check (the seed's
// second guard, or a movement's bound), so every index outside its table still faults, naming the stage and value.
#ifndef LOWERINGS_TOOLKIT_INDEX_H_
#define LOWERINGS_TOOLKIT_INDEX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/flat_build.h"
#include "proto/op.pb.h"
#include "spatial/builder.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// ── Index precisions (seed l.6348-6419) ──
// The seed's index_type: the narrowest index integer of the target holding [-space, space], or MissingPrecision.
absl::StatusOr<Precision> IndexType(const Target& target, int64_t space);
// The largest magnitude an INTEGER fill declares (saturating); nullopt for a fill the compiler cannot see (Unknown,
// float fills).
std::optional<int64_t> FillAbsBound(const proto::Fill& fill);
// The index space of an index OPERAND: max(span, (bound + 1) * max(per_unit, 1)), saturating — a declared index past
// its table must still be HELD exactly to be refused.
int64_t IndexSpace(int64_t span, int64_t per_unit, const proto::Fill& fill);
// A table's element precision: `float_p` for a float table; for an integer one the index integer holding every value
// its fill declares (an undeclared fill is its producer's bytes, read at the datapath's integer).
absl::StatusOr<Precision> TablePrecision(bool is_float, Precision float_p, const proto::Fill& fill,
                                         const Target& target);
// A row WRITE's element precision: the table's, widened to hold the source's declared values too.
absl::StatusOr<Precision> RowWritePrecision(bool is_float, Precision float_p, const proto::Fill& table,
                                            const proto::Fill& source, const Target& target);

// ── What the sections need of the target ──
// Index arithmetic (the stages that decrement, check and scale an index) runs on the integer datapath:
// "MissingCompute: an integer elementwise datapath for {what} (target X)" when the target has none.
absl::Status RequireIndexArithmetic(std::string_view what, const Target& target);
// The accumulator a section moving `dt` values folds in (the seed's AccPolicy::for_result): fp32 for a float section
// (RequireFp32Accumulator), the integer itself for an integer one — which also needs the integer datapath its copies
// run on, and an accumulator of that integer.
absl::StatusOr<Precision> SectionAcc(Precision dt, std::string_view what, const Target& target);

// ── Literal rows (seed l.6488) ──
inline constexpr std::string_view kLiteralRowOutside =
    "a literal row index outside its table — the program fails at run time on every tier, so there is no section "
    "to lower";
// The flat offset (index − 1) * cols of a literal 1-based row of a `rows`-row table, or the refusal above.
absl::StatusOr<int64_t> LiteralRowOffset(int64_t index, int64_t rows, int64_t cols);

// ── Guards and scalar stages ──
// ★ A BOUNDS CHECK IS A GATHER THAT MOVES NOTHING: a second read of slot `of` through `map` (the same element), whose
// stride-zero term checks the value slot `of` holds against [0, modulus). Reading it faults outside the range.
ElemAccess GuardOf(int of, ElemAccess map, int64_t modulus);
// A one-element Generic (flat_space(1)) of `t` writing element 0 of `out`; ins[i] read through maps[i].
StageId ScalarStage(Template& t, std::string name, std::vector<BufferId> ins, std::vector<ElemAccess> maps, Body body,
                    BufferId out);
// `index − 1` into element 0 of `out`, the 1-based index first held to [0, admitted] by a guard (so the decrement
// cannot wrap): the value written lies in [-1, admitted - 1]. Slots [index, guarded index].
StageId BiasedIndex(Template& t, std::string name, BufferId index, int64_t admitted, BufferId out);
// `value` checked against [0, modulus) and passed on (plus `add`): the seed's second guard.
StageId GuardedCopy(Template& t, std::string name, BufferId value, int64_t modulus, double add, BufferId out);

// ── The seed's index chains on a flat section ──
struct IndexChain {
  std::vector<StageId> stages;
  BufferId out = 0;
};
// lo = (index − 1) * cols for a 1-based index in [1, rows] (seed l.6421 row_offset_stages): "row_biased" (held to
// [0, rows], less one), "row_guarded" (checked in [0, rows)), "row_offset" (times cols); scratch pages at `ix`.
IndexChain RowOffsetStages(FlatBuild& b, BufferId index, int64_t rows, int64_t cols, Precision ix);
// P checked to be in [1, rows] from a one-element count operand (seed l.5276 checked_count): "count_biased",
// "count_checked" (= P); scratch pages at `ix`.
IndexChain CheckedCount(FlatBuild& b, BufferId count, int64_t rows, Precision ix);

// ── Merge trees (seed l.5255) ──
// The fan-ins of a merge tree over `nb` partials, bottom level first: the fewest levels any fan-in up to `fmax`
// allows, and at each level the SMALLEST fan-in that still reaches one partial in the levels left. Their product is
// the partial slot count, >= nb. Empty for nb <= 1. fmax below 2 reaches nothing (the seed would loop): it is 2.
std::vector<int64_t> MergeFans(int64_t nb, int64_t fmax);

}  // namespace spatial

#endif  // LOWERINGS_TOOLKIT_INDEX_H_
