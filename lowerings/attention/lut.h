// LUT attention (seed 002, original lines 4274-4595): an int8 model's single-query attention, integer throughout, in
// THREE sections, every one Exact:
//   1. "lut_attn_{h}x{att}_scores" -> "{out}_scores": s[v*att + j] = sum_e Q[v*hd + e] * K[j, kvh, e];
//   2. "lut_attn_{h}x{att}_weights" -> "{out}_weights": per head the maximum over the attended positions, then
//      w_j = E[clamp(((max - s_j) * M) >> S, 0, n - 1)] at a live position and 0 past P;
//   3. "lut_attn_{h}x{att}_context" -> out: ctx[v*hd + e] = floor(sum_j w_j * V[j, kvh, e] / sum_j w_j).
// Query head v reads K/V head v / (h / kv); V is as wide as K (vd = hd). att is the cache's l, or a literal P.
//
// ★ FENCE ONLY WHERE A MASKED VALUE COULD CHANGE AN ANSWER. A masked position is fenced off in the maximum and the
// weights; the sums need no mask, since a weight of 0 adds nothing. Every value the masked step computes is one the
// unmasked step could: a masked position folds into the maximum as the head's first score, which every P >= 1 attends,
// so no sentinel widens what the maximum holds. The maximum's fold column IS j, read against P itself; the index and
// weight stages compare the flat column with the head's threshold v*att + P.
//
// Precisions. Q, K, V and the table E are int8 in memory — what an int8 model stores, and what lets the certifier
// prove every sum and the index product inside the int32 integer datapath, which every stage runs on (the seed
// declares them at the datapath's integer). The scores, weights and context are that integer; P and the thresholds
// the target's index integer.
#ifndef LOWERINGS_ATTENTION_LUT_H_
#define LOWERINGS_ATTENTION_LUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"
#include "targets/target.h"

namespace spatial {

// What a LutAttentionSpec means, read once for the lowering and the reference: `attended` positions (the cache's l, or
// a literal P), `named` when P is the program's (operand 4), query head v reading K/V head v / group.
struct LutShape {
  int64_t h = 1, kv = 1, hd = 1, l = 1, n = 1;
  int64_t group = 1;
  int64_t attended = 1;
  bool named = false;
  int64_t m = 0, s = 0;
};
// Reads `spec.lut_attention()` with the refusals below (those of the spec alone).
absl::StatusOr<LutShape> LutShapeOf(const proto::OpSpec& spec);

// OpSpec.lut_attention: operands 0 Q (1 x h*hd), 1 K (1 x l*kv*hd), 2 V (1 x l*kv*hd), 3 E (1 x table_len), then P
// (1 x 1) when the position is named; result 1 x h*hd. A named P is checked at run time, 1 <= P <= l, or the run
// faults.
//
// Refusals: NotLowered("a LUT attention with no heads, no head dimension, no cache or no table, or query heads that do
// not group over its K/V heads"); NotLowered("a literal attention position P outside [1, N] ..."); NotLowered("a LUT
// attention whose index product (max - s) * M can leave the integer datapath ...") when |M| is too large for int8
// scores of hd terms to be proven inside the datapath's integer; MissingCompute without an integer datapath;
// MissingPrecision without int8 storage or an index integer; AccTilesExceeded when h*att scores or h*hd results are
// wider than an accumulator page; a wrong operand count. A negative field or shift is InvalidArgument.
absl::StatusOr<Composition> FromLutAttention(const proto::OpSpec& spec, const Target& target);

// The exact integer reference (reference_lut.cc): s_j = q.k_j; w_j = E[clamp(((max - s_j) * M) >> S, 0, n - 1)] for
// attended j (j < P, or j < att), 0 past P; ctx = floor(sum_j w_j v_j / sum_j w_j), the shift and the division
// flooring toward -infinity. Inputs by operand name, shaped as FromLutAttention declares them, every value an integer.
// A P outside [1, l] or a zero denominator is InvalidArgument (the program faults there).
absl::StatusOr<TensorMap> ReferenceLutAttention(const proto::OpSpec& spec, const TensorMap& inputs);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_LUT_H_
