// The per-head matmul (seed 002, original lines 1464-1532 and 1717-1785): Y = X matmul W across H heads, the
// weighted-sum shape of a latent attention's per-head projections. Unit u (row u / H, head h = u mod H) owns output
// columns [u*b, (u+1)*b): Y[u*b + r] = sum_e X[u*a + e] * W[(h*a + e)*b + r].
#ifndef LOWERINGS_MATMUL_HEAD_MATMUL_H_
#define LOWERINGS_MATMUL_HEAD_MATMUL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Operands [X (1 x m*heads*a), W (heads*a x b)].
// m == 1 at whole-tile a and b: ★ A PER-HEAD PRODUCT IS A PER-HEAD GEMV -- item (h, o) is output tile o of head h,
// the head's a/TC input tiles against the a/TC x 1 tile column o of its rows of W, which is a Param (the weights the
// lowering embeds, declared as the (heads*a) x b matrix it is, so W is never on chip whole). Needs a square tile
// (a weight tile's rows are the input's elements) and a site that holds the head's inputs and weight column.
// Section "head_matmul_1x{heads}x{a}x{b}_tiled".
// Otherwise the flat form: X and W (an Input, flat 1 x heads*a*b) loaded whole, one Generic folding ROW over a
// head's a inputs, one band per unit; no blocking. Section "head_matmul_{m}x{heads}x{a}x{b}".
// Claim "per-head matmul in {elem}".
absl::StatusOr<Composition> FromHeadMatmul(const proto::OpSpec& spec, const Target& target);

// The tiled form for callers that compose their own sections (a latent attention's absorbed projections): head h's
// a inputs are the a elements from h*x_every + x_from of X (1 x heads*x_every), so a head's part of a wider row is
// read in place. Its ones tile is named `scaler`. Refused (NotLowered) unless a, b, x_every and x_from are whole
// tiles with x_from + a <= x_every, and as FromHeadMatmul's tiled form.
struct HeadMatmulTiles {
  OperandRef x;
  int64_t x_every = 0;
  int64_t x_from = 0;
  OperandRef w;
  std::string out;
  int64_t heads = 0;
  int64_t a = 0;
  int64_t b = 0;
  std::string scaler;
};
absl::StatusOr<Composition> TileHeadMatmul(const HeadMatmulTiles& hm, const Target& target);

// The same products over `rows` token rows (a prefill's), on the matrix engine: X is the DENSE rows x heads*x_every
// matrix, Y the dense rows x heads*b one. Item (token tile ITEM_Y, head ITEM_X) folds the head's a/TC input tiles of
// its tile row, K blocks of up to eight, against the head's rows of W (its whole b wide), multicast along the token
// tiles; the result packed to the datapath's precision. Section "head_matmul_{rows}x{heads}x{a}x{b}_rows". Refused as
// TileHeadMatmul, and when a head's K block and weight rows do not fit a site.
absl::StatusOr<Composition> TileHeadMatmulRows(const HeadMatmulTiles& hm, int64_t rows, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_MATMUL_HEAD_MATMUL_H_
