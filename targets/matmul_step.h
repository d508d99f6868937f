// One K tile of one osh x osw Dst sub-block of a matmul on a target (tt-metal's matmul_block inner step): what the
// unpackers read and what the math thread spends. The machine's MatmulTiles cost (sim/machine/stage_cost.cc) and the
// lowering's blocking estimate (lowerings/matmul/matmul_blocking.cc) both read it, so the lowering compares
// blockings by the cost the machine charges.
#ifndef TARGETS_MATMUL_STEP_H_
#define TARGETS_MATMUL_STEP_H_

#include <cstdint>

#include "targets/target.h"

namespace spatial {

struct MatmulStep {
  // The unpackers: osh A tiles (SrcB) and osw B tiles (SrcA) at once, each within one unpacker's rate and both
  // within the shared L1 port's (Costs.unpack_bytes_per_cycle, unpack_both_bytes_per_cycle).
  double unpack = 0;
  // The math thread: osh * osw tile products at `product_cycles`, plus, where the target holds the reused operand in
  // pairs (Costs.matmul_held_pairs), the wait per pair for the pair's second held tile and the first streamed one.
  double math = 0;
};

// a_tile_bytes / b_tile_bytes: one tile of A and of B as stored; product_cycles: one tile product at the fidelity.
MatmulStep MatmulSubBlockStep(const Target& target, int64_t osh, int64_t osw, double a_tile_bytes,
                              double b_tile_bytes, double product_cycles);

}  // namespace spatial

#endif  // TARGETS_MATMUL_STEP_H_
