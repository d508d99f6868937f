// Gated DeltaNet (seed 002, original lines 3296-3694 and 12219-14279): over `hv` value heads reading `hk` key heads at
// head dim `d`, per token
//   u = S·k,   S ← α·S + β·(v − α·u)·kᵀ,   o = S·q / √d,   y = RMSNorm_head(o) · GN · gate(z)
// with value head h reading key/query head h mod hk, gate = silu or sigmoid. The memory S (hv heads of d x d, S[h,a,b]
// at h·d² + a·d + b) is CARRIED STATE: a State tensor read and written in place, in the composition's declared order.
//
// Operands, in the seed's order: [q, k, v, z, b (β), a (α), S, gn]. q, k: rows·hk·d; v, z: rows·hv·d; b, a: rows·hv;
// S: hv·d²; gn: d. OpSpec.out is y: 1 x hv·d, or for a block of rows > 1 the flat rows 1 x rows·hv·d.
//
// Forms (FromGatedDelta picks as the seed does):
//   - flat: the memory fits one accumulator page — per row THREE sections (predict, update, read) and, for a block,
//     the row write merging the row into the output (lowerings/row_writes.h);
//   - blocked: the head is the work item, the memory an nb x nb tile square per head — two gate broadcasts, then per
//     row ONE pass over each head's memory (stepped), or per chunk of a tile's rows the chunked WY form;
//   - widened: a head that is not whole tiles is widened to them by exact moves, run blocked, narrowed back.
#ifndef LOWERINGS_CARRIED_GATED_DELTA_H_
#define LOWERINGS_CARRIED_GATED_DELTA_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/body.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The result's name and the eight operands (the seed's StageNames).
struct GdNames {
  std::string out;
  std::vector<OperandRef> ops;  // q, k, v, z, b, a, S, gn
};

// The seed's from_gated_delta. Refusals: "a gated delta step with no heads, no head dimension or no rows"; a target
// without an fp32 accumulator (MissingPrecision); an epsilon that is not whole nano units; and those of each form.
// A malformed spec (negative sizes, no gate activation) is InvalidArgument.
absl::StatusOr<Composition> FromGatedDelta(const proto::OpSpec& spec, const Target& target);

// ── Pieces the forms share (gated_delta.cc) ──
// silu(z), or the sigmoid Recip(1 + Exp(z·(−1))), as the seed's delta_gate.
Body DeltaGate(proto::GatedDeltaSpec::GateAct gate, Body z);
// ⌈log₂ c⌉, at least 1: how many factors (I+N)(I+N²)(I+N⁴)… invert I + N for a strictly lower c x c N.
int64_t SolveFactors(int64_t c);
// Sections a block takes a row at a time (2 + rows) and a chunk of `tile` rows at a time.
int64_t SteppedSections(int64_t rows);
int64_t ChunkedSections(int64_t rows, int64_t tile);
// Whether a block of rows is lowered a chunk at a time: its chunks take fewer sections than its rows stepped.
bool TakesChunks(int64_t rows, int64_t tile);
// The seed's paged(build): the section with two pages in each once-an-item buffer when that fits a site, else one.
absl::StatusOr<Composition> Paged(const std::function<absl::StatusOr<Composition>(int64_t)>& build,
                                  const Target& target);

// ── The forms ──
// Row r of the flat form: "gd_predict_{hv}x{d}{tag}", "gd_update_{hv}x{d}{tag}", "gd_read_{hv}x{d}{tag}" (tag
// "_row{r}" in a block). ★ THREE SECTIONS, BECAUSE THE MEMORY IS READ ONCE AND WRITTEN ONCE.
absl::StatusOr<Composition> FlatGatedDeltaRow(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t r,
                                              const Target& target);

// `state(i)` names the memory after i rows (or chunks): the carried memory's one name for every i (read and written
// in place: State), or a version per i where the memory is the op's own (each version written once, in place of its
// zeros, and read by the next row or chunk as an Input).
using StateName = std::function<std::string(int64_t)>;

// The head as the work item: the gate broadcasts "matmul_{rows}x{hv}x{hv·tw}" (α and β into one tile per head),
// then per row "gd_step_{hv}x{d}[_row{r}]" — or, when TakesChunks, the chunked form. `head` is the width the 1/√d and
// the norm read (spec.d, or a widened head's own width). Refuses "a blocked gated delta needs a head dimension in
// whole tiles and v-heads a multiple of k-heads".
absl::StatusOr<Composition> BlockedGatedDelta(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t head,
                                              const StateName& state, const Target& target);

// BlockedGatedDelta without the chunked-vs-stepped decision: the gate broadcasts and a step per row whatever the row
// count (the form the seed's ~14,800-stage, 45-section layer took; bench/gdn_bench.cc measures it).
absl::StatusOr<Composition> SteppedGatedDelta(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t head,
                                              const StateName& state, const Target& target);

// The chunked WY form over chunks of a tile's rows (gated_delta_chunked.cc); `gates` are the two broadcast sections.
absl::StatusOr<Composition> ChunkedGatedDelta(const proto::GatedDeltaSpec& spec, const GdNames& names, int64_t head,
                                              const StateName& state, std::vector<Composition> gates,
                                              const Target& target);

// A head that is not whole tiles, widened to them (gated_delta_moves.cc). Refuses "a gated delta whose v-heads are
// not a multiple of its k-heads".
absl::StatusOr<Composition> WidenedGatedDelta(const proto::GatedDeltaSpec& spec, const GdNames& names,
                                              const Target& target);

// ── Moves (gated_delta_moves.cc) ──
// A run of a move: it ends at output element `end` and copies the source from element `from`, or writes zeros.
struct Run {
  int64_t end = 0;
  std::optional<int64_t> from;
  friend bool operator==(const Run&, const Run&) = default;
};
// `runs` with every run of zeros joined to the zeros before it, empty runs dropped.
std::vector<Run> JoinedZeroRuns(const std::vector<Run>& runs);
// A section "move_runs_{out}" writing `out` (1 x n, n the last run's end) from runs of `src` (1 x src_len). Movement
// only: claim Exact. ★ AN ITEM IS AN OUTPUT TILE, AND IT LOADS ONLY THE SOURCE IT MOVES. Refuses "a move of nothing"
// and "a move whose output tiles each take more runs than a table page names".
absl::StatusOr<Composition> MovedRuns(const OperandRef& src, int64_t src_len, const std::string& out,
                                      const std::vector<Run>& runs, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_CARRIED_GATED_DELTA_H_
