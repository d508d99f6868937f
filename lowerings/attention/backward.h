// Attention's backward pass (issue #17; the spec is proto/op.proto's AttentionBackwardSpec): FlashAttention-2's
// backward (Dao 2023, Algorithm 2) as lowered programs. Given the forward's Q, K, V, its output O, the output's
// gradient dO and the forward's per-row log-sum-exp L, with P = e^(scale * Q K^T - L) recomputed block by block:
//   D  = rowsum(dO * O)                       (one value per query row and head)
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ = scale * dS K,  dK = scale * dS^T Q.
// Nothing of size rows x l is ever stored: P, dP and dS live one block at a time in a site.
//
// ★ TWO FOLDS, NO ATOMICS. FlashAttention-2 accumulates dQ with atomic adds from the key-block loop; the algebra has
// no atomics (items write disjoint tiles), so each gradient has the loop it accumulates over, and the second fold
// recomputes S and dP: seven products a (query block, key block) pair where FlashAttention-2 has five.
//   1. "{tag}_dq_..." — item (chunk of query tiles, query head), folding blocks of key tile rows: D and the row
//      statistics in the prologue, S = Q K^T, P, dP = dO V^T, dS, dQ += dS K (the matrix engine's products,
//      accumulated onto the fp32 running dQ by the packer). The epilogue also writes D and L as rows ("column
//      layout": query q's value at column q of a one-row tensor per head), the form the second fold reads them in.
//   2. "{tag}_dkv_..." — item (chunk of key tile rows, query head), folding blocks of query tiles: the TRANSPOSED
//      scores S^T = K Q^T (so every product is one the matrix engine takes: A · B or A · B^T), P^T, dV += P^T dO,
//      dP^T = V dO^T, dS^T, dK += dS^T Q.
//   3. "{tag}_group_sum_..." — with GQA (group = h / kv > 1) the second fold writes each query head's dK and dV
//      (fp32), and this section sums a K/V head's group: FlashAttention-2's dK, dV summed over the heads that read it.
//
// ★ CAUSAL TRIPS BY RANGE, AS THE PREFILL FOLD (flash_prefill.h). A query chunk sees only the key blocks below its last
// row's limit; a key chunk is seen only by the query blocks from its first position's first reader on. Each fold's
// chunks are cut into ranges, one section each, folding exactly those blocks (literal counts and origins), the rest
// masked inside a block: P is exactly 0 where masked, so dS is too.
//
// ★ LAYOUTS (all dense, row-major): Q rows x h*hd, K l x kv*hd, V l x kv*vd, O and dO rows x h*vd, L rows x h (fp32).
// dQ (OpSpec.out) rows x h*hd, "{out}_dk" l x kv*hd, "{out}_dv" l x kv*vd. Intermediate tensors: "{out}__bwd_delta",
// "{out}__bwd_lse" (1 x h*tiles*tile, fp32) and, grouped, "{out}__bwd_dk_heads", "{out}__bwd_dv_heads" (fp32).
//
// Claims "attention backward in {p}". The K/V and Q/dO blocks are multicast along the chunks that share them.
#ifndef LOWERINGS_ATTENTION_BACKWARD_H_
#define LOWERINGS_ATTENTION_BACKWARD_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// What an AttentionBackwardSpec means, read once for the lowering and the reference alike.
struct BackwardShape {
  int64_t h = 0;
  int64_t kv = 0;
  int64_t hd = 0;
  int64_t vd = 0;
  int64_t l = 0;
  int64_t rows = 0;
  bool causal = false;
  double scale = 0.0;  // resolved: the spec's, or 1 / sqrt(hd)

  int64_t group() const { return h / kv; }
  // Query row t attends positions j < Limit(t): the rows are the last `rows` positions when causal.
  int64_t Limit(int64_t t) const { return causal ? l - rows + t + 1 : l; }
};

// Refusals and errors: a negative size or a scale that is not finite and positive-or-zero is InvalidArgument naming
// the field; NotLowered("an attention backward with no heads, no query rows or no head dimension"); NotLowered for
// query heads that do not group over the K/V heads; InvalidArgument for a causal block of more rows than positions.
absl::StatusOr<BackwardShape> BackwardShapeOf(const proto::OpSpec& spec);

// OpSpec.attention_backward, operands [Q, K, V, O, dO, L]. Refusals beyond the shape's: NotLowered on a tile that is
// not square or head widths that are not whole tiles, or when no blocking fits a site; MissingCompute without a float
// (or, causal or with a tail, an integer) datapath; MissingPrecision without an fp32 accumulator.
absl::StatusOr<Composition> FromAttentionBackward(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_BACKWARD_H_
