// The carried-state op references (DESIGN §5): the recurrences step by step, token after token, in f64, straight from
// the math — a ring of taps rows shifted and summed, a d x d memory per value head predicted, updated and read — and
// nothing of the sections, bands, tiles or tables the lowerings use.
//
// Each returns the op's result (OpSpec.out) AND the carried state it leaves (the ring, the memory) under the state
// operand's name, in the view the run gave it (a flat row or the matrix a blocked form declares: the same row-major
// values), so a caller can check both.
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lowerings/reference_ops.h"
#include "lowerings/toolkit/common.h"
#include "lowerings/toolkit/reference_tables_rows.h"
#include "spatial/status_macros.h"

namespace spatial {

absl::StatusOr<TensorMap> ReferenceCausalConv(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "causal_conv", 3));
  const proto::CausalConvSpec& c = spec.causal_conv();
  if (c.taps() < 0 || c.chan() < 0 || c.rows() < 0) return absl::InvalidArgumentError("causal_conv has a negative size");
  if (c.taps() == 0 || c.chan() == 0) return NotLowered("a causal conv with no taps or no channels");
  const int64_t taps = c.taps(), chan = c.chan(), rows = std::max<int64_t>(c.rows(), 1);
  ASSIGN_OR_RETURN(std::vector<double> x, RefValues(inputs, ops[0], rows * chan));
  ASSIGN_OR_RETURN(std::vector<double> w, RefValues(inputs, ops[1], taps * chan));
  std::pair<int64_t, int64_t> ring_view;
  ASSIGN_OR_RETURN(std::vector<double> ring, RefValues(inputs, ops[2], taps * chan, &ring_view));
  // The block's output is the rows x chan matrix it reads; one step's a 1 x chan row.
  TensorData y = RefResult(rows, chan, Precision::kFp32);
  for (int64_t r = 0; r < rows; ++r) {
    // The token enters the ring: every tap moves one row up, the newest token becomes tap taps − 1.
    for (int64_t t = 0; t + 1 < taps; ++t) {
      for (int64_t ch = 0; ch < chan; ++ch) ring[t * chan + ch] = ring[(t + 1) * chan + ch];
    }
    for (int64_t ch = 0; ch < chan; ++ch) ring[(taps - 1) * chan + ch] = x[r * chan + ch];
    // Then every channel convolves its own column of the ring with its own taps of the weight.
    for (int64_t ch = 0; ch < chan; ++ch) {
      double sum = 0.0;
      for (int64_t t = 0; t < taps; ++t) sum += ring[t * chan + ch] * w[t * chan + ch];
      y.values[r * chan + ch] = sum;
    }
  }
  TensorMap out;
  out[spec.out()] = std::move(y);
  out[ops[2].name] = TensorData{ring_view.first, ring_view.second, Precision::kFp32, std::move(ring)};
  return out;
}

absl::StatusOr<TensorMap> ReferenceGatedDelta(const proto::OpSpec& spec, const TensorMap& inputs) {
  ASSIGN_OR_RETURN(std::vector<OperandRef> ops, OperandsOf(spec, "gated_delta", 8));
  const proto::GatedDeltaSpec& g = spec.gated_delta();
  const int64_t hv = g.hv(), hk = g.hk(), d = g.d(), rows = g.rows();
  if (hv < 0 || hk < 0 || d < 0 || rows < 0) return absl::InvalidArgumentError("gated_delta has a negative size");
  if (hv == 0 || hk == 0 || d == 0 || rows == 0) {
    return NotLowered("a gated delta step with no heads, no head dimension or no rows");
  }
  if (g.gate() != proto::GatedDeltaSpec::SILU && g.gate() != proto::GatedDeltaSpec::SIGMOID) {
    return absl::InvalidArgumentError("gated_delta.gate names no gate activation (SILU or SIGMOID)");
  }
  ASSIGN_OR_RETURN(std::vector<double> q, RefValues(inputs, ops[0], rows * hk * d));
  ASSIGN_OR_RETURN(std::vector<double> k, RefValues(inputs, ops[1], rows * hk * d));
  ASSIGN_OR_RETURN(std::vector<double> v, RefValues(inputs, ops[2], rows * hv * d));
  ASSIGN_OR_RETURN(std::vector<double> z, RefValues(inputs, ops[3], rows * hv * d));
  ASSIGN_OR_RETURN(std::vector<double> beta, RefValues(inputs, ops[4], rows * hv));
  ASSIGN_OR_RETURN(std::vector<double> alpha, RefValues(inputs, ops[5], rows * hv));
  std::pair<int64_t, int64_t> s_view;
  ASSIGN_OR_RETURN(std::vector<double> S, RefValues(inputs, ops[6], hv * d * d, &s_view));
  ASSIGN_OR_RETURN(std::vector<double> gn, RefValues(inputs, ops[7], d));
  const double eps = g.eps();
  auto gate = [&](double x) {
    const double sigmoid = 1.0 / (1.0 + std::exp(-x));
    return g.gate() == proto::GatedDeltaSpec::SILU ? x * sigmoid : sigmoid;
  };
  TensorData y = RefResult(1, rows * hv * d, Precision::kFp32);
  std::vector<double> u(d), o(d);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < hv; ++h) {
      const int64_t kh = h % hk;  // value head h reads key/query head h mod hk
      const double* kr = &k[(r * hk + kh) * d];
      const double* qr = &q[(r * hk + kh) * d];
      const double* vr = &v[(r * hv + h) * d];
      const double a = alpha[r * hv + h], b = beta[r * hv + h];
      double* Sh = &S[h * d * d];  // S[a][j] at a·d + j
      // u = S·k, the memory's prediction of v before the update.
      for (int64_t i = 0; i < d; ++i) {
        double sum = 0.0;
        for (int64_t j = 0; j < d; ++j) sum += Sh[i * d + j] * kr[j];
        u[i] = sum;
      }
      // S ← α·S + β·(v − α·u)·kᵀ.
      for (int64_t i = 0; i < d; ++i) {
        const double coef = b * (vr[i] - a * u[i]);
        for (int64_t j = 0; j < d; ++j) Sh[i * d + j] = a * Sh[i * d + j] + coef * kr[j];
      }
      // o = S·q / √d, then the head's RMSNorm, the norm weight and the gate.
      double ss = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        double sum = 0.0;
        for (int64_t j = 0; j < d; ++j) sum += Sh[i * d + j] * qr[j];
        o[i] = sum / std::sqrt(static_cast<double>(d));
        ss += o[i] * o[i];
      }
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
      for (int64_t i = 0; i < d; ++i) {
        y.values[(r * hv + h) * d + i] = o[i] * inv * gn[i] * gate(z[(r * hv + h) * d + i]);
      }
    }
  }
  TensorMap out;
  out[spec.out()] = std::move(y);
  out[ops[6].name] = TensorData{s_view.first, s_view.second, Precision::kFp32, std::move(S)};
  return out;
}

}  // namespace spatial
