#include "sim/numerics/formats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/numerics/float_bits.h"

namespace spatial::numerics {
namespace {

constexpr uint32_t kSign = 0x80000000u;
constexpr uint32_t kMagMask = 0x7fffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;

// A zero produced by a flushing conversion: +0 when the conversion rounds (§1.2: rounding "turns -0 into +0"),
// the input's sign when it truncates (SFPSTORE.md ToBF16/ToFP16: "Flush ... to signed zero").
float FlushedZero(uint32_t u, Rounding mode) { return (mode == proto::TRUNCATE && (u & kSign)) ? -0.0f : 0.0f; }

// Rounds a non-negative integer-valued significand `sig` right by `s` bits with `mode`.
uint32_t RoundShift(uint32_t sig, int s, Rounding mode) {
  if (s <= 0) return sig;
  if (s >= 31) return 0;  // sig < 2^9 here: far below one half
  const uint32_t q = sig >> s;
  const uint32_t rem = sig & ((1u << s) - 1u);
  const uint32_t half = 1u << (s - 1);
  switch (mode) {
    case proto::TIES_AWAY: return q + (rem >= half ? 1u : 0u);
    case proto::TRUNCATE: return q;
    default: return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  }
}

// Shared by bf16 and tf32 (both keep fp32's 8-bit exponent and drop kDrop mantissa bits), with every rule of the
// header as a branch-free select so loops over a page vectorize:
//  - normal values: the mode's rounding on the magnitude (without flush the same arithmetic rounds denormals
//    correctly: a carry out of the mantissa makes the smallest normal, as IEEE gradual underflow does);
//  - exponent 255: Inf unchanged; NaN -> +-Inf (ties-away), the truncated pattern (truncate), a quiet NaN (RNE);
//  - exponent 0 with flush: FlushedZero.
template <int kDrop, Rounding kMode, bool kFlush>
inline uint32_t NarrowBits(uint32_t u) {
  const uint32_t sign = u & kSign;
  const uint32_t e = u & kInfBits;
  const uint32_t mant = u & 0x007fffffu;
  constexpr uint32_t kKeep = ~((1u << kDrop) - 1u);
  constexpr uint32_t kHalf = 1u << (kDrop - 1);
  uint32_t mag = u & kMagMask;
  uint32_t special;
  if constexpr (kMode == proto::TIES_AWAY) {
    mag += kHalf;
    special = mant != 0 ? (sign | kInfBits) : u;
  } else if constexpr (kMode == proto::TRUNCATE) {
    special = u & kKeep;
  } else {
    mag += (kHalf - 1u) + ((mag >> kDrop) & 1u);
    special = (mant != 0 ? (u | 0x00400000u) : u) & kKeep;
  }
  uint32_t r = e == kInfBits ? special : (sign | (mag & kKeep));
  if constexpr (kFlush) r = e == 0 ? (kMode == proto::TRUNCATE ? sign : 0u) : r;
  return r;
}

template <int kDrop, Rounding kMode>
float Narrow(float x, bool flush) {
  return FromBits(flush ? NarrowBits<kDrop, kMode, true>(Bits(x)) : NarrowBits<kDrop, kMode, false>(Bits(x)));
}

template <int kDrop>
float NarrowMantissa(float x, Rounding mode, bool flush) {
  switch (mode) {
    case proto::TIES_AWAY: return Narrow<kDrop, proto::TIES_AWAY>(x, flush);
    case proto::TRUNCATE: return Narrow<kDrop, proto::TRUNCATE>(x, flush);
    default: return Narrow<kDrop, proto::RNE>(x, flush);
  }
}

// A page of values into bf16: the store loop of RoundToPrecision, vectorizable.
template <Rounding kMode, bool kFlush>
void StoreBf16(double* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = FromBits(NarrowBits<16, kMode, kFlush>(Bits(ToFp32(v[i], kFlush))));
}

template <bool kFlush>
void StoreBf16(Rounding mode, double* v, int64_t n) {
  switch (mode) {
    case proto::TIES_AWAY: return StoreBf16<proto::TIES_AWAY, kFlush>(v, n);
    case proto::TRUNCATE: return StoreBf16<proto::TRUNCATE, kFlush>(v, n);
    default: return StoreBf16<proto::RNE, kFlush>(v, n);
  }
}

}  // namespace

uint32_t RoundDropBits(uint32_t u, int drop, Rounding mode) {
  const uint32_t sign = u & kSign;
  uint32_t mag = u & kMagMask;
  const uint32_t half = 1u << (drop - 1);
  const uint32_t mask = (1u << drop) - 1u;
  switch (mode) {
    case proto::TIES_AWAY: mag += half; break;  // ttsim: if ((discarded<<7) >= 0x400000) src += 0x10000
    case proto::TRUNCATE: break;
    default: mag += (half - 1u) + ((mag >> drop) & 1u); break;
  }
  return sign | (mag & ~mask);
}

float RoundToBf16(float x, Rounding mode, bool flush) { return NarrowMantissa<16>(x, mode, flush); }

float RoundToTf32(float x, Rounding mode, bool flush) { return NarrowMantissa<13>(x, mode, flush); }

float RoundToFp16(float x, Rounding mode, bool flush) {
  const uint32_t u = Bits(x);
  const uint32_t e = ExpField(u);
  const float inf = (u & kSign) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  if (e == 255) return inf;  // fp16 has no NaN on Tensix: NaN and Inf both read as the saturated pattern
  if (e == 0) {
    // An fp32 denormal is below 2^-126, far under fp16's smallest denormal (2^-24): zero in every mode.
    return flush ? FlushedZero(u, mode) : ((u & kSign) ? -0.0f : 0.0f);
  }
  if (static_cast<int>(e) - 127 < -14) {
    if (flush) return FlushedZero(u, mode);
    // IEEE gradual underflow onto fp16's denormal grid, quantum 2^-24 (exact in fp32).
    const float q = std::ldexp(std::fabs(x), 24);  // < 2^10, exact
    uint32_t n = static_cast<uint32_t>(q);
    const float frac = q - static_cast<float>(n);
    if (mode == proto::TIES_AWAY) {
      n += frac >= 0.5f ? 1u : 0u;
    } else if (mode != proto::TRUNCATE) {
      n += (frac > 0.5f || (frac == 0.5f && (n & 1u))) ? 1u : 0u;
    }
    const float r = std::ldexp(static_cast<float>(n), -24);
    return (u & kSign) ? -r : r;
  }
  const float r = FromBits(RoundDropBits(u, 13, mode));
  if (std::fabs(r) >= 65536.0f) return inf;  // exponent narrowing saturates (SFPSTORE.md, FormatConversion.md)
  return r;
}

double RoundToInt(double x, Precision p, Rounding mode) {
  if (std::isnan(x)) return 0.0;
  double r;
  switch (mode) {
    case proto::TIES_AWAY: r = std::round(x); break;
    case proto::TRUNCATE: r = std::trunc(x); break;
    default: r = std::nearbyint(x); break;  // the default environment rounds to nearest even
  }
  const int bits = IntBits(p).value_or(64);
  double lo, hi;
  if (bits >= 64) {
    lo = -9223372036854775808.0;  // -2^63
    hi = 9223372036854774784.0;   // the largest double below 2^63
  } else {
    hi = std::ldexp(1.0, bits - 1) - 1.0;  // sign-magnitude: +-(2^(bits-1) - 1)
    lo = -hi;
  }
  r = std::clamp(r, lo, hi);
  return r == 0.0 ? 0.0 : r;
}

void RoundBlockFloat(double* v, int n, int mag_bits, Rounding mode, bool flush) {
  // Every block format is first BFP8 (7-bit magnitudes, rounded by `mode`); a narrower one is then truncated from
  // it (hardware-facts §1.2, Packers/FormatConversion.md: "BFP4/BFP2 are then truncated from BFP8").
  constexpr uint32_t max_mag = 127u;
  const int drop = 7 - mag_bits;
  uint32_t sig[16], sign[16];
  int exp[16];
  bool special[16];
  int shared = 0;
  for (int i = 0; i < n; ++i) {
    const float b = RoundToBf16(ToFp32(v[i], flush), mode, flush);
    const uint32_t u = Bits(b);
    const uint32_t e = ExpField(u);
    sign[i] = u & kSign;
    special[i] = e == 255;
    if (special[i]) {
      v[i] = b;  // Inf stays Inf, NaN stays NaN; its exponent 255 dominates the block
      exp[i] = 255;
      sig[i] = 0;
      shared = 255;
      continue;
    }
    const uint32_t man7 = (u >> 16) & 0x7fu;
    // A bf16 denormal (only without flush) has no hidden bit and the exponent of the smallest normal.
    exp[i] = e == 0 ? 1 : static_cast<int>(e);
    sig[i] = e == 0 ? man7 : (0x80u | man7);
    if (sig[i] != 0) shared = std::max(shared, exp[i]);
  }
  // Step 4 of the header: at most one extra pass, because a carry past 127 happens only to an element of
  // exponent E with significand 255 and after the bump every magnitude is at most 64.
  uint32_t mag[16];
  for (int pass = 0; pass < 2; ++pass) {
    bool overflow = false;
    for (int i = 0; i < n; ++i) {
      if (special[i]) continue;
      mag[i] = sig[i] == 0 ? 0u : RoundShift(sig[i], shared - exp[i] + 1, mode);
      overflow |= mag[i] > max_mag;
    }
    if (!overflow) break;
    ++shared;
  }
  for (int i = 0; i < n; ++i) {
    if (special[i]) continue;
    const uint32_t m = std::min(mag[i], max_mag) >> drop;
    if (m == 0) {
      v[i] = 0.0;
      continue;
    }
    double r = std::ldexp(static_cast<double>(m), shared - 127 - (mag_bits - 1));
    if (r >= 0x1p128) r = std::numeric_limits<double>::infinity();
    if (flush && r < 0x1p-126) r = 0.0;  // unpacking to bf16 could not hold it as a normal number
    v[i] = sign[i] ? -r : r;
  }
}

void RoundBfp8BBlock(double* v, int n, Rounding mode, bool flush) { RoundBlockFloat(v, n, 7, mode, flush); }
void RoundBfp4BBlock(double* v, int n, Rounding mode, bool flush) { RoundBlockFloat(v, n, 3, mode, flush); }

void RoundToPrecision(Precision p, Rounding mode, bool flush, double* v, int64_t n) {
  switch (p) {
    case Precision::kFp32:
      for (int64_t i = 0; i < n; ++i) v[i] = ToFp32(v[i], flush);
      return;
    case Precision::kBf16: return flush ? StoreBf16<true>(mode, v, n) : StoreBf16<false>(mode, v, n);
    case Precision::kFp16:
      for (int64_t i = 0; i < n; ++i) v[i] = RoundToFp16(ToFp32(v[i], flush), mode, flush);
      return;
    case Precision::kBfp8B:
      for (int64_t i = 0; i < n; i += 16)
        RoundBfp8BBlock(v + i, static_cast<int>(std::min<int64_t>(16, n - i)), mode, flush);
      return;
    case Precision::kBfp4B:
      for (int64_t i = 0; i < n; i += 16)
        RoundBfp4BBlock(v + i, static_cast<int>(std::min<int64_t>(16, n - i)), mode, flush);
      return;
    case Precision::kInt8:
    case Precision::kInt16:
    case Precision::kInt32:
    case Precision::kInt64:
      for (int64_t i = 0; i < n; ++i) v[i] = RoundToInt(v[i], p, mode);
      return;
    case Precision::kUnspecified: return;
  }
}

double RoundOne(Precision p, Rounding mode, bool flush, double x) {
  RoundToPrecision(p, mode, flush, &x, 1);
  return x;
}

}  // namespace spatial::numerics
