// Multi-head latent attention, one decode step (DeepSeek-V2/V3; the spec is proto/op.proto's MlaSpec), in the
// absorbed form: W_uk is folded into the query and W_uv applied after the softmax, so the cache is never expanded
// into per-head keys and values. Seven sections:
//   1. "{out}__mla_qlat": each head's latent query, q_nope[h] W_uk[h] — the per-head GEMV of head_matmul.h, reading
//      the nope part of q in place.
//   2. "{out}__mla_qrope": each head's rope part of q (a tiled head slice).
//   3. "{out}__mla_qcat": the two joined per head, rank + rope wide — the width of a cached row.
//   4. "{out}__mla_q": that row as a DENSE heads x (rank + rope) matrix, head h on row h.
//   5. "{out}__mla_ctx": the flash fold (flash_fold.h) of every head over the ONE latent cache, grouped and latent:
//      the heads are query rows of one K/V head, tiles of them one item each, and a block's key page is its value
//      page (the values are the latent, the first rank columns of the cached row).
//   6. "{out}__mla_octx": the heads' latent contexts back as a flat row.
//   7. The result: each head's context times W_uv[h] (head_matmul.h again), 1 x heads*vd.
//
// ★ ONE FOLD SERVES ATTENTION AND MLA (seed 001's rule): the running softmax, its mask, its stability guards and its
// trip are flash_fold.h's; MLA only says how a block's scores and values come from the cache.
// ★ THE LATENT CACHE IS READ ONCE: 128 heads are four tiles of query rows, four items whose K/V head is the same, so
// each block is read from DRAM once and multicast to them (DESIGN §3.4).
#ifndef LOWERINGS_ATTENTION_MLA_H_
#define LOWERINGS_ATTENTION_MLA_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "lowerings/attention/geometry.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// What an MlaSpec means, read once for the lowering and the reference alike.
struct MlaShape {
  int64_t heads = 0;
  int64_t nope = 0;
  int64_t rope = 0;
  int64_t rank = 0;
  int64_t vd = 0;
  int64_t l = 0;         // cache positions declared
  int64_t attended = 0;  // the positions a literal (or unset) P covers; l when P is an operand
  std::optional<Bound> limit;  // P, when it is an operand (index 4)
  double scale = 1.0;
  int operands = 4;  // q, w_uk, cache, w_uv, then P when named
  int64_t rows = 1;  // query rows: row t attends P + t positions

  int64_t q_every() const { return nope + rope; }
  int64_t key() const { return rank + rope; }
};

// Reads `spec.mla()`. InvalidArgument: a negative field, a scale that is not finite, a named position that is not
// operand 4. NotLowered: "a latent attention with no heads, no head widths, no latent or an empty cache"; "a literal
// attention length outside its cache — ...".
absl::StatusOr<MlaShape> MlaShapeOf(const proto::OpSpec& spec);

// A prefill's rows (MlaSpec.rows > 1, q and the result DENSE T x ... matrices) take four sections: each head's
// latent query over the rows (the per-head product on the matrix engine, head_matmul.h's rows form), that query and
// each head's rope part copied side by side into the dense T x heads·(rank + rope) queries ("{out}__mla_q"), the
// flash fold with the rows as query rows of every head (each item one tile of a head's rows, row t limited to P + t
// positions), and the per-head W_uv product over the rows. No 1 x n row moves: T rows of one fill one row of every
// tile.
//
// OpSpec.mla: the seven sections above. Refused (NotLowered) unless nope, rope, rank and vd are whole tiles and the
// heads whole tile rows ("a latent attention whose widths are not whole tiles, or whose heads are not whole tile
// rows"), and as each section's lowering refuses.
absl::StatusOr<Composition> FromMla(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ATTENTION_MLA_H_
