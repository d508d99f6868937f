#include "sim/vm/fault.h"

#include "absl/strings/str_cat.h"
#include "spatial/number_text.h"

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

std::string FormatValue(double v) { return NumberText(v); }

}  // namespace spatial::vm_internal
