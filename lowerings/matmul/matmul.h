// C[m x n] = A[m x k] · B[k x n] through MatmulTiles (DESIGN §3.4; the seed's matmul file is not available, so this
// is its role in the algebra written out, as tt-metal's multicast matmul runs it): every tensor a dense, tiled
// rows x cols matrix in its format, accumulated in the target's matrix accumulator (fp32).
#ifndef LOWERINGS_MATMUL_MATMUL_H_
#define LOWERINGS_MATMUL_MATMUL_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Operands [A, B]; the result is OpSpec.out. The multicast decomposition of matmul_blocking.h: one item per
// per_site_m x per_site_n block of C, A's block row multicast along ITEM_X and B's column along ITEM_Y, the first
// K block in the prologue (a plain product writes the fp32 accumulator), the rest folded (accumulating in place),
// the epilogue packing a Dst's worth of tiles at a time to the output format and storing it. MatmulSpec's
// math_fidelity goes on every MatmulTiles; in0/in1/out_format set the tensors' and buffers' formats (unset: the
// target's matrix input precision). Section "matmul_{m}x{k}x{n}", claim "matmul in {matrix_in}".
absl::StatusOr<Composition> FromMatmul(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_MATMUL_MATMUL_H_
