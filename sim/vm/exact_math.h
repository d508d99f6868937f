// The exact meaning of every scalar operation of a Generic body (DESIGN §3.4), shared by the VM's inlined fast
// path and ExactModel so the two can never disagree.
#ifndef SIM_VM_EXACT_MATH_H_
#define SIM_VM_EXACT_MATH_H_

#include <cmath>
#include <cstdint>

#include "spatial/body.h"

namespace spatial::vm_math {

// Min/Max are IEEE minNum/maxNum: a NaN operand yields the other (the seed's max(score, -1e30) turns a NaN
// score into -1e30).
inline double Min(double a, double b) { return std::fmin(a, b); }
inline double Max(double a, double b) { return std::fmax(a, b); }
// The caller faults on b == 0 before calling.
inline double FloorDiv(double a, double b) { return std::floor(a / b); }
// An arithmetic shift right: floor(a / 2^by), exact for every integer a the index datapath holds.
inline double Shr(double a, int64_t by) {
  // ldexp takes an int; clamp so a hostile shift cannot overflow the conversion (2^±4096 is already 0 or inf).
  int e = by > 4096 ? 4096 : (by < -4096 ? -4096 : static_cast<int>(by));
  return std::floor(std::ldexp(a, -e));
}

inline double Binary(BodyOp op, double a, double b) {
  switch (op) {
    case BodyOp::kAdd: return a + b;
    case BodyOp::kSub: return a - b;
    case BodyOp::kMul: return a * b;
    case BodyOp::kMin: return Min(a, b);
    case BodyOp::kMax: return Max(a, b);
    case BodyOp::kFloorDiv: return FloorDiv(a, b);
    default: return std::nan("");
  }
}

inline double Rsqrt(double x, int64_t eps_nano, int64_t over) {
  return 1.0 / std::sqrt(x / static_cast<double>(over) + static_cast<double>(eps_nano) * 1e-9);
}
inline double Silu(double x) { return x / (1.0 + std::exp(-x)); }
// Written so neither branch overflows: e^-|x| <= 1.
inline double Sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
// x * Phi(x), Phi through erfc so the far negative tail keeps its relative accuracy.
inline double Gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

inline double Sfpu(const SfpuKind& k, double x) {
  switch (k.op) {
    case SfpuOp::kExp:
    case SfpuOp::kExpAccurate:
    case SfpuOp::kExpFast: return std::exp(x);
    case SfpuOp::kLn: return std::log(x);
    case SfpuOp::kRecip: return 1.0 / x;
    case SfpuOp::kRsqrt: return Rsqrt(x, k.eps_nano, k.over);
    case SfpuOp::kSilu: return Silu(x);
    case SfpuOp::kSigmoid: return Sigmoid(x);
    case SfpuOp::kGelu: return Gelu(x);
    case SfpuOp::kUnspecified: break;
  }
  return std::nan("");
}

}  // namespace spatial::vm_math

#endif  // SIM_VM_EXACT_MATH_H_
