// The depthwise causal conv1d of seed 002 (original lines 2668-3294 and 12021-12217): `Y[c] = Σ_t CS'[t, c]·W[t, c]`
// with `CS' = shift(CS) ← X`, the newest token at tap `taps − 1`, over a `taps`-deep decode ring that is CARRIED
// STATE: the ring CS is a State tensor, read and written in place, and the composition's declared state order says
// when each section reads and writes it.
//
// ★ THE RING IS WRITTEN IN ONE SECTION AND READ IN THE NEXT, AND THAT IS THE WHOLE POINT. The update and the reduction
// are separated by a barrier, so the order between them is a fact the certificate checks (the state order) and the VM
// enforces (StaleStateRead) rather than an accident of which engine happened to run first.
//
// Operands [x, w, cs]: the new input (1 x chan; a block of rows: the dense rows x chan matrix a projection writes),
// the weight and the ring (taps x chan, held flat 1 x taps*chan or as the taps x chan matrix, see RingIsMatrix).
// OpSpec.out is Y (1 x chan; a block: rows x chan).
#ifndef LOWERINGS_CARRIED_CAUSAL_CONV_H_
#define LOWERINGS_CARRIED_CAUSAL_CONV_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The seed's from_causal_conv: refuses no taps or no channels ("a causal conv with no taps or no channels"), a target
// without an fp32 accumulator (MissingPrecision); rows > 1 -> BlockCausalConv; a matrix ring -> BlockedCausalConv;
// otherwise FlatCausalConv.
absl::StatusOr<Composition> FromCausalConv(const proto::OpSpec& spec, const Target& target);

// Whether the ring is held as the taps x chan matrix it is (a column block of every tap an item) rather than as one
// flat row: when the row is wider than an accumulator page, or the single step's flat form does not build or does not
// fit a site. ONE decision for the single step and a block of rows, so a prefill chunk leaves the ring in the layout
// a decode reads.
bool RingIsMatrix(const proto::CausalConvSpec& spec, const Target& target);

// The single step over a flat ring, TWO one-item sections: "conv_ring_{taps}x{chan}" (Exact: CS' = shift(CS) <- X,
// two bands) then "conv_taps_{taps}x{chan}" (the tap reduction against the UPDATED ring, the fold on the ROW).
absl::StatusOr<Composition> FlatCausalConv(const proto::CausalConvSpec& spec, const std::vector<OperandRef>& ops,
                                           const std::string& out, const Target& target);

// The single step over a matrix ring, one channel tile per item, the same two sections. ★ A CAUSAL CONV BLOCKS BY
// CHANNEL, AND NEEDS NO HALO. Refuses "a blocked causal conv whose channel count is not a whole number of tiles" and
// (beyond the seed, which reads past the page) a ring of more taps than a tile has rows.
absl::StatusOr<Composition> BlockedCausalConv(const proto::CausalConvSpec& spec, const std::vector<OperandRef>& ops,
                                              const std::string& out, const Target& target);

// A block of rows > 1 tokens, TWO sections: "conv_rows_{rows}x{chan}_taps{taps}" (every output row against the ring
// as it came in) then "conv_ring_rows_{rows}x{chan}_taps{taps}" (Exact: the ring the block leaves) — read the old
// ring, then write the new one. Refuses "a block causal conv whose ring is taller than a tile row" and, for a matrix
// ring, the blocked form's channel refusal.
absl::StatusOr<Composition> BlockCausalConv(const proto::CausalConvSpec& spec, const std::vector<OperandRef>& ops,
                                            const std::string& out, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_CARRIED_CAUSAL_CONV_H_
