// Full attention (seed 002, original lines 4597-4652): C = attention(Q, K, V) over t positions and h heads — t query
// rows of h heads, each reading its own K/V head and attending over all t positions. Unmasked, as the vision tower's
// block is: every row sees every position.
#ifndef LOWERINGS_ATTENTION_FULL_ATTENTION_H_
#define LOWERINGS_ATTENTION_FULL_ATTENTION_H_

#include "absl/status/statusor.h"
#include "lowerings/attention/geometry.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The flash geometry of a full attention: QueryHeads{t, h, 1}, kvw = h, vd = hd, rows = l = t, no limit, window or
// sinks, scale 1/sqrt(hd).
FlashGeometry FullAttentionGeometry(const proto::FullAttentionSpec& spec);

// OpSpec.full_attention, operands [Q (t x h*hd), K (t x h*hd), V (t x h*hd)], result t x h*hd, all dense. A head in
// whole tiles (FullAttentionReadsDense) takes the flash form, tag "full_attn": section
// "full_attn_flash_blocks_{items}x{hd}_l{t}_b{tile}". A head that is not whole tiles takes the three flat sections
// (sections.h), Q, K, V and the result then flat rows of the same values. Refusals: NotLowered("a full attention with
// no positions, no heads or no head dimension"), and each form's own (the flash fold's: a tile that is not square,
// MissingPrecision without an fp32 accumulator). A negative field is InvalidArgument.
absl::StatusOr<Composition> FromFullAttention(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_FULL_ATTENTION_H_
