#include "sim/vm/fault.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spatial::vm_internal {

absl::Status FaultStatus(std::string_view kind, const std::string& where, const std::string& detail) {
  std::string msg = where.empty() ? absl::StrCat(std::string(kind), ": ", detail)
                                  : absl::StrCat(std::string(kind), ": ", where, ": ", detail);
  if (kind == kBadInput || kind == kBadProgram) return absl::InvalidArgumentError(msg);
  if (kind == kTooLarge) return absl::ResourceExhaustedError(msg);
  if (kind == kTileOutOfRange || kind == kIndexOutOfRange || kind == kTripOutOfRange) {
    return absl::OutOfRangeError(msg);
  }
  return absl::FailedPreconditionError(msg);
}

std::string FormatValue(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%.17g", v);
}

}  // namespace spatial::vm_internal
