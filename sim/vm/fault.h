// Faults of a VM run. A stage reports what went wrong (kind + detail); the driver, which knows the section, item
// and stage, turns it into "Kind: section 's' item 2 stage 'g' (#3): detail". Building the message only on the
// fault path keeps string work out of the inner loops.
#ifndef SIM_VM_FAULT_H_
#define SIM_VM_FAULT_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace spatial::vm_internal {

// Fault kinds (the first word of every VM error message).
inline constexpr std::string_view kBadInput = "BadInput";
inline constexpr std::string_view kBadProgram = "BadProgram";
inline constexpr std::string_view kTooLarge = "TooLarge";
inline constexpr std::string_view kTileOutOfRange = "TileOutOfRange";
inline constexpr std::string_view kIndexOutOfRange = "IndexOutOfRange";
inline constexpr std::string_view kUnwrittenBuffer = "UnwrittenBuffer";
inline constexpr std::string_view kTripOutOfRange = "TripOutOfRange";
inline constexpr std::string_view kStaleStateRead = "StaleStateRead";
inline constexpr std::string_view kDivisionByZero = "DivisionByZero";

struct Fault {
  std::string_view kind;  // one of the constants above; empty = no fault
  std::string detail;
  bool ok() const { return kind.empty(); }
};

inline Fault MakeFault(std::string_view kind, std::string detail) { return Fault{kind, std::move(detail)}; }

// "kind: where: detail" (or "kind: detail" when where is empty) with the status code of the kind: malformed
// programs and inputs are InvalidArgument, data-dependent range faults OutOfRange, ordering faults
// FailedPrecondition, TooLarge ResourceExhausted.
absl::Status FaultStatus(std::string_view kind, const std::string& where, const std::string& detail);
inline absl::Status FaultStatus(const Fault& f, const std::string& where) {
  return FaultStatus(f.kind, where, f.detail);
}

// A double as a message shows it: integers without a fraction ("70"), others with up to 17 digits.
std::string FormatValue(double v);

}  // namespace spatial::vm_internal

#endif  // SIM_VM_FAULT_H_
