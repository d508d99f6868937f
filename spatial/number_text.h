// A double as every message shows it: integers without a fraction ("70"), others with up to 17 digits.
#ifndef SPATIAL_NUMBER_TEXT_H_
#define SPATIAL_NUMBER_TEXT_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace spatial {

inline std::string NumberText(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrFormat("%.17g", v);
}

}  // namespace spatial

#endif  // SPATIAL_NUMBER_TEXT_H_
