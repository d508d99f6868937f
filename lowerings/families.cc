// The one table of op families (lowerings/family.h).
#include "lowerings/family.h"

#include "lowerings/attention/attention.h"
#include "lowerings/attention/backward.h"
#include "lowerings/attention/full_attention.h"
#include "lowerings/attention/lut.h"
#include "lowerings/attention/mla.h"
#include "lowerings/attention/reference_attention.h"
#include "lowerings/attention/reference_backward.h"
#include "lowerings/carried/causal_conv.h"
#include "lowerings/carried/gated_delta.h"
#include "lowerings/carried/scan.h"
#include "lowerings/elementwise/binary.h"
#include "lowerings/elementwise/elementwise.h"
#include "lowerings/gathers/argmax.h"
#include "lowerings/gathers/gathers.h"
#include "lowerings/gathers/row_writes.h"
#include "lowerings/matmul/head_matmul.h"
#include "lowerings/matmul/matmul.h"
#include "lowerings/moe/moe.h"
#include "lowerings/reference_ops.h"
#include "lowerings/rope/rope.h"
#include "lowerings/rows/row_norms.h"
#include "lowerings/rows/softmax.h"
#include "lowerings/tables/tables.h"

namespace spatial {

const std::vector<OpFamily>& OpFamilies() {
  // The tolerances: the largest relative L2 over 30 seeds of every case of tests/integration/tolerances.cc
  // (SPATIAL_TOLERANCE_SEEDS=30), median in parentheses. Every bound is ~2x the largest measured error, rounded up:
  // room for other seeds and shapes, and still tight enough that one extra bf16 rounding in a chain, or a coarser
  // fidelity, would trip it.
  static const std::vector<OpFamily>* families = new std::vector<OpFamily>{
    // ── Elementwise ──
    {proto::OpSpec::kSigmoid, &FromSigmoid, &ReferenceSigmoid, 3e-3, 1e-12,
     "One SFPU kernel (tt-metal's sigmoid_tile) rounded once to bf16 (ties-away): ~1.1e-3 RMS. "
     "1/(1 + exp_21f(-x)) with a one-Newton reciprocal (<= 0.5 bf16 ulp each, in fp32) before the "
     "rounding. Measured 1.3e-3 (1.1e-3); 1.4e-3 as one kernel."},
    {proto::OpSpec::kSilu, &FromSilu, &ReferenceSilu, 4e-3, 1e-12,
     "silu = x * sigmoid(x) (SILU_SIGMOID): the sigmoid's error, one fp32 multiply, the pack. "
     "Measured 1.9e-3 (1.4e-3)."},
    {proto::OpSpec::kGelu, &FromGelu, &ReferenceGelu, 2.5e-3, 1e-12,
     "tanh GELU through Exp and Recip: most of the norm is in large |x|, where gelu(x) ~ x or 0 "
     "and the pack of a nearly-bf16 value loses little. Measured 9.8e-4 (6.3e-4)."},
    {proto::OpSpec::kScale, &FromScale, &ReferenceScale, 4e-3, 1e-12,
     "x * factor in fp32 (the factor as an fp32 constant), one pack. Measured 2.2e-3 (1.7e-3)."},
    {proto::OpSpec::kSoftcap, &FromSoftcap, &ReferenceSoftcap, 4e-3, 1e-12,
     "cap * tanh(x / cap) via Exp and Recip, one pack. Measured 1.7e-3 (1.5e-3)."},
    {proto::OpSpec::kDecay, &FromDecay, &ReferenceDecay, 4e-3, 1e-12,
     "-exp(alog) * softplus(ar + dt): Exp and Ln on the SFPU, one pack. Measured 1.8e-3 (1.4e-3)."},
    {proto::OpSpec::kRelu, &FromRelu, &ReferenceRelu, 0.0, 1e-12,
     "max(x, 0) of bf16 values (float) or int32 (int): no rounding at all. Measured 0."},
    {proto::OpSpec::kBinary, &FromBinary, &ReferenceBinary, 5e-3, 1e-12,
     "Float: one fp32 add, subtract or multiply of bf16 values, rounded once into the 16-bit Dst and "
     "packed: one bf16 rounding of the result, more relative to it where a sum cancels. Int: exact "
     "(the inputs are narrowed so nothing leaves the datapath). Measured 2.5e-3 (max of 150 runs)."},
    {proto::OpSpec::kIntRequant, &FromIntRequant, &ReferenceIntRequant, 0.0, 0.0,
     "Integer kinds claim Exact: int32 arithmetic, bit-equal. Measured 0."},
    {proto::OpSpec::kIntClamp, &FromIntClamp, &ReferenceIntClamp, 0.0, 0.0,
     "Integer kinds claim Exact: int32 arithmetic, bit-equal. Measured 0."},
    // ── Matmul ──
    {proto::OpSpec::kMatmul, &FromMatmul, &ReferenceMatmul, 1e-2, 1e-12,
     "bf16 operands at HiFi2: the left operand (in SrcB) keeps its hidden bit and top 6 of 7 "
     "mantissa bits (matrix_engine.h), a truncation of up to 2^-7 per product that does not "
     "average out of a dot product's relative error; the fp32 Dst sums exactly enough; one pack "
     "to bf16 at the end. ~2.5e-3 + 1.1e-3 RMS, independent of k. Measured 5.2e-3 (4.0e-3) over k "
     "= 13..256."},
    // ── Tables and heads ──
    {proto::OpSpec::kTranspose, &FromTranspose, &ReferenceTranspose, 0.0, 0.0,
     "Pure moves of bf16 (or int32) values: no rounding. Measured 0."},
    {proto::OpSpec::kHeadSlice, &FromHeadSlice, &ReferenceHeadSlice, 0.0, 0.0,
     "Pure moves of bf16 (or int32) values: no rounding. Measured 0."},
    {proto::OpSpec::kJoin, &FromJoin, &ReferenceJoin, 0.0, 0.0,
     "Pure moves of bf16 (or int32) values: no rounding. Measured 0."},
    {proto::OpSpec::kHeadMatmul, &FromHeadMatmul, &ReferenceHeadMatmul, 1e-2, 1e-12,
     "Per-head matmuls: matmul's reasoning (HiFi2 operand truncation, one pack). Measured 4.5e-3 "
     "(2.2e-3)."},
    // ── Rows ──
    {proto::OpSpec::kL2Norm, &FromL2Norm, &ReferenceL2Norm, 5e-3, 1e-12,
     "Sum of squares in fp32, Rsqrt (magic seed + one correction step) in fp32, x * inv, one "
     "pack. Measured 2.2e-3 (1.7e-3)."},
    {proto::OpSpec::kFusedRow, &FromFusedRow, &ReferenceFusedRow, 1.2e-2, 1e-12,
     "RMSNorm: as l2norm, plus the residual add stored to bf16 and, streamed, the squares stored "
     "to bf16 before a matmul against ones and the inverse stored before the rescale: up to four "
     "bf16 roundings in series. Measured 6.0e-3 (3.9e-3) on the streamed 1 x 100 with residual."},
    {proto::OpSpec::kSoftmax, &FromSoftmax, &ReferenceSoftmax, 5e-3, 1e-12,
     "max, Exp(x - max), sum, Recip, multiply, one pack; at_acc keeps fp32 end to end (measured "
     "3e-7). Measured 2.5e-3 (1.6e-3)."},
    // ── Attention ──
    {proto::OpSpec::kAttention, &FromAttention, &ReferenceAttention, 1.2e-2, 1e-12,
     "Scores (a matmul at HiFi2, stored bf16), the softmax (stored bf16), the weighted sum of "
     "values (another HiFi2 matmul, one pack); the flash fold keeps its running max, sum and "
     "output in fp32. Measured 6.4e-3 (2.5e-3): the largest on 12-value outputs (2 heads x 6), "
     "where a few roundings weigh most. With the fold's contractions on the matrix engine's path "
     "(spatial/semantics/contraction.h): 7.4e-3 over 30 seeds. With the split decode's fp32 "
     "partials and their combine: 7.6e-3 over 240 runs."},
    {proto::OpSpec::kLutAttention, &FromLutAttention, &ReferenceLutAttention, 0.0, 0.0,
     "Integer LUT attention claims Exact. Measured 0."},
    {proto::OpSpec::kFullAttention, &FromFullAttention, &ReferenceFullAttention, 1.2e-2, 1e-12,
     "Attention's chain over every position. Its score and value contractions run on the matrix "
     "engine as the machine runs them (bf16 operands at HiFi2; the probabilities are unpacked to "
     "bf16), as the flash fold's do. Measured 7.0e-3 over 30 seeds (2.8e-3 while the values "
     "computed them point by point in fp32)."},
    {proto::OpSpec::kMla, &FromMla, &ReferenceMla, 1.6e-2, 1e-12,
     "The absorbed query (a per-head HiFi2 GEMV, packed to bf16: 1.7e-3), the flash fold over the "
     "latent cache (attention's error, 7.4e-3 on the context), the per-head HiFi2 GEMV back to the "
     "values, one pack. The fold dominates. Measured 8.4e-3 (max of 150 runs), against the naive "
     "reference that expands every head's keys and values."},
    {proto::OpSpec::kAttentionBackward, &FromAttentionBackward, &ReferenceAttentionBackward, 1.6e-2, 1e-12,
     "Seven HiFi2 products over the two folds (S, dP and S^T, dP^T from bf16 operands; dQ, dK, dV "
     "from P and dS packed to bf16) accumulated in fp32, P recomputed through the SFPU's exp, "
     "D = rowsum(dO * O) "
     "in fp32, the gradients packed once (GQA: summed over the group in fp32 first). Each gradient "
     "carries about the forward attention's error: measured 7.7e-3 (max of 120 runs)."},
    {proto::OpSpec::kScan, &FromScan, &ReferenceScan, 4e-3, 1e-12,
     "The carried page in fp32 (a step is one fp32 multiply-add, add or max of bf16 inputs), each "
     "result packed once to bf16 (~1.1e-3 RMS); the softmax denominator's exponentials on the "
     "SFPU in fp32 before it. Measured 1.8e-3 (max of 150 runs)."},
    // ── Gathers, row writes, argmax ──
    {proto::OpSpec::kRowGather, &FromRowGather, &ReferenceRowGather, 0.0, 0.0,
     "Moves of bf16 (or int32) rows, and an index: no rounding. Measured 0."},
    {proto::OpSpec::kRowsGather, &FromRowsGather, &ReferenceRowsGather, 0.0, 0.0,
     "Moves of bf16 (or int32) rows, and an index: no rounding. Measured 0."},
    {proto::OpSpec::kSetRow, &FromSetRow, &ReferenceSetRow, 0.0, 0.0,
     "Moves of bf16 (or int32) rows, and an index: no rounding. Measured 0."},
    {proto::OpSpec::kArgmax, &FromArgMax, &ReferenceArgMax, 0.0, 0.0,
     "The index of the first maximum: exact on inputs whose order bf16 keeps (the draw's). "
     "Measured 0."},
    // ── Mixture of experts ──
    {proto::OpSpec::kMoe, &FromMoe, &ReferenceMoe, 4e-2, 1e-12,
     "The router, scores and weights in fp32 (the picks are the VM's on these draws). Flat form: "
     "each expert's GEMVs from bf16 weights summed in fp32, SiLU on the SFPU, one pack to bf16: "
     "measured 2.6e-3. Blocked form: two HiFi2 matmuls in series (gate/up, then down) with the "
     "hidden row packed to bf16 between them, each matmul's error (~5e-3, the matmul family's) "
     "and more where the 8-term dot products of test_tiny's d = 8 cancel. Measured 2.4e-2 (max of "
     "330 runs, on test_tiny's 8 x 8), 1.2e-2 at the models' routing shapes. Shared experts add "
     "their SwiGLU (two matmuls, SiLU, product, matmul) and one bf16 add: 1.0e-2."},
    // ── Rope ──
    {proto::OpSpec::kRope, &FromRope, &ReferenceRope, 4e-3, 1e-12,
     "q * cos + rotate(q) * sin in fp32 from bf16 tables, one pack. Measured 1.6e-3 (1.5e-3)."},
    // ── Carried state ──
    {proto::OpSpec::kCausalConv, &FromCausalConv, &ReferenceCausalConv, 6e-3, 1e-12,
     "A taps-deep multiply-add over the ring in fp32, one pack; the ring itself only moves bf16 "
     "values (0). Measured 2.8e-3 (2.3e-3)."},
    {proto::OpSpec::kGatedDelta, &FromGatedDelta, &ReferenceGatedDelta, 1.6e-2, 1e-12,
     "One Gated DeltaNet step: u = S k, the rank-1 update of S (stored back to bf16), S q, the "
     "head's RMSNorm, the gate (Exp/Recip): about six bf16 roundings in series, the memory S the "
     "worst. Measured 8.8e-3 (5.6e-3), on S."},
  };
  return *families;
}

const OpFamily* FindFamily(proto::OpSpec::KindCase kind) {
  for (const OpFamily& f : OpFamilies()) {
    if (f.kind == kind) return &f;
  }
  return nullptr;
}

const OpFamily* FindFamily(std::string_view name) {
  const auto* field = proto::OpSpec::descriptor()->FindFieldByName(std::string(name));
  if (field == nullptr || field->containing_oneof() == nullptr) return nullptr;
  return FindFamily(static_cast<proto::OpSpec::KindCase>(field->number()));
}

}  // namespace spatial
