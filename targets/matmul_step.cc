#include "targets/matmul_step.h"

#include <algorithm>

namespace spatial {

MatmulStep MatmulSubBlockStep(const Target& target, int64_t osh, int64_t osw, double a_tile_bytes,
                              double b_tile_bytes, double product_cycles) {
  const auto& costs = target.proto().costs();
  MatmulStep step;
  step.math = static_cast<double>(osh) * static_cast<double>(osw) * product_cycles;
  const double one = costs.unpack_bytes_per_cycle();
  if (one <= 0) return step;  // no unpack cost: the machine charges none
  const double both = costs.unpack_both_bytes_per_cycle() > 0 ? costs.unpack_both_bytes_per_cycle() : 2 * one;
  const double a = static_cast<double>(osh) * a_tile_bytes, b = static_cast<double>(osw) * b_tile_bytes;
  step.unpack = std::max({a / one, b / one, (a + b) / both});
  if (costs.matmul_held_pairs()) {
    // tt-llk holds A (one tile per sub-block row) when the sub-block is at least as wide as it is tall, else B; a
    // pair needs two held tiles. Per pair the math waits for its second held tile and the first streamed tile.
    const bool hold_a = osw >= osh;
    const int64_t held_tiles = hold_a ? osh : osw;
    const double held = hold_a ? a_tile_bytes : b_tile_bytes, streamed = hold_a ? b_tile_bytes : a_tile_bytes;
    step.math += static_cast<double>(held_tiles / 2) * (held + streamed) / one;
  }
  return step;
}

}  // namespace spatial
