#include "spatial/semantics/trip.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spatial/number_text.h"

namespace spatial {
Wide TripBlocks(const Trip& t, Wide value) {
  const Wide per = t.per < 1 ? 1 : t.per;  // validation refuses per < 1; this keeps the division defined
  return std::max<Wide>(0, -FloorDivWide(-Clamp(value + t.bias), per));
}

Interval TripBlockRange(const Trip& t) { return Interval::Of(TripBlocks(t, t.lo), TripBlocks(t, t.hi)); }

absl::StatusOr<int64_t> RunTripBlocks(const Trip& t, int64_t num_blocks, double value) {
  const std::string shown = absl::StrCat("trip value ", NumberText(value));
  if (value != std::floor(value)) return absl::OutOfRangeError(absl::StrCat(shown, " is not an integer"));
  // The explicit magnitude bound keeps the integer conversion defined whatever [lo, hi] admits.
  if (!(value >= static_cast<double>(t.lo) && value <= static_cast<double>(t.hi)) || std::fabs(value) > 9.0e18) {
    return absl::OutOfRangeError(absl::StrCat(shown, " not in [", t.lo, ", ", t.hi, "]"));
  }
  const Wide blocks = TripBlocks(t, static_cast<int64_t>(value));
  if (blocks > num_blocks) {
    return absl::OutOfRangeError(absl::StrCat(shown, " gives ", WideToString(blocks), " blocks, more than the fold's ",
                                              num_blocks));
  }
  return static_cast<int64_t>(blocks);
}

}  // namespace spatial
