// The routing of a mixture of experts (seed 002's moe_choosing, moe_pick, picked_penalty, moe_groups and
// moe_routing; guide seed002-D §2.2, §2.7) as two sections whose rounds are a fold, and the gated activation.
//
// ★ A ROUND IS A BLOCK OF THE FOLD. The seed unrolls its k rounds (and a group limit's kept rounds) into one section,
// a page a round for every pick, end and weight: at DeepSeek-V3's top 8 of the top 4 of 8 groups that is more pages
// than a Tensix core's 32 circular buffers. Here the scores a round chooses by are a carried row — each round picks
// its arg-max and writes the pick's −1e30 back into the row — so a section holds the same few pages at any k.
#ifndef LOWERINGS_MOE_MOE_ROUTING_H_
#define LOWERINGS_MOE_MOE_ROUTING_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/builder.h"
#include "spatial/body.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The internal tensors the sections hand on, named "{out}__moe_...".
struct MoeNames {
  std::string logits;    // 1 x ne, fp32: the router's
  std::string probs;     // 1 x ne, fp32: the scores
  std::string choosing;  // 1 x ne, fp32: the group limit's selection row (only under a group limit)
  std::string picks;     // 1 x k·TC at the index type: tile r's element 0 is round r's expert
  std::string weights;   // 1 x k·TC, fp32: tile r's element 0 is round r's weight
  std::string norm;      // 1 x 1, fp32: 1 / max(Σ w, 2^-14) (only when renormalized)
  std::string hidden;    // 1 x k·dff, the datapath's: each round's gated activation (the blocked form)
  std::string down;      // 1 x k·d, fp32: each round's expert output (the blocked form)
  // A prefill's (moe_prefill.h; the logits are then T x ne and the hidden rows T x ne·dff):
  std::string dense;     // T x ne, fp32: token t's weight for expert e, 0 where e is not chosen
  std::string spread;    // T x ne·nj·TC, fp32: expert e's weights as nj copies of a tile, one a row
  static MoeNames Of(const std::string& out);
};

// The rounds of a section as its fold: `rounds` blocks, the body's stages a round's, the epilogue's once after. One
// round is no fold (a section of one block has only a prologue), so its stages join the prologue and a table's tile
// is tile 0. Call before the first round's stage; the epilogue's phase is then `after`.
struct MoeRounds {
  Phase after = Phase::kEpilogue;
  std::vector<Term> tile;  // the load/store steps to round r's tile of a table: r
  static MoeRounds Begin(Template& t, int64_t rounds);
};

// "moe_groups_{ne}x{kept}": the group limit over the selection scores, as llama.cpp's build_moe_ffn takes it —
// each of group_count groups of ne / group_count experts scored by its two best selection scores (the best, then
// the best of the rest with the best's slot masked; a group of one by its one), then group_kept rounds (the fold)
// each choosing the best group not yet chosen, and the selection scores of the chosen groups' experts kept in a row
// that is −1e30 elsewhere. Refuses "a group limit over more groups than a page has rows".
absl::StatusOr<Composition> MoeGroupsSection(const proto::MoeSpec& m, const MoeNames& names,
                                             const std::optional<OperandRef>& selection_bias, const Target& target);

// "moe_routing_{ne}x{k}": k rounds (the fold) over the selection row — MoeGroupsSection's, or max(P + B, −1e30) with
// a selection bias B, max(P, −1e30) for a sigmoid without one (a sigmoid scores each logit alone, so a NaN first
// score would otherwise seed the arg-max and win), P itself for a softmax (one NaN logit makes every score NaN, and
// both scans pick the first) — each writing its pick and its weight P[pick] (· scale when nothing renormalizes) to
// the tables, and the renormalization's factor at the end.
absl::StatusOr<Composition> MoeRoutingSection(const proto::MoeSpec& m, const MoeNames& names,
                                              const std::optional<OperandRef>& selection_bias, const Target& target);

// Each group's score into `left` (a carried page): its best selection score plus the best of the rest, the best's
// slot masked (a group of one: its one score). `space(pool)` iterates the groups with their `per` members reduced
// by `pool` (one member when unset); `members` maps a point to its selection score in `sel`, `own` to its group's
// value. A decode's group is a row of its page (one token); a prefill's a column of its token's row.
void AddGroupScores(Template& t, const std::function<std::vector<IterSpec>(std::optional<IterKind>)>& space,
                    BufferId sel, const ElemAccess& members, const ElemAccess& own, int64_t per, Precision ix,
                    BufferId left);

// value·[bound(lo) ≤ var < bound(lo + 1)], 0 elsewhere: the operand slots lo and lo + 1 hold a pick and its end.
Body InsidePick(LoopVar var, int lo, double value);

// 1/(1 + e^(0 − x)), the desugar's arrangement: the router's scores and the shared expert's gate alike.
Body MoeSigmoid(Body x);

// The gated activation of an expert: SwiGLU's silu(gate)·up, or gpt-oss's clamped form
// min(g, L)·σ(α·min(g, L))·(clamp(up, −L, L) + 1), the sigmoid term as silu(α·g)/α — one SFPU op.
Body MoeGated(const proto::MoeSpec& m, Body gate, Body up);

}  // namespace spatial

#endif  // LOWERINGS_MOE_MOE_ROUTING_H_
