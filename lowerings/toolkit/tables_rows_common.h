// Small pieces the tables-and-heads and rows families share (seed 002, original lines 1543-1565, 5325, and the
// epsilon and accumulator rules every normalization applies): whole-tile widths, the grouped items of a flat row of
// runs, a site's footprint, the ones tile a reduction's scaler operand reads, the epsilon of an Rsqrt.
#ifndef LOWERINGS_TOOLKIT_TABLES_ROWS_COMMON_H_
#define LOWERINGS_TOOLKIT_TABLES_ROWS_COMMON_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "spatial/builder.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// Every width is a whole number of tiles (the seed's whole_tiles).
bool WholeTiles(std::initializer_list<int64_t> widths, const Target& target);

// The items of a flat row of `groups` runs of `run_t` tiles, `blk` tiles an item: item (g, j) owns tiles
// [g*run_t + j*blk, g*run_t + (j+1)*blk); ids g-major (the seed's grouped_block_items).
std::vector<WorkItem> GroupedBlockItems(int64_t groups, int64_t run_t, int64_t blk);
// The same over a matrix of row_tiles tile rows of `groups` groups each: item y = r * groups + g (its linear run is
// then y * run_t, as a row of the matrix is whole groups), x a block; out row r, columns g * run_t + x * blk.
std::vector<WorkItem> DenseGroupedBlockItems(int64_t row_tiles, int64_t groups, int64_t run_t, int64_t blk);

// Bytes one site holds for the section: every buffer at its declared depth (the seed's site_footprint).
int64_t SiteFootprint(const Section& s, const Target& target);

// The seed's flat and column-blocked forms load every operand whole, so a wide one outgrows a site's local memory
// ("inputs wider than local memory must fail this check", guide seed002-A §3.2): refused, not emitted.
// "NotLowered: a flat {what} whose operands, loaded whole, need 1601536 bytes of a site's 1397984". Passes a
// refusal or error through.
absl::StatusOr<Composition> FitSite(absl::StatusOr<Composition> c, std::string_view what, const Target& target);

// The seed's float sections fold at AccPolicy::F32 (for_result of a float is fp32): a target without an fp32
// accumulator (Grayskull's Dst is bf16 only) or without fp32 storage for the fold's scratch has no section to lower.
// "MissingPrecision: an fp32 accumulator (Dst) for {what} (target X)".
absl::Status RequireFp32Accumulator(std::string_view what, const Target& target);

// The reduce engine's scaler operand: a TR x TC Param of ones named `name` at `p` (Tensix's reduce_tile multiplies
// every term by a constant tile and REQUIRES one; every divide of these chains happens once, in the transform);
// `copies` of the tile side by side (TR x copies * TC) where readers should find it on several DRAM channels.
TensorId OnesTile(Template& t, const std::string& name, Precision p, int64_t copies = 1);

// eps in the Rsqrt transform's nano units. A negative or non-finite eps is InvalidArgument; an eps that is not a
// whole number of nano units would be silently rounded by the transform, so it is refused:
// "NotLowered: an epsilon of 1.5e-10 that is not a whole number of nano units".
absl::StatusOr<int64_t> EpsNano(std::string_view kind, double eps);

// A fused row's dense_heads (FusedRowSpec): 0 (the flat form) or a positive divisor of rows, else InvalidArgument
// "fused_row.dense_heads (3) does not divide rows (8): the heads of every token row". The lowering's and the
// reference's check.
absl::Status CheckDenseHeads(int64_t dense_heads, int64_t rows);

}  // namespace spatial

#endif  // LOWERINGS_TOOLKIT_TABLES_ROWS_COMMON_H_
