// from_attention (seed 002, original lines 3735-3832): the `attention` op kind — GQA attention of a block of query
// rows over a cache, decode (one query row) or a causal prefill block, with literal or named positions, sliding and
// chunked windows, sinks, a soft cap before the mask, and a scale.
//
// The spec is read by AttentionShapeOf (geometry.h), so every form agrees on what it means; this file makes the
// seed's one choice between the forms:
//   ★ A HEAD IN WHOLE TILES TAKES THE FLASH FORM — every real attention layer does (AttentionReadsDense: keys and
//     values whole tiles, query heads a multiple of the K/V heads). Query head v reads K/V head (v mod h) / group,
//     which is not affine in v, so the item carries both and the cache streams in blocks: FlashFormAttention
//     (grouped_decode.h), which tries the grouped decode first (★ ONE ROW'S QUERY HEADS THAT SHARE A K/V HEAD STREAM
//     IT ONCE) and falls back, on any refusal of it, to one item per query head.
//   Otherwise the three flat sections of sections.h.
// AttentionSpec.form overrides the choice (`spatial lower --attention-form`): FORM_SECTIONS takes the three sections
// whatever the heads, FORM_FLASH the flash form, refused by message where the heads are not whole tiles.
//
// Operand layouts follow the form: the flash form reads Q (T x h*hd), K (l x kv*hd) and V (l x kv*vd) as DENSE
// matrices and writes T x h*vd ("a table an attention reads dense is written dense too"); the three-section form reads
// and writes the same values as flat rows. The values are the same row-major numbers either way.
#ifndef LOWERINGS_ATTENTION_ATTENTION_H_
#define LOWERINGS_ATTENTION_ATTENTION_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// OpSpec.attention: operands 0 Q, 1 K, 2 V, then P when the position is named, then the sinks (one logit per head).
// Refusals, with the seed's messages (geometry.h's AttentionShapeOf): "an attention with no heads, no query rows, no
// head dimension or an empty cache"; "a window of no positions — every row's softmax would be empty"; "a block of
// query rows with no causal bound"; "a literal attention position P outside [1, N] ..."; a wrong operand count
// ("attention takes 4 operands, got 3"); and each form's own (flash.h, grouped_decode.h, sections.h).
absl::StatusOr<Composition> FromAttention(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_ATTENTION_H_
