// RoPE-NEOX (seed 002, original lines 2315-2665 and 14319-14700): rotate-half over `h` heads of `hd` dims, each head
// rotating its leading 2·half dims as (i, i + half) pairs and passing the remaining hd − 2·half through — Qwen3.8's
// partial rotary; Qwen3's full rotary is half = hd / 2.
//
// The angles are OPERANDS, as the seed has them: a cosine and a sine table of `half` angles per table row. Head h of
// query row y turns by table row y (positions 0..rows), or, reading a cache, by row P − 1 + y where P is a literal or
// a named (run-time) 1-based position. RopeSpec.theta is the angles' base (1e6 for Qwen3); the lowering never
// computes an angle — the op reference does, from theta, to judge the program against the real rotation.
#ifndef LOWERINGS_ROPE_ROPE_H_
#define LOWERINGS_ROPE_ROPE_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Operands [q, rc, rs] (+ [p] for a named position, named by RopeSpec.from.named). q is 1 x h*hd; rc and rs are
// 1 x T*half with T = cache (from set) or rows. The result OpSpec.out is 1 x h*hd, "rope_{h}x{hd}_half{half}"
// (+ "_rows{rows}" past one row). A prefill's rows in whole tile rows, with hd and half whole tiles of a square
// tile, turn as the DENSE rows x (h / rows)*hd matrix (q and the result both; "_dense"): an item a tile of rows
// of one head, its tables' rows one block. Otherwise a head in whole tiles of a row wider than a page is the work
// item (the blocked form), or one flat stage, blocked by the result's columns past a page. Claim
// Approx("rotary embedding").
absl::StatusOr<Composition> FromRope(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ROPE_ROPE_H_
