// The row normalizations (seed 002, original lines 1787-2075): a reduction per row, then a banded rescale, on a FLAT
// 1 x rows*cols activation whose rows (heads) are bands of `cols` columns. When the flat row does not fit one
// accumulator page, the forms of lowerings/row_norms_blocked.h take over, chosen here as the seed chooses them.
#ifndef LOWERINGS_ROWS_ROW_NORMS_H_
#define LOWERINGS_ROWS_ROW_NORMS_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// y[h, i] = x[h, i] / sqrt(sum_i x[h, i]^2 + eps) over `rows` heads of `cols` (operand [x], flat 1 x rows*cols).
// The flat form ("l2norm_{rows}x{cols}": square, reduce_rows, row_xform = Rsqrt{eps, over 1}, banded rescale) while
// the row fits a page and its rows a tile; the head as the work item (BlockedL2Norm, same name) when the row needs
// blocking and one head does not -- ★ L2NORM REDUCES PER HEAD, SO IT BLOCKS PER HEAD.
// Refusals beyond the seed's: a per-head form whose heads are not whole tiles (the seed addresses head h at tile
// h*cols/TC without checking), and a flat form whose rows exceed a tile's rows (the seed's implicit limit).
absl::StatusOr<Composition> FromL2Norm(const proto::OpSpec& spec, const Target& target);

// The fused row op, RMS norm: y[h, j] = v[h, j] * rsqrt(sum_j v[h, j]^2 / cols + eps) * w[j], v = x (+ residual).
// Operands [x, weight?, residual?, bias?] (weight and bias: cols elements shared by every row; residual: rows*cols).
// Dispatch, the seed's from_row_norm_flat then blocked_rms_norm:
//   - the row fits a page and its rows a tile: the flat twin "rmsnorm_flat_{rows}x{cols}" (refuses an rmsnorm's
//     bias with the seed's message). EXTENSION: a LAYER_NORM there is lowered too, "layernorm_flat_{rows}x{cols}":
//     y = (v - mean) * rsqrt(var + eps) * w + b, the population variance -- the seed refuses it ("a composed
//     layernorm row op ... no flat twin yet");
//   - the row needs blocking, a head does not, no residual or bias, whole-tile heads: the head is the item,
//     "rmsnorm_heads_{rows}x{cols}" (BlockedHeadRms);
//   - otherwise, for one row or for token rows (per_head false): the streamed four or five sections of
//     BlockedRmsNorm, the sum of squares as a matmul against ones;
//   - per_head rows that fit none of these are refused: the streamed form keeps a rows x cols matrix, which is not
//     the flat layout a per-head activation has in a composition.
absl::StatusOr<Composition> FromFusedRow(const proto::OpSpec& spec, const Target& target);

// Whether one head of `cols` is a work item of the per-head forms (BlockedHeadRms, DenseHeadRms): it fits an
// accumulator page, and head h starts at tile h * cols / TC. A layer asks it before it norms a prefill's heads dense.
bool HeadIsItem(int64_t cols, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ROWS_ROW_NORMS_H_
