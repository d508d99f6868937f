// How far a simulated output is from the exact f64 VM's (DESIGN §8 "Output"): max abs, max rel and relative L2
// error next to the tolerance the section's numerics claim allows.
#ifndef SIM_REPORT_ERROR_STATS_H_
#define SIM_REPORT_ERROR_STATS_H_

#include <string>

#include "proto/report.pb.h"
#include "spatial/tensor_data.h"

namespace spatial {

// The default relative-L2 tolerance of an Approx claim: 8 bf16 unit roundoffs (2^-5 ~ 3.1%). A bf16 value carries
// 2^-8 relative error; a handful of roundings (unpack, fp32 accumulation, pack) and the approximate SFPU functions
// (hardware-facts §1.6: approx exp ~ 4.5% max relative, much less in L2 after a softmax's normalization) keep
// whole-tensor errors of the seed's programs under it. Exact claims default to 0: bit equality.
inline constexpr double kApproxRelL2Tolerance = 0.03125;

inline double DefaultTolerance(bool exact_claim) { return exact_claim ? 0.0 : kApproxRelL2Tolerance; }

// Compares `sim` with `ref` elementwise. A shape mismatch compares the overlapping prefix and counts the rest as
// mismatched NaNs (an infinite error). within: rel_l2 <= tolerance, and with tolerance 0 every element equal.
proto::OutputError CompareTensor(const std::string& name, const TensorData& sim, const TensorData& ref,
                                 double tolerance, bool exact_claim);

// Compares a choice: `sim` and `ref` are T x n rows of weights, nonzero exactly where an expert is chosen, each row's
// choice the largest of its scores (`sim_scores` the machine's, `ref_scores` the exact VM's, T x n; their order is the
// choice's: a softmax or a sigmoid of them is monotonic). A row whose chosen set differs is explained when every
// expert chosen on one side only is within 2 d of every expert chosen on the other side only in the exact scores, d
// the row's largest score error (machine against exact): the machine's own rounding can order them either way. The
// errors (max abs, max rel, rel L2) are over the rows that choose alike; within: every differing row explained and
// rel L2 <= tolerance. choice_rows_differing counts the rows that differ.
proto::OutputError CompareChoice(const std::string& name, const TensorData& sim, const TensorData& ref,
                                 const TensorData& sim_scores, const TensorData& ref_scores, double tolerance);

}  // namespace spatial

#endif  // SIM_REPORT_ERROR_STATS_H_
