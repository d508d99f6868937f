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

}  // namespace spatial

#endif  // SIM_REPORT_ERROR_STATS_H_
