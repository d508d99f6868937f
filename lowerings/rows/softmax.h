// The row softmax of the composition layout (seed 002, original lines 2077-2313): y[r, j] = exp(x[r, j] - max_r) /
// sum_j exp(x[r, j] - max_r) over `rows` rows of `cols`, on a FLAT 1 x rows*cols activation. Attention's
// probabilities are this section (heads as rows, cache positions as columns), and so is a standalone softmax and a
// router's: one chain -- row max, centred exp, row sum, one reciprocal per row, banded rescale -- in one place.
#ifndef LOWERINGS_ROWS_SOFTMAX_H_
#define LOWERINGS_ROWS_SOFTMAX_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lowerings/toolkit/common.h"
#include "proto/op.pb.h"
#include "spatial/precision.h"
#include "spatial/builder.h"
#include "spatial/program.h"
#include "targets/target.h"

namespace spatial {

// The seed's flat_softmax_rows_at: one section named `label` reading the flat input `input` (1 x rows*cols) and
// writing `out_name` (1 x rows*cols), both at `precision` -- the target's element precision, or the accumulator's
// width for a softmax whose result DECIDES something (a router's expert choice), where a bf16 rounding of a logit
// moves its weight by e^delta and can flip a top-K pick.
//
// `sinks`, when given, names a flat 1 x rows tensor of one logit per row that joins the row's softmax and takes no
// value (gpt-oss's attention sinks): the row's maximum starts from it and its term joins the denominator, as ggml's
// soft_max_ext takes them.
//
// Stages (chain order): row_max, [row_max_sink], exp_centred, row_sum, [row_sum_sink], recip, scale. The reduce
// scaler is the Param "sm_scaler" at the element precision, "sm_scaler_fp32" at another (a composition unifies
// tensors by name, so a shared constant's name says what it holds). Claim "row softmax in {precision}".
//
// Refusals: MissingCompute without a float datapath; MissingPrecision without an fp32 accumulator; NotLowered when
// the rows do not fit one tile-high page ("a flat row softmax over 40 rows, more than a tile's 32") -- the seed's
// implicit limit (guide seed002-A §3.8), stated; AccTilesExceeded when the flat row is wider than the accumulator
// (the seed has no blocked softmax) under the seed's DstPolicy::kWholePage. Under kStreamed the elementwise pages
// (the exponentials, the rescale) stream through Dst a tile at a time, as tt-metal's softmax kernel takes a row
// wider than Dst, and only the statistics hold their one-tile pages: a router's fp32 softmax over 512 experts.
absl::StatusOr<Composition> FlatSoftmaxRowsAt(const OperandRef& input, const std::string& out_name, int64_t rows,
                                              int64_t cols, const std::string& label, Precision precision,
                                              const std::optional<OperandRef>& sinks, const Target& target,
                                              DstPolicy policy = DstPolicy::kWholePage);

// The chain every row softmax runs (FlatSoftmaxRowsAt's, and a prefill's router rows, lowerings/moe/moe_prefill.h):
// over `rows` rows of `cols` in page `in` (row r's element j at r·pitch + j), each row's max (with its sink's logit
// when `sink_input` is set: called after the max's stage, it declares the sink and gives its buffer and per-row map), the centred exponentials into a rows x cols plane `ex`
// (row r at r·PageWidth(TilesOf(cols))), their sum (plus the sink's term) and one reciprocal a row into `inv` (row r
// at column 0). Scratches at `acc`; `scaler`, when given, is each reduction's engine operand (a tile of ones).
// `chain` is the stages in order, for the caller's wiring.
struct RowSoftmax {
  BufferId ex = 0, inv = 0;
  std::vector<StageId> chain;
};
using SinkInput = std::function<std::pair<BufferId, ElemAccess>()>;
RowSoftmax AddRowSoftmax(Template& t, BufferId in, int64_t rows, int64_t cols, int64_t pitch, Precision acc,
                         std::optional<BufferId> scaler, const SinkInput& sink_input = nullptr);

// FlatSoftmaxRowsAt at the target's element precision, without sinks.
absl::StatusOr<Composition> FlatSoftmaxRows(const OperandRef& input, const std::string& out_name, int64_t rows,
                                            int64_t cols, const std::string& label, const Target& target);

// OpSpec.softmax: operands [x] or, with `sinks`, [x, sinks]; at_acc computes at the accumulator's precision (fp32).
// Section "softmax_flat_{rows}x{cols}". Streamed (DstPolicy::kStreamed), as tt-metal's softmax takes a row wider than
// Dst — a departure from the seed, which refuses a row wider than the accumulator: a softmax of attention scores over
// a cache of 2048 positions lowers (an attention composed from its parts, passes/online_softmax.h). The rows and
// the site's memory still bound it (NotLowered).
absl::StatusOr<Composition> FromSoftmax(const proto::OpSpec& spec, const Target& target);

}  // namespace spatial

#endif  // LOWERINGS_ROWS_SOFTMAX_H_
