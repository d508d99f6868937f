#include "sim/numerics/sfpu.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/numerics/float_bits.h"
#include "sim/numerics/formats.h"

namespace spatial::numerics {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint32_t kSign = 0x80000000u;

// Horner with one SFPMAD per coefficient, highest degree first.
template <size_t N>
float Horner(float x, const float (&c)[N]) {
  float p = c[0];
  for (size_t i = 1; i < N; ++i) p = SfpMad(p, x, c[i]);
  return p;
}

float WithSignOf(float mag, uint32_t sign_bits) { return (sign_bits & kSign) ? -mag : mag; }

// The destination rounding of EvalSfpu (see sfpu.h).
float Finish(const SfpuConfig& c, float y, bool explicit_round) {
  y = Ftz(y);
  const Rounding mode = explicit_round ? proto::TIES_AWAY : c.store;
  switch (c.dest) {
    case Precision::kBf16:
    case Precision::kBfp8B:
    case Precision::kBfp4B: return RoundToBf16(y, mode);
    case Precision::kFp16: return RoundToFp16(y, mode);
    default: return y;
  }
}

float AccurateExpFor(const SfpuConfig& c, float x) {
  return c.dest == Precision::kFp32 ? ExpAccurateFp32(x) : Exp21f(x);
}

float Recip(const SfpuConfig& c, float x) {
  switch (c.recip) {
    case proto::RECIP_HW_APPROX: return RecipHwApprox(x, c.recip_iters, c.dest == Precision::kFp32);
    case proto::RECIP_LEGACY_NEWTON: return RecipLegacy(x, c.recip_iters);
    default: return RecipNewton(x, c.recip_iters);
  }
}

}  // namespace

// ── primitives ──

float SfpMad(float a, float b, float c) {
  a = Ftz(a);
  b = Ftz(b);
  c = Ftz(c);
  // Exact fused multiply-add without an FMA instruction: the product of two fp32 is exact in double; the sum is
  // rounded to double, then made round-to-odd from its exact error (TwoSum), and round-to-odd at 53 bits followed
  // by RNE at 24 bits is the correctly rounded RNE result (53 >= 24 + 2).
  const double p = static_cast<double>(a) * static_cast<double>(b);
  const double cd = static_cast<double>(c);
  double s = p + cd;
  if (std::isfinite(s)) {
    const double bv = s - p;
    const double err = (p - (s - bv)) + (cd - bv);
    if (err != 0.0) {
      uint64_t u = Bits64(s);
      if ((u & 1u) == 0) u = ((err > 0.0) == (s > 0.0)) ? u + 1 : u - 1;
      s = FromBits64(u);
    }
  }
  return Ftz(static_cast<float>(s));
}

float SfpMul(float a, float b) { return Ftz(Ftz(a) * Ftz(b)); }

float SfpAdd(float a, float b) { return Ftz(Ftz(a) + Ftz(b)); }

// ── exp ──

float ExpSchraudolph(float x) {
  constexpr float kA = static_cast<float>(256.0 / 0.69314718055994530942);  // 256/ln2 = 369.33
  constexpr float kBMinusC = 32500.818359375f;                              // 127*256 - C, C ~ 11.18
  if (std::isnan(x)) return kNaN;
  x = std::max(x, -88.5f);
  const float t = SfpMad(kA, x, kBMinusC);
  // SFP_STOCH_RND to *unsigned* int16, deterministic (ties away), saturating at 0 and 65535 (tt-llk
  // _init_exponential_: "Round to unsigned Int16"). No upper guard: from x ~ 89.4 the result's bits are 0x7FFF8000,
  // a NaN, as on the hardware.
  const float i = std::clamp(std::round(t), 0.0f, 65535.0f);
  return Ftz(FromBits(static_cast<uint32_t>(i) << 15));
}

namespace {

// exp_21f from its scaled argument z = x/ln2 + 127 in [0, 255): z * 2^23 truncated to an integer (exact: an
// exponent add, then a conversion of z >= 0) is 2^floor(z) in its exponent field and the fraction f below; 2^f is
// refined by a quadratic on the integer scale and the exponent set.
float Exp21fScaled(float z) {
  constexpr float kC[] = {4.791750143340323e-15f, 7.839635491371155e-08f, 1.0017248f};  // highest degree first
  const uint32_t zi = static_cast<uint32_t>(std::ldexp(static_cast<double>(z), 23));
  const uint32_t exponent = zi >> 23;
  const float frac = static_cast<float>(zi & 0x7fffffu);  // exact: < 2^23
  const float p = Horner(frac, kC);
  return Ftz(FromBits((exponent << 23) | (Bits(p) & 0x7fffffu)));  // setexp
}

}  // namespace

float Exp21f(float x) {
  constexpr float kOneOverLn2 = 1.442695040888963f;
  if (std::isnan(x)) return kNaN;
  const float z = std::clamp(SfpMad(x, kOneOverLn2, 127.0f), 0.0f, 255.0f);
  if (z >= 255.0f) return kInf;  // the clamp lands on exponent 255: Inf once rounded (and the facts' range ends)
  return Exp21fScaled(z);
}

float ExpAccurateFp32(float x) {
  constexpr float kInvLn2 = 1.442695040888963f;
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  constexpr float kLn2Hi = 0.693115234375f;
  constexpr float kLn2Lo = 3.19461833e-5f;
  constexpr float kTaylor[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
  if (std::isnan(x)) return kNaN;
  const float z = SfpMul(x, kInvLn2);
  if (z >= 128.0f) return kInf;
  if (z <= -127.0f) return 0.0f;
  const float k = SfpAdd(SfpMad(x, kInvLn2, kMagic), -kMagic);  // round(x/ln2), ties to even
  float r = SfpMad(-k, kLn2Hi, x);
  r = SfpMad(-k, kLn2Lo, r);
  const float p = Horner(r, kTaylor);  // e^r, r in [-ln2/2, ln2/2]
  const int e = static_cast<int>(ExpField(Bits(p))) + static_cast<int>(k);
  if (e >= 255) return kInf;
  if (e <= 0) return 0.0f;
  return FromBits((Bits(p) & 0x807fffffu) | (static_cast<uint32_t>(e) << 23));
}

float ExpLegacySquaring(float x) {
  if (std::isnan(x)) return kNaN;
  const uint32_t u = Bits(std::fabs(x));
  const int e = static_cast<int>(ExpField(u)) - 127;
  float v = FromBits(u);
  int squarings = 0;
  if (e >= 0) {
    v = FromBits((u & 0x007fffffu) | (126u << 23));
    squarings = std::min(e + 1, 8);
  }
  float p = SfpMad(v, SfpMad(v, 0.8373f, 0.863281f), 1.0f);
  for (int s = 0; s < squarings; ++s) p = SfpMul(p, p);
  return x < 0.0f ? RecipLegacy(p, 2) : p;
}

// ── reciprocal ──

float RecipNewton(float x, int iters) {
  constexpr float kK0 = 0.3232325f, kK1 = 1.4545460f, kK2 = 2.1212125f;
  const uint32_t u = Bits(Ftz(x));
  const uint32_t e = ExpField(u);
  const float neg_m = FromBits(0xbf800000u | (u & 0x007fffffu));  // -m, m in [1, 2)
  float y = SfpMad(neg_m, SfpMad(neg_m, kK0, kK1), kK2);          // k2 - k1*m + k0*m^2
  for (int i = 0; i < iters; ++i) {
    const float t = SfpMad(neg_m, y, 1.0f);  // 1 - m*y
    y = SfpMad(y, t, y);
  }
  const float scale = FromBits((255u - e) << 23);  // e = 0: Inf; e = 255: 0
  return WithSignOf(SfpMul(SfpMul(y, scale), 0.5f), u);
}

float RecipHwApprox(float x, int iters, bool fp32_dest) {
  const uint32_t u = Bits(Ftz(x));
  const uint32_t e = ExpField(u);
  if (e == 0) return WithSignOf(kInf, u);
  if (std::isnan(x)) return kNaN;
  const float a = std::fabs(x);
  if (a >= 0x1p126f) return 0.0f;  // "+-0 for |x| >= 2^126"; +0 because the SFPU never emits -0 (§1.2)
  // Modelled 7-bit seed (see sfpu.h): 1/m at the middle of the input's 7-bit mantissa bucket, 7 bits out.
  const double m = 1.0 + (static_cast<double>((u >> 16) & 0x7fu) + 0.5) / 128.0;
  const float inv_m = RoundToBf16(static_cast<float>(1.0 / m), proto::RNE);
  const float seed = WithSignOf(std::ldexp(inv_m, 127 - static_cast<int>(e)), u);
  if (fp32_dest && a >= 0x1p119f) return Ftz(seed);  // §2: the fp32 refinement underflows, raw seed returned
  float y = Ftz(seed);
  for (int i = 0; i < iters; ++i) {
    const float err = SfpMad(-x, y, 1.0f);  // 1 - x*y
    y = SfpMad(y, err, y);
  }
  return y;
}

float RecipLegacy(float x, int iters) {
  const uint32_t u = Bits(Ftz(x));
  const int ex = static_cast<int>(ExpField(u));
  const float v = FromBits(kSign | (126u << 23) | (u & 0x007fffffu));  // -(m/2) in [-1, -0.5)
  float y = 1.442695f;
  for (int i = 0; i < iters; ++i) y = SfpMul(y, SfpMad(v, y, 2.0f));
  const int ne = static_cast<int>(ExpField(Bits(y))) - ex + 126;
  if (ne <= 0) return 0.0f;  // "saturating to 0 if negative"; exponent 0 is a flushed denormal
  const float r = FromBits((Bits(y) & 0x007fffffu) | (static_cast<uint32_t>(std::min(ne, 255)) << 23));
  return WithSignOf(r, u);
}

// ── rsqrt ──

float RsqrtMagicPoly(float x, bool approx, int steps) {
  x = Ftz(x);
  if (std::isnan(x) || x < 0.0f) return kNaN;
  if (x == 0.0f) return kInf;
  if (std::isinf(x)) return 0.0f;
  const uint32_t i = Bits(x) >> 1;
  const float neg_x = -x;
  float y;
  if (approx) {
    y = FromBits(0x5f0b3892u - i);
    const float c = SfpMul(x, y);
    y = SfpMul(y, SfpMad(-y, c, 1.89099014875f));  // y*(K - y*(x*y))
  } else {
    y = FromBits(0x5f1110a0u - i);
    const float c = SfpMul(SfpMul(neg_x, y), y);                  // -x*y*y
    y = SfpMul(y, SfpMad(c, SfpAdd(2.2533049f, c), 2.2825186f));  // y*(K1 + c*(K2 + c))
  }
  for (int s = 0; s < steps; ++s) {
    const float half_y = y * 0.5f;                      // addexp(y, -1): exact
    const float r = SfpMad(SfpMul(neg_x, y), y, 1.0f);  // 1 - x*y*y
    y = SfpMad(r, half_y, y);
  }
  return y;
}

float RsqrtCompat(float x, int steps, int recip_iters) {
  x = Ftz(x);
  float r = FromBits(0x5f370000u - (Bits(x) >> 1));
  const float neg_half_x = SfpMul(x, -0.5f);
  for (int s = 0; s < steps; ++s) r = SfpMul(SfpMad(SfpMul(r, r), neg_half_x, 1.5f), r);
  return RecipLegacy(SfpMul(r, x), recip_iters);
}

// ── ln ──

float LnFp32(float x) {
  // fdlibm e_logf.c constants.
  constexpr float kLn2Hi = 6.9313812256e-01f;  // 0x3f317180
  constexpr float kLn2Lo = 9.0580006145e-06f;  // 0x3717f7d1
  constexpr float kLg1 = 0.66666662693f, kLg2 = 0.40000972152f, kLg3 = 0.28498786688f, kLg4 = 0.24279078841f;
  x = Ftz(x);
  if (std::isnan(x) || x < 0.0f) return kNaN;
  if (x == 0.0f) return -kInf;
  if (std::isinf(x)) return kInf;
  uint32_t u = Bits(x);
  int k = static_cast<int>(ExpField(u)) - 127;
  u &= 0x007fffffu;
  // Normalize the mantissa into [sqrt(2)/2, sqrt(2)).
  const uint32_t i = (u + (0x95f64u << 3)) & 0x800000u;
  const float m = FromBits(u | (i ^ 0x3f800000u));
  k += static_cast<int>(i >> 23);
  const float f = Ftz(m - 1.0f);
  const float s = Ftz(f / Ftz(2.0f + f));
  const float z = Ftz(s * s);
  const float w = Ftz(z * z);
  const float t1 = Ftz(w * Ftz(kLg2 + Ftz(w * kLg4)));
  const float t2 = Ftz(z * Ftz(kLg1 + Ftz(w * kLg3)));
  const float r = Ftz(t2 + t1);
  const float hfsq = Ftz(Ftz(0.5f * f) * f);
  const float dk = static_cast<float>(k);
  const float lo = Ftz(Ftz(s * Ftz(hfsq + r)) + Ftz(dk * kLn2Lo));
  return Ftz(Ftz(dk * kLn2Hi) - Ftz(Ftz(hfsq - lo) - f));
}

// ── sigmoid / silu / tanh / gelu ──

float SigmoidApprox(float x) {
  x = Ftz(x);
  const float a = std::fabs(x);
  // SFPLUT: the 8-bit coefficients (sign, 3-bit negative exponent, 4-bit mantissa) decode to these exactly.
  const float slope = a < 1.0f ? 0.2265625f : (a < 2.0f ? 0.265625f : 0.0f);
  const float intercept = a < 1.0f ? 0.0f : (a < 2.0f ? -0.046875f : 0.5f);
  const float l = SfpMad(slope, a, intercept);
  return SfpAdd(std::signbit(x) ? -l : l, 0.5f);
}

float TanhLut(float x) {
  x = Ftz(x);
  const float a = std::fabs(x);
  const float t = a < 1.0f ? SfpMul(0.90625f, a) : (a < 2.0f ? SfpMad(0.09375f, a, 0.8125f) : 1.0f);
  return x < 0.0f ? -t : t;
}

float SiluPoly(float x) {
  constexpr float kPoly[] = {0.00144462f, -0.01055479f, -0.01203685f, 0.24300185f, 0.50437757f};
  x = Ftz(x);
  const float a = std::fabs(x);
  float s = 1.0f;
  if (a <= 1.0f) {
    s = SfpMad(0.229f, a, 0.5f);
  } else if (a < 5.0f) {
    s = Horner(a, kPoly);
  }
  if (x < 0.0f) s = SfpAdd(1.0f, -s);
  return SfpMul(x, s);
}

float TanhFp32(float x) { return Ftz(static_cast<float>(std::tanh(static_cast<double>(Ftz(x))))); }

float GeluApprox(float x) {
  // SFPLUTFP32, 6 fp16 entries (TABLE1: cuts at 0.5, 1, 1.5, 2, 3), decoded exactly: slope, intercept.
  struct Segment {
    float below, slope, intercept;
  };
  static constexpr Segment kTable[] = {{0.5f, 0.1927490234375f, -0.00010442733764648438f},
                                       {1.0f, 0.493896484375f, -0.160400390625f},
                                       {1.5f, 0.61865234375f, -0.279541015625f},
                                       {2.0f, 0.60986328125f, -0.263427734375f},
                                       {3.0f, 0.5400390625f, -0.119384765625f},
                                       {kInf, 0.5f, 0.0f}};
  x = Ftz(x);
  const float a = std::fabs(x);
  const Segment* seg = &kTable[5];
  for (const Segment& e : kTable) {
    if (a < e.below) {
      seg = &e;
      break;
    }
  }
  // No sign copy: the table is the even part, 0.5|x| erf(|x|/sqrt 2), added to x/2.
  return SfpAdd(SfpMul(x, 0.5f), SfpMad(seg->slope, a, seg->intercept));
}

float GeluPiecewise(float x) {
  // Phi's odd core, c1 x + c3 x^3 + ... + c13 x^13 (coefficients of x^2, highest first), and the cubic that
  // corrects e^(-x^2/2) into Phi in the lower tail (highest first).
  constexpr float kCore[] = {7.9821413868e-08f, -3.8082057209e-06f, 8.1812159812e-05f, -1.0717806322e-03f,
                             9.7720050615e-03f, -6.6361041488e-02f, 3.9894227818e-01f};
  constexpr float kTail[] = {7.5950479368e-04f, 1.3809983619e-02f, 9.5413386822e-02f, 3.0369991064e-01f};
  x = Ftz(x);
  if (std::isnan(x)) return kNaN;
  if (!(x > -5.54259443f)) return 0.0f;
  if (x >= 2.78125f) return x;
  const float x2 = SfpMul(x, x);
  if (x >= -3.125f) return SfpMul(x, SfpMad(x, Horner(x2, kCore), 0.5f));
  // -x^2/2 in exp_21f's scale (x^2 * -1/(2 ln 2) + 127), and the same 2^f refinement.
  const float e = Exp21fScaled(SfpMad(x2, -0.72134752044f, 127.0f));
  const float h = SfpMul(e, Horner(x, kTail));
  // (h + 0.375) - 0.375 snaps h to a multiple of 2^-25 before the product.
  return SfpMul(x, SfpAdd(SfpAdd(h, 0.375f), -0.375f));
}

float GeluErf(float x) {
  // erf(s) = s P(s^2) / Q(s^2): P's coefficients of s^0, s^2, ..., s^14 (of the odd powers 1..15), Q's of s^0 ..
  // s^16, both highest first.
  constexpr float kNum[] = {-2.8632063387e-10f, 2.7384647439e-08f, 1.7678321456e-05f, 6.1307044234e-04f,
                            5.6230435148e-03f,  6.2133435160e-02f, 2.1477432549e-01f, 1.1283791065e+00f};
  constexpr float kDen[] = {-6.7350725691e-12f, -3.5153888689e-09f, 1.3156344494e-06f, 1.3179056987e-04f,
                            1.9545555115e-03f,  1.9642570987e-02f,  1.2961706519e-01f, 5.2367275953e-01f,
                            1.0f};
  x = Ftz(x);
  if (std::isnan(x)) return kNaN;
  if (!(x > -5.54259443f)) return 0.0f;
  const float s = std::min(SfpMul(x, 0.7071067811865475f), 10.0f);
  const float s2 = SfpMul(s, s);
  const float num = SfpMul(Horner(s2, kNum), s);
  const float erf = std::clamp(SfpMul(num, RecipNewton(Horner(s2, kDen), 2)), -1.0f, 1.0f);
  if (erf == -1.0f) return SfpMul(x, std::ldexp(1.0f, -25));
  return SfpMul(x, SfpMad(0.5f, erf, 0.5f));
}

// ── configuration ──

SfpuConfig ResolveSfpuConfig(const proto::Numerics& n, Precision dest, bool approx) {
  SfpuConfig c;
  c.dest = dest;
  c.approx = approx;
  const bool fp32 = dest == Precision::kFp32;
  c.exp = n.exp();
  if (c.exp == proto::EXP_ALGORITHM_UNSPECIFIED) {
    c.exp = approx ? proto::EXP_SCHRAUDOLPH_FAST : (fp32 ? proto::EXP_ACCURATE_FP32 : proto::EXP_21F);
  } else if (c.exp == proto::EXP_21F && fp32) {
    c.exp = proto::EXP_ACCURATE_FP32;
  }
  c.recip = n.recip() == proto::RECIP_ALGORITHM_UNSPECIFIED ? proto::RECIP_NEWTON : n.recip();
  const int given = static_cast<int>(std::clamp<int64_t>(n.recip_newton_iters(), 0, 16));
  switch (c.recip) {
    case proto::RECIP_LEGACY_NEWTON: c.recip_iters = given > 0 ? given : (approx ? 2 : 3); break;
    case proto::RECIP_HW_APPROX: c.recip_iters = approx ? 0 : (given > 0 ? given : 1) + (fp32 ? 1 : 0); break;
    default:
      // tt-llk _calculate_reciprocal_internal_: approx runs _sfpu_reciprocal_<0> ("the same effect as max_iter=1")
      // and stores it unrounded; otherwise <2> for an fp32 Dst, <1> and an explicit bf16 rounding for a 16-bit one.
      c.recip_iters = approx ? 1 : (given > 0 ? given : 1) + (fp32 ? 1 : 0);
      c.recip_rounds = !approx;
      break;
  }
  if (c.recip == proto::RECIP_LEGACY_NEWTON) c.recip_rounds = false;
  c.rsqrt = n.rsqrt() == proto::RSQRT_ALGORITHM_UNSPECIFIED ? proto::RSQRT_MAGIC_POLY : n.rsqrt();
  const int steps = static_cast<int>(std::clamp<int64_t>(n.rsqrt_newton_iters(), 0, 16));
  if (c.rsqrt == proto::RSQRT_COMPAT_NEWTON) {
    c.rsqrt_steps = steps > 0 ? steps : 2;
  } else {
    c.rsqrt_steps = approx ? 0 : (steps > 0 ? steps : 1);
  }
  c.legacy_recip_iters = approx ? 2 : 3;
  c.silu = n.silu();
  if (c.silu == proto::SILU_ALGORITHM_UNSPECIFIED) c.silu = approx ? proto::SILU_POLY : proto::SILU_SIGMOID;
  c.store = n.sfpu_store() == proto::ROUNDING_UNSPECIFIED ? proto::TRUNCATE : n.sfpu_store();
  return c;
}

float SigmoidAccurate(const SfpuConfig& c, float x) {
  const float e = AccurateExpFor(c, -Ftz(x));
  return Recip(c, SfpAdd(1.0f, e));
}

float EvalSfpu(const SfpuConfig& c, const SfpuKind& k, float x) {
  x = Ftz(x);
  switch (k.op) {
    case SfpuOp::kExp:
      switch (c.exp) {
        case proto::EXP_SCHRAUDOLPH_FAST: return Finish(c, ExpSchraudolph(x), false);
        case proto::EXP_21F: return Finish(c, Exp21f(x), true);
        case proto::EXP_LEGACY_SQUARING: return Finish(c, ExpLegacySquaring(x), false);
        default: return Finish(c, ExpAccurateFp32(x), true);
      }
    case SfpuOp::kExpAccurate: return Finish(c, AccurateExpFor(c, x), true);
    // tt-llk's fast approximate exp (exp_tile<true, true>): Schraudolph's, stored as computed.
    case SfpuOp::kExpFast: return Finish(c, ExpSchraudolph(x), false);
    case SfpuOp::kLn: return Finish(c, LnFp32(x), true);
    case SfpuOp::kRecip: return Finish(c, Recip(c, x), c.recip_rounds);
    case SfpuOp::kRsqrt: {
      const float scale = static_cast<float>(1.0 / static_cast<double>(k.over == 0 ? 1 : k.over));
      const float eps = static_cast<float>(static_cast<double>(k.eps_nano) * 1e-9);
      const float v = SfpMad(x, scale, eps);
      if (c.rsqrt == proto::RSQRT_COMPAT_NEWTON) {
        return Finish(c, RsqrtCompat(v, c.rsqrt_steps, c.legacy_recip_iters), false);
      }
      return Finish(c, RsqrtMagicPoly(v, c.approx, c.rsqrt_steps), true);
    }
    case SfpuOp::kSilu:
      if (c.silu == proto::SILU_POLY) return Finish(c, SiluPoly(x), false);
      return Finish(c, SfpMul(x, SigmoidAccurate(c, x)), true);
    case SfpuOp::kSigmoid:
      if (c.approx) return Finish(c, SigmoidApprox(x), false);
      return Finish(c, SigmoidAccurate(c, x), true);
    case SfpuOp::kGelu:
      if (c.approx) return Finish(c, GeluApprox(x), false);
      return Finish(c, c.dest == Precision::kFp32 ? GeluErf(x) : GeluPiecewise(x), true);
    case SfpuOp::kUnspecified: break;
  }
  return x;
}

}  // namespace spatial::numerics
