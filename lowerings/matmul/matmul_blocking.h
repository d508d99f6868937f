// How a matmul is cut into work: the decomposition tt-metal's multicast matmul uses (its
// matmul_multicore_reuse_mcast program factories and tech_reports/GEMM_FLOPS), written as a choice among
// candidates scored by the target's own costs.
//
//  - The output C (m_t x n_t tiles) is cut into per-item blocks of per_site_m x per_site_n tiles; both divide the
//    tile counts, so every block is whole and every Load stays inside its tensor.
//  - Items (y, x) form an items_y x items_x grid. When it fits the target's grid it is the 2-D layout: A's block
//    row is multicast along ITEM_X (the sites of one grid row), B's block column along ITEM_Y. Larger grids wrap
//    (item (y, x) on site (y mod grid_y, x mod grid_x)). A single row of blocks (a skinny m, the decode shapes) is
//    the 1-D layout: the items spread over the whole grid and A is multicast to all of them.
//  - K is folded in blocks of k_block tiles (in0_block_w): each fold block loads an A block of
//    per_site_m x k_block tiles and a B block of k_block x per_site_n tiles and accumulates into the fp32 block
//    kept in local memory; within a fold block the products of one Dst sub-block (osh x osw tiles) accumulate in
//    Dst.
//  - The first fold block is peeled into the prologue (a plain product, no zeroing pass, as tt-metal's first
//    block does not reload); the epilogue packs the accumulator to the output format in chunks of pack_w tiles
//    (what one Dst holds) and stores them.
// The candidates' footprint (the fp32 block, double-buffered A and B blocks, the packed chunks) must fit the
// site's local memory; the score is an estimate of the run's cycles: the larger of one site's (its rounds of items
// times the largest of the matrix work, the unpackers' reads with the accumulator's round trip, and its NoC
// traffic) and the chip's DRAM time (A read once per round of item columns, B once per round of item rows). The
// estimate only ranks; the simulator times the program.
#ifndef LOWERINGS_MATMUL_MATMUL_BLOCKING_H_
#define LOWERINGS_MATMUL_MATMUL_BLOCKING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/precision.h"
#include "targets/target.h"

namespace spatial {

struct MatmulShape {
  int64_t m_t = 1, k_t = 1, n_t = 1;  // tile counts
  Precision a = Precision::kBf16, b = Precision::kBf16, out = Precision::kBf16, acc = Precision::kFp32;
  double product_cycles = 32;  // one tile product at the matmul's fidelity
  bool pack_accumulate = false;  // the packer accumulates in local memory: no K block reloads the partials
};

struct MatmulBlocking {
  int64_t per_site_m = 1, per_site_n = 1;
  int64_t items_y = 1, items_x = 1;
  int64_t k_block = 1, k_blocks = 1;
  int64_t osh = 1, osw = 1;
  int64_t pack_w = 1;
  bool one_d = false;       // a single row of blocks spread over the whole grid
  int64_t rounds = 1;       // items on the busiest site
  double est_cycles = 0;    // the ranking estimate: the larger of site_cycles and the chip's DRAM time
  double site_cycles = 0;   // one site's estimated cycles
};

// Fails (NotLowered) when not even a one-tile block fits the site's memory, or when every block that does makes
// more work items than a section holds (the refusal names `what`, the spec's sizes).
absl::StatusOr<MatmulBlocking> ChooseMatmulBlocking(const MatmulShape& shape, const Target& target,
                                                    const std::string& what);

// The blocking a MatmulSpec's program_config names (tt-metal's out_block, in0_block_w and out_subblock), with the
// same estimate, instead of the chooser's. InvalidArgument, naming the field, when a block does not divide its
// dimension; NotLowered when the sub-block is over half of Dst, or the blocks do not fit a site's local memory;
// the work-item budget's refusal when there are more blocks than a section holds.
absl::StatusOr<MatmulBlocking> FixedMatmulBlocking(const MatmulShape& shape, const Target& target,
                                                   const proto::MatmulProgramConfig& config,
                                                   const std::string& what);

}  // namespace spatial

#endif  // LOWERINGS_MATMUL_MATMUL_BLOCKING_H_
