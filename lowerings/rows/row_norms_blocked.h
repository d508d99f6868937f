// The row normalizations at real widths (seed 002, original lines 11356-12019 and 14702-14857): when the flat
// 1 x rows*cols row does not fit one accumulator page, either the head becomes the work item (a per-head norm reduces
// per head, and one head fits), or the reduction streams as a matmul against ones over sections that each fit a site.
// FromL2Norm and FromFusedRow (lowerings/row_norms.h) choose among these; they are exposed for tests and for callers
// that compose them.
#ifndef LOWERINGS_ROWS_ROW_NORMS_BLOCKED_H_
#define LOWERINGS_ROWS_ROW_NORMS_BLOCKED_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// OpSpec.l2norm with the HEAD as the work item: each item loads its band of cols/TC tiles, squares, folds it with
// a one-row space (★ THE BAND IS ONE HEAD, SO THE 2-D VIEW HAS EXACTLY ONE ROW: a full-tile space would sum 31 rows
// of padding into the norm), takes Rsqrt{eps, over 1} and rescales. Section "l2norm_{rows}x{cols}", one item per
// head. Refuses heads that are not whole tiles or wider than the accumulator.
absl::StatusOr<Composition> BlockedL2Norm(const proto::OpSpec& spec, const Target& target);

// OpSpec.fused_row (RMS, operands [x, weight?]) with the HEAD as the work item: square, head_sum, head_rsqrt
// (Rsqrt{eps, over cols}: the divide by the head width happens ONCE, inside the transform), rescale x*inv[*w], the
// weight a Param per-column table every head reads. Section "rmsnorm_heads_{rows}x{cols}". Refuses a residual or a
// bias, and heads that are not whole tiles or wider than the accumulator.
absl::StatusOr<Composition> BlockedHeadRms(const proto::OpSpec& spec, const Target& target);

// OpSpec.fused_row (RMS, per_head, dense_heads = H, operands [x, weight?]) over DENSE token rows: x and the result are
// T x H*cols (T = rows / H), as a projection writes them. ★ A TILE ROW OF TOKENS IS THE ITEM'S ROWS: item (y, x) is
// tile row y of head x, a page of cols / TC tiles whose every row is a token — where the flat form's item is one
// head of one token, a tile of which one row is live — and the heads stay where the projection put them, so no
// relayout comes before or after. The same stages as BlockedHeadRms over the page's rows. Section
// "rmsnorm_dense_heads_{T}x{H}x{cols}". Refuses what BlockedHeadRms refuses, a spec that is not per_head, and a
// dense_heads that does not divide rows (InvalidArgument).
absl::StatusOr<Composition> DenseHeadRms(const proto::OpSpec& spec, const Target& target);

// OpSpec.fused_row, streamed. ★ A ROW REDUCTION OVER A ROW THAT DOES NOT FIT IS NOT A HARDER REDUCTION -- IT IS A
// STREAMED ONE: sum(x^2) IS a matmul x^2 * 1, which the matmul already streams over K blocks. Sections, each fitting
// a site, sharing tensors by name:
//   [0. xr  = x + residual      "xr_{cols}" | "xr_{rows}x{cols}"        ({y}__xr)]
//    1. xsq = base^2            "xsq_{cols}" | "xsq_{rows}x{cols}"      ({y}__xsq)
//    2. ssq = xsq * ones        "matmul_{rows}x{cols}x1"                 ({y}__ssq, ones {y}__ones a Param)
//    3. inv = rsqrt(ssq / cols) "rms_scale_1" | "rms_scale_{rows}x1"     ({y}__inv)
//    4. y   = base * w * inv    "rmsnorm_rescale_{cols}" | "..._{rows}x{cols}"
// One row is flat 1 x cols; ★ A STACK OF ROWS IS THE SAME FOUR SECTIONS OVER A MATRIX: rows x cols tensors, every
// row's contraction in the one weight-free pass. ★ AND WITH ITS REAL FILL: without a residual the base is x itself,
// read by two sections and stored by neither, so both declare it with the source's fill.
// Refusals (the seed's): "a blocked softmax or layernorm row op — only rmsnorm streams today", "a blocked rmsnorm
// with a bias term", "a blocked rmsnorm over no rows".
absl::StatusOr<Composition> BlockedRmsNorm(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ROWS_ROW_NORMS_BLOCKED_H_
