// Units in the last place, for the numerics tests' error bounds: the spacing of fp32 and bf16 values at the
// magnitude of v (v normal; below fp32's smallest normal, the spacing there).
#ifndef TESTS_NUMERICS_ULP_H_
#define TESTS_NUMERICS_ULP_H_

#include <algorithm>
#include <cmath>

namespace spatial::numerics::testing {

inline double UlpAt(double v, int mantissa_bits) {
  int e;
  std::frexp(v, &e);
  return std::ldexp(1.0, std::max(e, -125) - 1 - mantissa_bits);
}
inline double UlpFp32(double v) { return UlpAt(v, 23); }
inline double UlpBf16(double v) { return UlpAt(v, 7); }

}  // namespace spatial::numerics::testing

#endif  // TESTS_NUMERICS_ULP_H_
