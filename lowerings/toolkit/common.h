// What every lowering shares (seed 002, original lines 182-258 and 700-810): the refusals a lowering returns
// instead of a wrong program, the datapath an op names, the accumulator budget that decides when a row is blocked,
// the claims, operand bookkeeping, and the sealing of a section into a one-section composition.
#ifndef LOWERINGS_TOOLKIT_COMMON_H_
#define LOWERINGS_TOOLKIT_COMMON_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/op.pb.h"
#include "spatial/body.h"
#include "spatial/builder.h"
#include "spatial/precision.h"
#include "spatial/program.h"
#include "spatial/status_macros.h"
#include "targets/target.h"

namespace spatial {

// ── Refusals (DESIGN §3.6) ──
// A refusal is a status whose message starts with its kind and ": ", so a caller (and a test) can tell "this op
// cannot be mapped here" from a malformed request. NotLowered is Unimplemented; the others, which name a missing
// resource of the target, are FailedPrecondition.
absl::Status NotLowered(std::string_view what);
// "MissingCompute: a float elementwise datapath (target test_nofloat)".
absl::Status MissingCompute(std::string_view needed, const Target& target);
// "MissingPrecision: ... (target X)".
absl::Status MissingPrecision(std::string_view needed, const Target& target);
// "AccTilesExceeded: ...": a compute page larger than the accumulator holds.
absl::Status AccTilesExceeded(std::string_view what);
// True for a status made by one of the constructors above (or by Target::index_precision_for).
bool IsRefusal(const absl::Status& status);

// ── Datapaths and precisions ──
// Which elementwise datapath a stage's body runs on: named by the op, never guessed from its body (a float ReLU's
// max(x, 0.0) is integral arithmetic over float data).
enum class Datapath { kFloat, kInt };
inline Datapath DatapathOf(bool is_float) { return is_float ? Datapath::kFloat : Datapath::kInt; }
// The datapath's element precision, or MissingCompute naming it.
absl::StatusOr<Precision> DatapathPrecision(Datapath dp, const Target& target);
// The float precision of the target's elementwise datapath (the seed's elem_precision).
absl::StatusOr<Precision> ElemPrecision(const Target& target);
// A storage format a spec names in `field` ("matmul.in1_format"): `dflt` when unset; InvalidArgument when it is not
// a precision or not a float one; MissingPrecision when the target does not store it.
absl::StatusOr<Precision> FormatOf(proto::Precision p, std::string_view field, Precision dflt, const Target& target);
// The seed's AccPolicy::for_result(p).interm_precision(): fp32 for a float section, an integer as wide as the
// datapath for an integer one.
Precision AccFor(Precision p);
// The Dst a pointwise map of `in` to `out` computes in, as tt-metal's unary ops choose it (ttnn
// eltwise/unary/unary.cpp: fp32_dest_acc_en only for an fp32 or 32-bit integer input or output): a bf16 map runs in
// a 16-bit Dst, with the SFPU's bf16 variants (exp_21f, one Newton step, the result rounded to bf16), where the
// target has one; everything else as AccFor.
Precision MapAccFor(Precision in, Precision out, const Target& target);

// ── Claims ──
// Approx{"{what} in {precision}"}: the chain rounds where the datapath does; the reference is f64.
NumericsClaim ApproxIn(std::string_view what, Precision p);
// Exact when the body is integer arithmetic on an integer precision (int8 requant, saturation, int ReLU),
// ApproxIn(what, p) otherwise.
NumericsClaim ClaimOf(std::string_view what, const Body& body, Precision p);

// ── The accumulator budget ──
// Tiles a flat 1 x n row occupies: max(1, ceil(n / TC)).
int64_t TilesOf(int64_t n, const Target& target);
// How many result tiles one compute page may hold: the fp32 full-sync accumulator, at least 1. The seed uses the
// F32 policy even for bf16 sections.
int64_t RowBlockTiles(const Target& target);
// A row wider than the budget cannot be one whole-row item.
bool RowNeedsBlocking(int64_t cols, const Target& target);
// The largest divisor of row_t no larger than min(row_t, RowBlockTiles): the tiles one item moves (160 -> 8).
int64_t RowBlock(int64_t row_t, const Target& target);

// The shape a pointwise op maps over: 1 x n when the spec's shape is unset (both 0), else its rows x cols, which
// must account for the n elements. A negative shape is InvalidArgument "{kind} spec has a negative shape (-1 x 4)";
// one that does not hold n (a product that disagrees, or overflows int64, or half a shape) is InvalidArgument
// naming both: "silu spec's shape_rows x shape_cols = 2 x 4 = 8 elements disagrees with silu.n = 16".
absl::StatusOr<std::pair<int64_t, int64_t>> PointwiseShape(std::string_view kind, int64_t rows, int64_t cols,
                                                           int64_t n);

// What is known of an operand's n values at lowering time, as the tensor's init: Unknown -> External, integer
// fills -> Values, float fills -> ConstF / FloatValues. A fill that sets an element past n is InvalidArgument.
absl::StatusOr<TensorInit> InitOf(const proto::Fill& fill, int64_t n);

// ── Operands ──
// An operand's name and fill (the seed's names.operand(i)).
struct OperandRef {
  std::string name;
  proto::Fill fill;
};

// The spec's result name and its `count` operands, checked: a wrong count is "NotLowered: {kind} takes 1 operand,
// got 2"; an empty name, or a name used twice (tensors unify by name), is InvalidArgument.
absl::StatusOr<std::vector<OperandRef>> OperandsOf(const proto::OpSpec& spec, std::string_view kind, int count);

// A size field of a spec: negative is InvalidArgument "{kind}.{field} is negative (-3)"; zero is the refusal
// "NotLowered: a {kind} of an empty tensor" ("an" before a vowel).
absl::Status CheckElements(std::string_view kind, std::string_view field, int64_t value);

// A spec's sizes that may be zero but not negative: the first negative one is InvalidArgument
// "{kind}.{field} is negative (-3)", the message CheckElements gives.
struct SizeField {
  const char* name;
  int64_t value;
};
absl::Status CheckNotNegative(std::string_view kind, std::initializer_list<SizeField> fields);

// ── Wiring ──
// Each hand-off's edge goes to its FIRST reader (seed l.8638): for every buffer a stage writes, an edge to the first
// later stage that reads it; a later stage naming the same page reads it before the last reader pops it. A fold's
// carried updates thereby hand their last page to the epilogue.
void WireFirstReaders(Template& t);

// ★ ITEMS THAT READ ONE TILE SHARE IT: every prologue Load of `t` (not yet multicast, not a gather) whose block takes
// no step on `axis` is marked multicast along it (DESIGN §3.4), so the machine reads it once for the items of a
// group instead of once per item from one DRAM channel (64 parts of a split decode reading one tile of P took ~8 us,
// issue #12; a prefill's rope read its tables once per head). The meaning is unchanged. Loads of the tensors in
// `own` stay every item's own.
void MulticastSharedPrologue(Template& t, LoopVar axis, const std::vector<TensorId>& own = {});

// ── Sealing ──
// How a lowering sizes its compute pages against the accumulator. kWholePage is the seed's policy (AccPolicy::F32):
// every compute page fits Dst, so the seed's forms and their refusals stand. kStreamed takes what the machine needs
// (DstTiles, the certifier's measure): an elementwise page streams through Dst a tile at a time.
enum class DstPolicy { kWholePage, kStreamed };

// Seals `t` (Template::Finish) into a one-section composition for `target`: refuses with AccTilesExceeded when a
// compute stage's result page holds more tiles than the accumulator (under `policy`), and records the target and
// its tile shape.
absl::StatusOr<Composition> FinishSection(Template& t, std::string name, std::vector<WorkItem> items,
                                          Precision acc_precision, NumericsClaim claim, const Target& target,
                                          DstPolicy policy = DstPolicy::kWholePage);

}  // namespace spatial

#endif  // LOWERINGS_TOOLKIT_COMMON_H_
