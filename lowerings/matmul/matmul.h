// C[m x n] = A[m x k] · B[k x n] through MatmulTiles (DESIGN §3.4; the seed's matmul file is not available, so this
// is its role in the algebra written out): every tensor a dense, tiled rows x cols matrix at the matrix engine's
// operand precision, accumulated in the target's matrix accumulator (fp32).
#ifndef LOWERINGS_MATMUL_MATMUL_H_
#define LOWERINGS_MATMUL_MATMUL_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Operands [A, B]; the result is OpSpec.out. One item per block of up to RowBlockTiles output tiles along n (the
// block divides n's tiles, so every item is alike), item grid (m tiles, n blocks). With more than one K tile the
// section folds over K: the prologue zeroes a carried fp32 accumulator, each block loads A's tile and B's block
// row and accumulates, the epilogue packs the accumulator to the output precision and stores it. One K tile needs no
// fold. Section "matmul_{m}x{k}x{n}", claim "matmul in {matrix_in}".
absl::StatusOr<Composition> FromMatmul(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_MATMUL_MATMUL_H_
