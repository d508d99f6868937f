// Bit-level views of fp32 values and the flush-to-zero rule every Tensix datapath applies. Everything in
// sim/numerics computes on fp32 bit patterns because that is what the hardware's LRegs, Dst and Src registers
// hold (reference/hardware-facts.md §1.2).
#ifndef SIM_NUMERICS_FLOAT_BITS_H_
#define SIM_NUMERICS_FLOAT_BITS_H_

#include <cstdint>
#include <cstring>

namespace spatial::numerics {

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint64_t Bits64(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

inline double FromBits64(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

// The biased 8-bit exponent field of an fp32 pattern.
inline uint32_t ExpField(uint32_t u) { return (u >> 23) & 0xffu; }

// Denormals and -0 become +0: "denormal inputs are treated as 0 by both FPU and SFPU. The SFPU never outputs -0
// or denormals" and SFPMAD flushes "Denormal/-0 outputs ... to +0" (hardware-facts §1.2, FloatBitPatterns.md,
// SFPMAD.md). Branch-free so loops over tiles vectorize.
inline float Ftz(float f) {
  const uint32_t u = Bits(f);
  const uint32_t keep = 0u - static_cast<uint32_t>((u & 0x7f800000u) != 0);  // all ones unless exponent 0
  return FromBits(u & keep);
}

}  // namespace spatial::numerics

#endif  // SIM_NUMERICS_FLOAT_BITS_H_
