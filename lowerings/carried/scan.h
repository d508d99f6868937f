// The scan (issue #17; seed 003's ScanOp with a discount factor; the spec is proto/op.proto's ScanSpec): along the
// steps (rows) of a steps x lanes matrix, y_t = d_t * y_(t-1) + x_t (SUM) or max(y_(t-1), x_t) (MAX), every lane its
// own recurrence, with the inclusive and the exclusive outputs.
//
// ★ A FOLD WITH A CARRIED PAGE. An item is a tile of lanes; the fold's block b is tile row b of the steps. The carried
// page holds the block's inclusive outputs as they are made: step j of the block is one Generic that rewrites the page
// with row j = combine(row j-1, x row j, d row j) and every other row as it was (row -1 is the previous block's last
// row, still in the page when step 0 runs; the prologue writes the identity there). A step depends on the one before,
// so the tile_rows steps of a block are tile_rows stages in order: the recurrence is sequential, as it is on the
// machine's vector engine. The exclusive output is the block's page shifted down a row, its first row the carry the
// block started from (saved by the block's first stage), times d for SUM.
//
// ★ THE ONLINE SOFTMAX'S DENOMINATOR, WRITTEN WITH IT (`softmax_denominator`): the running maximum m is the MAX scan of
// x, m_(t-1) its exclusive output, and the denominator the SUM scan of e^(x_t - m_t) discounted by e^(m_(t-1) - m_t):
// s_t = e^(m_(t-1) - m_t) s_(t-1) + e^(x_t - m_t) = sum_(j<=t) e^(x_j - m_t) (the rescale identity), the pair the flash
// fold carries. At t = 0 the discount is e^(-1e30 - m_0) = 0.
//
// Sections: "scan_{sum|max}_{steps}x{lanes}" (with "_discounted", "_exclusive"), or "scan_softmax_denominator_..." .
// Claims "scan in fp32" (the carried page is fp32; the results are stored at the datapath's precision).
#ifndef LOWERINGS_CARRIED_SCAN_H_
#define LOWERINGS_CARRIED_SCAN_H_

#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "spatial/tensor_data.h"
#include "targets/target.h"

namespace spatial {

// OpSpec.scan, operands [x] or [x, d] (discounted). Refusals: NotLowered("a scan of no steps or no lanes"); NotLowered
// for a discounted or exclusive MAX scan or a softmax denominator that is discounted, exclusive or MAX ("...: the
// denominator is its own SUM scan, discounted by the maximum's rescale"); MissingPrecision without an fp32
// accumulator. Negative sizes are InvalidArgument.
absl::StatusOr<Composition> FromScan(const proto::OpSpec& spec, const Target& target);

// The f64 reference: each lane's recurrence step by step; the softmax denominator by its direct formula
// sum_(j<=t) e^(x_j - m_t), not the recurrence.
absl::StatusOr<TensorMap> ReferenceScan(const proto::OpSpec& spec, const TensorMap& inputs);

}  // namespace spatial

#endif  // LOWERINGS_CARRIED_SCAN_H_
