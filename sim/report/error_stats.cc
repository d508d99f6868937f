#include "sim/report/error_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spatial {

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
  int64_t nan_mismatch = static_cast<int64_t>(total - n);
  bool all_equal = total == n;
  for (size_t i = 0; i < n; ++i) {
    const double s = sim.values[i], r = ref.values[i];
    const bool sn = std::isnan(s), rn = std::isnan(r);
    if (sn || rn) {
      if (sn != rn) {
        ++nan_mismatch;
        all_equal = false;
      }
      continue;  // NaN in both: the same answer
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

}  // namespace spatial
