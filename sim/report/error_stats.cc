#include "sim/report/error_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace spatial {
namespace {

// The exact value as the output's format can hold it at all: a magnitude below the format's least normal one is
// stored as 0 (Tensix flushes denormals) and one above its largest finite value as infinite (hardware-facts §1.2).
// Only the range: the precision the format loses is what the comparison measures. Without it a tensor of exact
// values all below 2^-126 (a gated delta's high powers, 1e-110) compared as rel L2 1 with the machine's zeros.
double InStoredRange(double r, Precision p) {
  double least = 0x1p-126, most;
  switch (p) {
    case Precision::kFp32: most = 0x1.fffffep127; break;
    case Precision::kBf16: most = 0x1.fep127; break;
    case Precision::kBfp8B: most = 0x1.fcp127; break;  // 127/64 under the largest shared exponent
    case Precision::kBfp4B: most = 0x1.cp127; break;   // 7/4: three bits of magnitude
    case Precision::kFp16: least = 0x1p-14, most = 65504; break;
    default: return r;  // integers, and formats without a fixed range
  }
  const double a = std::fabs(r);
  if (a < least) return 0.0;
  if (a > most && std::isfinite(a)) return std::copysign(std::numeric_limits<double>::infinity(), r);
  return r;
}

}  // namespace

proto::OutputError CompareTensor(const std::string& name, const TensorData& sim, const TensorData& ref,
                                 double tolerance, bool exact_claim) {
  proto::OutputError e;
  e.set_tensor(name);
  e.set_tolerance(tolerance);
  e.set_exact_claim(exact_claim);
  const size_t n = std::min(sim.values.size(), ref.values.size());
  const size_t total = std::max(sim.values.size(), ref.values.size());
  e.set_elements(static_cast<int64_t>(total));
  double max_abs = 0, max_rel = 0, diff2 = 0, ref2 = 0;
  int64_t nan_mismatch = static_cast<int64_t>(total - n), nan_both = 0;
  bool all_equal = total == n;
  for (size_t i = 0; i < n; ++i) {
    const double s = sim.values[i], r = InStoredRange(ref.values[i], sim.precision);
    const bool sn = std::isnan(s), rn = std::isnan(r);
    if (sn || rn) {
      if (sn != rn) {
        ++nan_mismatch;
        all_equal = false;
      } else {
        ++nan_both;
      }
      continue;  // NaN in both: the same answer (counted, and said)
    }
    if (s == r) {  // also equal infinities, whose difference is NaN
      ref2 += std::isinf(r) ? 0.0 : r * r;
      continue;
    }
    all_equal = false;
    const double d = std::fabs(s - r);
    max_abs = std::max(max_abs, d);
    if (r != 0) max_rel = std::max(max_rel, d / std::fabs(r));
    diff2 += d * d;
    ref2 += std::isinf(r) ? 0.0 : r * r;
  }
  const double inf = std::numeric_limits<double>::infinity();
  e.set_mismatched_nans(nan_mismatch);
  e.set_nans_on_both_sides(nan_both);
  if (nan_mismatch > 0) {
    max_abs = max_rel = inf;
  }
  e.set_max_abs(max_abs);
  e.set_max_rel(max_rel);
  double rel_l2 = nan_mismatch > 0 ? inf : (ref2 > 0 ? std::sqrt(diff2) / std::sqrt(ref2) : std::sqrt(diff2));
  if (std::isnan(rel_l2)) rel_l2 = inf;  // an infinite difference
  e.set_rel_l2(rel_l2);
  e.set_within(tolerance > 0 ? (nan_mismatch == 0 && rel_l2 <= tolerance) : all_equal);
  return e;
}

proto::OutputError CompareChoice(const std::string& name, const TensorData& sim, const TensorData& ref,
                                 const TensorData& sim_scores, const TensorData& ref_scores, double tolerance) {
  const bool shaped = sim.rows == ref.rows && sim.cols == ref.cols && sim_scores.rows == ref.rows &&
                      sim_scores.cols == ref.cols && ref_scores.rows == ref.rows && ref_scores.cols == ref.cols &&
                      ref.values.size() == static_cast<size_t>(ref.rows * ref.cols) &&
                      sim.values.size() == ref.values.size() && sim_scores.values.size() == ref.values.size() &&
                      ref_scores.values.size() == ref.values.size();
  if (!shaped) {  // not a choice of these scores: an infinite error, named as a shape mismatch
    proto::OutputError e = CompareTensor(name, sim, ref, tolerance, false);
    e.set_within(false);
    return e;
  }
  const int64_t rows = ref.rows, n = ref.cols;
  TensorData alike_sim{0, n, sim.precision, {}}, alike_ref{0, n, ref.precision, {}};
  int64_t differing = 0;
  bool explained = true;
  for (int64_t t = 0; t < rows; ++t) {
    const double* s = sim.values.data() + t * n;
    const double* r = ref.values.data() + t * n;
    std::vector<int64_t> only_sim, only_ref;
    for (int64_t e = 0; e < n; ++e) {
      if ((s[e] != 0) && !(r[e] != 0)) only_sim.push_back(e);
      if (!(s[e] != 0) && (r[e] != 0)) only_ref.push_back(e);
    }
    if (only_sim.empty() && only_ref.empty()) {
      alike_sim.values.insert(alike_sim.values.end(), s, s + n);
      alike_ref.values.insert(alike_ref.values.end(), r, r + n);
      ++alike_sim.rows;
      ++alike_ref.rows;
      continue;
    }
    ++differing;
    const double* ss = sim_scores.values.data() + t * n;
    const double* rs = ref_scores.values.data() + t * n;
    double d = 0;
    for (int64_t e = 0; e < n; ++e) d = std::max(d, std::fabs(ss[e] - rs[e]));
    bool row_ok = only_sim.size() == only_ref.size() && std::isfinite(d);
    for (int64_t a : only_sim) {
      for (int64_t b : only_ref) row_ok = row_ok && std::fabs(rs[a] - rs[b]) <= 2 * d;
    }
    explained = explained && row_ok;
  }
  proto::OutputError e = CompareTensor(name, alike_sim, alike_ref, tolerance, false);
  e.set_elements(rows * n);
  e.set_choice_rows_differing(differing);
  e.set_within(e.within() && explained);
  return e;
}

}  // namespace spatial
